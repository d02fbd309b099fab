"""webhook/install/overlay.py and `gpu-admission manifests overlay`: a kustomize overlay
of deploy/base for a team's own policy, rendered by the real kubectl.

Without the kubectl the e2e harness builds these tests skip (they fail under
GPU_ADMISSION_E2E=required); tests/e2e/test_team_policy.py applies the overlay to a real
kube-apiserver.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.install.overlay import OVERLAY_FILES, flow_control_of, overlay_files
from webhook.install.scope import SCOPE_ANNOTATION, scope_digest
from webhook.policy import load_policy_file
from webhook.policy.load import default_policy_text

REPOSITORY = Path(__file__).resolve().parents[2]
TEAM_POLICY = REPOSITORY / "policies" / "examples" / "acme.yaml"

Objects = list[dict[str, Any]]


def write_overlay(policy: Path, directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "webhook.cli", "manifests", "overlay",
            "--policy", str(policy), "--output-dir", str(directory), *extra,
        ],
        capture_output=True, text=True, timeout=60, cwd=REPOSITORY, check=False,
    )  # fmt: skip


def kustomized(kubectl: Path, directory: Path) -> Objects:
    output = subprocess.run(
        [str(kubectl), "kustomize", str(directory)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return [o for o in yaml.safe_load_all(output) if o]


@pytest.fixture(scope="module")
def team_overlay(kubectl: Path, tmp_path_factory: pytest.TempPathFactory) -> Objects:
    # Inside the repository, so that the base is found as a relative path.
    directory = Path(tmp_path_factory.mktemp("overlay"))
    written = write_overlay(TEAM_POLICY, directory, "--base", str(REPOSITORY / "deploy" / "base"))
    assert written.returncode == 0, written.stderr
    return kustomized(kubectl, directory)


def of_kind(objects: Objects, kind: str) -> Objects:
    return [o for o in objects if o["kind"] == kind]


def test_the_overlay_serves_the_teams_policy_with_its_scope_digest(team_overlay: Objects) -> None:
    [config_map] = [
        o for o in of_kind(team_overlay, "ConfigMap") if "policy" in o["metadata"]["name"]
    ]

    assert config_map["data"]["policy.yaml"] == TEAM_POLICY.read_text("utf-8")
    annotations = config_map["metadata"]["annotations"]
    assert annotations[SCOPE_ANNOTATION] == scope_digest(load_policy_file(TEAM_POLICY))


def test_every_opted_in_webhook_selects_the_teams_label_and_none_the_default(
    team_overlay: Objects,
) -> None:
    hooks = [
        h for o in team_overlay if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]
    ]

    opted_in = [h for h in hooks if h["name"] != "validate-policy.gpu-admission.io"]
    assert opted_in
    for hook in opted_in:
        first = hook["namespaceSelector"]["matchExpressions"][0]
        assert first == {"key": "team.example.com/gpu-enabled", "operator": "In", "values": ["yes"]}
    assert "gpu-admission.io/workload" not in yaml.safe_dump(hooks)
    assert "acme.example.com/workload" in yaml.safe_dump(hooks)


def test_the_priority_classes_are_the_teams_and_the_defaults_are_gone(
    team_overlay: Objects,
) -> None:
    classes = {
        o["metadata"]["name"]: (o["value"], o["preemptionPolicy"])
        for o in of_kind(team_overlay, "PriorityClass")
    }

    assert classes == {
        "acme-inference": (500000, "PreemptLowerPriority"),
        "acme-training": (200, "Never"),
    }


def test_a_class_named_as_the_bases_is_patched_to_the_policys_value(
    kubectl: Path,
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        default_policy_text().replace(
            "name: training-priority, value: 1000}", "name: training-priority, value: 777}"
        ),
        "utf-8",
    )
    directory = tmp_path / "overlay"
    assert (
        write_overlay(policy, directory, "--base", str(REPOSITORY / "deploy" / "base")).returncode
        == 0
    )

    classes = {
        o["metadata"]["name"]: o["value"]
        for o in of_kind(kustomized(kubectl, directory), "PriorityClass")
    }

    assert classes == {"inference-priority": 1000000, "training-priority": 777}


def test_without_a_base_the_repositorys_is_named_relative_to_the_overlay(tmp_path: Path) -> None:
    directory = REPOSITORY / ".pytest-overlay"
    try:
        written = write_overlay(TEAM_POLICY, directory)
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text("utf-8"))
    finally:
        for path in sorted(directory.glob("*")):
            path.unlink()
        directory.rmdir()

    assert written.returncode == 0, written.stderr
    assert kustomization["resources"][:2] == ["../deploy/base", "../deploy/base/flowcontrol"]
    assert "team.example.com/gpu-enabled=yes" in written.stderr


def test_outside_a_repository_the_base_must_be_given(tmp_path: Path) -> None:
    written = subprocess.run(
        [
            sys.executable, "-m", "webhook.cli", "manifests", "overlay",
            "--policy", str(TEAM_POLICY), "--output-dir", str(tmp_path / "o"),
        ],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )  # fmt: skip

    assert written.returncode == 2
    assert "pass --base" in written.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("base", "flow_control"),
    [
        ("../../base", "../../base/flowcontrol"),
        (
            "github.com/org/gpu-admission/deploy/base?ref=v1.2.0",
            "github.com/org/gpu-admission/deploy/base/flowcontrol?ref=v1.2.0",
        ),
    ],
)
def test_the_flow_control_folder_is_beside_the_base_even_for_a_remote_reference(
    base: str, flow_control: str
) -> None:
    assert flow_control_of(base) == flow_control


def test_written_again_for_a_policy_of_the_bases_classes_it_leaves_no_stale_file(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "overlay"
    base = str(REPOSITORY / "deploy" / "base")
    assert write_overlay(TEAM_POLICY, directory, "--base", base).returncode == 0
    assert (directory / "priorityclasses.yaml").is_file()
    default = tmp_path / "default.yaml"
    default.write_text(default_policy_text(), "utf-8")

    assert write_overlay(default, directory, "--base", base).returncode == 0

    assert not (directory / "priorityclasses.yaml").exists()
    assert {p.name for p in directory.iterdir()} <= OVERLAY_FILES


def test_every_file_an_overlay_may_hold_is_one_it_owns() -> None:
    files = overlay_files(load_policy_file(TEAM_POLICY), TEAM_POLICY.read_text("utf-8"), "../base")

    assert set(files) == OVERLAY_FILES
