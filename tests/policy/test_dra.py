"""How a policy says which pools take GPUs through Dynamic Resource Allocation and how DRA
GPUs are recognised (webhook/policy/model.py `gpusThrough` and `dra`, compiled.py
`DraSettings`, references.py), and every problem of those fields at its line."""

from __future__ import annotations

import pytest

from webhook.engine import RULES
from webhook.errors import PolicyError, PolicyProblem
from webhook.policy import load_policy_text
from webhook.policy.compiled import BOTH, DEVICE_PLUGIN, DRA, GPU_DEVICE, MIG_DEVICE
from webhook.policy.load import default_policy_text, load_default_policy
from webhook.policy.schema import policy_schema

SOURCE = "dra.yaml"

DRA_SECTION = """
dra:
  drivers: [gpu.nvidia.com, gpu.example.com]
  deviceClasses:
    gpu: [gpu.nvidia.com, gpu.example.com]
    mig: [mig.nvidia.com]
  attributes:
    type: type
    productName: gpu.example.com/product
    migProfile: profile
"""


def edited(*replacements: tuple[str, str], dra: str = "") -> str:
    text = default_policy_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text.replace("\nclasses:\n", f"{dra}\nclasses:\n", 1)


def problems_of(text: str) -> list[PolicyProblem]:
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text, SOURCE, rule_names=RULES.names)
    return list(raised.value.problems)


def line_of(text: str, fragment: str) -> int:
    """The line holding `fragment` outside a comment (the default policy's comments
    quote fields)."""
    lines = text.splitlines()
    return next(n for n, line in enumerate(lines, start=1) if fragment in line.split("#")[0])


INFERENCE_THROUGH = "mig: mixed                          # whole GPUs and MIG slices side by side\n    gpusThrough: devicePlugin"  # fmt: skip
TRAINING_THROUGH = "mig: none\n    gpusThrough: devicePlugin"


def test_the_default_policy_keeps_every_pool_on_the_device_plugin_with_nvidias_dra_names() -> None:
    policy = load_default_policy()

    assert {pool.gpus_through for pool in policy.pools.values()} == {DEVICE_PLUGIN}
    assert all(not pool.takes_dra_gpus for pool in policy.pools.values())
    assert policy.dra.drivers == {"gpu.nvidia.com"}
    assert policy.dra.device_kind("gpu.nvidia.com") == GPU_DEVICE
    assert policy.dra.device_kind("mig.nvidia.com") == MIG_DEVICE
    assert policy.dra.device_kind("example.com") is None
    assert (
        policy.dra.type_attribute,
        policy.dra.product_attribute,
        policy.dra.profile_attribute,
    ) == ("type", "productName", "profile")


def test_a_policy_without_gpus_through_means_the_device_plugin() -> None:
    text = edited((INFERENCE_THROUGH, "mig: mixed"), (TRAINING_THROUGH, "mig: none"))

    policy = load_policy_text(text, SOURCE)

    assert policy.pools["inference"].gpus_through == DEVICE_PLUGIN
    assert policy.pools["inference"].takes_device_plugin_gpus


def test_pools_take_gpus_through_dra_or_both_as_the_policy_says() -> None:
    text = edited(
        (INFERENCE_THROUGH, "mig: mixed\n    gpusThrough: dra"),
        (TRAINING_THROUGH, "mig: none\n    gpusThrough: both"),
        dra=DRA_SECTION,
    )

    policy = load_policy_text(text, SOURCE, rule_names=RULES.names)

    inference, training = policy.pools["inference"], policy.pools["training"]
    assert (inference.gpus_through, training.gpus_through) == (DRA, BOTH)
    assert inference.takes_dra_gpus and not inference.takes_device_plugin_gpus
    assert training.takes_dra_gpus and training.takes_device_plugin_gpus
    assert policy.dra.drivers == {"gpu.nvidia.com", "gpu.example.com"}
    assert policy.dra.device_kind("gpu.example.com") == GPU_DEVICE
    assert policy.dra.device_classes == {"gpu.nvidia.com", "gpu.example.com", "mig.nvidia.com"}
    assert policy.dra.attributes == {"type", "gpu.example.com/product", "profile"}


def test_a_dra_pool_keeps_its_mig_profiles_from_the_catalog() -> None:
    text = edited((INFERENCE_THROUGH, "mig: mixed\n    gpusThrough: dra"))

    pool = load_policy_text(text, SOURCE).pools["inference"]

    assert pool.mig_slices_per_node("1g.5gb") == 7 * 8


