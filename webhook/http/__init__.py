"""The HTTP edge: AdmissionReviews in, the engine's decisions out.

It owns the routes (``app``, ``readiness``, ``replies``), the AdmissionReview envelope
(``review``), answering one review (``answering``: its body read, parsed, judged and
its reply encoded, in ``judging``; an autoscaler's workload read in
``scaled_workloads``), the limits that keep a slow or hostile client from stalling a
replica (``limits``, ``body``), judging large bodies in a worker process (``offload``,
``memory``) and the Prometheus metrics (``metrics``, ``counting``, ``metrics_app``).
It imports the engine, the policy, the TLS wing's served-certificate state and
``webhook.errors``; the service wires it to a server, the cluster and the files.
"""
