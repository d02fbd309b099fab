"""The audit's bounds on the real control plane: listing page by page in the namespaces
named only, one object at a time, a stopped run asking for no further page, tenant-sized
objects costing the run one object's memory, owners trusted only when they exist, and
PolicyReports published a page at a time, written only when changed and never touching
a foreign one.

A few pods and suspended Jobs are created while their namespaces have not opted in (no
webhook sees them), then two of the three namespaces opt in. Page sizes are made small
(2) so that a handful of objects spans several pages.
"""

from __future__ import annotations

import functools
import itertools
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from tests.builders import tenant_replica_set
from webhook.engine import Engine
from webhook.engine.inventory import Inventory
from webhook.engine.templates import POD, TemplateKind
from webhook.kube import listing
from webhook.kube import policy_reports as publishing
from webhook.kube.api_errors import ApiException
from webhook.kube.client import api_client
from webhook.kube.listing import list_kind, read_object
from webhook.kube.policy_reports import GROUP, PLURAL, REPORT_NAME, VERSION, publish_policy_reports
from webhook.offline.audit import judge_object
from webhook.service import audit
from webhook.service.audit import audit_cluster
from webhook.service.audit_schedule import AuditMetrics, PeriodicAudit

from .admission_fixtures import OPT_IN, REPO
from .controlplane import ControlPlane
from .waiting import wait_for

pytestmark = pytest.mark.e2e

T = TypeVar("T")

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

    items = list(
        list_kind(
            api, POD, "v1", namespaces=[TEAM_A, TEAM_B], page_size=2,
            progress=lambda _, listed: progress.append(listed),
        )
    )  # fmt: skip

    assert progress == [2, 4, 5, 7, 8]  # pages of 2, 2, 1 then 2, 1, counted across namespaces
    namespaces = [item["metadata"]["namespace"] for item in items]
    assert namespaces == [TEAM_A] * 5 + [TEAM_B] * 3  # never OUTSIDE
    assert {(item["apiVersion"], item["kind"]) for item in items} == {("v1", "Pod")}


def test_a_kind_of_another_group_is_listed_page_by_page_by_the_generic_calls(
    api: Any, running: None, engine: Engine
) -> None:
    progress: list[int] = []

    items = list(
        list_kind(
            api, job_kind(engine), "v1", namespaces=[TEAM_A, TEAM_B], page_size=2,
            progress=lambda _, listed: progress.append(listed),
        )
    )  # fmt: skip

    assert progress == [2, 3, 3]  # TEAM_B has no Job
    assert {(item["apiVersion"], item["kind"]) for item in items} == {("batch/v1", "Job")}


def test_without_namespaces_the_kind_is_listed_across_the_cluster(api: Any, running: None) -> None:
    progress: list[int] = [0]
    namespaces = {
        item["metadata"]["namespace"]
        for item in list_kind(api, POD, "v1", page_size=2, progress=lambda _, n: progress.append(n))
    }

    assert set(PODS) <= namespaces
    pages = [after - before for before, after in itertools.pairwise(progress)]
    assert len(pages) > 1 and max(pages) <= 2


def test_the_next_page_is_asked_for_only_when_the_last_is_taken(api: Any, running: None) -> None:
    progress: list[int] = []
    items = list_kind(
        api, POD, "v1", namespaces=[TEAM_A, TEAM_B], page_size=2,
        progress=lambda _, listed: progress.append(listed),
    )  # fmt: skip

    for _ in range(3):  # the first page, and the first object of the second
        next(items)
    items.close()

    assert progress == [2]  # told after each page listed: one page whole, and no third


def test_an_object_is_read_again_by_name_and_a_missing_one_is_none(
    api: Any, running: None, engine: Engine
) -> None:
    found = read_object(api, job_kind(engine), "v1", TEAM_A, "j-0")

    assert isinstance(found, dict)
    assert (found["apiVersion"], found["kind"], found["metadata"]["name"]) == ("batch/v1", "Job", "j-0")  # fmt: skip
    assert read_object(api, job_kind(engine), "v1", TEAM_A, "no-such-job") is None


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


