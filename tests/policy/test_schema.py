"""The policy JSON Schema (webhook/policy/schema.py) and the committed policies/schema.json."""

from __future__ import annotations

from pathlib import Path

import yaml

from webhook.engine import RULES
from webhook.policy.schema import policy_schema, policy_schema_text, shipped_schema_path

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def test_the_committed_schema_is_the_one_the_model_makes() -> None:
    committed = (POLICIES / "schema.json").read_text("utf-8")
    assert committed == policy_schema_text(RULES.names), (
        "policies/schema.json is out of date with webhook/policy/model.py or the engine's rules; "
        "regenerate it with: make schema"
    )


def test_the_schema_is_written_beside_the_shipped_policies() -> None:
    assert shipped_schema_path().resolve() == (POLICIES / "schema.json").resolve()


def test_the_schema_names_its_dialect_and_title() -> None:
    schema = policy_schema(RULES.names)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "gpu-admission policy"


def test_the_schema_uses_the_field_names_operators_write() -> None:
    schema = policy_schema(RULES.names)
    assert set(schema["required"]) == {"apiVersion", "kind", "pools", "classes"}
    assert {"podLabels", "nodeLabels", "namespaceOptIn"} <= set(schema["properties"])
    assert "gpusPerNode" in schema["$defs"]["Pool"]["properties"]
    assert "priorityClass" in schema["$defs"]["WorkloadClass"]["properties"]


def test_unknown_fields_are_refused_as_the_loader_refuses_them() -> None:
    schema = policy_schema(RULES.names)
    assert schema["additionalProperties"] is False
    assert all(
        d.get("additionalProperties") is False
        for d in schema["$defs"].values()
        if d.get("type") == "object"
    )


def test_every_field_of_the_shipped_policies_is_in_the_schema() -> None:
    properties = set(policy_schema(RULES.names)["properties"])
    for path in (POLICIES / "default.yaml", POLICIES / "overflow.yaml"):
        policy = yaml.safe_load(path.read_text("utf-8"))
        assert set(policy) <= properties, path


def test_the_rule_names_are_the_ones_given_wherever_enforcement_gives_modes() -> None:
    definitions = policy_schema(["gpu-count", "mine"])["$defs"]

    for model in ("Enforcement", "ClassEnforcement"):
        rules = definitions[model]["properties"]["rules"]
        assert rules["propertyNames"] == {"enum": ["gpu-count", "mine"]}
        assert list(rules) == sorted(rules), "keywords in pydantic's order, as schema.json has"
