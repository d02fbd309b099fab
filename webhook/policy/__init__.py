"""Policy: the YAML model, the MIG catalog, and compiling both for the engine."""

from webhook.policy.compiled import Policy
from webhook.policy.load import load_default_policy, load_policy_file, load_policy_text

__all__ = ["Policy", "load_default_policy", "load_policy_file", "load_policy_text"]
