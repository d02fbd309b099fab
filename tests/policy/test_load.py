"""Loading and compiling policies (webhook/policy/load.py, compile.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.errors import PolicyError
from webhook.policy import load_default_policy, load_policy_file, load_policy_text
from webhook.policy.load import default_policy_text

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def broken(old: str, new: str) -> str:
    text = default_policy_text()
    assert old in text, old
    return text.replace(old, new)


def test_the_embedded_default_policy_encodes_the_conventions() -> None:
    policy = load_default_policy()
    assert (policy.workload_label, policy.pool_label, policy.model_label) == (
        "gpu-admission.io/workload",
        "gpu-pool",
        "nvidia-gpu-model",
    )
    inference, training = policy.classes["inference"], policy.classes["training"]
    assert (inference.priority_class.name, inference.priority_class.value) == (
        "inference-priority",
        1000000,
    )
    assert (training.priority_class.name, training.priority_class.value) == (
        "training-priority",
        1000,
    )
    assert policy.pools["inference"].mig_slices_per_node("1g.5gb") == 56
    assert policy.pools["training"].mig_slices_per_node("1g.5gb") == 0
    assert [t.describe() for t in policy.gpu_taints] == [
        "gpu-pool=inference:NoSchedule",
        "gpu-pool=training:NoSchedule",
        "gpu-pool=<a value of no pool of the policy>:NoSchedule",
    ]


def test_the_shipped_policy_files_load() -> None:
    for path in sorted(POLICIES.glob("*.yaml")):
        if path.name != "mig-profiles.yaml":
            assert load_policy_file(path).classes


def test_the_embedded_policy_is_the_shipped_file() -> None:
    assert default_policy_text() == (POLICIES / "default.yaml").read_text("utf-8")


def test_a_gpu_feature_discovery_cluster_names_models_by_product() -> None:
    text = broken("model: nvidia-gpu-model ", "model: nvidia.com/gpu.product ").replace(
        "A100: {product: A100-SXM4-40GB}", "NVIDIA-A100-SXM4-40GB: {}"
    )
    policy = load_policy_text(text, "gfd.yaml")
    assert policy.model_label == "nvidia.com/gpu.product"
    assert policy.pools["inference"].models["NVIDIA-A100-SXM4-40GB"].product == "A100-SXM4-40GB"
    assert policy.pools["inference"].mig_slices_per_node("1g.5gb") == 56


@pytest.mark.parametrize(
    ("text", "path", "reason"),
    [
        (
            broken("pools: [training]", "pools: [trainig]"),
            "classes.training.pools[0]",
            "unknown pool 'trainig'",
        ),
        (
            broken("gpusPerNode: 8\n    # taints", "gpusPerNode: -8\n    # taints"),
            "pools.inference.gpusPerNode",
            "-8 is out of range; write at least 1",
        ),
        (
            broken("defaultGpus: 1\n  training", "defaultGpu: 1\n  training"),
            "classes.inference.defaultGpu",
            "unknown key 'defaultGpu' in classes.inference; did you mean 'defaultGpus'?",
        ),
        (
            broken("A100: {product: A100-SXM4-40GB}", "A100: {product: A100-SXM9}"),
            "pools.inference.models.A100.product",
            "unknown GPU product 'A100-SXM9'",
        ),
        (
            broken("      A100: {product: A100-SXM4-80GB}\n    mig: none", "    mig: mixed"),
            "pools.training.mig",
            "mixed MIG needs at least one model",
        ),
        (broken("kind: Policy", "kind: Polcy"), "kind", "must be 'Policy', not 'Polcy'"),
        (
            broken("value: 1000}", "value: high}"),
            "classes.training.priorityClass.value",
            "expected a whole number, not the text 'high'",
        ),
    ],
    ids=[
        "unknown-pool",
        "negative-count",
        "typo-field",
        "unknown-product",
        "mig-on-v100",
        "kind",
        "priority-type",
    ],
)
def test_a_broken_policy_names_file_line_path_and_reason(text: str, path: str, reason: str) -> None:
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text, "edited.yaml")
    [problem] = raised.value.problems
    assert (problem.source, problem.path) == ("edited.yaml", path)
    assert reason in problem.reason
    assert problem.line is not None
    assert str(raised.value) == f"edited.yaml:{problem.line}: {path}: {problem.reason}"


def test_invalid_yaml_names_line_and_column() -> None:
    with pytest.raises(PolicyError) as raised:
        load_policy_text("apiVersion: x\nkind: [unclosed\n", "bad.yaml")
    assert (raised.value.path, raised.value.line) == ("", 3)
    assert raised.value.reason.startswith("not valid YAML: ")
    assert raised.value.reason.endswith("(column 1)")


@pytest.mark.parametrize("text", ["", "- a list\n", "just text\n"])
def test_a_document_that_is_not_a_mapping_is_refused(text: str) -> None:
    with pytest.raises(PolicyError, match="expected a mapping"):
        load_policy_text(text, "empty.yaml")


def test_a_missing_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy_file(tmp_path / "nope.yaml")


def test_two_pools_cannot_share_a_node_label_value() -> None:
    text = broken(
        "  training:\n    gpusPerNode: 8",
        "  training:\n    labelValue: inference\n    gpusPerNode: 8",
    )
    with pytest.raises(PolicyError, match="share the node label value 'inference'"):
        load_policy_text(text, "dup.yaml")
