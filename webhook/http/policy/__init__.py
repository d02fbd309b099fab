"""``/validate-policy``, the webhook of the policy ConfigMap: ``route`` (the ASGI route,
its body bounds and replies), ``queue`` (the policies waiting to be compiled, fair between
sources, each compiled once) and ``verdict`` (what a policy ConfigMap is judged by: a
policy that serves, and a scope the live configurations give it)."""
