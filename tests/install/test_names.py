"""The names of what an install puts into a cluster (webhook/install/names.py): the name
an install may give its objects, and the webhooks of an install named otherwise."""

from __future__ import annotations

import pytest

from tests.builders import pod_create
from webhook.engine.handlers import HANDLERS
from webhook.engine.handlers.policy_configmap import VALIDATE_POLICY
from webhook.engine.request import AdmissionRequest
from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.install.names import INSTALL_NAME, INSTALL_NAME_MAX, handlers_of_install, install_name
from webhook.policy import load_default_policy

POLICY = load_default_policy()
ENDPOINT = Endpoint(ca_bundle="", service_name="acme-gpu", service_namespace="platform")


def configmap_review(name: str) -> AdmissionRequest:
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    return pod_create(configmap, kind="ConfigMap", resource="configmaps", namespace="platform")


@pytest.mark.parametrize("name", ["gpu-admission", "acme-gpu", "a", "a" * INSTALL_NAME_MAX])
def test_a_dns_label_short_enough_for_every_derived_name_names_an_install(name: str) -> None:
    assert install_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "Acme", "acme_gpu", "acme.gpu", "-acme", "acme-", "1acme", "a" * 39]
)
def test_a_name_that_cannot_name_every_object_is_refused_saying_what_a_name_must_be(
    name: str,
) -> None:
    with pytest.raises(ValueError, match="must be a DNS label of at most 38 characters"):
        install_name(name)


def test_the_longest_name_leaves_room_for_the_rotation_cronjobs_jobs() -> None:
    """A CronJob's name is at most 52 characters; ``NAME-cert-rotation`` is the longest."""
    assert len("a" * INSTALL_NAME_MAX + "-cert-rotation") == 52


def test_an_install_of_the_usual_name_has_the_registrys_webhooks() -> None:
    assert handlers_of_install() is HANDLERS
    assert handlers_of_install(INSTALL_NAME) is HANDLERS


def test_an_install_named_otherwise_judges_its_own_policy_configmap_and_no_other() -> None:
    renamed = handlers_of_install("acme-gpu").named(VALIDATE_POLICY.name)
    [condition] = renamed.conditions

    assert condition.twin(POLICY, configmap_review("acme-gpu-policy"))
    assert condition.twin(POLICY, configmap_review("acme-gpu-policy-5f7c9d"))
    assert not condition.twin(POLICY, configmap_review("gpu-admission-policy"))
    assert not condition.twin(POLICY, configmap_review("acme-gpu"))
    assert "'acme-gpu-policy'" in condition.cel(POLICY)


def test_an_install_named_otherwise_differs_only_in_its_policy_configmaps_condition() -> None:
    usual = render_webhook_configurations(POLICY, ENDPOINT, own_namespace="platform")
    renamed = render_webhook_configurations(
        POLICY, ENDPOINT, own_namespace="platform", handlers=handlers_of_install("acme-gpu")
    )

    for before, after in zip(usual, renamed, strict=True):
        changed = [
            (a["name"], a["matchConditions"])
            for b, a in zip(before["webhooks"], after["webhooks"], strict=True)
            if a != b
        ]
        if before["kind"] == "MutatingWebhookConfiguration":
            assert changed == []
        else:
            [(name, conditions)] = changed
            assert name == VALIDATE_POLICY.webhook_name
            assert "acme-gpu-policy" in conditions[0]["expression"]
