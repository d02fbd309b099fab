"""The HTTP edge: AdmissionReviews in, the engine's decisions out.

It owns the routes (``app``), the AdmissionReview envelope (``review``), the
limits that keep a slow or hostile client from stalling a replica (``limits``,
``body``), judging large bodies in a worker process (``offload``, ``judging``,
``memory``) and the Prometheus metrics. It imports the engine, the policy, the
TLS wing's served-certificate state and ``webhook.errors``; the service wires
it to a server, the cluster and the files.
"""
