"""The audit's bounds on the real control plane: listing page by page in the namespaces
named only, a stopped run asking for no further page, and PolicyReports published a
page at a time, written only when changed and never touching a foreign one.

A few pods and suspended Jobs are created while their namespaces have not opted in (no
webhook sees them), then two of the three namespaces opt in. Page sizes are made small
(2) so that a handful of objects spans several pages.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from webhook.engine import Engine
from webhook.engine.inventory import Inventory
from webhook.engine.templates import POD, TemplateKind
from webhook.kube import listing
from webhook.kube import policy_reports as publishing
from webhook.kube.api_errors import ApiException
from webhook.kube.client import api_client
from webhook.kube.listing import list_kind
from webhook.kube.policy_reports import GROUP, PLURAL, REPORT_NAME, VERSION, publish_policy_reports
from webhook.service import audit
from webhook.service.audit import audit_cluster
from webhook.service.audit_schedule import AuditMetrics, PeriodicAudit

from .admission_fixtures import OPT_IN, REPO
from .controlplane import ControlPlane
from .waiting import wait_for

pytestmark = pytest.mark.e2e

TEAM_A, TEAM_B, OUTSIDE = "bounds-team-a", "bounds-team-b", "bounds-not-opted-in"
OPTED_IN = (TEAM_A, TEAM_B)
PODS = {TEAM_A: 5, TEAM_B: 3, OUTSIDE: 2}
JOBS = {TEAM_A: 3}
REPORTS_ONLY = ("bounds-reports-c", "bounds-reports-d")
"""Namespaces with no pods, for reports alone."""
CRD = REPO / "deploy" / "audit" / "policyreports.yaml"
LABELS = {"app.kubernetes.io/managed-by": "gpu-admission"}


def pod(name: str) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container], "terminationGracePeriodSeconds": 0},
    }


def suspended_job(name: str) -> dict[str, Any]:
    template = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}],
        }
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"suspend": True, "template": template},
    }


@pytest.fixture(scope="module")
def api(controlplane: ControlPlane) -> Iterator[Any]:
    api = api_client(controlplane.kubeconfig)
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="module")
def running(controlplane: ControlPlane, api: Any) -> Iterator[None]:
    """PODS and JOBS, created before their namespaces opted in; then OPTED_IN opt in."""
    for namespace in PODS:
        controlplane.create_namespace(namespace)
    try:
        core = client.CoreV1Api(api)
        batch = client.BatchV1Api(api)
        for namespace, count in PODS.items():
            for index in range(count):
                core.create_namespaced_pod(namespace, pod(f"p-{index}"))
        for namespace, count in JOBS.items():
            for index in range(count):
                batch.create_namespaced_job(namespace, suspended_job(f"j-{index}"))
        for namespace in OPTED_IN:
            controlplane.create_namespace(namespace, OPT_IN)
        yield
    finally:
        for namespace in PODS:
            controlplane.delete_namespace(namespace, wait=False)


def job_kind(engine: Engine) -> TemplateKind:
    [job] = [kind for kind in engine.kinds if kind.group == "batch" and kind.kind == "Job"]
    return job


# --- listing (webhook.kube.listing.list_kind) ---------------------------------------------


def test_named_namespaces_are_listed_each_page_by_page(api: Any, running: None) -> None:
    progress: list[int] = []

    pages = list(
        list_kind(
            api, POD, "v1", namespaces=[TEAM_A, TEAM_B], page_size=2,
            progress=lambda _, listed: progress.append(listed),
        )
    )  # fmt: skip

    assert [len(page.items) for page in pages] == [2, 2, 1, 2, 1]
    assert progress == [2, 4, 5, 7, 8]  # counted across the namespaces
    namespaces = [item["metadata"]["namespace"] for page in pages for item in page.items]
    assert namespaces == [TEAM_A] * 5 + [TEAM_B] * 3  # never OUTSIDE
    assert {(item["apiVersion"], item["kind"]) for page in pages for item in page.items} == {
        ("v1", "Pod")
    }


def test_a_kind_of_another_group_is_listed_page_by_page_by_the_generic_calls(
    api: Any, running: None, engine: Engine
) -> None:
    pages = list(list_kind(api, job_kind(engine), "v1", namespaces=[TEAM_A, TEAM_B], page_size=2))

    assert [len(page.items) for page in pages] == [2, 1, 0]  # TEAM_B has no Job
    assert {(item["apiVersion"], item["kind"]) for page in pages for item in page.items} == {
        ("batch/v1", "Job")
    }


def test_without_namespaces_the_kind_is_listed_across_the_cluster(api: Any, running: None) -> None:
    sizes: list[int] = []
    namespaces: set[str] = set()
    for page in list_kind(api, POD, "v1", page_size=2):
        sizes.append(len(page.items))
        namespaces |= {item["metadata"]["namespace"] for item in page.items}

    assert set(PODS) <= namespaces
    assert len(sizes) > 1 and max(sizes) <= 2


def test_the_next_page_is_asked_for_only_when_the_last_is_taken(api: Any, running: None) -> None:
    progress: list[int] = []
    pages = list_kind(
        api, POD, "v1", namespaces=[TEAM_A, TEAM_B], page_size=2,
        progress=lambda _, listed: progress.append(listed),
    )  # fmt: skip

    next(pages)
    pages.close()

    assert progress == [2]  # told after each page listed: one page, and no other


# --- the audit's run (webhook.service.audit.audit_cluster) --------------------------------


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit lists with pages of 2."""
    monkeypatch.setattr(audit, "list_kind", functools.partial(listing.list_kind, page_size=2))


