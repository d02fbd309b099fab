"""The webhooks of gpu-admission, each declared once (``declaration.Handler``), in the
order of their configurations: the mutating ones first, then the validating ones.

Adding a webhook is one ``Handler`` in a module of its own and its place in
``HANDLERS``; the configurations, scope checks, routes and metrics follow from it
(CONTRIBUTING.md shows it step by step).
"""

from __future__ import annotations

from webhook.engine.handlers.autoscalers import WARN_AUTOSCALERS
from webhook.engine.handlers.bindings import VALIDATE_BINDINGS
from webhook.engine.handlers.claims import VALIDATE_CLAIMS
from webhook.engine.handlers.declaration import Handler, ResourceRule, Review
from webhook.engine.handlers.env_keys import VALIDATE_ENV_KEYS
from webhook.engine.handlers.pods import (
    MUTATE,
    MUTATE_UNCLASSED,
    VALIDATE,
    VALIDATE_UNCLASSED,
    VALIDATE_UPDATES,
)
from webhook.engine.handlers.policy_configmap import VALIDATE_POLICY
from webhook.engine.handlers.registry import HandlerConflict, HandlerRegistry, Routes
from webhook.engine.handlers.reservations import VALIDATE_RESERVATIONS
from webhook.engine.handlers.workloads import MUTATE_WORKLOADS, VALIDATE_WORKLOADS

__all__ = [
    "HANDLERS",
    "Handler",
    "HandlerConflict",
    "HandlerRegistry",
    "ResourceRule",
    "Review",
    "Routes",
]

HANDLERS = HandlerRegistry(
    (
        MUTATE,
        MUTATE_UNCLASSED,
        MUTATE_WORKLOADS,
        VALIDATE,
        VALIDATE_UPDATES,
        VALIDATE_UNCLASSED,
        VALIDATE_WORKLOADS,
        WARN_AUTOSCALERS,
        VALIDATE_CLAIMS,
        VALIDATE_RESERVATIONS,
        VALIDATE_BINDINGS,
        VALIDATE_ENV_KEYS,
        VALIDATE_POLICY,
    )
)
