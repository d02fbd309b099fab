"""End-to-end tests on a real Kubernetes control plane built from Go modules."""