def test_an_audit_lists_the_opted_in_namespaces_page_by_page(
    api: Any, running: None, engine: Engine, small_pages: None
) -> None:
    pages: list[tuple[str, int]] = []
    told = []

    run = audit_cluster(
        api, engine, inventory=Inventory(), keep=lambda finding: False, found=told.append,
        listed=lambda kind, listed: pages.append((kind.kind, listed)),
    )  # fmt: skip

    assert set(OPTED_IN) <= set(run.namespaces) and OUTSIDE not in run.namespaces
    assert not run.stopped
    assert run.findings == [] and len(told) == run.summary.judged
    for namespace in OPTED_IN:
        # a Job whose pods the job controller makes is judged by its template
        expected = PODS[namespace] + JOBS.get(namespace, 0)
        assert sum(run.summary.by_namespace[namespace].values()) == expected, namespace
    assert OUTSIDE not in run.summary.by_namespace
    assert len([kind for kind, _ in pages if kind == "Pod"]) >= 5


def test_an_audit_of_all_namespaces_covers_those_not_opted_in(
    api: Any, running: None, engine: Engine, small_pages: None
) -> None:
    run = audit_cluster(api, engine, inventory=Inventory(), all_namespaces=True)

    assert {OUTSIDE, *OPTED_IN} <= set(run.namespaces)
    assert "kube-system" not in run.namespaces
    assert sum(run.summary.by_namespace[OUTSIDE].values()) == PODS[OUTSIDE]


def test_a_run_told_to_stop_after_its_first_page_asks_for_no_further_page(
    api: Any, running: None, engine: Engine, small_pages: None
) -> None:
    asked: list[int] = []
    pages: list[int] = []

    def should_stop() -> bool:
        asked.append(len(pages))
        return len(asked) >= 2  # before the first kind, then after the first page

    run = audit_cluster(
        api, engine, inventory=Inventory(), should_stop=should_stop,
        listed=lambda _, listed: pages.append(listed),
    )  # fmt: skip

    assert run.stopped
    assert asked == [0, 1]
    assert len(pages) == 1  # the page listed before the stop, and no other asked for
    assert run.summary.judged <= 2


# --- publishing PolicyReports (webhook.kube.policy_reports) -------------------------------


