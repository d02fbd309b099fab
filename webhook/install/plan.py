"""`gpu-admission install` / `uninstall`: the kustomize base, applied through the API.

The objects come from `deploy/base` (shipped in the wheel), so `kubectl apply
-k deploy/` and `install` install the same thing. What install adds:
certificates (generated, or reused and renewed when due: ``webhook.tls.provision``),
the PriorityClasses of the policy's classes in place of the base's (the default policy's),
the policy ConfigMap from any policy file (annotated with the digest of the webhook scope
its policy needs, ``webhook.install.scope.scope_digest``: the policy ConfigMap's webhook
admits it before the configurations of the same install are replaced), the caBundle in both webhook
configurations, an image override, and a wait for the Deployment to be available.

Order matters so nothing is ever left blocking: install creates the webhook
configurations last, after everything they call; uninstall deletes them
first, before anything they call goes away.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from webhook.errors import GpuAdmissionError
from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.install.flow_control import FLOW_SCHEMA, tenant_write_rules
from webhook.install.names import (
    APP_LABELS,
    DEPLOYMENT,
    IMAGE_NAME,
    NAMESPACE,
    POLICY_CONFIGMAP,
    SERVICE,
)
from webhook.install.priority_classes import priority_class_objects
from webhook.install.scope import SCOPE_ANNOTATION, scope_digest
from webhook.policy import Policy

POLICY_CHECKSUM = "gpu-admission.io/policy-sha256"

CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "PriorityClass",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "FlowSchema",
        "PriorityLevelConfiguration",
    }
)
FLOW_CONTROL = "flowcontrol"
"""The base's folder of cluster-scoped flow control objects, listed beside the base (not
in it) by the kustomizations, and applied by install after the base's own."""
WEBHOOK_KINDS = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})


class InstallError(GpuAdmissionError):
    """Install or uninstall could not finish; the message says what to do."""


def base_directory() -> Path:
    """deploy/base: inside the wheel, or beside the package in a source checkout."""
    shipped = Path(str(resources.files("webhook"))) / "deploy" / "base"
    if shipped.is_dir():
        return shipped
    return Path(__file__).resolve().parents[2] / "deploy" / "base"


def base_objects(base: Path | None = None) -> list[dict[str, Any]]:
    """The objects of the kustomize base, in its resources order (generators excluded),
    with the namespace set on namespaced ones as kustomize's `namespace:` does; then
    those of its flow control folder."""
    base = base or base_directory()
    objects: list[dict[str, Any]] = []
    for folder in (base, base / FLOW_CONTROL):
        if not (folder / "kustomization.yaml").is_file():
            continue
        kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text("utf-8"))
        for resource in kustomization.get("resources", []):
            for document in yaml.safe_load_all((folder / resource).read_text("utf-8")):
                if not document:
                    continue
                if document["kind"] not in CLUSTER_SCOPED:
                    document.setdefault("metadata", {})["namespace"] = NAMESPACE
                objects.append(document)
    return objects


@dataclass(frozen=True)
class InstallPlan:
    """Everything install applies, rendered. The webhook configurations are replaced
    whole, not merged: a merge with one written by other means (say with a `url`)
    could leave both `url` and `service`, which the apiserver refuses."""

    objects: list[dict[str, Any]]
    mutating: dict[str, Any]
    validating: dict[str, Any]


def render_install(
    policy: Policy,
    policy_text: str,
    ca_bundle_b64: str,
    image: str | None = None,
    base: Path | None = None,
) -> InstallPlan:
    """The base objects with namespace, policy, caBundle and image filled in."""
    objects = []
    for obj in base_objects(base):
        if obj["kind"] in WEBHOOK_KINDS or obj["kind"] == "PriorityClass":
            continue  # rendered below from the policy actually installed
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == DEPLOYMENT:
            _roll_on_policy_change(obj, policy_text)
        if obj["kind"] == "FlowSchema" and obj["metadata"]["name"] == FLOW_SCHEMA:
            obj["spec"]["rules"][0]["resourceRules"] = tenant_write_rules(policy)
        if image is not None:
            _set_image(obj, image)
        objects.append(obj)
    objects.insert(1, _policy_configmap(policy, policy_text))
    objects.extend(priority_class_objects(policy))
    endpoint = Endpoint(ca_bundle=ca_bundle_b64, service_name=SERVICE, service_namespace=NAMESPACE)
    mutating, validating = render_webhook_configurations(policy, endpoint, own_namespace=NAMESPACE)
    return InstallPlan(objects, mutating, validating)


def _policy_configmap(policy: Policy, policy_text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": POLICY_CONFIGMAP,
            "namespace": NAMESPACE,
            "labels": dict(APP_LABELS),
            "annotations": {SCOPE_ANNOTATION: scope_digest(policy)},
        },
        "data": {"policy.yaml": policy_text},
    }


def _roll_on_policy_change(deployment: dict[str, Any], policy_text: str) -> None:
    # kustomize's generator hashes the ConfigMap name; install keeps one name and rolls
    # the pods on a policy change through this annotation instead.
    template = deployment["spec"]["template"]
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[POLICY_CHECKSUM] = hashlib.sha256(policy_text.encode("utf-8")).hexdigest()


def _set_image(obj: dict[str, Any], image: str) -> None:
    """Our image in every container that runs it (the service's and the rotation job's),
    matched by image name as kustomize's `images:` does."""
    spec = obj.get("spec", {})
    if obj["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    pod = spec.get("template", {}).get("spec", {})
    for container in pod.get("containers", []):
        if _image_name(container.get("image", "")) == IMAGE_NAME:
            container["image"] = image


def _image_name(image: str) -> str:
    """`gpu-admission` of `gpu-admission:0.1.0` or `gpu-admission@sha256:...`."""
    name = image.split("@", 1)[0]
    last_slash = name.rfind("/")
    tag = name.rfind(":")
    return name[:tag] if tag > last_slash else name
