"""The policy's `mutateTemplates`: the kinds whose pod templates are mutated at their
workload's CREATE (webhook/engine/template_mutation.py)."""

from __future__ import annotations

import pytest

from tests.policy.test_workload_kinds import CUSTOM
from tests.policy.test_workload_kinds import with_kinds as policy_with
from webhook.errors import PolicyError
from webhook.policy import load_default_policy, load_policy_text


def test_by_default_every_kind_but_the_long_running_controllers_is_mutated() -> None:
    assert load_default_policy().mutated_template_kinds == {
        "Job",
        "CronJob",
        "PyTorchJob",
        "TFJob",
        "MPIJob",
        "RayCluster",
        "RayJob",
        "JobSet",
        "LeaderWorkerSet",
    }


def test_the_policys_own_kinds_are_mutated_by_default() -> None:
    kinds = load_policy_text(policy_with(CUSTOM), "custom.yaml").mutated_template_kinds

    assert kinds == {"Job", "CronJob", "Trainer"}


def test_a_list_names_the_mutated_kinds_alone() -> None:
    text = policy_with("mutateTemplates: [Job, Deployment]\n")

    assert load_policy_text(text, "p.yaml").mutated_template_kinds == {"Job", "Deployment"}


def test_an_empty_list_mutates_no_template() -> None:
    policy = load_policy_text(policy_with("mutateTemplates: []\n"), "p.yaml")

    assert policy.mutated_template_kinds == frozenset()


def test_a_kind_without_templates_is_refused_with_the_kinds_that_have_them() -> None:
    with pytest.raises(PolicyError) as raised:
        load_policy_text(policy_with("mutateTemplates: [Job, Jobs]\n"), "edited.yaml")

    assert raised.value.path == "mutateTemplates[1]"
    assert "unknown kind 'Jobs'" in raised.value.reason
    assert "PyTorchJob" in raised.value.reason


def test_a_custom_kind_may_be_named_once_the_policy_lists_it() -> None:
    text = policy_with(CUSTOM + "mutateTemplates: [Trainer]\n")

    assert load_policy_text(text, "p.yaml").mutated_template_kinds == {"Trainer"}
