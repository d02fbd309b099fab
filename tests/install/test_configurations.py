"""Webhook configurations rendered from the policy (webhook/install/configurations.py).

The CEL matchConditions are compiled and evaluated by the real kube-apiserver
in the end-to-end tests; here we check the shape and the scope.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from webhook.http.policy import route as policy_route
from webhook.install.configurations import (
    POLICY_PATH,
    POLICY_WEBHOOK,
    Endpoint,
    render_webhook_configurations,
)
from webhook.policy import load_default_policy

POLICY = load_default_policy()


def by_name(rendered: Any) -> dict[str, dict[str, Any]]:
    return {hook["name"]: hook for configuration in rendered for hook in configuration["webhooks"]}


@pytest.fixture
def rendered() -> tuple[dict[str, Any], dict[str, Any]]:
    return render_webhook_configurations(
        POLICY,
        Endpoint(ca_bundle="Q0E=", url="https://127.0.0.1:9443/"),
        own_namespace="gpu-admission",
    )


def test_both_webhooks_call_their_path_with_the_ca_bundle(rendered: Any) -> None:
    mutating, validating = rendered
    assert mutating["webhooks"][0]["clientConfig"] == {
        "caBundle": "Q0E=",
        "url": "https://127.0.0.1:9443/mutate",
    }
    assert validating["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:9443/validate"


def test_a_service_endpoint_names_service_namespace_path_and_port() -> None:
    endpoint = Endpoint(
        ca_bundle="x", service_name="gpu-admission", service_namespace="gpu-admission"
    )
    mutating, _ = render_webhook_configurations(POLICY, endpoint)
    assert mutating["webhooks"][0]["clientConfig"]["service"] == {
        "name": "gpu-admission",
        "namespace": "gpu-admission",
        "path": "/mutate",
        "port": 443,
    }


def test_only_opted_in_namespaces_and_never_the_control_plane_or_our_own(rendered: Any) -> None:
    hooks = by_name(rendered)
    hooks.pop(POLICY_WEBHOOK)  # the service's own namespace only, below
    for hook in hooks.values():
        selector = hook["namespaceSelector"]["matchExpressions"]
        assert selector == [
            {"key": "gpu-admission.io/enabled", "operator": "In", "values": ["true"]},
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kube-node-lease", "gpu-admission"],
            },
        ]


def test_mutation_at_pod_create_and_debug_containers_and_reinvoked_if_needed(
    rendered: Any,
) -> None:
    hook = rendered[0]["webhooks"][0]
    assert [(r["operations"], r["resources"]) for r in hook["rules"]] == [
        (["CREATE"], ["pods"]),
        (["UPDATE"], ["pods/ephemeralcontainers"]),
    ]
    assert (hook["reinvocationPolicy"], hook["sideEffects"]) == ("IfNeeded", "None")
    assert hook["admissionReviewVersions"] == ["v1"]


def test_validation_covers_pod_create_update_and_ephemeral_containers(rendered: Any) -> None:
    hooks = by_name(rendered)
    covered = {
        (operation, resource)
        for name in ("validate.gpu-admission.io", "validate-updates.gpu-admission.io")
        for rule in hooks[name]["rules"]
        for operation in rule["operations"]
        for resource in rule["resources"]
    }
    assert covered == {
        ("CREATE", "pods"),
        ("UPDATE", "pods"),
        ("UPDATE", "pods/ephemeralcontainers"),
    }


def test_class_pods_are_told_apart_by_their_label_before_any_cel(rendered: Any) -> None:
    hooks = by_name(rendered)
    exists = {"matchExpressions": [{"key": "gpu-admission.io/workload", "operator": "Exists"}]}
    absent = {
        "matchExpressions": [{"key": "gpu-admission.io/workload", "operator": "DoesNotExist"}]
    }
    for name in ("mutate.gpu-admission.io", "validate.gpu-admission.io"):
        assert hooks[name]["objectSelector"] == exists
    for name in ("mutate-unclassed.gpu-admission.io", "validate-unclassed.gpu-admission.io"):
        assert hooks[name]["objectSelector"] == absent


def test_a_class_pod_is_mutated_at_its_create_without_a_condition(rendered: Any) -> None:
    assert "matchConditions" not in by_name(rendered)["mutate.gpu-admission.io"]


def test_a_pod_without_class_is_mutated_only_when_debug_containers_are_added(
    rendered: Any,
) -> None:
    hook = by_name(rendered)["mutate-unclassed.gpu-admission.io"]
    assert [(r["operations"], r["resources"]) for r in hook["rules"]] == [
        (["UPDATE"], ["pods/ephemeralcontainers"]),
    ]
    assert [c["name"] for c in hook["matchConditions"]] == ["gpu-relevant-pod"]
    assert hook["reinvocationPolicy"] == "IfNeeded"


def test_a_class_pod_is_validated_at_its_create_without_a_condition(rendered: Any) -> None:
    hook = by_name(rendered)["validate.gpu-admission.io"]
    assert "matchConditions" not in hook
    assert [(r["operations"], r["resources"]) for r in hook["rules"]] == [
        (["CREATE"], ["pods"]),
        (["UPDATE"], ["pods/ephemeralcontainers"]),
    ]


def test_pod_updates_reach_validation_when_placement_or_what_it_was_admitted_as_changes(
    rendered: Any,
) -> None:
    hooks = by_name(rendered)
    updates = hooks["validate-updates.gpu-admission.io"]
    unclassed = hooks["validate-unclassed.gpu-admission.io"]
    assert [(r["operations"], r["resources"]) for r in updates["rules"]] == [
        (["UPDATE"], ["pods"]),
    ]
    assert updates["objectSelector"] == hooks["validate.gpu-admission.io"]["objectSelector"]
    assert [c["name"] for c in updates["matchConditions"]] == ["judged-change"]
    assert [c["name"] for c in unclassed["matchConditions"]] == [
        "gpu-relevant-pod",
        "judged-change",
    ]
    assert [(r["operations"], r["resources"]) for r in unclassed["rules"]] == [
        (["CREATE", "UPDATE"], ["pods"]),
        (["UPDATE"], ["pods/ephemeralcontainers"]),
    ]
    changed = updates["matchConditions"][0]["expression"]
    for field in ("tolerations", "nodeSelector", "affinity", "schedulingGates"):
        assert f"object.spec.{field} != oldObject.spec.{field}" in changed
    for label in ("gpu-admission.io/workload", "gpu-admission.io/gpu-model"):
        assert (
            f"object.metadata.labels['{label}'] != oldObject.metadata.labels['{label}']" in changed
        )
    assert "cdi\\.k8s\\.io" in changed


def test_the_match_condition_names_what_the_policy_cares_about(rendered: Any) -> None:
    hook = by_name(rendered)["validate-unclassed.gpu-admission.io"]
    expression = hook["matchConditions"][0]["expression"]
    for part in (
        "startsWith('nvidia.com/')",
        "tolerations",
        "'NVIDIA_VISIBLE_DEVICES'",
        "(request.operation == 'CREATE' && (has(object.spec.nodeName) && "
        "object.spec.nodeName != ''))",
        "object.spec.priorityClassName in ['inference-priority', 'training-priority']",
    ):
        assert part in expression
    # the label is the objectSelector's to look at, not the condition's
    assert "'gpu-admission.io/workload'" not in expression


def test_failure_policy_is_explicit_and_timeout_small(rendered: Any) -> None:
    for configuration in rendered:
        hook = configuration["webhooks"][0]
        assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Fail", 3)


def test_workloads_have_a_validating_webhook_of_their_own_at_create_and_update(
    rendered: Any,
) -> None:
    pods, _, _, workloads, *_ = rendered[1]["webhooks"]
    assert (pods["name"], workloads["name"]) == (
        "validate.gpu-admission.io",
        "validate-workloads.gpu-admission.io",
    )
    assert workloads["clientConfig"]["url"] == "https://127.0.0.1:9443/validate-workloads"
    assert [(r["apiGroups"], r["apiVersions"], r["resources"]) for r in workloads["rules"]] == [
        (["apps"], ["v1"], ["deployments", "statefulsets", "daemonsets", "replicasets"]),
        (["batch"], ["v1"], ["jobs", "cronjobs"]),
        (["kubeflow.org"], ["*"], ["pytorchjobs", "tfjobs", "mpijobs"]),
        (["ray.io"], ["*"], ["rayclusters", "rayjobs"]),
        (["jobset.x-k8s.io"], ["*"], ["jobsets"]),
        (["leaderworkerset.x-k8s.io"], ["*"], ["leaderworkersets"]),
    ]
    assert {tuple(r["operations"]) for r in workloads["rules"]} == {("CREATE", "UPDATE")}
    assert (workloads["failurePolicy"], workloads["namespaceSelector"]) == (
        "Fail",
        pods["namespaceSelector"],
    )


def test_the_workload_condition_looks_into_each_kinds_templates(rendered: Any) -> None:
    [condition] = by_name(rendered)["validate-workloads.gpu-admission.io"]["matchConditions"]
    expression = condition["expression"]
    assert condition["name"] == "gpu-relevant-template"
    for part in (
        "has(object.spec.template) && ((has(object.spec.template.metadata)",
        "has(object.spec.jobTemplate.spec.template) && ",
        "object.spec.pytorchReplicaSpecs.exists(k0, [type(k0) == string ? ",
        "'gpu-admission.io/workload' in object.spec.leaderWorkerTemplate.workerTemplate",
        "(object.kind == 'CronJob' && object.apiVersion.startsWith('batch/'))",
        "startsWith('nvidia.com/')",
    ):
        assert part in expression


def test_a_policy_without_workload_kinds_still_covers_the_built_in_controllers() -> None:
    policy = dataclasses.replace(POLICY, workload_kinds=())
    _, validating = render_webhook_configurations(policy, Endpoint(ca_bundle="x", url="u"))
    rules = by_name((validating,))["validate-workloads.gpu-admission.io"]["rules"]
    assert [r["apiGroups"] for r in rules] == [["apps"], ["batch"]]


def test_autoscalers_have_a_validating_webhook_that_only_warns_and_fails_open(
    rendered: Any,
) -> None:
    pods, _, _, _, autoscalers, *_ = rendered[1]["webhooks"]
    assert autoscalers["name"] == "warn-autoscalers.gpu-admission.io"
    assert autoscalers["clientConfig"]["url"] == "https://127.0.0.1:9443/warn-autoscalers"
    assert autoscalers["rules"] == [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["autoscaling"],
            "apiVersions": ["v1", "v2"],
            "resources": ["horizontalpodautoscalers"],
            "scope": "Namespaced",
        },
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["keda.sh"],
            "apiVersions": ["v1alpha1"],
            "resources": ["scaledobjects"],
            "scope": "Namespaced",
        },
    ]
    assert (autoscalers["failurePolicy"], autoscalers["sideEffects"]) == ("Ignore", "None")
    assert autoscalers["timeoutSeconds"] == 3
    assert autoscalers["namespaceSelector"] == pods["namespaceSelector"]
    assert "matchConditions" not in autoscalers  # what it scales is only known from the cluster


def test_every_webhook_that_guards_pods_fails_closed_the_others_open(rendered: Any) -> None:
    policies = {
        hook["name"]: hook["failurePolicy"]
        for configuration in rendered
        for hook in configuration["webhooks"]
    }
    assert policies == {
        "mutate.gpu-admission.io": "Fail",
        "mutate-unclassed.gpu-admission.io": "Fail",
        "mutate-workloads.gpu-admission.io": "Fail",
        "validate.gpu-admission.io": "Fail",
        "validate-unclassed.gpu-admission.io": "Fail",
        "validate-updates.gpu-admission.io": "Fail",
        "validate-workloads.gpu-admission.io": "Fail",
        "warn-autoscalers.gpu-admission.io": "Ignore",
        "validate-claims.gpu-admission.io": "Fail",
        "validate-reservations.gpu-admission.io": "Fail",
        "validate-env-keys.gpu-admission.io": "Fail",
        "validate-policy.gpu-admission.io": "Ignore",
    }


def test_gpu_claims_have_a_validating_webhook_at_their_create_only(rendered: Any) -> None:
    pods, *_, claims, _, _, _ = rendered[1]["webhooks"]

    assert claims["name"] == "validate-claims.gpu-admission.io"
    assert claims["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": ["resource.k8s.io"],
            "apiVersions": ["v1"],
            "resources": ["resourceclaimtemplates", "resourceclaims"],
            "scope": "Namespaced",
        }
    ]
    assert claims["namespaceSelector"] == pods["namespaceSelector"]
    [condition] = claims["matchConditions"]
    assert "'gpu.nvidia.com', 'mig.nvidia.com'" in condition["expression"]


def test_claims_reserved_for_pods_have_a_validating_webhook_and_bindings_none(
    rendered: Any,
) -> None:
    """A Binding carries nothing of its pod to select on, so its webhook would hold every
    pod of an opted-in namespace; the claim's reservation is met only by pods with claims."""
    pods, *_, reservations, _, _ = rendered[1]["webhooks"]
    names = [hook["name"] for configuration in rendered for hook in configuration["webhooks"]]

    assert reservations["name"] == "validate-reservations.gpu-admission.io"
    assert reservations["rules"] == [
        {
            "operations": ["UPDATE"],
            "apiGroups": ["resource.k8s.io"],
            "apiVersions": ["v1"],
            "resources": ["resourceclaims/status"],
            "scope": "Namespaced",
        }
    ]
    assert reservations["namespaceSelector"] == pods["namespaceSelector"]
    assert [c["name"] for c in reservations["matchConditions"]] == ["reserves-a-pod"]
    assert reservations["failurePolicy"] == "Fail"
    assert "validate-bindings.gpu-admission.io" not in names


