"""`python -m benchmarks.service`."""

from benchmarks.service.run import main

if __name__ == "__main__":
    raise SystemExit(main())
