"""The AdmissionReview bodies the attack benchmark sends.

The large ones are the issue's: a Deployment created (or dry-run) with thousands of
containers, each as kube-apiserver sends it after defaulting (a 3 MiB request of
`{name, image}` pairs grows to about 7 MB once every container carries its defaults):
the largest body the server reads at all, and the largest object its engine judges
(``MAX_VALUES`` JSON values; a larger one is refused unread). The small one is an
ordinary inference pod.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

WORKLOAD = "gpu-admission.io/workload"


def _review(obj: dict[str, Any], kind: str, group: str, resource: str) -> dict[str, Any]:
    version = "v1"
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "namespace": "ml",
            "operation": "CREATE",
            "userInfo": {"username": "tenant", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": True,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def _container(index: int) -> dict[str, Any]:
    return {
        "name": f"c{index}",
        "image": "registry.example/cuda:12",
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }


def deployment_review(containers: int) -> bytes:
    """A Deployment of one inference pod template with `containers` containers."""
    template = {
        "metadata": {"labels": {WORKLOAD: "inference", "app": "wide"}},
        "spec": {
            "containers": [_container(i) for i in range(containers)],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "wide", "namespace": "ml", "labels": {"app": "wide"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "wide"}},
            "template": template,
        },
    }
    return orjson.dumps(_review(deployment, "Deployment", "apps", "deployments"))


def largest_deployment_review(limit: int) -> bytes:
    """The Deployment review with the most containers whose body stays within `limit`."""
    per_container = len(deployment_review(1001)) - len(deployment_review(1000))
    containers = (limit - len(deployment_review(0))) // per_container
    body = deployment_review(containers)
    while len(body) > limit:
        containers -= 1
        body = deployment_review(containers)
    return body


def json_values(value: Any) -> int:
    """How many JSON values `value` holds, itself included (as the engine counts them)."""
    if isinstance(value, dict):
        return 1 + sum(json_values(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(json_values(v) for v in value)
    return 1


def largest_judged_deployment_review(max_values: int) -> bytes:
    """The Deployment review with the most containers whose object holds at most
    `max_values` JSON values."""
    per_container = json_values(_container(0))
    deployment = orjson.loads(deployment_review(0))["request"]["object"]
    containers = (max_values - json_values(deployment)) // per_container
    return deployment_review(containers)


def small_review() -> bytes:
    """An inference pod with one GPU, as the mutating webhook sees it."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "small", "namespace": "ml", "labels": {WORKLOAD: "inference"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/cuda:12",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }
    return orjson.dumps(_review(pod, "Pod", "", "pods"))


def policy_text(size: int, variant: int = 0) -> str:
    """The default policy grown to about `size` bytes with comment lines (read by the YAML
    parser like any other line), `variant` making each text its own."""
    from webhook.policy.load import default_policy_text

    text = default_policy_text() + f"# variant {variant}\n"
    line = "# " + "padding " * 8 + "\n"
    return text + line * max(0, (size - len(text)) // len(line))


def policy_review(text: str) -> bytes:
    """An UPDATE of the policy ConfigMap to `text`, as `kubectl apply` sends it."""
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpu-admission-policy", "namespace": "gpu-admission"},
        "data": {"policy.yaml": text},
    }
    review = _review(configmap, "ConfigMap", "", "configmaps")
    review["request"]["namespace"] = "gpu-admission"
    review["request"]["name"] = "gpu-admission-policy"
    review["request"]["operation"] = "CREATE"
    review["request"]["dryRun"] = False
    return orjson.dumps(review)
