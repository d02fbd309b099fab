"""`gpu-admission manifests kueue-flavors` (webhook/install/kueue.py, webhook/cli/manifests.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from webhook.cli.main import main
from webhook.engine.kueue_flavors import pool_flavors
from webhook.install.kueue import flavors_yaml
from webhook.policy import load_default_policy

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def test_the_yaml_holds_one_flavor_per_pool_as_made_from_the_policy() -> None:
    policy = load_default_policy()

    documents = list(yaml.safe_load_all(flavors_yaml(policy)))

    assert documents == pool_flavors(policy)


def test_the_command_prints_the_flavors_of_the_policy_it_is_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["manifests", "kueue-flavors", "--policy", str(POLICIES / "overflow.yaml")])

    out = capsys.readouterr().out
    assert code == 0
    assert "# Pool training: workloads of inference, training tolerate its taints" in out
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["ResourceFlavor", "ResourceFlavor"]


def test_a_policy_that_cannot_be_read_exits_2_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["manifests", "kueue-flavors", "--policy", str(tmp_path / "missing.yaml")])

    assert code == 2
    assert "missing.yaml" in capsys.readouterr().err
