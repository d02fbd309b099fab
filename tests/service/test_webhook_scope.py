"""A replica compares the installed webhook configurations with its policy
(webhook/service/webhook_scope.py), fed configurations as an install renders them."""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Mapping
from typing import Any

import pytest

from tests.clock import ManualClock
from webhook.http.metrics import Metrics
from webhook.http.policy.verdict import SCOPE_NOT_COMPARED
from webhook.install.configurations import (
    MUTATING_WEBHOOK,
    POLICY_WEBHOOK,
    VALIDATING_WEBHOOK,
    Endpoint,
    render_webhook_configurations,
)
from webhook.install.names import handlers_of_install
from webhook.install.scope import LiveWebhooks, scope_digest
from webhook.policy import Policy, load_default_policy, load_policy_text
from webhook.policy.load import default_policy_text
from webhook.service.webhook_scope import FIX, NOT_COMPARED, ScopeCheck, WebhookScope

DEFAULT = load_default_policy()
RENAMED = load_policy_text(
    default_policy_text().replace(
        "workload: gpu-admission.io/workload", "workload: team.example/class"
    ),
    "renamed.yaml",
)
ENDPOINT = Endpoint(
    ca_bundle="Q0E=", service_name="gpu-admission", service_namespace="gpu-admission"
)

Configurations = tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]


def installed(policy: Policy = DEFAULT) -> Configurations:
    return render_webhook_configurations(policy, ENDPOINT, own_namespace="gpu-admission")


class Cluster:
    """What the read returns: the configurations installed now, or the error it raises."""

    def __init__(self, configurations: Configurations) -> None:
        self.configurations = configurations
        self.error: Exception | None = None

    def read(self) -> Configurations:
        if self.error is not None:
            raise self.error
        return self.configurations


def mismatch(metrics: Metrics, webhook: str) -> float | None:
    return metrics.registry.get_sample_value(
        "gpu_admission_webhook_configuration_mismatch", {"webhook": webhook}
    )


def scope_of(
    cluster: Cluster, policy: Policy, metrics: Metrics, clock: ManualClock
) -> WebhookScope:
    return WebhookScope(cluster.read, lambda: policy, metrics, clock=clock)


def test_before_the_first_comparison_the_replica_is_ready_and_says_so() -> None:
    scope = scope_of(Cluster(installed()), DEFAULT, Metrics(), ManualClock(1000.0))
    assert scope.readiness() == (True, "not compared with the policy yet")


def test_configurations_of_the_policy_report_no_mismatch() -> None:
    metrics, clock = Metrics(), ManualClock(1000.0)
    scope = scope_of(Cluster(installed()), DEFAULT, metrics, clock)
    assert scope.compare_once() == ()
    clock.now += 12
    assert scope.readiness() == (True, "send what the policy needs (compared 12s ago)")
    assert mismatch(metrics, MUTATING_WEBHOOK) == 0
    assert mismatch(metrics, VALIDATING_WEBHOOK) == 0


def test_a_policy_with_another_workload_label_is_reported_and_the_replica_stays_ready() -> None:
    metrics = Metrics()
    scope = scope_of(Cluster(installed(DEFAULT)), RENAMED, metrics, ManualClock(1000.0))
    differences = scope.compare_once()
    assert differences and MUTATING_WEBHOOK in {d.webhook for d in differences}
    ready, detail = scope.readiness()
    assert ready
    assert detail.startswith("differ from what the policy needs (compared 0s ago): ")
    assert (
        f"{MUTATING_WEBHOOK}: its objectSelector selects gpu-admission.io/workload, "
        "the policy's workload label is team.example/class"
    ) in detail
    assert detail.endswith(FIX)
    assert mismatch(metrics, MUTATING_WEBHOOK) == 1


def test_a_webhook_set_right_goes_back_to_zero() -> None:
    metrics = Metrics()
    cluster = Cluster(installed(DEFAULT))
    scope = scope_of(cluster, RENAMED, metrics, ManualClock(1000.0))
    scope.compare_once()
    cluster.configurations = installed(RENAMED)
    assert scope.compare_once() == ()
    assert mismatch(metrics, MUTATING_WEBHOOK) == 0


