"""The JSON Schemas of the reports of `check` and `policy test` (webhook/offline/report_schema.py)
and the schema files that ship in the package (webhook/offline/schemas/)."""

from __future__ import annotations

import io
import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from webhook.cli.main import main
from webhook.offline.report_schema import (
    CHECK_SCHEMA,
    MODELS,
    SCHEMAS,
    TEST_SCHEMA,
    report_schema_text,
    validate_check_report,
    validate_policy_test_report,
)

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = REPOSITORY / "examples"
POLICY_CASES = REPOSITORY / "policies" / "tests"

Capture = pytest.CaptureFixture[str]

DRA_CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
"""


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_shipped_schema_is_the_one_the_models_make(name: str) -> None:
    committed = (SCHEMAS / name).read_text("utf-8")
    assert committed == report_schema_text(name), (
        f"webhook/offline/schemas/{name} is out of date with webhook/offline/report_schema.py; "
        "regenerate it with: python -c 'from webhook.offline.report_schema import "
        "write_schemas; write_schemas()'"
    )


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_schemas_are_package_data_and_forbid_unknown_keys(name: str) -> None:
    schema = json.loads(files("webhook.offline").joinpath("schemas", name).read_text("utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    assert all(
        d.get("additionalProperties") is False
        for d in schema["$defs"].values()
        if d.get("type") == "object" and "properties" in d
    )


def check_json(capsys: Capture, *args: str) -> tuple[int, Any]:
    code = main(["check", "-o", "json", *args])
    return code, json.loads(capsys.readouterr().out)


class TestCheckReports:
    def test_the_examples_report_is_what_the_schema_says(self, capsys: Capture) -> None:
        code, report = check_json(capsys, str(EXAMPLES))

        assert code == 1
        validate_check_report(report)

    def test_a_report_with_unreadable_files_claim_objects_and_skipped_ones_too(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        (tmp_path / "broken.yaml").write_text("a: [\n", "utf-8")
        (tmp_path / "claim.yaml").write_text(DRA_CLAIM, "utf-8")
        (tmp_path / "service.yaml").write_text(
            "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "utf-8"
        )

        code, report = check_json(capsys, str(tmp_path), str(tmp_path / "nowhere.yaml"))

        assert code == 2
        assert (len(report["errors"]), len(report["claimObjects"]), len(report["skipped"])) == (
            2,
            1,
            1,
        )
        assert report["errors"][1] == {
            "source": str(tmp_path / "nowhere.yaml"),
            "line": None,
            "reason": "no such file or folder",
        }
        validate_check_report(report)

    def test_only_denied_lists_the_denied_and_counts_all(self, capsys: Capture) -> None:
        code, report = check_json(capsys, "--only-denied", str(EXAMPLES))

        assert code == 1
        assert {p["verdict"] for p in report["pods"]} == {"denied"}
        assert report["summary"]["pods"] == len(list(EXAMPLES.rglob("*.yaml")))
        assert report["summary"]["denied"] == len(report["pods"])
        validate_check_report(report)

    def test_the_yaml_report_is_what_the_schema_says(self, capsys: Capture) -> None:
        main(["check", "-o", "yaml", str(EXAMPLES / "inference-deployment.yaml")])

        validate_check_report(yaml.safe_load(capsys.readouterr().out))

    def test_a_report_with_a_key_the_schema_does_not_name_is_refused(self, capsys: Capture) -> None:
        _, report = check_json(capsys, str(EXAMPLES / "cpu-pod.yaml"))
        report["pods"][0]["surprise"] = 1

        with pytest.raises(ValidationError):
            validate_check_report(report)


class TestPolicyTestReports:
    def test_the_shipped_cases_report_is_what_the_schema_says(self, capsys: Capture) -> None:
        code = main(["policy", "test", "-o", "json", str(POLICY_CASES)])

        report = json.loads(capsys.readouterr().out)
        assert (code, report["passed"]) == (0, True)
        validate_policy_test_report(report)

    def test_a_report_with_failures_and_errors_too(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
    ) -> None:
        case = yaml.safe_load((POLICY_CASES / "cpu-pod-allowed.yaml").read_text("utf-8"))
        monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump({**case, "expect": "denied"})))
        (tmp_path / "not-a-case.yaml").write_text("expect: maybe\n", "utf-8")

        code = main(["policy", "test", "-o", "yaml", "-", str(tmp_path), "missing/"])

        report = yaml.safe_load(capsys.readouterr().out)
        assert code == 2
        assert [c["result"] for c in report["cases"]] == ["fail", "error", "error"]
        validate_policy_test_report(report)


@pytest.mark.parametrize(
    ("command", "name"), [(["check"], CHECK_SCHEMA), (["policy", "test"], TEST_SCHEMA)]
)
def test_print_schema_prints_the_shipped_schema(
    command: list[str], name: str, capsys: Capture
) -> None:
    assert main([*command, "--print-schema"]) == 0
    assert capsys.readouterr().out == (SCHEMAS / name).read_text("utf-8")
