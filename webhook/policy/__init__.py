"""The policy: its YAML model and schema, the MIG catalog, and compiling both for the engine.

It owns the policy format and the files shipped in ``webhook/policies/``
(default policies, catalog, schema). It imports only ``webhook.errors``; the
engine and every wing above read the compiled, frozen ``Policy`` it produces.
"""

from webhook.policy.compiled import Policy
from webhook.policy.load import load_default_policy, load_policy_file, load_policy_text

__all__ = ["Policy", "load_default_policy", "load_policy_file", "load_policy_text"]