def test_a_run_told_to_stop_after_its_first_object_asks_for_no_further_page(
    api: Any, running: None, engine: Engine, small_pages: None
) -> None:
    told: list[Any] = []
    pages: list[int] = []
    pages_done_at_first: list[int] = []

    def should_stop() -> bool:
        return len(told) >= 1  # asked before each kind and after each object judged

    def found(finding: Any) -> None:
        told.append(finding)
        pages_done_at_first.append(len(pages))

    run = audit_cluster(
        api, engine, inventory=Inventory(), should_stop=should_stop, found=found,
        listed=lambda _, listed: pages.append(listed),
    )  # fmt: skip

    assert run.stopped
    # Pages are judged object by object: the run stopped inside the page of its first
    # object, so no page was done after it (before it, empty pages or pages of objects in
    # other namespaces, passed over).
    assert len(pages) == pages_done_at_first[0]
    assert run.summary.judged == 1


# --- each kind counted once across the cluster (webhook.service.where_listed) -------------


def test_a_kind_is_counted_across_the_cluster_as_kube_apiserver_holds_it(
    api: Any, running: None, engine: Engine
) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)

    def counts() -> tuple[tuple[int | None, int], ...]:
        return (
            (listing.count_kind(api, POD, "v1"), len(core.list_pod_for_all_namespaces().items)),
            (listing.count_kind(api, job_kind(engine), "v1"), len(batch.list_job_for_all_namespaces().items)),
        )  # fmt: skip

    def agreeing() -> tuple[tuple[int | None, int], ...] | None:
        found = counts()  # again, if pods of namespaces being deleted went meanwhile
        return found if all(counted == listed for counted, listed in found) else None

    (_, pods), (_, jobs) = wait_for(agreeing, 30, "the counts to agree with the lists")
    assert pods >= sum(PODS.values()) and jobs >= sum(JOBS.values())


