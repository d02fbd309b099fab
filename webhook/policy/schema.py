"""The JSON Schema of policy files, made from the pydantic model.

Written to `policies/schema.json` by `make schema` (`gpu-admission policy schema
--output-file`), so editors validate a policy as it is typed: put
`# yaml-language-server: $schema=schema.json` (a path or URL of the schema) at
the top of the policy file. The rule names `enforcement` may use are the engine's,
given by the caller: the policy does not know which rules exist.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from webhook.policy.model import ClassEnforcement, Enforcement, PolicySpec
from webhook.policy.shipped import shipped_file

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_RESOURCE = "schema.json"
TITLE = "gpu-admission policy"
RULE_MODES = ((Enforcement, "rules"), (ClassEnforcement, "rules"))
"""The fields giving rules modes, whose keys are the engine's rule names."""


def policy_schema(rule_names: Sequence[str]) -> dict[str, Any]:
    """The schema of a policy as operators write it (camelCase field names), in which the
    rules `enforcement` gives modes are `rule_names` (the engine's, see webhook.engine.rules)."""
    schema = PolicySpec.model_json_schema(by_alias=True, mode="validation")
    schema.pop("title", None)
    for model, field in RULE_MODES:
        properties = schema["$defs"][model.__name__]["properties"]
        properties[field] = _sorted({**properties[field], "propertyNames": {"enum": [*rule_names]}})
    return {
        "$schema": SCHEMA_DIALECT,
        "title": TITLE,
        "description": "A gpu-admission policy: GPU pools, workload classes and their rules. "
        "Validate with `gpu-admission policy validate FILE`.",
        **schema,
    }


def policy_schema_text(rule_names: Sequence[str]) -> str:
    """The schema as written to schema.json: stable, indented JSON ending in a newline."""
    return json.dumps(policy_schema(rule_names), indent=2, ensure_ascii=False) + "\n"


def shipped_schema_path() -> Path:
    """Where the schema lives beside the shipped policies (policies/schema.json)."""
    return Path(str(shipped_file(SCHEMA_RESOURCE)))


def _sorted(keywords: dict[str, Any]) -> dict[str, Any]:
    """Keywords in the order pydantic writes them: by name."""
    return dict(sorted(keywords.items()))
