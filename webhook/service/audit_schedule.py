"""`serve --audit-interval`: the audit repeated, published as PolicyReports and metrics.

A thread of its own runs ``audit_cluster`` (``webhook.service.audit``) with the engine
serving now (a reloaded policy included), the first time shortly after start, then
every interval; reviews keep being answered meanwhile, the audit's pages being judged
between them. Each run's findings become one PolicyReport per audited namespace
(``webhook.offline.policy_report``, folded in as they come: a run holds per namespace
its counts and the results it publishes, not every finding), written only where they changed
(``webhook.kube.policy_reports``), so replicas that agree write once between them.
Without the PolicyReport CRD nothing is written and one line says so (again only once
the CRD comes or goes). A run that fails is logged and counted; the next one comes at
its time.

Series, on the service's registry (``webhook.http.metrics``):

- ``gpu_admission_audit_rule_results{rule,result}``: judged pods and pod templates by
  rule and outcome (``pass``, ``fail``, ``warn``, ``audit``, ``skip``) at the last run;
- ``gpu_admission_audit_verdicts{verdict}``: the same by verdict (``denied``,
  ``warned``, ``audited``, ``exempted``, ``passed``);
- ``gpu_admission_audit_runs_total{result}``: runs that ended in ``success`` or ``failure``;
- ``gpu_admission_audit_last_run_timestamp_seconds`` and
  ``gpu_admission_audit_duration_seconds``: when the last successful run ended, and
  what it took.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from webhook.engine import RULES, Engine
from webhook.engine.inventory import Inventory
from webhook.kube.policy_reports import publish_policy_reports
from webhook.offline.audit import OUTCOMES, VERDICTS, Finding
from webhook.offline.policy_report import ReportResults
from webhook.service.audit import AuditRun, audit_cluster

__all__ = ["AuditMetrics", "PeriodicAudit"]

log = logging.getLogger("gpu_admission.audit")

FIRST_RUN_AFTER = 30.0
"""Seconds before the first run (less when the interval is shorter): the live inventory
syncs meanwhile, and a rollout's replicas do not all list at once."""

STOP_JOIN_TIMEOUT = 5.0


class AuditMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.rule_results = Gauge(
            "gpu_admission_audit_rule_results",
            "Judged pods and pod templates by rule and outcome at the last audit",
            ["rule", "result"],
            registry=registry,
        )
        self.verdicts = Gauge(
            "gpu_admission_audit_verdicts",
            "Judged pods and pod templates by verdict at the last audit",
            ["verdict"],
            registry=registry,
        )
        self.runs = Counter(
            "gpu_admission_audit_runs",
            "Audits of what runs, by result",
            ["result"],
            registry=registry,
        )
        self.last_run = Gauge(
            "gpu_admission_audit_last_run_timestamp_seconds",
            "When the last successful audit ended",
            registry=registry,
        )
        self.duration = Gauge(
            "gpu_admission_audit_duration_seconds",
            "How long the last successful audit took",
            registry=registry,
        )
        for result in ("success", "failure"):
            self.runs.labels(result)

    def record(self, run: AuditRun, ended: float, seconds: float) -> None:
        rules = dict.fromkeys(RULES.names) | dict.fromkeys(run.summary.by_rule)
        for rule in rules:
            counts = run.summary.by_rule.get(rule)
            for outcome in OUTCOMES:
                self.rule_results.labels(rule, outcome).set(counts[outcome] if counts else 0)
        for verdict in VERDICTS:
            self.verdicts.labels(verdict).set(run.summary.verdicts[verdict])
        self.runs.labels("success").inc()
        self.last_run.set(ended)
        self.duration.set(seconds)

    def failed(self) -> None:
        self.runs.labels("failure").inc()


def _none(finding: Finding) -> bool:
    return False


