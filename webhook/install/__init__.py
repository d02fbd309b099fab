"""Installation: what the project puts into a cluster, rendered from the package.

It owns the names of the installed objects and their label (``names``), the webhook
configurations, one webhook per handler of the engine's registry (``configurations``,
its CEL made in ``webhook.engine.handlers``), whether the live ones send what the
policy needs (``scope``), the kustomize base with the image and policy set (``plan``)
and the generated files of deploy/ (``manifests``). It renders; applying is the CLI's
work through the kube wing, the certificates the TLS wing's. It imports the engine
(its handlers, which kinds are workloads) and the policy.
"""