def test_a_webhook_that_is_gone_no_longer_counts_as_differing() -> None:
    metrics = Metrics()
    mutating, validating = installed()
    assert mutating is not None
    extra = {**mutating, "webhooks": [*mutating["webhooks"], {"name": "old.example", "rules": []}]}
    cluster = Cluster((extra, validating))
    scope = scope_of(cluster, DEFAULT, metrics, ManualClock(1000.0))
    scope.compare_once()
    assert mismatch(metrics, "old.example") == 1
    cluster.configurations = (mutating, validating)
    scope.compare_once()
    assert mismatch(metrics, "old.example") == 0


def test_a_read_that_fails_is_shown_and_the_last_comparison_stands() -> None:
    metrics = Metrics()
    cluster = Cluster(installed(DEFAULT))
    scope = scope_of(cluster, RENAMED, metrics, ManualClock(1000.0))
    scope.compare_once()
    cluster.error = RuntimeError("403 Forbidden")
    assert scope.compare_once() is None
    ready, detail = scope.readiness()
    assert ready
    assert detail.startswith(
        "differ from what the policy needs (cannot be read (403 Forbidden); compared 0s ago): "
    )
    assert mismatch(metrics, MUTATING_WEBHOOK) == 1


def test_a_mismatch_is_logged_once_while_it_lasts(caplog: pytest.LogCaptureFixture) -> None:
    scope = scope_of(Cluster(installed(DEFAULT)), RENAMED, Metrics(), ManualClock(1000.0))
    with caplog.at_level(logging.INFO, logger="gpu_admission.webhook_scope"):
        scope.compare_once()
        scope.compare_once()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "do not send what the policy needs" in warnings[0].getMessage()


def test_a_reloaded_policy_is_compared_without_waiting_for_the_interval() -> None:
    metrics = Metrics()
    serving = [DEFAULT]
    scope = WebhookScope(Cluster(installed()).read, lambda: serving[0], metrics, interval=3600)
    scope.start()
    try:
        wait_for(lambda: mismatch(metrics, MUTATING_WEBHOOK) == 0)
        serving[0] = RENAMED
        wait_for(lambda: mismatch(metrics, MUTATING_WEBHOOK) == 1)
    finally:
        scope.stop()


def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.05)


# -- the judge of a policy ConfigMap's scope -------------------------------------------------

NAME = "gpu-admission/gpu-admission-policy"


def live(policy: Policy = DEFAULT) -> LiveWebhooks:
    return LiveWebhooks.read(*installed(policy))


def test_a_policy_the_live_configurations_serve_is_admitted() -> None:
    assert ScopeCheck(live()).verdict(NAME, DEFAULT, None) is None


def test_a_policy_of_another_workload_label_is_refused_saying_what_differs_and_the_fix() -> None:
    refusal = ScopeCheck(live()).verdict(NAME, RENAMED, None)
    assert refusal is not None
    assert refusal.startswith(f"the policy in ConfigMap {NAME} needs webhook configurations")
    assert (
        f"{MUTATING_WEBHOOK}: its objectSelector selects gpu-admission.io/workload, "
        "the policy's workload label is team.example/class"
    ) in refusal
    assert "more." in refusal  # every classed webhook selects by the label
    assert refusal.endswith(FIX)


def test_a_policy_whose_annotation_is_its_own_scopes_digest_is_admitted_before_the_configurations() -> (
    None
):
    assert ScopeCheck(live()).verdict(NAME, RENAMED, scope_digest(RENAMED)) is None


def test_an_annotation_of_another_scope_does_not_admit_a_policy() -> None:
    assert ScopeCheck(live()).verdict(NAME, RENAMED, scope_digest(DEFAULT)) is not None


def test_configurations_not_installed_refuse_a_policy() -> None:
    _, validating = installed()
    refusal = ScopeCheck(LiveWebhooks.read(None, validating)).verdict(NAME, DEFAULT, None)
    assert refusal is not None and "is not installed" in refusal


def test_without_live_configurations_a_policy_is_admitted_with_a_warning_of_no_comparison() -> None:
    check = ScopeCheck(None)
    assert check.verdict(NAME, RENAMED, None) == SCOPE_NOT_COMPARED
    assert check.warning == NOT_COMPARED
    assert "could not be compared" in NOT_COMPARED and NOT_COMPARED.endswith(FIX)


