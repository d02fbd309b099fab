"""The optional guards written for a policy (webhook/install/guards.py, `gpu-admission
manifests guards`): a team's policy gets guards in its own words, the default policy the
files of deploy/guards/. tests/e2e/test_team_guards.py puts a team's in force."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.install.guards import GUARD_FILES, guard_files
from webhook.policy import Policy, load_default_policy, load_policy_file, load_policy_text
from webhook.policy.load import default_policy_text

REPOSITORY = Path(__file__).resolve().parents[2]
TEAM_POLICY = REPOSITORY / "policies" / "examples" / "acme.yaml"
TEAM = load_policy_file(TEAM_POLICY)
DEFAULT_WORDS = ("gpu-admission.io/enabled", "inference-priority", "training-priority")


def documents(policy: Policy, name: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(guard_files(policy, "team.yaml")[name]) if o]


def quota_classes(policy: Policy) -> list[str]:
    [quota] = documents(policy, "gpu-priority-quota.yaml")
    [expression] = quota["spec"]["scopeSelector"]["matchExpressions"]
    values: list[str] = expression["values"]
    return values


def test_the_team_quota_and_admission_configuration_name_the_teams_classes() -> None:
    [configuration] = documents(TEAM, "admission-configuration.yaml")
    [plugin] = configuration["plugins"]
    [limited] = plugin["configuration"]["limitedResources"]

    assert quota_classes(TEAM) == ["acme-inference", "acme-training"]
    assert limited["matchScopes"][0]["values"] == ["acme-inference", "acme-training"]


def test_the_team_label_guard_watches_the_teams_opt_in_label() -> None:
    policy, binding = documents(TEAM, "opt-in-label-policy.yaml")
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}

    assert variables["key"] == "'team.example.com/gpu-enabled'"
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]


@pytest.mark.parametrize("name", sorted(GUARD_FILES))
def test_no_team_guard_names_the_default_policys_label_or_classes(name: str) -> None:
    text = guard_files(TEAM, "team.yaml")[name]

    assert not [word for word in DEFAULT_WORDS if word in text]


@pytest.mark.parametrize("name", sorted(GUARD_FILES))
def test_every_comment_line_stays_within_ninety_characters(name: str) -> None:
    long = [
        line
        for line in guard_files(TEAM, str(TEAM_POLICY))[name].splitlines()
        if line.startswith("#") and len(line) > 90 and "kube-apiserver --admission" not in line
    ]

    assert long == []


def test_classes_sharing_a_priority_class_name_it_once() -> None:
    """Two workload classes may share one PriorityClass: the quota lists it once."""
    text = default_policy_text().replace(
        "{name: training-priority, value: 1000}", "{name: inference-priority, value: 1000000}"
    )
    shared = load_policy_text(text, "shared.yaml")

    assert quota_classes(shared) == ["inference-priority"]


def test_the_default_policys_guards_are_the_files_of_deploy_guards() -> None:
    written = guard_files(load_default_policy(), "policies/default.yaml")

    for name, text in written.items():
        assert (REPOSITORY / "deploy" / "guards" / name).read_text("utf-8") == text


def run_guards(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook.cli", "manifests", "guards", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_command_writes_each_guard_and_says_which_label_the_quota_goes_with(
    tmp_path: Path,
) -> None:
    written = run_guards("--policy", str(TEAM_POLICY), "--output-dir", str(tmp_path / "guards"))

    assert written.returncode == 0, written.stderr
    assert sorted(p.name for p in (tmp_path / "guards").iterdir()) == sorted(GUARD_FILES)
    assert "team.example.com/gpu-enabled=yes" in written.stderr


def test_a_broken_policy_writes_nothing_and_exits_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("classes: [", "utf-8")

    written = run_guards("--policy", str(broken), "--output-dir", str(tmp_path / "guards"))

    assert written.returncode == 2
    assert str(broken) in written.stderr
    assert not (tmp_path / "guards").exists()
