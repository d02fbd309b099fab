"""What claims ask, kept per object and view of the DeviceClasses (webhook/engine/dra/pod_claims.py).

The answer kept must be the one reading the object afresh gives, and never one read
through another view of which DeviceClasses give GPUs.
"""

from __future__ import annotations

import pytest

from tests.builders import claim_spec, claim_template
from webhook.engine.dra.api import TEMPLATE
from webhook.engine.dra.claims import ClaimSource, GpuClasses, claim_asks
from webhook.engine.dra.pod_claims import KeptAsks
from webhook.errors import MalformedObject
from webhook.policy import load_default_policy

SETTINGS = load_default_policy().dra
POLICY_VIEW = GpuClasses(SETTINGS)
WIDER_VIEW = GpuClasses(SETTINGS, {"a100.example.com": "gpu"})
SOURCE = ClaimSource(TEMPLATE, "t")


def test_an_object_read_again_gives_what_reading_it_afresh_gives() -> None:
    kept = KeptAsks()
    template = claim_template("t", claim_spec(count=2))
    first = kept.asks(POLICY_VIEW, SOURCE, template)
    assert kept.asks(POLICY_VIEW, SOURCE, template) is first
    assert first == claim_asks(POLICY_VIEW, SOURCE, template)


def test_an_equal_view_built_anew_keeps_the_answers() -> None:
    kept = KeptAsks()
    template = claim_template("t")
    first = kept.asks(POLICY_VIEW, SOURCE, template)
    assert kept.asks(GpuClasses(SETTINGS), SOURCE, template) is first


def test_another_view_reads_the_object_through_its_own_classes() -> None:
    kept = KeptAsks()
    template = claim_template("t", claim_spec("a100.example.com"))
    assert not kept.asks(POLICY_VIEW, SOURCE, template).asks_gpus
    assert kept.asks(WIDER_VIEW, SOURCE, template).asks_gpus
    assert kept.asks(WIDER_VIEW, SOURCE, template) == claim_asks(WIDER_VIEW, SOURCE, template)


def test_objects_alike_but_for_one_request_are_kept_apart() -> None:
    kept = KeptAsks()
    one, two = claim_template("t", claim_spec(count=1)), claim_template("t", claim_spec(count=2))
    assert kept.asks(POLICY_VIEW, SOURCE, one) != kept.asks(POLICY_VIEW, SOURCE, two)


def test_an_object_that_cannot_be_read_is_refused_each_time_and_never_kept() -> None:
    kept = KeptAsks()
    broken = claim_template("t", claim_spec(count=0))
    for _ in range(2):
        with pytest.raises(MalformedObject):
            kept.asks(POLICY_VIEW, SOURCE, broken)


def test_no_more_answers_are_kept_than_the_bound() -> None:
    kept = KeptAsks(max_answers=2)
    for count in range(1, 6):
        template = claim_template("t", claim_spec(count=count))
        assert kept.asks(POLICY_VIEW, SOURCE, template).requests[0].alternatives[0].count == count
        assert len(kept._table[1]) <= 2


def test_objects_over_the_key_bound_are_read_each_time() -> None:
    kept = KeptAsks(max_key_bytes=64)
    template = claim_template("t")
    assert kept.asks(POLICY_VIEW, SOURCE, template) == claim_asks(POLICY_VIEW, SOURCE, template)
    assert kept._table[1] == {}
