"""A policy as the service would serve it: the one way policy text becomes an ``Engine``.

The policy is loaded with the engine's rule names, so every problem is reported at once
(unknown rule names with the others), and made an ``Engine``. `serve`, the reloader,
the policy ConfigMap's webhook, `policy validate`, `install`, `audit`, `manifests` and
the offline commands all come through here: a policy one of them accepts, the others
accept, and one the service refuses, every one of them refuses.
"""

from __future__ import annotations

from pathlib import Path

from webhook.engine.review import Engine
from webhook.engine.rules import RULES
from webhook.errors import PolicyError
from webhook.policy.load import DEFAULT_POLICY, default_policy_text, load_policy_text


def serving_engine(text: str, source: str) -> Engine:
    """The engine that would serve the policy `text` (named `source` in errors).

    Raises PolicyError carrying every problem found."""
    return Engine(load_policy_text(text, source, rule_names=RULES.names))


def serving_engine_from_file(path: Path) -> Engine:
    """The engine that would serve the policy file at `path`.

    Raises PolicyError for a file that cannot be read or a policy that cannot serve."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(str(path), "", f"cannot read: {error}") from error
    return serving_engine(text, str(path))


def embedded_serving_engine() -> Engine:
    """The engine on the policy shipped in the package."""
    return serving_engine(default_policy_text(), EMBEDDED_SOURCE)


EMBEDDED_SOURCE = f"policies/{DEFAULT_POLICY} (embedded)"
"""How errors and reports name the embedded policy."""
