"""`python -m benchmarks.attack`."""

from benchmarks.attack.run import main

if __name__ == "__main__":
    raise SystemExit(main())