class TestThePolicyConfigMapWebhook:
    def test_it_calls_the_policy_route_of_the_http_edge(self, rendered: Any) -> None:
        hook = rendered[1]["webhooks"][-1]

        assert hook["name"] == POLICY_WEBHOOK
        assert POLICY_PATH == policy_route.PATH
        assert hook["clientConfig"]["url"] == f"https://127.0.0.1:9443{POLICY_PATH}"

    def test_it_sees_configmaps_at_create_and_update_never_at_delete(self, rendered: Any) -> None:
        hook = by_name(rendered)[POLICY_WEBHOOK]

        assert hook["rules"] == [
            {
                "operations": ["CREATE", "UPDATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["configmaps"],
                "scope": "Namespaced",
            }
        ]

    def test_it_sees_only_the_services_own_namespace(self, rendered: Any) -> None:
        hook = by_name(rendered)[POLICY_WEBHOOK]

        assert hook["namespaceSelector"] == {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "In",
                    "values": ["gpu-admission"],
                }
            ]
        }
        assert "objectSelector" not in hook

    def test_without_an_own_namespace_it_looks_in_the_install_namespace(self) -> None:
        endpoint = Endpoint(ca_bundle="x", url="https://127.0.0.1:9443")
        _, validating = render_webhook_configurations(POLICY, endpoint)

        selector = validating["webhooks"][-1]["namespaceSelector"]["matchExpressions"]
        assert selector[0]["values"] == ["gpu-admission"]

    def test_only_the_policy_configmap_by_its_name_or_kustomizes_hashed_name(
        self, rendered: Any
    ) -> None:
        [condition] = by_name(rendered)[POLICY_WEBHOOK]["matchConditions"]

        assert condition == {
            "name": "policy-configmap",
            "expression": "has(object.metadata.name) && "
            "(object.metadata.name == 'gpu-admission-policy' || "
            "object.metadata.name.startsWith('gpu-admission-policy-'))",
        }

    def test_it_fails_open_so_a_stopped_service_never_blocks_the_repair_of_its_policy(
        self, rendered: Any
    ) -> None:
        hook = by_name(rendered)[POLICY_WEBHOOK]

        assert (hook["failurePolicy"], hook["sideEffects"]) == ("Ignore", "None")
        assert hook["timeoutSeconds"] == 3


def test_configmaps_and_secrets_are_sent_only_with_a_key_named_as_a_device_request(
    rendered: Any,
) -> None:
    *_, keys, _ = rendered[1]["webhooks"]

    assert keys["name"] == "validate-env-keys.gpu-admission.io"
    assert keys["rules"] == [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["configmaps", "secrets"],
            "scope": "Namespaced",
        }
    ]
    [condition] = keys["matchConditions"]
    assert "'NVIDIA_VISIBLE_DEVICES'" in condition["expression"]
    assert "'NVIDIA_IMEX_CHANNELS'" in condition["expression"]
    assert "object.stringData.exists" in condition["expression"]
