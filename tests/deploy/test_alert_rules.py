"""The alert rules under Prometheus's own `promtool` (built from its Go module like the
control plane): they load, and each alert fires on the series that should raise it,
once its `for` has passed, and on no other (tests/deploy/alert_rules_test.yaml)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.deploy.test_helm import built, run

HERE = Path(__file__).resolve().parent
UNIT_TESTS = HERE / "alert_rules_test.yaml"
RULES = HERE.parents[1] / "deploy" / "helm" / "gpu-admission" / "files" / "prometheus-rules.yaml"


@pytest.fixture(scope="module")
def promtool() -> Path:
    return built("promtool")


def alerts_of(rules: Path) -> set[str]:
    groups = yaml.safe_load(rules.read_text("utf-8"))["groups"]
    return {rule["alert"] for group in groups for rule in group["rules"]}


def test_the_rules_load(promtool: Path) -> None:
    checked = run([promtool, "check", "rules", RULES])

    assert f"SUCCESS: {len(alerts_of(RULES))} rules found" in checked.stdout


def test_every_alert_fires_as_its_unit_tests_say(promtool: Path) -> None:
    tested = {
        case["alertname"]
        for test in yaml.safe_load(UNIT_TESTS.read_text("utf-8"))["tests"]
        for case in test["alert_rule_test"]
        if case.get("exp_alerts")
    }

    assert tested == alerts_of(RULES)
    assert "SUCCESS" in run([promtool, "test", "rules", UNIT_TESTS]).stdout


def test_an_alert_that_fires_too_early_is_found(promtool: Path, tmp_path: Path) -> None:
    """The unit tests can fail: with one alert's `for` taken out, promtool says so."""
    rules = tmp_path / "deploy" / "helm" / "gpu-admission" / "files" / "prometheus-rules.yaml"
    rules.parent.mkdir(parents=True)
    rules.write_text(RULES.read_text("utf-8").replace("for: 10m", "for: 0m", 1), "utf-8")
    copied = tmp_path / "tests" / "deploy" / UNIT_TESTS.name
    copied.parent.mkdir(parents=True)
    shutil.copy(UNIT_TESTS, copied)

    failed = run([promtool, "test", "rules", copied], check=False)

    assert failed.returncode != 0
    assert "FAILED" in failed.stdout + failed.stderr
