"""The audit's loop (webhook.service.audit) and the service's run of it, against stand-ins
for the listing calls; tests/e2e/test_audit.py runs both against a real cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.builders import container, pod
from webhook.engine import Engine
from webhook.engine.inventory import Inventory
from webhook.engine.templates import POD, TemplateKind
from webhook.kube.listing import Page
from webhook.offline.policy_report import MAX_RESULTS
from webhook.service import audit, audit_schedule
from webhook.service.audit import audit_cluster
from webhook.service.audit_schedule import AuditMetrics, PeriodicAudit

PAGES = 3
PODS_PER_PAGE = 400


def pods_page(namespace: str, page: int) -> list[dict[str, Any]]:
    peek = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    items = []
    for index in range(PODS_PER_PAGE):
        item = pod(name=f"p{page}-{index}", containers=[container(env=peek)])
        item["metadata"]["namespace"] = namespace
        items.append(item)
    return items


class Cluster:
    """Pods only, PAGES pages of them in each namespace listed; records what was asked."""

    def __init__(self, opted_in: tuple[str, ...] = ("ml", "team")) -> None:
        self.opted_in = opted_in
        self.listed_in: list[tuple[str, ...] | None] = []
        self.pages_asked = 0

    def namespaces_in_scope(self, api: Any, label: tuple[str, str] | None) -> list[str]:
        return [*self.opted_in, "kube-system", "others"] if label is None else list(self.opted_in)

    def list_kind(
        self, api: Any, kind: TemplateKind, version: str, **options: Any
    ) -> Iterator[Page]:
        namespaces = options.get("namespaces")
        self.listed_in.append(None if namespaces is None else tuple(namespaces))
        if kind is not POD:
            return
        for namespace in namespaces if namespaces is not None else self.opted_in:
            for page in range(PAGES):
                self.pages_asked += 1
                yield Page(kind, pods_page(namespace, page))


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Cluster:
    stand_in = Cluster()
    monkeypatch.setattr(audit, "namespaces_in_scope", stand_in.namespaces_in_scope)
    monkeypatch.setattr(audit, "list_kind", stand_in.list_kind)
    monkeypatch.setattr(audit, "preferred_versions", lambda api: {"": "v1", "apps": "v1", "batch": "v1"})  # fmt: skip
    return stand_in


def test_opted_in_namespaces_are_listed_each_and_not_the_whole_cluster(
    cluster: Cluster, engine: Engine
) -> None:
    run = audit_cluster(None, engine, inventory=Inventory())

    assert run.namespaces == ("ml", "team")
    assert set(cluster.listed_in) == {("ml", "team")}
    assert run.summary.judged == 2 * PAGES * PODS_PER_PAGE
    assert not run.stopped


def test_all_namespaces_lists_across_the_cluster(cluster: Cluster, engine: Engine) -> None:
    run = audit_cluster(None, engine, inventory=Inventory(), all_namespaces=True)

    assert run.namespaces == ("ml", "team", "others")
    assert set(cluster.listed_in) == {None}


def test_a_run_told_to_stop_asks_for_no_further_page(cluster: Cluster, engine: Engine) -> None:
    asked: list[int] = []

    def should_stop() -> bool:
        asked.append(cluster.pages_asked)
        return cluster.pages_asked >= 2

    run = audit_cluster(None, engine, inventory=Inventory(), should_stop=should_stop)

    assert run.stopped
    assert cluster.pages_asked == 2
    assert run.summary.judged == 2 * PODS_PER_PAGE
    assert asked == [0, 1, 2]  # before the first kind, then after each page


def test_findings_are_told_as_they_come_and_kept_only_when_asked(
    cluster: Cluster, engine: Engine
) -> None:
    told = []
    run = audit_cluster(
        None, engine, inventory=Inventory(), keep=lambda f: False, found=told.append
    )

    assert run.findings == []
    assert len(told) == run.summary.judged == 2 * PAGES * PODS_PER_PAGE


class Published:
    def __init__(self) -> None:
        self.reports: list[dict[str, dict[str, Any]]] = []

    def __call__(self, api: Any, reports: dict[str, dict[str, Any]]) -> None:
        self.reports.append(reports)


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch, cluster: Cluster) -> Published:
    publish = Published()
    monkeypatch.setattr(audit_schedule, "publish_policy_reports", publish)
    return publish


def periodic(engine: Engine) -> PeriodicAudit:
    return PeriodicAudit(
        None, lambda: engine, 60, AuditMetrics(CollectorRegistry()), inventory=Inventory
    )


def test_the_service_keeps_no_finding_and_publishes_capped_reports(
    published: Published, engine: Engine
) -> None:
    run = periodic(engine).run_once()

    assert run is not None and run.findings == []
    [reports] = published.reports
    assert sorted(reports) == ["ml", "team"]
    for report in reports.values():
        assert len(report["results"]) == MAX_RESULTS
        assert {r["result"] for r in report["results"]} == {"fail"}
        assert report["summary"]["fail"] == PAGES * PODS_PER_PAGE


def test_a_stopped_service_run_publishes_and_records_nothing(
    published: Published, engine: Engine
) -> None:
    audit_run = periodic(engine)
    audit_run.stop()  # never started: only sets the flag a run asks

    assert audit_run.run_once() is None
    assert published.reports == []
