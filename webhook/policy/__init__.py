"""The policy: its YAML model and schema, the MIG catalog, and compiling both for the engine.

It owns the policy format and the files shipped in ``webhook/policies/``
(default policies, catalog, schema). It imports only ``webhook.errors``; the
engine and every wing above read the compiled, frozen ``Policy`` it produces.
Which rules exist is the engine's to say: the policy keeps the rule names its
`enforcement` gives modes, the engine refuses those it does not have, and the
schema is made with the engine's names.
"""

from webhook.policy.compiled import Policy
from webhook.policy.load import load_default_policy, load_policy_file, load_policy_text

__all__ = ["Policy", "load_default_policy", "load_policy_file", "load_policy_text"]
