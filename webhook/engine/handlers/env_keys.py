"""The webhook of ConfigMaps and Secrets: refused at their CREATE and UPDATE when they hold
a key that ``envFrom`` would turn into a variable the node's runtime reads as a device
request (``webhook.engine.env_keys``). Its condition sends only those holding one: nearly
every ConfigMap never reaches the service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.engine.decision import Decision
from webhook.engine.env_keys import judge_env_keys
from webhook.engine.handlers.cel import env_key_condition
from webhook.engine.handlers.declaration import Condition, Handler, ResourceRule, Review, static
from webhook.engine.handlers.twins import env_key_held

if TYPE_CHECKING:
    from webhook.engine.review import Engine

__all__ = ["VALIDATE_ENV_KEYS"]


def validate_env_keys(engine: Engine, review: Review) -> Decision:
    return judge_env_keys(engine.policy, review.request)


VALIDATE_ENV_KEYS = Handler(
    "validate-env-keys",
    mutating=False,
    rules=static(
        ResourceRule(
            "",
            ("v1",),
            ("configmaps", "secrets"),
            {"CREATE": validate_env_keys, "UPDATE": validate_env_keys},
        )
    ),
    summary="Refuses a ConfigMap or Secret holding a key envFrom would make a device request.",
    conditions=(Condition("device-request-key", env_key_condition, env_key_held),),
)