def report(namespace: str, name: str = REPORT_NAME, passed: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PolicyReport",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS)},
        "summary": {"pass": passed},
        "results": [],
    }


def test_without_the_crd_nothing_is_written(controlplane: ControlPlane, api: Any) -> None:
    assert not controlplane.exists("crd", f"{PLURAL}.{GROUP}")

    assert publish_policy_reports(api, {TEAM_A: report(TEAM_A)}) is None


def test_a_stopped_service_run_publishes_and_records_nothing(
    api: Any, running: None, engine: Engine, served: None
) -> None:
    metrics = AuditMetrics(CollectorRegistry())
    periodic = PeriodicAudit(api, lambda: engine, 60, metrics, inventory=Inventory)
    periodic.stop()  # never started: only sets the flag a run asks

    assert periodic.run_once() is None
    assert _stored(api) == {}


@pytest.fixture(scope="module")
def served(controlplane: ControlPlane, api: Any, running: None) -> Iterator[None]:
    """The PolicyReport CRD, served; the namespaces of REPORTS_ONLY."""
    for namespace in REPORTS_ONLY:
        controlplane.create_namespace(namespace)
    controlplane.kubectl("apply", "-f", str(CRD))
    try:
        wait_for(lambda: _served(api), 30, "the PolicyReport kind to be served")
        yield
    finally:
        controlplane.kubectl("delete", "-f", str(CRD), "--ignore-not-found")
        for namespace in REPORTS_ONLY:
            controlplane.delete_namespace(namespace, wait=False)


def test_reports_are_listed_a_page_at_a_time_written_when_changed_and_foreign_ones_left(
    api: Any, served: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five reports of ours on three pages of 2: each found unchanged is on some page; were
    a page missed, its reports would be written again."""
    monkeypatch.setattr(publishing, "PAGE_SIZE", 2)
    objects = client.CustomObjectsApi(api)
    foreign = report(OUTSIDE, "someone-elses", passed=1)  # labelled as ours, named otherwise
    objects.create_namespaced_custom_object(GROUP, VERSION, OUTSIDE, PLURAL, foreign)
    namespaces = sorted((*PODS, *REPORTS_ONLY))
    first = publish_policy_reports(api, {n: report(n, passed=1) for n in namespaces})
    before = _stored(api)
    foreign_before = _version(objects, OUTSIDE, "someone-elses")

    wanted = {n: report(n, passed=2 if n == TEAM_B else 1) for n in namespaces if n != REPORTS_ONLY[1]}  # fmt: skip
    second = publish_policy_reports(api, wanted)
    after = _stored(api)

    assert first is not None and second is not None
    assert (sorted(first.written), first.deleted, first.failed) == (namespaces, [], {})
    assert sorted(second.unchanged) == sorted(set(namespaces) - {TEAM_B, REPORTS_ONLY[1]})
    assert (second.written, second.deleted, second.failed) == ([TEAM_B], [REPORTS_ONLY[1]], {})
    assert set(after) == set(namespaces) - {REPORTS_ONLY[1]}
    for namespace in second.unchanged:
        assert after[namespace] == before[namespace], f"{namespace}: written though unchanged"
    assert after[TEAM_B] != before[TEAM_B]
    assert _version(objects, OUTSIDE, "someone-elses") == foreign_before


def _served(api: Any) -> bool:
    try:
        client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, PLURAL, limit=1)
    except ApiException:
        return False
    return True


def _stored(api: Any) -> dict[str, str]:
    """Namespace -> the resourceVersion of our report there."""
    found = client.CustomObjectsApi(api).list_cluster_custom_object(
        GROUP, VERSION, PLURAL, field_selector=f"metadata.name={REPORT_NAME}"
    )
    return {
        item["metadata"]["namespace"]: item["metadata"]["resourceVersion"]
        for item in found["items"]
    }


def _version(objects: Any, namespace: str, name: str) -> str:
    found = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return str(found["metadata"]["resourceVersion"])
