"""gpu-admission at the scale of the largest GPU clusters (``python -m benchmarks.scale``;
see ``benchmarks.scale.run``)."""
