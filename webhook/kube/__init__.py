"""The Kubernetes wing: the only code that talks to kube-apiserver.

It owns the client (credentials, apply and delete, API errors), the
certificate Secrets and caBundles (``secrets``), the list+watch loop
(``reflector``), the live inventory of nodes and PriorityClasses
(``inventory``) and the lookup of an autoscaler's target (``targets``). It
translates what it reads into the engine's types, so it imports the engine,
the policy and the TLS wing, never HTTP, install or offline.
"""
