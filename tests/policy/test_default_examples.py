"""The commented examples of the default policy (webhook/policies/default.yaml), uncommented,
load and do what their comments say, so that an example cannot rot while the default's
decisions stay those of the uncommented text."""

from __future__ import annotations

import re

import pytest

from tests.builders import admitted, container, mutated, pod
from webhook.engine import Engine
from webhook.policy import load_policy_text
from webhook.policy.compiled import Taint
from webhook.policy.load import default_policy_text

EXAMPLES = ("taints", "workloadKinds", "dra", "hostAccess", "enforcement", "exemptions")
"""The keys whose commented example the default policy shows, each a block that opens
with `# <key>:` and goes on with lines of `#` and at least two spaces."""

POOL_TAINT = Taint("gpu-pool", "inference", "NoSchedule")
GKE_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


def uncommented(text: str, key: str) -> str:
    """`text` with the commented example of `key` made YAML: `# ` taken off each of its
    lines, at the indentation the comment has."""
    lines = text.splitlines(keepends=True)
    [start] = [i for i, line in enumerate(lines) if re.fullmatch(rf" *# {key}:\n", line)]
    indent = lines[start][: lines[start].index("#")]
    end = start + 1
    while end < len(lines) and lines[end].startswith(f"{indent}#  "):
        end += 1
    block = [indent + line[len(indent) + 2 :] for line in lines[start:end]]
    return "".join([*lines[:start], *block, *lines[end:]])


def engine_of(text: str) -> Engine:
    return Engine(load_policy_text(text, "default.yaml"))


@pytest.mark.parametrize("key", EXAMPLES)
def test_each_commented_example_uncommented_is_a_policy_an_engine_serves(key: str) -> None:
    text = uncommented(default_policy_text(), key)

    assert text != default_policy_text()
    assert re.search(rf"^ *{key}:\n", text, re.MULTILINE)
    engine_of(text)


def test_the_taints_example_replaces_the_inference_pools_default_taint() -> None:
    default = engine_of(default_policy_text()).policy
    policy = engine_of(uncommented(default_policy_text(), "taints")).policy

    assert default.pools["inference"].taints == (POOL_TAINT,)
    assert policy.pools["inference"].taints == (POOL_TAINT, GKE_TAINT)
    assert policy.classes["inference"].taints == (POOL_TAINT, GKE_TAINT)
    assert policy.pools["training"].taints == default.pools["training"].taints


def test_an_inference_pod_of_the_taints_example_tolerates_every_taint_of_its_nodes() -> None:
    engine = engine_of(uncommented(default_policy_text(), "taints"))
    obj = pod("inference", containers=[container(gpus=1)])

    tolerations = mutated(engine, obj)["spec"]["tolerations"]

    assert tolerations == [
        {"key": "gpu-pool", "operator": "Equal", "value": "inference", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ]
    assert admitted(engine, obj).allowed


def test_the_host_access_example_lets_every_pod_read_the_model_cache_and_write_nothing() -> None:
    engine = engine_of(uncommented(default_policy_text(), "hostAccess"))

    def reading(read_only: bool) -> dict[str, object]:
        mount = {"name": "models", "mountPath": "/models", "readOnly": read_only}
        return pod(
            "inference",
            containers=[container(volumeMounts=[mount])],
            volumes=[{"name": "models", "hostPath": {"path": "/data/models/llama"}}],
        )

    assert admitted(engine, reading(True)).allowed
    assert not admitted(engine, reading(False)).allowed
    assert not admitted(engine_of(default_policy_text()), reading(True)).allowed


@pytest.mark.parametrize(
    ("class_text", "workload", "spec"),
    [
        (
            "hostAccess: {paths: [{path: /tmp/nvidia-mps, readOnly: false}]}",
            "inference",
            {
                "containers": [
                    container(volumeMounts=[{"name": "mps", "mountPath": "/tmp/nvidia-mps"}])
                ],
                "volumes": [{"name": "mps", "hostPath": {"path": "/tmp/nvidia-mps"}}],
            },
        ),
        ("hostAccess: {hostNetwork: true}", "training", {"hostNetwork": True}),
    ],
    ids=["kai-mps", "rdma"],
)
def test_each_class_example_of_host_access_admits_what_its_comment_says(
    class_text: str, workload: str, spec: dict[str, object]
) -> None:
    text = default_policy_text()
    assert f"#     {class_text}\n" in text
    anchor = f"  {workload}:\n    pools: [{workload}]\n"
    with_class = text.replace(anchor, f"{anchor}    {class_text}\n")

    assert admitted(engine_of(with_class), pod(workload, **spec)).allowed
    assert not admitted(engine_of(text), pod(workload, **spec)).allowed


def test_the_examples_are_comments_of_the_default_policy_not_settings() -> None:
    default = engine_of(default_policy_text()).policy

    assert [t for p in default.pools.values() for t in p.taints] == [
        POOL_TAINT,
        Taint("gpu-pool", "training", "NoSchedule"),
    ]
    assert default.exemptions == ()
