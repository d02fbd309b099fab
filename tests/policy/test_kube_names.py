"""The lengths of label keys and values (webhook/policy/kube_names.py), checked where the
policy names them."""

from __future__ import annotations

import pytest

from webhook.errors import PolicyError
from webhook.policy import load_policy_text
from webhook.policy.kube_names import label_value, qualified_name
from webhook.policy.load import default_policy_text


@pytest.mark.parametrize(
    "key", ["gpu-pool", "example.com/" + "n" * 63, "p" * 253 + "/name", "n" * 63]
)
def test_a_qualified_name_within_kubernetes_limits_is_kept(key: str) -> None:
    assert qualified_name(key) == key


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("n" * 64, "the name after the prefix has 64 characters; Kubernetes allows at most 63"),
        (
            "example.com/" + "n" * 64,
            "the name after the prefix has 64 characters; Kubernetes allows at most 63",
        ),
        ("p" * 254 + "/name", "the prefix before '/' has 254 characters; Kubernetes allows at most 253"),
    ],
    ids=["name", "prefixed-name", "prefix"],
)  # fmt: skip
def test_a_qualified_name_past_kubernetes_limits_is_refused(key: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        qualified_name(key)


def test_a_label_value_has_at_most_63_characters() -> None:
    assert label_value("v" * 63) == "v" * 63
    with pytest.raises(ValueError, match="has 64 characters; a label value has at most 63"):
        label_value("v" * 64)


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ("pool: gpu-pool ", f"pool: {'k' * 64} ", "nodeLabels.pool"),
        ("  inference:\n    gpusPerNode: 8", f"  inference:\n    labelValue: {'v' * 64}\n    gpusPerNode: 8", "pools.inference.labelValue"),
        ("  value: \"true\"", f"  value: {'v' * 64}", "namespaceOptIn.value"),
        ("- batch.kubernetes.io/job-name", f"- batch.kubernetes.io/{'j' * 64}", "classes.training.coLocation.jobLabels"),
        ("topologyKey: topology.kubernetes.io/zone", f"topologyKey: {'t' * 64}", "classes.training.coLocation.topologyKey"),
    ],
    ids=["node-label-key", "pool-label-value", "opt-in-value", "job-label", "topology-key"],
)  # fmt: skip
def test_a_policy_naming_a_key_or_value_no_object_could_carry_is_refused_at_it(
    old: str, new: str, path: str
) -> None:
    text = default_policy_text()
    assert old in text, old

    with pytest.raises(PolicyError) as raised:
        load_policy_text(text.replace(old, new, 1), "long.yaml")

    [problem] = raised.value.problems
    assert problem.path == path
    assert "characters" in problem.reason
