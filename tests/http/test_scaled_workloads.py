"""The workload an autoscaler under review targets, read for its warning
(webhook/http/scaled_workloads.py): only for autoscalers, never at the cost of the review."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from tests.builders import pod, pod_create
from webhook.engine import AdmissionRequest, Engine
from webhook.engine.autoscalers import ScaleTarget
from webhook.engine.dra.pod_claims import NO_CLAIMS
from webhook.engine.handlers import Review
from webhook.engine.inventory import UNKNOWN
from webhook.engine.templates import TemplateKind
from webhook.http.scaled_workloads import ScaledWorkloadReader, ScaledWorkloads

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trainer"}}


def hpa_create() -> AdmissionRequest:
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "trainer"},
            "maxReplicas": 3,
        },
    }
    return pod_create(
        hpa,
        group="autoscaling",
        version="v2",
        kind="HorizontalPodAutoscaler",
        resource="horizontalpodautoscalers",
        name="trainer",
    )


def workload(
    engine: Engine, request: AdmissionRequest, read: ScaledWorkloads, seconds: float = 2.0
) -> Mapping[str, Any] | None:
    return asyncio.run(ScaledWorkloadReader(read, seconds).workload(engine, request))


def test_the_target_of_an_autoscaler_is_read_with_the_engine_s_kinds(engine: Engine) -> None:
    asked: list[tuple[ScaleTarget, tuple[TemplateKind, ...]]] = []

    def read(target: ScaleTarget, kinds: tuple[TemplateKind, ...]) -> Mapping[str, Any]:
        asked.append((target, kinds))
        return DEPLOYMENT

    found = workload(engine, hpa_create(), read)

    assert found == DEPLOYMENT
    [(target, kinds)] = asked
    assert (target.namespace, target.kind, target.name) == ("ml", "Deployment", "trainer")
    assert kinds == engine.kinds


def test_a_review_of_anything_but_an_autoscaler_reads_nothing(engine: Engine) -> None:
    asked: list[ScaleTarget] = []

    def read(target: ScaleTarget, kinds: tuple[TemplateKind, ...]) -> Mapping[str, Any]:
        asked.append(target)
        return DEPLOYMENT

    assert workload(engine, pod_create(pod("inference")), read) is None
    assert asked == []


def test_a_read_that_fails_is_logged_and_yields_no_workload(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    def read(target: ScaleTarget, kinds: tuple[TemplateKind, ...]) -> Mapping[str, Any]:
        raise PermissionError("403 Forbidden")

    with caplog.at_level(logging.WARNING, logger="gpu_admission.http"):
        found = workload(engine, hpa_create(), read)

    assert found is None
    [record] = caplog.records
    assert record.getMessage().startswith("cannot read the workload an autoscaler targets")
    assert (record.uid, record.target, record.namespace) == ("uid-1", "Deployment/trainer", "ml")  # type: ignore[attr-defined]
    assert record.reason == "403 Forbidden"  # type: ignore[attr-defined]


def test_a_read_slower_than_its_seconds_is_given_up_on(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    released = threading.Event()

    def read(target: ScaleTarget, kinds: tuple[TemplateKind, ...]) -> Mapping[str, Any]:
        released.wait(5)  # an apiserver that does not answer
        return DEPLOYMENT

    try:
        with caplog.at_level(logging.WARNING, logger="gpu_admission.http"):
            found = workload(engine, hpa_create(), read, seconds=0.1)
    finally:
        released.set()

    assert found is None
    [record] = caplog.records
    assert record.reason == "TimeoutError"  # type: ignore[attr-defined]


class CountingEngine(Engine):
    """An engine that counts how often it works out what an autoscaler scales."""

    looked = 0

    def scale_target(self, request: AdmissionRequest) -> ScaleTarget | None:
        self.looked += 1
        return super().scale_target(request)


def test_the_target_is_worked_out_once_for_the_read_and_the_warning(engine: Engine) -> None:
    counting = CountingEngine(engine.policy)

    def read(target: ScaleTarget, kinds: tuple[TemplateKind, ...]) -> Mapping[str, Any]:
        return {**DEPLOYMENT, "spec": {"template": pod("training")}}

    request = hpa_create()
    scaled = asyncio.run(ScaledWorkloadReader(read, 2.0).scaled(counting, request))
    assert scaled is not None
    review = Review(request, UNKNOWN, NO_CLAIMS, scaled.workload, scaled.target)
    decision = counting.answer("warn-autoscalers", review)

    assert decision.allowed
    assert counting.looked == 1
