"""`python -m benchmarks.engine`."""

from benchmarks.engine.run import main

if __name__ == "__main__":
    raise SystemExit(main())
