"""Tests of the pure helpers of the benchmarks (no timed assertions)."""
