"""`python -m benchmarks.audit`."""

from benchmarks.audit.run import main

if __name__ == "__main__":
    raise SystemExit(main())
