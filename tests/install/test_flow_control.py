"""The FlowSchema shapes every tenant write a webhook is sent, as the policy's
configurations send them (webhook/install/flow_control.py), in every install path."""

from __future__ import annotations

from pathlib import Path

import yaml

from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.install.flow_control import FLOW_SCHEMA, flow_control_objects, tenant_write_rules
from webhook.install.overlay import overlay_files
from webhook.install.plan import render_install
from webhook.policy import Policy, load_default_policy, load_policy_text
from webhook.policy.load import default_policy_text

TRAINERS = (
    "workloadKinds:\n  - group: example.com\n    kind: Trainer\n    resource: trainers\n"
    "    templatePaths: [/spec/template]\n"
)


def team_policy() -> Policy:
    text = default_policy_text().replace("# workloadKinds:\n", TRAINERS, 1)
    return load_policy_text(text, "team.yaml")


def sent(policy: Policy) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every write kube-apiserver sends a webhook of the
    policy, but the policy ConfigMap's."""
    verbs = {"CREATE": ["create"], "UPDATE": ["update", "patch"], "DELETE": ["delete"]}
    endpoint = Endpoint(ca_bundle="", url="https://x.invalid")
    found = set()
    for configuration in render_webhook_configurations(policy, endpoint):
        for hook in configuration["webhooks"]:
            if hook["name"].startswith("validate-policy."):
                continue
            for rule in hook["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for operation in rule["operations"]:
                            found.update((group, resource, v) for v in verbs[operation])
    return found


def matched(rules: list[dict[str, object]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]  # type: ignore[attr-defined]
        for resource in rule["resources"]  # type: ignore[attr-defined]
        for verb in rule["verbs"]  # type: ignore[attr-defined]
    }


def test_every_write_a_webhook_is_sent_is_shaped() -> None:
    policy = load_default_policy()

    assert sent(policy) <= matched(tenant_write_rules(policy))


def test_a_kind_the_policy_adds_is_shaped_by_the_install_that_sends_it() -> None:
    rules = tenant_write_rules(team_policy())

    assert ("example.com", "trainers", "create") in matched(rules)
    assert sent(team_policy()) <= matched(rules)
    assert all(rule["namespaces"] == ["*"] for rule in rules)


def test_the_policy_configmap_is_left_to_the_releases_namespace() -> None:
    assert not any(
        "validate-policy" in str(rule) for rule in tenant_write_rules(load_default_policy())
    )


def test_install_gives_the_base_flowschema_the_policys_rules() -> None:
    objects = render_install(team_policy(), "text", "").objects

    [schema] = [o for o in objects if o["kind"] == "FlowSchema"]
    assert schema["spec"]["rules"][0]["resourceRules"] == tenant_write_rules(team_policy())


def test_an_overlay_patches_the_base_flowschema_with_the_policys_rules() -> None:
    files = overlay_files(team_policy(), "text", "../base")

    [operation] = yaml.safe_load(files["flowschema.yaml"])
    assert operation["value"] == tenant_write_rules(team_policy())
    patches = yaml.safe_load(files["kustomization.yaml"])["patches"]
    assert {"target": {"group": "flowcontrol.apiserver.k8s.io", "version": "v1",
                       "kind": "FlowSchema", "name": FLOW_SCHEMA},
            "path": "flowschema.yaml"} in patches  # fmt: skip


def test_the_base_holds_the_default_policys_flowschema() -> None:
    base = Path(__file__).parents[2] / "deploy/base/flowcontrol/flowcontrol.yaml"

    assert list(yaml.safe_load_all(base.read_text())) == flow_control_objects(load_default_policy())
