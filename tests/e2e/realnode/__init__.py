"""One node of real parts for the e2e tests: its network, images, configuration
and the cluster that starts it beside the control plane."""
