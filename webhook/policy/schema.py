"""The JSON Schema of policy files, made from the pydantic model.

Written to `policies/schema.json` by `gpu-admission policy schema`, so editors
validate a policy as it is typed: put
`# yaml-language-server: $schema=schema.json` (a path or URL of the schema) at
the top of the policy file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from webhook.policy.model import PolicySpec
from webhook.policy.shipped import shipped_file

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_RESOURCE = "schema.json"
TITLE = "gpu-admission policy"


def policy_schema() -> dict[str, Any]:
    """The schema of a policy as operators write it (camelCase field names)."""
    schema = PolicySpec.model_json_schema(by_alias=True, mode="validation")
    schema.pop("title", None)
    return {
        "$schema": SCHEMA_DIALECT,
        "title": TITLE,
        "description": "A gpu-admission policy: GPU pools, workload classes and their rules. "
        "Validate with `gpu-admission policy validate FILE`.",
        **schema,
    }


def policy_schema_text() -> str:
    """The schema as written to schema.json: stable, indented JSON ending in a newline."""
    return json.dumps(policy_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_schema_path() -> Path:
    """Where the schema lives beside the shipped policies (policies/schema.json)."""
    return Path(str(shipped_file(SCHEMA_RESOURCE)))
