"""The Grafana dashboard (deploy/monitoring/dashboard.json): every query parses with
Prometheus's own parser (promtool, built from its Go module), reads only series the
service exports or kube-apiserver's webhook series the alerts read (which the outage test
checks against a real kube-apiserver), and the chart ships it as a ConfigMap for Grafana's
sidecar."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Review
from tests.deploy.test_helm import built, one, run, sets, template
from tests.deploy.test_monitoring import served_series
from webhook.engine import Engine

REPOSITORY = Path(__file__).resolve().parents[2]
DASHBOARD = REPOSITORY / "deploy" / "monitoring" / "dashboard.json"
ALERTS = REPOSITORY / "deploy" / "monitoring" / "alerts.yaml"
SERIES = re.compile(r"\b((?:gpu_admission|apiserver)_[a-z_]+)\b")
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$job": ".*"}


def queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel."""
    panels = json.loads(DASHBOARD.read_text("utf-8"))["panels"]
    return [(panel["title"], target["expr"]) for panel in panels for target in panel["targets"]]


def as_prometheus_reads(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def test_every_panel_has_a_title_a_description_and_a_query() -> None:
    panels = json.loads(DASHBOARD.read_text("utf-8"))["panels"]

    assert len({panel["id"] for panel in panels}) == len(panels)
    for panel in panels:
        assert panel["title"] and panel["description"] and panel["targets"], panel["title"]


def test_the_service_series_read_are_those_it_exports(engine: Engine, review: Review) -> None:
    exported = served_series(engine, review)

    for title, expr in queries():
        for name in SERIES.findall(expr):
            if name.startswith("gpu_admission_"):
                family = name.removesuffix("_total").removesuffix("_bucket")
                assert name in exported or family in exported, (title, name)


def test_kube_apiservers_series_read_are_those_the_alerts_read() -> None:
    """The outage test checks each against what a real kube-apiserver exports."""
    alerts = set(SERIES.findall(ALERTS.read_text("utf-8")))

    for title, expr in queries():
        for name in SERIES.findall(expr):
            if name.startswith("apiserver_"):
                assert name.removesuffix("_bucket") in {
                    a.removesuffix("_bucket") for a in alerts
                }, (title, name)


@pytest.fixture(scope="module")
def promtool() -> Path:
    return built("promtool")


def test_every_query_parses_as_promql(promtool: Path, tmp_path: Path) -> None:
    rules = [
        {"record": f"dashboard:query_{number}", "expr": as_prometheus_reads(expr)}
        for number, (_, expr) in enumerate(queries())
    ]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))

    checked = run([promtool, "check", "rules", path])

    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout


def test_a_query_that_does_not_parse_is_found(promtool: Path, tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    rule: dict[str, Any] = {"record": "dashboard:broken", "expr": "sum by (le (rate(x[5m]))"}
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [rule]}]}))

    assert run([promtool, "check", "rules", path], check=False).returncode != 0


@pytest.fixture(scope="module")
def helm() -> Path:
    return built("helm")


def test_the_chart_ships_it_for_grafanas_sidecar_when_asked(helm: Path) -> None:
    objects = template(helm, *sets("monitoring.dashboard.enabled=true"))
    default = template(helm)

    config_map = one(objects, "ConfigMap", "gpu-admission-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["gpu-admission.json"]) == json.loads(
        DASHBOARD.read_text("utf-8")
    )
    assert not [o for o in default if o["metadata"]["name"] == "gpu-admission-dashboard"]
