"""Differential tests: the engine's answers checked against Kubernetes' own code.

Where a question the engine answers has an answer in Kubernetes itself, these tests
ask Kubernetes rather than a model of ours, which would share our misreadings. The
placement oracle (``oracle/main.go``) is a small Go program of kube-scheduler's own
helpers from ``k8s.io/component-helpers``, pinned at the release the end-to-end
control plane is built from: whether a pod's nodeSelector and required node affinity
match a node, and whether it tolerates the node's NoSchedule and NoExecute taints.
``tests/e2e/build_controlplane.py`` builds it into the cache outside the repository,
keyed by a hash of its sources. The clusters the tests generate are labelled as real
clusters label their nodes (GPU Feature Discovery's labels, pools the policy does not
name, models it does not list, nodes still without a model label), not as the policy
expects them to be.
"""
