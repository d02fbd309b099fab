"""Which namespaces the audit judges (webhook.service.audit): those the webhooks cover,
never kube-system, kube-node-lease or the one the service runs in, whatever its name.
The cluster is a stand-in answering plain Namespaces (tests/service/cluster_stub.py);
the audit of what they hold runs against a real cluster in tests/e2e."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from tests.service.cluster_stub import cluster_stub
from webhook.engine import Engine
from webhook.service.audit import audit_cluster, namespaces_to_audit, never_audited
from webhook.service.audit_schedule import AuditMetrics, PeriodicAudit

OPTED_IN = {"gpu-admission.io/enabled": "true"}
NAMESPACES = {
    "kube-system": OPTED_IN,
    "kube-node-lease": {},
    "platform-admission": OPTED_IN,  # where the chart was installed
    "gpu-admission": OPTED_IN,  # a tenant's, of the same name as the project
    "team-b": {},
}


def test_the_namespace_the_service_runs_in_is_never_audited_beside_the_control_planes() -> None:
    assert never_audited("platform-admission") == {
        "kube-system",
        "kube-node-lease",
        "platform-admission",
    }
    assert "gpu-admission" not in never_audited("platform-admission")
    assert never_audited(None) == {"kube-system", "kube-node-lease"}


def test_an_opted_in_namespace_named_gpu_admission_is_audited_when_the_service_runs_elsewhere(
    engine: Engine,
) -> None:
    with cluster_stub(NAMESPACES) as cluster:
        chosen = namespaces_to_audit(cluster.api(), engine, False, "platform-admission")

    assert chosen == ("gpu-admission",)


def test_a_preview_of_every_namespace_leaves_out_the_services_own(engine: Engine) -> None:
    with cluster_stub(NAMESPACES) as cluster:
        chosen = namespaces_to_audit(cluster.api(), engine, True, "platform-admission")

    assert chosen == ("gpu-admission", "team-b")


def test_a_run_is_told_the_service_namespace_and_judges_only_the_others(engine: Engine) -> None:
    with cluster_stub(NAMESPACES) as cluster:
        run = audit_cluster(
            cluster.api(), engine, all_namespaces=True, service_namespace="gpu-admission"
        )

    assert run.namespaces == ("platform-admission", "team-b")
    assert set(run.summary.by_namespace) == {"platform-admission", "team-b"}


def test_the_periodic_audit_skips_the_namespace_it_was_given(engine: Engine) -> None:
    metrics = AuditMetrics(CollectorRegistry())
    with cluster_stub(NAMESPACES) as cluster:
        periodic = PeriodicAudit(
            cluster.api(), lambda: engine, 60, metrics, service_namespace="platform-admission"
        )
        run = periodic.run_once()

    assert periodic.service_namespace == "platform-admission"
    assert run is not None and run.namespaces == ("gpu-admission",)


def test_a_run_narrowed_to_named_namespaces_asks_nothing_of_the_others(engine: Engine) -> None:
    namespaces = {**NAMESPACES, "team-c": OPTED_IN}
    with cluster_stub(namespaces) as cluster:
        run = audit_cluster(
            cluster.api(), engine, service_namespace="platform-admission", only=["team-c"]
        )
        paths = cluster.paths

    assert run.namespaces == ("team-c",)
    assert run.not_audited == {}
    listed = [p for p in paths if "/namespaces/" in p]
    assert listed and all("/namespaces/team-c/" in p for p in listed)


def test_a_narrowed_preview_of_every_namespace_lists_only_the_named_ones(engine: Engine) -> None:
    with cluster_stub(NAMESPACES) as cluster:
        run = audit_cluster(
            cluster.api(),
            engine,
            all_namespaces=True,
            service_namespace="platform-admission",
            only=["team-b"],
        )
        paths = cluster.paths

    assert run.namespaces == ("team-b",)
    listed = [p for p in paths if "/namespaces/" in p]
    assert listed and all("/namespaces/team-b/" in p for p in listed)


def test_each_named_namespace_out_of_scope_is_left_with_its_reason(engine: Engine) -> None:
    named = ["gpu-admission", "team-b", "kube-system", "platform-admission", "nowhere"]
    with cluster_stub(NAMESPACES) as cluster:
        run = audit_cluster(
            cluster.api(), engine, service_namespace="platform-admission", only=named
        )

    assert run.namespaces == ("gpu-admission",)
    assert run.not_audited == {
        "team-b": "not opted in (no label gpu-admission.io/enabled=true); "
        "--all-namespaces audits it as a preview",
        "kube-system": "the webhooks never cover it",
        "platform-admission": "the service's own namespace, which its webhooks never cover",
        "nowhere": "no such namespace",
    }
    assert set(run.summary.by_namespace) == {"gpu-admission"}
