"""Installed webhook configurations against the policy in force (webhook/install/scope.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webhook.install.chart import webhook_scope
from webhook.install.configurations import (
    AUTOSCALER_WEBHOOK,
    MUTATING_WEBHOOK,
    UNCLASSED_VALIDATING_WEBHOOK,
    VALIDATING_WEBHOOK,
    WORKLOAD_WEBHOOK,
    Endpoint,
    render_webhook_configurations,
)
from webhook.install.scope import (
    DIFFERENCES_LIMIT,
    FIX,
    MUTATING,
    VALIDATING,
    LiveWebhooks,
    ScopeDifference,
    canonical_json,
    needed_scope,
    scope_differences,
    scope_digest,
    scope_refusal,
)
from webhook.policy import Policy, load_default_policy, load_policy_text
from webhook.policy.load import default_policy_text

DEFAULT = load_default_policy()
ENDPOINT = Endpoint(
    ca_bundle="Q0E=", service_name="gpu-admission", service_namespace="gpu-admission"
)


def policy_with(old: str, new: str) -> Policy:
    text = default_policy_text()
    assert old in text
    return load_policy_text(text.replace(old, new), "edited.yaml")


def installed(policy: Policy = DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
    """The configurations as an install renders them, with the operator's own choices."""
    return render_webhook_configurations(policy, ENDPOINT, own_namespace="gpu-admission")


def reasons(differences: list[ScopeDifference]) -> dict[str, str]:
    return {difference.webhook: difference.reason for difference in differences}


def test_configurations_rendered_from_the_policy_differ_in_nothing() -> None:
    assert scope_differences(DEFAULT, *installed()) == []


def test_what_operators_set_is_not_compared() -> None:
    mutating, validating = installed()
    for hook in (*mutating["webhooks"], *validating["webhooks"]):
        hook["clientConfig"] = {"caBundle": "b3RoZXI=", "url": "https://elsewhere:8443/x"}
        hook["failurePolicy"] = "Ignore"
        hook["timeoutSeconds"] = 10
        hook["namespaceSelector"]["matchExpressions"][-1]["values"] = ["kube-system", "batch"]
    assert scope_differences(DEFAULT, mutating, validating) == []


def test_defaults_kube_apiserver_fills_in_are_not_differences() -> None:
    mutating, validating = installed()
    for hook in (*mutating["webhooks"], *validating["webhooks"]):
        hook.setdefault("objectSelector", {})
        for rule in hook["rules"]:
            if rule["scope"] == "*":
                del rule["scope"]
    assert scope_differences(DEFAULT, mutating, validating) == []


def test_a_renamed_workload_label_is_named_in_the_object_selector_reason() -> None:
    policy = policy_with("workload: gpu-admission.io/workload", "workload: team.example/class")
    found = reasons(scope_differences(policy, *installed()))
    assert found[MUTATING_WEBHOOK] == (
        "its objectSelector selects gpu-admission.io/workload, "
        "the policy's workload label is team.example/class"
    )
    assert VALIDATING_WEBHOOK in found


def test_a_renamed_opt_in_label_is_named_with_its_value() -> None:
    policy = policy_with("key: gpu-admission.io/enabled", "key: team.example/gpus")
    found = reasons(scope_differences(policy, *installed()))
    assert found[MUTATING_WEBHOOK] == (
        "its namespaceSelector opts namespaces in with gpu-admission.io/enabled=true, "
        "the policy's opt-in label is team.example/gpus=true"
    )


def test_a_new_gpu_resource_leaves_the_conditions_behind() -> None:
    policy = policy_with("otherGpus: [nvidia.com/gpu.shared]", "otherGpus: [amd.com/gpu]")
    found = reasons(scope_differences(policy, *installed()))
    assert (
        "its matchCondition gpu-relevant-pod does not look for amd.com/"
        in found[UNCLASSED_VALIDATING_WEBHOOK]
    )
    assert "gpu-relevant-template does not look for amd.com/" in found[WORKLOAD_WEBHOOK]


def test_a_new_workload_kind_is_missing_from_the_workload_rules() -> None:
    policy = policy_with(
        "# workloadKinds:\n",
        "workloadKinds:\n  - group: example.com\n    kind: Trainer\n    resource: trainers\n"
        "    templatePaths: [/spec/template]\n",
    )
    found = reasons(scope_differences(policy, *installed()))
    assert found[WORKLOAD_WEBHOOK].startswith(
        "its rules do not send trainers.example.com/* (CREATE UPDATE); "
    )


