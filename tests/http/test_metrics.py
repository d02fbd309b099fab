"""`GET /metrics` of the metrics app, scraped after a few reviews on the admission app:
the documented series, with sane values."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import container, mutated, pod
from webhook.engine import Decision, Engine
from webhook.engine.handlers import Review as HandlerReview
from webhook.http.app import create_app
from webhook.http.metrics import DURATION_BUCKETS, Metrics, ReviewCounts
from webhook.http.metrics_app import create_metrics_app
from webhook.policy.load import default_policy_text, load_policy_text
from webhook.tls.pki import create_ca, issue_serving_certificate
from webhook.tls.served import CertificateState, ServedCertificate

Review = Callable[..., dict[str, Any]]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: TestClient) -> Samples:
    """Every sample a scrape of the metrics app shows of the reviews `client` posted, by
    name and labels; the reply checked like Prometheus would."""
    reply = TestClient(create_metrics_app(client.app.state.metrics)).get("/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def requests(samples: Samples) -> dict[tuple[str, str, str, str], float]:
    """gpu_admission_requests_total by (webhook, operation, decision, rule)."""
    found = {}
    for (name, labels), count in samples.items():
        if name == "gpu_admission_requests_total":
            by = dict(labels)
            found[(by["webhook"], by["operation"], by["decision"], by["rule"])] = count
    return found


@pytest.fixture(scope="module")
def certificate() -> CertificateState:
    issued = issue_serving_certificate(create_ca("metrics CA"), "gpu-admission", dns_names=["x"])
    return CertificateState(ServedCertificate.of(issued.certificate))


@pytest.fixture
def client(engine: Engine, certificate: CertificateState) -> TestClient:
    metrics = Metrics()
    metrics.watch_certificate(certificate)
    return TestClient(create_app(lambda: engine, metrics=metrics))


def test_each_review_is_counted_by_webhook_operation_decision_and_rule(
    client: TestClient, review: Review
) -> None:
    inference = pod("inference")
    for _ in range(3):
        client.post("/mutate", json=review(inference))
    client.post("/validate", json=review(pod(containers=[container(gpus=1)])))
    client.post("/validate", json=review(inference, operation="UPDATE", old_object=inference))
    client.post("/validate", content=b"[]")

    assert requests(scrape(client)) == {
        ("mutate", "CREATE", "allowed", ""): 3,
        ("validate", "CREATE", "denied", "workload-class"): 1,
        ("validate", "UPDATE", "allowed", ""): 1,
        ("validate", "", "error", ""): 1,
    }


def test_a_denial_counts_once_per_violated_rule_and_once_in_the_histogram(
    client: TestClient, review: Review
) -> None:
    # neither its pool nor its priority class set
    unmutated_inference = pod("inference", containers=[container(gpus=1)])

    client.post("/validate", json=review(unmutated_inference))

    samples = scrape(client)
    assert requests(samples) == {
        ("validate", "CREATE", "denied", "pool-placement"): 1,
        ("validate", "CREATE", "denied", "priority-class"): 1,
    }
    assert value(samples, "gpu_admission_review_duration_seconds_count", webhook="validate") == 1


def test_an_engine_that_raises_is_counted_as_an_error_of_its_operation(review: Review) -> None:
    class Crashing(Engine):
        def __init__(self) -> None:
            pass

        def answer(self, handler: str, review: HandlerReview) -> Decision:
            raise RuntimeError("rule crashed on purpose")

    client = TestClient(create_app(Crashing))
    client.post("/validate", json=review(pod("inference")))

    assert requests(scrape(client)) == {("validate", "CREATE", "error", ""): 1}


def test_the_duration_histogram_counts_every_review_in_buckets_from_sub_ms_to_1s(
    client: TestClient, review: Review
) -> None:
    started = time.perf_counter()
    for _ in range(4):
        client.post("/validate", json=review(pod("training")))
    client.post("/mutate", json=review(pod("training")))
    elapsed = time.perf_counter() - started

    samples = scrape(client)

    assert value(samples, "gpu_admission_review_duration_seconds_count", webhook="validate") == 4
    assert value(samples, "gpu_admission_review_duration_seconds_count", webhook="mutate") == 1
    total = sum(
        value(samples, "gpu_admission_review_duration_seconds_sum", webhook=webhook)
        for webhook in ("validate", "mutate")
    )
    assert 0 < total < elapsed
    assert DURATION_BUCKETS[0] < 0.001 and DURATION_BUCKETS[-1] == 1.0
    buckets = [
        value(samples, "gpu_admission_review_duration_seconds_bucket", webhook="validate", le=le)
        for le in [*(str(bound) for bound in DURATION_BUCKETS), "+Inf"]
    ]
    assert buckets == sorted(buckets) and buckets[-1] == 4


def test_the_certificate_expiry_is_the_served_certificates_not_after(
    client: TestClient, certificate: CertificateState
) -> None:
    expiry = value(scrape(client), "gpu_admission_certificate_expiry_timestamp_seconds")

    assert expiry == certificate.not_after.timestamp()
    assert expiry > time.time() + 300 * 86400


def test_the_policy_series_start_valid_with_no_reloads(client: TestClient) -> None:
    samples = scrape(client)

    assert value(samples, "gpu_admission_policy_valid") == 1
    assert value(samples, "gpu_admission_policy_reloads_total", result="success") == 0
    assert value(samples, "gpu_admission_policy_reloads_total", result="failure") == 0
    loaded = value(samples, "gpu_admission_policy_last_reload_timestamp_seconds")
    assert time.time() - 60 < loaded <= time.time()


def test_two_apps_count_apart(engine: Engine, review: Review) -> None:
    first = TestClient(create_app(lambda: engine))
    second = TestClient(create_app(lambda: engine))

    first.post("/validate", json=review(pod(containers=[container()])))

    assert requests(scrape(first)) == {("validate", "CREATE", "allowed", ""): 1}
    assert requests(scrape(second)) == {}


def test_warned_audited_and_exempted_rules_are_counted_beside_the_decision(
    review: Review,
) -> None:
    text = default_policy_text() + (
        "\nenforcement:\n  rules: {gpu-count: warn, priority-class: audit}\n"
        "exemptions:\n  - podLabels: {team: legacy}\n    reason: legacy\n"
    )
    engine = Engine(load_policy_text(text, "modes.yaml"))
    client = TestClient(create_app(lambda: engine))
    nine = pod("training", containers=[container(gpus=9)])

    client.post("/validate", json=review(mutated(engine, nine)))
    borrowing = pod("training", priorityClassName="inference-priority", priority=1000000)
    client.post("/validate", json=review(mutated(engine, borrowing)))
    exempt = pod("training", containers=[container(gpus=9)], labels={"team": "legacy"})
    client.post("/validate", json=review(exempt))
    client.post("/validate", json=review(pod("inference", nodeSelector={"gpu-pool": "training"}, containers=[container(gpus=9)])))  # fmt: skip

    assert requests(scrape(client)) == {
        ("validate", "CREATE", "allowed", ""): 3,
        ("validate", "CREATE", "warned", "gpu-count"): 2,
        ("validate", "CREATE", "audited", "priority-class"): 2,
        ("validate", "CREATE", "exempted", ""): 1,
        ("validate", "CREATE", "denied", "pool-placement"): 1,
    }


def test_the_inventory_series_say_which_kinds_synced_and_how_long_ago(engine: Engine) -> None:
    ages: dict[str, float | None] = {"nodes": None, "priorityclasses": None}
    metrics = Metrics()
    metrics.watch_inventory(lambda: ages)
    client = TestClient(create_app(lambda: engine, metrics=metrics))

    before = scrape(client)
    ages["nodes"] = 2.5
    after = scrape(client)

    assert value(before, "gpu_admission_inventory_synced", kind="nodes") == 0
    assert value(before, "gpu_admission_inventory_sync_age_seconds", kind="nodes") == float("inf")
    assert value(after, "gpu_admission_inventory_synced", kind="nodes") == 1
    assert value(after, "gpu_admission_inventory_sync_age_seconds", kind="nodes") == 2.5
    assert value(after, "gpu_admission_inventory_synced", kind="priorityclasses") == 0


def test_without_the_inventory_there_are_no_inventory_series(client: TestClient) -> None:
    assert not [name for name, _ in scrape(client) if name.startswith("gpu_admission_inventory")]


def test_the_admission_app_serves_no_metrics(client: TestClient) -> None:
    assert client.get("/metrics").status_code == 404


def test_connections_cut_off_are_counted_by_reason() -> None:
    metrics = Metrics()
    metrics.expect_cuts(["idle", "body_timeout"])
    metrics.connection_cut("body_timeout")
    metrics.connection_cut("body_timeout")
    client = TestClient(create_metrics_app(metrics))

    samples = {
        sample.labels["reason"]: sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
        if sample.name == "gpu_admission_connections_cut_total"
    }

    assert samples == {"idle": 0, "body_timeout": 2}


def test_reviews_counted_as_plain_numbers_scrape_as_prometheus_clients_own_series_would() -> None:
    durations = [0.00005, 0.0001, 0.0003, 0.0003, 0.004, 0.7, 1.0, 2.5, 0.0]
    reviews = [
        ("mutate", "CREATE", "allowed", ""),
        ("validate", "CREATE", "denied", "gpu-count"),
        ("validate", "CREATE", "denied", "gpu-count"),
        ("validate", "UPDATE", "warned", "priority-class"),
    ]
    ours = CollectorRegistry()
    counts = ReviewCounts(DURATION_BUCKETS)
    ours.register(counts)
    theirs = CollectorRegistry()
    requests = Counter("gpu_admission_requests", "", ["webhook", "operation", "decision", "rule"], registry=theirs)  # fmt: skip
    duration = Histogram("gpu_admission_review_duration_seconds", "", ["webhook"], buckets=DURATION_BUCKETS, registry=theirs)  # fmt: skip
    for index, seconds in enumerate(durations):
        webhook = ("mutate", "validate")[index % 2]
        counts.time(webhook, seconds)
        duration.labels(webhook=webhook).observe(seconds)
    for labels in reviews:
        counts.count(labels)
        requests.labels(*labels).inc()

    def samples(registry: CollectorRegistry) -> Samples:
        text = generate_latest(registry).decode()
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if not sample.name.endswith("_created")
        }

    assert samples(ours) == samples(theirs)


def test_the_live_inventorys_watch_events_and_changes_are_counted_by_kind() -> None:
    metrics = Metrics()
    events = {"nodes": (12, 3), "priorityclasses": (1, 0)}
    metrics.watch_inventory(lambda: {"nodes": 0.5, "priorityclasses": 0.5}, lambda: events)

    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
    }

    assert value(samples, "gpu_admission_inventory_watch_events_total", kind="nodes") == 12
    assert value(samples, "gpu_admission_inventory_changes_total", kind="nodes") == 3
    events["nodes"] = (13, 3)  # read again at each scrape
    assert (
        'gpu_admission_inventory_watch_events_total{kind="nodes"} 13.0'
        in metrics.exposition().decode()
    )
