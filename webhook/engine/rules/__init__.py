"""Validation rules. Each is a function of (policy, pod[, class]) -> violations."""