@pytest.fixture
def requests_made(api: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs of the requests ``api`` makes, as it makes them."""
    made: list[str] = []
    call_api = api.call_api

    def recorded(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        made.append(url)
        return call_api(method, url, *args, **kwargs)

    monkeypatch.setattr(api, "call_api", recorded)
    return made


def test_an_audit_counts_each_kind_once_and_lists_none_where_the_cluster_holds_none(
    api: Any,
    running: None,
    engine: Engine,
    requests_made: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = audit_cluster(api, engine, inventory=Inventory())
    counted = [url for url in requests_made if "limit=1&" in f"{url}&"]
    asked = list(requests_made)
    requests_made.clear()
    monkeypatch.setattr(audit, "where_to_list", lambda api, kind, version, namespaces: namespaces)
    per_namespace = audit_cluster(api, engine, inventory=Inventory())

    versions = listing.preferred_versions(api)
    served = [kind for kind in engine.kinds if kind.group in versions]
    assert len(counted) == len(served)  # one request each, across the cluster
    assert not any("/namespaces/" in url for url in counted)
    for kind in served:
        resource = f"/{kind.resource}?"
        namespaced = [url for url in asked if "/namespaces/" in url and resource in url]
        if listing.count_kind(api, kind, versions[kind.group]) == 0:  # no StatefulSet, say
            assert namespaced == [], kind.kind
    # no kind costs more than listed per namespace, plus the request that counts it
    assert len(asked) <= len(requests_made) + len(served)
    for namespace in OPTED_IN:
        assert run.summary.by_namespace[namespace] == per_namespace.summary.by_namespace[namespace]


# --- tenant-sized objects and owners (webhook.kube.listing, webhook.service.audit) --------

TENANT = "bounds-tenant"
TENANT_SIZED = 10
"""ReplicaSets of zero replicas, each with a value of VALUE_BYTES: with pages read whole,
all of them were held at once, raw and parsed."""
VALUE_BYTES = 1_200_000
GHOST = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",  # judged (the default policy's workloadKinds), never served here
    "name": "ghost",
    "uid": "6b0d3c1e-0000-4000-8000-000000000000",
    "controller": True,
}


def cronjob(name: str, owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}  # fmt: skip
    metadata: dict[str, Any] = {"name": name}
    if owners:
        metadata["ownerReferences"] = owners
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": metadata,
        "spec": {
            "schedule": "0 0 1 1 *",
            "suspend": True,
            "jobTemplate": {"spec": {"template": template}},
        },
    }


@pytest.fixture(scope="module")
def tenant(controlplane: ControlPlane, api: Any) -> Iterator[None]:
    """TENANT_SIZED ReplicaSets of a 1.2 MB value; a CronJob whose controller is a JobSet
    the cluster does not serve; a real CronJob and a Job it controls. Created before the
    namespace opts in."""
    controlplane.create_namespace(TENANT)
    try:
        apps = client.AppsV1Api(api)
        batch = client.BatchV1Api(api)
        for index in range(TENANT_SIZED):
            apps.create_namespaced_replica_set(
                TENANT, tenant_replica_set(f"big-{index}", VALUE_BYTES)
            )
        batch.create_namespaced_cron_job(TENANT, cronjob("fake-owned", [GHOST]))
        real = batch.create_namespaced_cron_job(TENANT, cronjob("real-owner"))
        owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": "real-owner", "uid": real.metadata.uid, "controller": True}  # fmt: skip
        job = suspended_job("owned-by-real")
        job["metadata"]["ownerReferences"] = [owner]
        batch.create_namespaced_job(TENANT, job)
        controlplane.create_namespace(TENANT, OPT_IN)
        yield
    finally:
        controlplane.delete_namespace(TENANT, wait=False)


def traced_peak(work: Callable[[], T]) -> tuple[T, int]:
    """What ``work`` returns, and the peak of Python memory it took above what was held."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        done = work()
        return done, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_tenant_sized_objects_cost_the_audit_one_object_at_a_time(
    api: Any, tenant: None, engine: Engine
) -> None:
    """Ten ReplicaSets of 1.2 MB on one page: read whole, the page alone held 12 MB raw
    and 12 MB parsed (the issue's replica grew by 200 MiB with 40). Now the run's peak
    is that of judging one of them, and little more, whatever the page holds."""
    one = tenant_replica_set("alone", VALUE_BYTES) | {
        "metadata": {"name": "alone", "namespace": TENANT}
    }
    replica_set_kind = next(kind for kind in engine.kinds if kind.kind == "ReplicaSet")
    _, judging_one = traced_peak(lambda: judge_object(engine, one, replica_set_kind))

    run, peak = traced_peak(
        lambda: audit_cluster(api, engine, inventory=Inventory(), keep=lambda finding: False)
    )

    assert sum(run.summary.by_namespace[TENANT].values()) >= TENANT_SIZED
    assert peak < judging_one + 4 * VALUE_BYTES, f"peak {peak:,} bytes, one judged {judging_one:,}"


def test_a_workload_whose_owner_does_not_exist_is_judged_and_one_whose_owner_does_is_left(
    api: Any, tenant: None, engine: Engine
) -> None:
    run = audit_cluster(api, engine, inventory=Inventory())

    judged = {(f.subject.kind, f.subject.name) for f in run.findings if f.subject.namespace == TENANT}  # fmt: skip
    assert (
        "CronJob",
        "fake-owned",
    ) in judged  # its "owner" is of a kind the cluster does not serve
    assert ("CronJob", "real-owner") in judged
    assert ("Job", "owned-by-real") not in judged  # left to the CronJob that controls it
    assert ("ReplicaSet", "big-0") in judged


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
