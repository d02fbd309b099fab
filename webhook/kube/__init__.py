"""The Kubernetes wing: the only code that talks to kube-apiserver.

It owns the client (credentials, apply and delete), what a failed call means
(``api_errors``: the status codes acted on, one message for people), how objects
others may write too are written (``writes``: read, write back, retry on conflict),
the certificate Secrets and caBundles (``secrets``), the list+watch loop
(``reflector``), the live inventory of nodes and PriorityClasses (``inventory``) and
the lookup of an autoscaler's target (``targets``). It translates what it reads into
the engine's types, so it imports the engine, the policy and the TLS wing, never
HTTP, install or offline.
"""