def test_rules_beyond_the_policys_are_named() -> None:
    mutating, validating = installed()
    validating["webhooks"][0]["rules"].append(
        {"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    )
    found = reasons(scope_differences(DEFAULT, mutating, validating))
    assert found == {
        VALIDATING_WEBHOOK: "its rules send pods/v1 (DELETE), which the policy does not need"
    }


def test_a_missing_and_an_extra_webhook_are_both_reported() -> None:
    mutating, validating = copy.deepcopy(installed())
    validating["webhooks"] = [
        hook for hook in validating["webhooks"] if hook["name"] != AUTOSCALER_WEBHOOK
    ]
    validating["webhooks"].append({"name": "old.gpu-admission.io", "rules": []})
    assert scope_differences(DEFAULT, mutating, validating) == [
        ScopeDifference(
            VALIDATING, AUTOSCALER_WEBHOOK, f"not in the {VALIDATING}, the policy needs it"
        ),
        ScopeDifference(
            VALIDATING,
            "old.gpu-admission.io",
            f"in the {VALIDATING}, the policy has no such webhook",
        ),
    ]


def test_a_configuration_not_installed_misses_each_of_its_webhooks() -> None:
    _, validating = installed()
    differences = scope_differences(DEFAULT, None, validating)
    assert {d.kind for d in differences} == {MUTATING}
    assert reasons(differences)[MUTATING_WEBHOOK] == f"the {MUTATING} is not installed"
    assert str(differences[0]) == f"{MUTATING_WEBHOOK}: the {MUTATING} is not installed"


# -- the digest of the scope a policy needs ----------------------------------------------


def test_the_digest_is_a_sha256_the_same_for_the_same_policy() -> None:
    digest = scope_digest(DEFAULT)
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert scope_digest(load_policy_text(default_policy_text(), "again.yaml")) == digest


def test_an_edit_that_leaves_the_scope_as_it_was_keeps_the_digest() -> None:
    stricter = policy_with("  training:\n    gpusPerNode: 8", "  training:\n    gpusPerNode: 4")
    assert scope_digest(stricter) == scope_digest(DEFAULT)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("workload: gpu-admission.io/workload", "workload: team.example/class"),
        ("gpu: nvidia.com/gpu ", "gpu: amd.com/gpu "),
        ("key: gpu-admission.io/enabled", "key: team.example/gpu"),
    ],
    ids=["workload label", "gpu resource", "opt-in label"],
)
def test_an_edit_that_changes_the_scope_changes_the_digest(old: str, new: str) -> None:
    assert scope_digest(policy_with(old, new)) != scope_digest(DEFAULT)


def test_the_scope_holds_the_opt_in_and_the_webhooks_the_chart_renders_from() -> None:
    scope = needed_scope(DEFAULT)
    assert scope["namespaceOptIn"] == {"key": "gpu-admission.io/enabled", "value": "true"}
    assert scope["webhooks"] == webhook_scope(DEFAULT, "text")["webhooks"]


def test_canonical_json_is_what_gos_encoding_json_writes() -> None:
    value = {"b": ["x && y > 1 < 2"], "a": {"é": '\u2028\n"\\'}, "n": 3}
    assert canonical_json(value) == (
        b'{"a":{"\xc3\xa9":"\\u2028\\n\\"\\\\"},"b":["x \\u0026\\u0026 y \\u003e 1 \\u003c 2"],"n":3}'
    )


# -- the live webhooks and the refusal ------------------------------------------------------


def test_live_webhooks_keep_the_webhooks_and_a_digest_of_them() -> None:
    mutating, validating = installed()
    live = LiveWebhooks.read(mutating, validating)
    assert scope_differences(DEFAULT, *live.configurations()) == []
    assert live.digest == LiveWebhooks.read(*installed()).digest
    assert live.digest != LiveWebhooks.read(None, validating).digest
    assert live.configurations()[0] is not None
    assert LiveWebhooks.read(None, validating).configurations()[0] is None


def test_a_refusal_lists_a_few_differences_counts_the_others_and_says_the_fix() -> None:
    differences = [ScopeDifference(MUTATING, f"hook-{n}", f"reason {n}") for n in range(5)]
    refusal = scope_refusal("gpu-admission/gpu-admission-policy", differences)
    assert refusal.startswith(
        "the policy in ConfigMap gpu-admission/gpu-admission-policy needs webhook "
        "configurations other than the live ones"
    )
    assert "hook-0: reason 0; hook-1: reason 1; hook-2: reason 2; and 2 more." in refusal
    assert "hook-3" not in refusal and DIFFERENCES_LIMIT == 3
    assert refusal.endswith(FIX)


def test_a_long_difference_is_cut_so_that_the_fix_is_always_said() -> None:
    differences = [ScopeDifference(MUTATING, "hook", "x" * 20_000)]
    assert scope_refusal("ns/name", differences).endswith(FIX)


def test_the_fix_names_the_helm_and_the_install_commands() -> None:
    assert "gpu-admission manifests helm-values --policy FILE" in FIX
    assert "helm upgrade" in FIX
    assert "gpu-admission install --policy FILE" in FIX
