"""The engine benchmarks: reviews per second and latency on one core (`run`), their growth
with pod and policy size (`growth`), and the largest objects judged (`large_objects`).
"""
