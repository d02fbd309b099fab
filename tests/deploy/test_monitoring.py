"""deploy/monitoring: the ServiceMonitor and alerts point at what the service really serves."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import pod
from webhook.engine import Engine
from webhook.http.app import create_app
from webhook.http.metrics import Metrics
from webhook.http.metrics_app import create_metrics_app
from webhook.tls.pki import create_ca, issue_serving_certificate
from webhook.tls.served import CertificateState, ServedCertificate

Review = Callable[..., dict[str, Any]]

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
BASE = MONITORING.parent / "base"


def load(path: Path) -> dict[str, Any]:
    [document] = yaml.safe_load_all(path.read_text("utf-8"))
    loaded: dict[str, Any] = document
    return loaded


def served_series(engine: Engine, review: Review) -> set[str]:
    """The names a scrape shows once a review was answered, an error counted, the
    certificate and the live inventory watched and the webhook configurations compared, as
    in a serving pod."""
    issued = issue_serving_certificate(create_ca("monitoring CA"), "x", dns_names=["x"])
    metrics = Metrics()
    metrics.watch_certificate(CertificateState(ServedCertificate.of(issued.certificate)))
    metrics.watch_inventory(lambda: {"nodes": 1.0, "priorityclasses": None})
    metrics.webhook_configurations_compared(
        ["mutate.gpu-admission.io"], {"mutate.gpu-admission.io"}
    )
    client = TestClient(create_app(lambda: engine, metrics=metrics))
    client.post("/validate", json=review(pod("inference")))
    client.post("/validate", content=b"[]")
    reply = TestClient(create_metrics_app(metrics)).get("/metrics")
    return {
        sample.name
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    } | {family.name for family in text_string_to_metric_families(reply.text)}


def test_every_series_an_alert_uses_is_one_the_service_serves(
    engine: Engine, review: Review
) -> None:
    rules = load(MONITORING / "alerts.yaml")["spec"]["groups"][0]["rules"]
    used = {name for rule in rules for name in re.findall(r"gpu_admission_\w+", rule["expr"])}

    assert {rule["alert"] for rule in rules} == {
        "GpuAdmissionPolicyInvalid",
        "GpuAdmissionCertificateExpiringSoon",
        "GpuAdmissionReviewErrors",
        "GpuAdmissionInventoryStale",
        "GpuAdmissionWebhookConfigurationMismatch",
    }
    assert used
    assert used <= served_series(engine, review)


def test_the_service_monitor_scrapes_the_plain_http_metrics_port_of_the_metrics_service() -> None:
    monitor = load(MONITORING / "servicemonitor.yaml")
    services = list(yaml.safe_load_all((BASE / "service.yaml").read_text("utf-8")))
    selected = [
        s
        for s in services
        if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    ]
    [endpoint] = monitor["spec"]["endpoints"]

    assert [s["metadata"]["name"] for s in selected] == ["gpu-admission-metrics"]
    [port] = selected[0]["spec"]["ports"]
    assert endpoint["port"] == port["name"] == port["targetPort"] == "metrics"
    assert (endpoint["scheme"], endpoint["path"]) == ("http", "/metrics")
    assert "tlsConfig" not in endpoint


RUNBOOKS = MONITORING.parents[1] / "docs" / "runbooks"


def every_alert() -> list[dict[str, Any]]:
    groups = load(MONITORING / "alerts.yaml")["spec"]["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_every_alert_links_its_runbook_and_every_runbook_is_an_alerts() -> None:
    alerts = every_alert()
    links = {rule["alert"]: rule["annotations"]["runbook_url"] for rule in alerts}
    pages = {page.stem for page in RUNBOOKS.glob("*.md")} - {"README"}

    assert links == {name: f"docs/runbooks/{name}.md" for name in links}
    assert set(links) == pages
    index = (RUNBOOKS / "README.md").read_text("utf-8")
    assert all(f"[{name}]({name}.md)" in index for name in links)


def test_kube_apiservers_alerts_read_only_its_webhook_series_of_our_webhooks() -> None:
    groups = load(MONITORING / "alerts.yaml")["spec"]["groups"]
    [apiserver] = [g for g in groups if g["name"] == "gpu-admission-kube-apiserver"]

    for rule in apiserver["rules"]:
        assert re.findall(r"apiserver_admission_webhook_\w+", rule["expr"]), rule["alert"]
        assert 'name=~".+\\\\.gpu-admission\\\\.io"' in rule["expr"], rule["alert"]
