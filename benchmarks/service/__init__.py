"""One replica over HTTPS under a Go load generator (`loadgen/`, driven by
`load_generator`): saturation, latency at 50% and 90% of it, CPU per review (`run`);
cProfile of the replica under that load (`profile`, through `cprofile_run`).
"""
