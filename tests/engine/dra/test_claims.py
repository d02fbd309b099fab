"""What a ResourceClaim or ResourceClaimTemplate asks for, in GPU terms
(webhook/engine/dra/claims.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import claim_spec, claim_template
from tests.fuzz.strategies import mutated
from webhook.engine.dra.api import CLAIM, TEMPLATE
from webhook.engine.dra.claims import ClaimSource, GpuClasses, claim_asks
from webhook.errors import MalformedObject
from webhook.policy.compiled import DraSettings

SETTINGS = DraSettings()
TEMPLATE_SOURCE = ClaimSource(TEMPLATE, "t")
A100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB'"


def asks_of(spec: dict[str, Any]) -> Any:
    return claim_asks(SETTINGS, TEMPLATE_SOURCE, claim_template("t", spec))


def only_ask(spec: dict[str, Any]) -> Any:
    (request,) = asks_of(spec).requests
    (ask,) = request.alternatives
    return ask


def test_a_request_of_the_gpu_class_asks_for_one_whole_gpu_by_default() -> None:
    ask = only_ask(claim_spec())

    assert (ask.kind, ask.count, ask.all_devices) == ("gpu", 1, False)
    assert ask.describe() == "1 GPU of DeviceClass gpu.nvidia.com"


def test_a_request_of_another_class_is_no_gpu() -> None:
    asks = asks_of(claim_spec("nic.example.com", count=2))

    assert not asks.asks_gpus and asks.gpu_requests == ()


def test_the_count_and_all_devices_are_read() -> None:
    assert only_ask(claim_spec(count=8)).count == 8
    assert only_ask(claim_spec(all_devices=True)).all_devices


def test_the_mig_class_with_a_profile_selector_asks_for_that_profile() -> None:
    profile = 'device.attributes["gpu.nvidia.com"].profile == "1g.5gb"'

    ask = only_ask(claim_spec("mig.nvidia.com", selectors=[profile]))

    assert (ask.kind, ask.profile, ask.unjudged) == ("mig", "1g.5gb", ())


def test_conjunctions_of_known_attributes_and_the_driver_are_judged() -> None:
    expression = f"device.driver == 'gpu.nvidia.com' && ({A100})"

    ask = only_ask(claim_spec(selectors=[expression]))

    assert ask.product == "NVIDIA A100-SXM4-40GB" and ask.unjudged == ()


def test_a_type_selector_narrows_a_gpu_class_to_mig_devices() -> None:
    ask = only_ask(claim_spec(selectors=["device.attributes['gpu.nvidia.com'].type == 'mig'"]))

    assert ask.kind == "mig"


@pytest.mark.parametrize(
    "expression",
    [
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        f"{A100} || device.attributes['gpu.nvidia.com'].productName == 'H100'",
        "device.attributes['other.example.com'].productName == 'A100'",
        "device.attributes['gpu.nvidia.com'].architecture == 'Ampere'",
        "device.driver == 'someone.else.example.com'",
    ],
)
def test_other_selectors_are_kept_as_not_judged_never_guessed(expression: str) -> None:
    ask = only_ask(claim_spec(selectors=[expression]))

    assert ask.unjudged == (expression,)
    assert ask.product is None and ask.profile is None


def test_selectors_asking_two_values_of_one_attribute_are_not_judged() -> None:
    other = A100.replace("A100-SXM4-40GB", "H100")

    ask = only_ask(claim_spec(selectors=[A100, other]))

    assert ask.unjudged == (other,)


def test_first_available_alternatives_are_each_read() -> None:
    spec = {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 2},
                        {"name": "small", "deviceClassName": "gpu.nvidia.com"},
                    ],
                }
            ]
        }
    }

    (request,) = asks_of(spec).requests

    assert [(a.request, a.count) for a in request.alternatives] == [
        ("gpu/big", 2),
        ("gpu/small", 1),
    ]
    assert request.is_gpu
    assert request.may_give_no_gpu == ()


def test_an_alternative_of_another_class_is_a_way_to_no_gpu() -> None:
    spec = {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 99},
                        {"name": "nic", "deviceClassName": "nic.example.com"},
                    ],
                }
            ]
        }
    }

    (request,) = asks_of(spec).requests

    assert request.may_be_gpu and not request.is_gpu
    assert [ask.request for ask in request.may_give_no_gpu] == ["gpu/nic"]


def test_a_request_of_no_gpu_at_all_is_no_way_to_no_gpu() -> None:
    (request,) = asks_of(claim_spec("nic.example.com")).requests

    assert not request.may_be_gpu and request.may_give_no_gpu == ()


def test_a_gpu_class_of_the_cluster_s_is_read_as_gpus_through_the_view() -> None:
    classes = GpuClasses(SETTINGS, {"gpus.example.com": "gpu", "slices.example.com": "mig"})
    template = claim_template("t", claim_spec("gpus.example.com"))

    ask = only_ask_of(claim_asks(classes, TEMPLATE_SOURCE, template))

    assert ask.kind == "gpu"
    assert only_ask(claim_spec("gpus.example.com")).kind is None
    assert classes.names("mig") == ["mig.nvidia.com", "slices.example.com"]


def only_ask_of(asks: Any) -> Any:
    (request,) = asks.requests
    (ask,) = request.alternatives
    return ask


def test_a_claim_holds_its_spec_at_spec_not_spec_spec() -> None:
    claim = {"metadata": {"name": "c"}, "spec": claim_spec(count=3)}

    asks = claim_asks(SETTINGS, ClaimSource(CLAIM, "c"), claim)

    assert asks.requests[0].alternatives[0].count == 3


@pytest.mark.parametrize(
    ("exactly", "path"),
    [
        ({"deviceClassName": 7}, "spec.spec.devices.requests[0].exactly.deviceClassName"),
        ({"deviceClassName": "gpu.nvidia.com", "count": 0}, "spec.spec.devices.requests[0].exactly.count"),
        ({"deviceClassName": "gpu.nvidia.com", "count": True}, "spec.spec.devices.requests[0].exactly.count"),
        ({"deviceClassName": "gpu.nvidia.com", "allocationMode": "Some"}, "spec.spec.devices.requests[0].exactly.allocationMode"),
        ({"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": 1}}]}, "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression"),
    ],
)  # fmt: skip
def test_a_wrong_shape_names_its_path(exactly: dict[str, Any], path: str) -> None:
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}

    with pytest.raises(MalformedObject) as raised:
        asks_of(spec)

    assert raised.value.path == path


def test_at_most_32_requests_are_read() -> None:
    spec = {"devices": {"requests": [claim_spec()["devices"]["requests"][0]] * 10_000}}

    assert len(asks_of(spec).requests) == 32


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_template_shape_is_read_or_refused_with_its_path(data: st.DataObject) -> None:
    spec = claim_spec(count=2, selectors=[A100, "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"])  # fmt: skip
    template = data.draw(mutated(claim_template("t", spec)))

    try:
        asks = claim_asks(SETTINGS, TEMPLATE_SOURCE, template)
    except MalformedObject as error:
        assert error.path
    else:
        assert len(asks.requests) <= 32