def test_without_live_configurations_a_matching_annotation_admits_without_a_warning() -> None:
    assert ScopeCheck(None).verdict(NAME, RENAMED, scope_digest(RENAMED)) is None


def test_the_judge_of_a_replica_holds_what_it_last_read_and_keeps_it_past_a_failed_read() -> None:
    cluster = Cluster(installed(DEFAULT))
    scope = scope_of(cluster, DEFAULT, Metrics(), ManualClock(1000.0))
    assert scope.judge().live is None
    scope.compare_once()
    read = scope.judge()
    assert read.live == live() and read.key == live().digest
    cluster.error = RuntimeError("403 Forbidden")
    scope.compare_once()
    assert scope.judge().live == read.live


def test_the_fresh_judge_reads_the_configurations_applied_since_the_last_read() -> None:
    """A replica started before the configurations were applied read none; asked before a
    refusal, it reads them again, however recent its last read."""
    cluster = Cluster((None, None))
    scope = scope_of(cluster, DEFAULT, Metrics(), ManualClock(1000.0))
    scope.compare_once()
    assert scope.judge().verdict("gpu-admission/p", DEFAULT, None)  # "not installed"

    cluster.configurations = installed(DEFAULT)

    assert scope.fresh_judge().verdict("gpu-admission/p", DEFAULT, None) is None
    assert scope.judge().verdict("gpu-admission/p", DEFAULT, None) is None


def test_a_read_in_review_that_fails_leaves_the_refusal_standing() -> None:
    """The read a review waits on is its own, bounded below the webhook's timeout; one that
    times out keeps the last comparison, so the policy is refused, not left to fail open."""
    cluster, in_review = Cluster((None, None)), Cluster(installed(DEFAULT))
    scope = WebhookScope(
        cluster.read, lambda: DEFAULT, Metrics(), clock=ManualClock(1000.0),
        read_in_review=in_review.read,
    )  # fmt: skip
    scope.compare_once()

    assert scope.fresh_judge().verdict("gpu-admission/p", DEFAULT, None) is None
    scope.compare_once()  # the thread's own read: none installed again
    in_review.error = TimeoutError("read timed out (0.75 s)")
    assert scope.fresh_judge().verdict("gpu-admission/p", DEFAULT, None)


def test_a_judge_travels_to_the_review_worker() -> None:
    check = ScopeCheck(live())
    copied = pickle.loads(pickle.dumps(check))
    assert copied == check and copied.key == check.key


def installed_as(name: str, policy: Policy = DEFAULT) -> Configurations:
    return render_webhook_configurations(
        policy, ENDPOINT, own_namespace="gpu-admission", handlers=handlers_of_install(name)
    )


def test_an_install_named_otherwise_is_compared_with_its_own_policy_configmaps_webhook() -> None:
    """The chart with fullnameOverride: the replicas are told the name (--install-name)."""
    cluster = Cluster(installed_as("acme-gpu"))
    scope = WebhookScope(cluster.read, lambda: DEFAULT, Metrics(), install_name="acme-gpu")

    assert scope.compare_once() == ()
    assert scope.judge().verdict("gpu-admission/acme-gpu-policy", RENAMED, None)


def test_a_replica_not_told_the_name_of_its_install_reports_its_policy_configmaps_webhook() -> None:
    cluster = Cluster(installed_as("acme-gpu"))
    scope = WebhookScope(cluster.read, lambda: DEFAULT, Metrics())

    differences = scope.compare_once()

    assert differences is not None
    assert [d.webhook for d in differences] == [POLICY_WEBHOOK]
    assert "acme-gpu-policy" in str(differences[0])


def test_the_judge_of_an_install_named_otherwise_travels_with_its_name() -> None:
    check = ScopeCheck(LiveWebhooks.read(*installed_as("acme-gpu")), install_name="acme-gpu")
    copied = pickle.loads(pickle.dumps(check))

    assert copied == check
    assert copied.verdict("gpu-admission/p", DEFAULT, None) is None
