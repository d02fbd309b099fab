"""What a claim of Dynamic Resource Allocation asks for, as the reports show it
(webhook/offline/claims_shown.py)."""

from __future__ import annotations

from typing import Any

from tests.builders import claim_spec, claim_template, dra_engine
from webhook.engine.dra.api import TEMPLATE
from webhook.engine.dra.claims import ClaimAsks, ClaimSource, claim_asks
from webhook.engine.dra.pod_claims import NOT_GIVEN, PodClaim
from webhook.offline.claims_shown import asks_text, pod_claim_data, pod_claim_text

SOURCE = ClaimSource(TEMPLATE, "t")
PROFILE = "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"


def asks(spec: dict[str, Any]) -> ClaimAsks:
    return claim_asks(dra_engine().policy.dra, SOURCE, claim_template("t", spec))


def two_requests() -> dict[str, Any]:
    spec = claim_spec(count=2)
    spec["devices"]["requests"] += claim_spec("nic.example.com", request="nic")["devices"][
        "requests"
    ]
    return spec


class TestAsks:
    def test_a_gpu_request_is_said_as_the_rules_say_it(self) -> None:
        assert asks_text(asks(claim_spec())) == "1 GPU of DeviceClass gpu.nvidia.com"

    def test_a_request_of_a_class_the_policy_does_not_know_as_gpus_asks_for_devices(
        self,
    ) -> None:
        assert asks_text(asks(claim_spec("nic.example.com", all_devices=True))) == (
            "all devices of DeviceClass nic.example.com"
        )

    def test_requests_are_separated_by_semicolons(self) -> None:
        assert asks_text(asks(two_requests())) == (
            "2 GPUs of DeviceClass gpu.nvidia.com; 1 device of DeviceClass nic.example.com"
        )

    def test_alternatives_are_joined_by_or(self) -> None:
        alternatives = [
            {"name": "mig", "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": PROFILE}}]},
            {"name": "whole", "deviceClassName": "gpu.nvidia.com"},
        ]  # fmt: skip
        spec = {"devices": {"requests": [{"name": "gpu", "firstAvailable": alternatives}]}}

        assert asks_text(asks(spec)) == (
            "1 MIG device (profile 1g.5gb) of DeviceClass mig.nvidia.com or "
            "1 GPU of DeviceClass gpu.nvidia.com"
        )

    def test_a_claim_without_requests_asks_for_no_devices(self) -> None:
        assert asks_text(asks({"devices": {"requests": []}})) == "no devices"


class TestPodClaims:
    def test_a_claim_read_is_shown_with_what_it_asks_for(self) -> None:
        claim = PodClaim("gpu", SOURCE, asks(two_requests()))

        assert pod_claim_text(claim) == (
            "claim 'gpu' (ResourceClaimTemplate 't'): 2 GPUs of DeviceClass gpu.nvidia.com; "
            "1 device of DeviceClass nic.example.com"
        )
        assert pod_claim_data(claim) == {
            "name": "gpu",
            "source": {"kind": TEMPLATE, "name": "t"},
            "asks": ["2 GPUs of DeviceClass gpu.nvidia.com", "1 device of DeviceClass nic.example.com"],
            "problem": None,
        }  # fmt: skip

    def test_a_claim_whose_object_was_not_given_is_shown_as_not_judged(self) -> None:
        claim = PodClaim("gpu", SOURCE, None, NOT_GIVEN)

        assert pod_claim_text(claim) == "claim 'gpu' (ResourceClaimTemplate 't'): not given, so not judged"  # fmt: skip
        assert pod_claim_data(claim)["problem"] == NOT_GIVEN

    def test_a_claim_that_cannot_be_read_is_shown_with_why(self) -> None:
        claim = PodClaim("gpu", SOURCE, None, "cannot be read: spec.spec: is required")

        assert pod_claim_text(claim).endswith("): cannot be read: spec.spec: is required")

    def test_a_claim_naming_no_object_says_so(self) -> None:
        claim = PodClaim("gpu", None, None)

        assert pod_claim_text(claim) == "claim 'gpu': names no ResourceClaimTemplate or ResourceClaim"  # fmt: skip
        assert pod_claim_data(claim) == {"name": "gpu", "source": None, "asks": [], "problem": None}
