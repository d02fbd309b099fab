"""`python -m benchmarks.apiserver`."""

from benchmarks.apiserver.run import main

if __name__ == "__main__":
    raise SystemExit(main())