@pytest.mark.parametrize(
    ("replacement", "dra", "where", "path", "reason"),
    [
        pytest.param(
            (INFERENCE_THROUGH, "mig: mixed\n    gpusThrough: plugin"),
            "",
            "gpusThrough: plugin",
            "pools.inference.gpusThrough",
            "must be 'devicePlugin', 'dra' or 'both', not 'plugin'",
            id="an unknown way of taking GPUs",
        ),
        pytest.param(
            (TRAINING_THROUGH, "mig: single\n    gpusThrough: dra"),
            "",
            "mig: single",
            "pools.training.mig",
            "single is the device plugin's MIG strategy",
            id="the single MIG strategy on a DRA pool",
        ),
        pytest.param(
            None,
            "\ndra:\n  deviceClasses:\n    gpu: [gpu.nvidia.com]\n    mig: [gpu.nvidia.com]\n",
            "mig: [gpu.nvidia.com]",
            "dra.deviceClasses.mig[0]",
            "DeviceClass 'gpu.nvidia.com' is listed under gpu too",
            id="a class meaning both whole GPUs and MIG slices",
        ),
        pytest.param(
            None,
            "\ndra:\n  deviceClasses:\n    gpu: []\n",
            "gpu: []",
            "dra.deviceClasses.gpu",
            "must not be empty",
            id="no DeviceClass of whole GPUs",
        ),
        pytest.param(
            None,
            "\ndra:\n  deviceClasses:\n    gpu: [GPU_Class]\n",
            "gpu: [GPU_Class]",
            "dra.deviceClasses.gpu",
            "'GPU_Class' is not a DeviceClass name",
            id="a DeviceClass name Kubernetes refuses",
        ),
        pytest.param(
            None,
            "\ndra:\n  drivers: [gpu.nvidia.com, gpu.nvidia.com]\n",
            "drivers: [gpu.nvidia.com, gpu.nvidia.com]",
            "dra.drivers[1]",
            "driver 'gpu.nvidia.com' is listed twice",
            id="a driver listed twice",
        ),
        pytest.param(
            None,
            "\ndra:\n  attributes:\n    migProfile: type\n",
            "migProfile: type",
            "dra.attributes.migProfile",
            "type and migProfile both read the device attribute 'type'",
            id="one attribute read for two meanings",
        ),
        pytest.param(
            None,
            "\ndra:\n  attributes:\n    productName: product-name\n",
            "productName: product-name",
            "dra.attributes.productName",
            "'product-name' is not a device attribute",
            id="an attribute name that is not a C identifier",
        ),
        pytest.param(
            (INFERENCE_THROUGH, "mig: mixed\n    gpusThrough: both"),
            "\ndra:\n  deviceClasses:\n    mig: []\n",
            "mig: mixed",
            "pools.inference.mig",
            "dra.deviceClasses.mig names no DeviceClass for MIG devices",
            id="MIG through DRA without a MIG DeviceClass",
        ),
        pytest.param(
            None,
            "\ndra:\n  deviceclasses: {}\n",
            "deviceclasses: {}",
            "dra.deviceclasses",
            "unknown key 'deviceclasses' in dra; did you mean 'deviceClasses'?",
            id="a misspelt field",
        ),
    ],
)
def test_each_dra_problem_is_reported_at_its_line(
    replacement: tuple[str, str] | None, dra: str, where: str, path: str, reason: str
) -> None:
    text = edited(*([replacement] if replacement else []), dra=dra)

    problems = problems_of(text)

    assert [(p.path, p.line) for p in problems] == [(path, line_of(text, where))]
    assert reason in problems[0].reason
    assert str(problems[0]).startswith(f"{SOURCE}:{line_of(text, where)}: {path}: ")


def test_the_schema_describes_gpus_through_and_the_dra_settings() -> None:
    schema = policy_schema(RULES.names)
    definitions = schema["$defs"]

    assert definitions["Pool"]["properties"]["gpusThrough"]["enum"] == [
        "devicePlugin",
        "dra",
        "both",
    ]
    assert definitions["Pool"]["properties"]["gpusThrough"]["default"] == "devicePlugin"
    assert set(definitions["Dra"]["properties"]) == {"drivers", "deviceClasses", "attributes"}
    assert set(definitions["DeviceAttributes"]["properties"]) == {
        "type",
        "productName",
        "migProfile",
    }
    assert "dra" in schema["properties"]