class PeriodicAudit:
    """Audits the cluster behind ``api`` every ``interval`` seconds, in a daemon thread.

    ``engine`` gives the engine serving now; ``inventory``, when given, the live
    inventory's latest snapshot (else Nodes and PriorityClasses are listed each run).
    ``service_namespace``, the namespace the replica runs in (``webhook.service.namespace``),
    is never audited, as the webhooks never cover it."""

    def __init__(
        self,
        api: Any,
        engine: Callable[[], Engine],
        interval: float,
        metrics: AuditMetrics,
        *,
        inventory: Callable[[], Inventory] | None = None,
        service_namespace: str | None = None,
        first_run_after: float = FIRST_RUN_AFTER,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"the audit interval must be positive: {interval}")
        self._api = api
        self._engine = engine
        self._interval = interval
        self._metrics = metrics
        self._inventory = inventory
        self._service_namespace = service_namespace
        self._first = min(first_run_after, interval)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._publishing: bool | None = None
        self._below_baseline: dict[str, str] | None = None

    @property
    def service_namespace(self) -> str | None:
        """The namespace never audited beside kube-system and kube-node-lease."""
        return self._service_namespace

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the audit was already started")
        self._thread = threading.Thread(target=self._loop, name="audit", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = STOP_JOIN_TIMEOUT) -> None:
        """Ask the thread to stop and wait up to ``timeout`` seconds; a run under way ends
        before its next page (``audit_cluster``'s ``should_stop``) and publishes nothing."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        delay = self._first
        while not self._stop.wait(delay):
            self.run_once()
            delay = self._interval

    def run_once(self) -> AuditRun | None:
        """One audit, published; None when it failed (logged and counted) or was stopped.

        Findings are folded into the reports as they come (``ReportResults``): a run holds
        per namespace its counts and at most MAX_RESULTS results, never every finding."""
        started = time.monotonic()
        engine = self._engine()
        try:
            inventory = None if self._inventory is None else self._inventory()
            results = ReportResults()
            run = audit_cluster(
                self._api,
                engine,
                service_namespace=self._service_namespace,
                inventory=inventory,
                keep=_none,
                found=results.add,
                should_stop=self._stop.is_set,
            )
            if run.stopped:  # part of the cluster judged: nothing to publish or record
                log.info("audit stopped before its end; nothing published")
                return None
            ended = time.time()
            reports = results.reports(
                run.namespaces, timestamp=int(ended), policy=engine.policy.source
            )
            published = publish_policy_reports(self._api, reports)
        except Exception as error:  # a run must never end the thread: the next one may work
            self._metrics.failed()
            log.warning("audit failed; the next runs at its time", extra={"reason": str(error)})
            return None
        seconds = time.monotonic() - started
        self._metrics.record(run, ended, seconds)
        self._report_publishing(published is not None)
        log.info(
            "audit done",
            extra={
                "namespaces": len(run.namespaces),
                "judged": run.summary.judged,
                "denied": run.summary.denied,
                "seconds": round(seconds, 2),
                "reports_written": len(published.written) if published else 0,
                "reports_failed": published.failed if published else {},
                "unlisted": run.unlisted,
            },
        )
        self._report_pod_security(run.below_baseline)
        for flavor, found in run.flavors.items():
            log.warning(
                "a Kueue ResourceFlavor contradicts the policy",
                extra={"flavor": flavor, "contradictions": list(found)},
            )
        return run

    def _report_pod_security(self, below: dict[str, str]) -> None:
        """Logged when the set changes; kept for ``pod_security_readiness``."""
        if below != self._below_baseline and below:
            log.warning(
                "opted-in namespaces do not enforce Pod Security baseline: hostPath volumes "
                "and privileged containers of the pods no webhook judges are not refused there",
                extra={"namespaces": below},
            )
        self._below_baseline = dict(below)

    def pod_security_readiness(self) -> tuple[bool, str]:
        """A ``/readyz`` check, always ready: the opted-in namespaces the last audit found
        without Pod Security `baseline`."""
        below = self._below_baseline
        if below is None:
            return True, "not audited yet"
        if not below:
            return True, "every opted-in namespace enforces baseline or restricted"
        named = "; ".join(f"{namespace} ({why})" for namespace, why in below.items())
        return True, f"opted-in namespaces below Pod Security baseline: {named}"

    def _report_publishing(self, publishing: bool) -> None:
        if publishing == self._publishing:
            return
        self._publishing = publishing
        if publishing:
            log.info("audit results are published as PolicyReports (wgpolicyk8s.io/v1alpha2)")
        else:
            log.info(
                "the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is not installed: audit "
                "results go to metrics only (deploy/audit installs it)"
            )
