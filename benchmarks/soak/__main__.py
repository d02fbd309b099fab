"""`python -m benchmarks.soak`."""

from benchmarks.soak.run import main

if __name__ == "__main__":
    raise SystemExit(main())
