"""`kubectl apply -k deploy/` against the real kube-apiserver.

The apiserver validates every object of the kustomize base (the Deployment's
pods are even created through Pod Security "restricted" and bound by
kube-scheduler; without kubelets they never run). The applied webhook
configurations name the in-cluster Service, which has no endpoints here: GPU
pods are refused (failurePolicy Fail) while other pods are not. Pointed at the
test's webhook process, the same configurations mutate and validate.

The session's other tests need the configurations named gpu-admission to reach
the `admission` fixture's process: the module re-registers it at the end and
deletes what it created, the PriorityClasses (shared with `admission`) aside.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from subprocess import CompletedProcess
from typing import Any

import pytest
import yaml

from webhook.engine.handlers import HANDLERS

from .admission_fixtures import REPO, example
from .controlplane import ControlPlane
from .nodes import FLEET
from .webhook_server import WebhookServer

DEPLOY = REPO / "deploy"
NAMESPACE = "gpu-admission"
SELECTOR = "app.kubernetes.io/name=gpu-admission,app.kubernetes.io/component=webhook"
CONFIGURATIONS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
WEBHOOK_COUNTS = {
    "mutatingwebhookconfiguration": len(HANDLERS.mutating()),
    "validatingwebhookconfiguration": len(HANDLERS.validating()),
}
"""The webhooks the handler registry installs (webhook/engine/handlers), each once."""
POLICY_WEBHOOK = "validate-policy.gpu-admission.io"
"""Fails open, so that a stopped service never locks out the repair of its policy."""
# Class pods are judged by validate.gpu-admission.io (their updates by validate-updates),
# pods without the label by validate-unclassed (webhook.install.configurations).
DENIED = re.compile(
    r'admission webhook "validate(-unclassed|-updates)?\.gpu-admission\.io" denied the request'
)


def kustomize(controlplane: ControlPlane, directory: str) -> list[dict[str, Any]]:
    output = controlplane.kubectl("kustomize", str(DEPLOY / directory)).stdout
    return [o for o in yaml.safe_load_all(output) if o]


@pytest.fixture(scope="module")
def applied(
    controlplane: ControlPlane, admission: WebhookServer
) -> Iterator[CompletedProcess[str]]:
    """`kubectl apply -k deploy/`, as on a cluster without gpu-admission.

    The `admission` fixture's configurations are deleted first: they were
    created by a client, not by kubectl apply, so an apply would merge the
    Service into them next to their URL.
    """
    try:
        for kind in CONFIGURATIONS:
            controlplane.delete(kind, ["gpu-admission"])
        yield controlplane.kubectl("apply", "-k", str(DEPLOY))
    finally:
        admission.register(controlplane.kubeconfig)
        controlplane.delete_namespace(NAMESPACE)
        for name in ("gpu-admission", "gpu-admission-cert-rotation"):
            controlplane.delete("clusterrolebinding", [name])
            controlplane.delete("clusterrole", [name])
        for kind in FLOW_CONTROL_KINDS:
            controlplane.delete(kind, [FLOW_CONTROL_NAME])


FLOW_CONTROL_KINDS = ("flowschema", "prioritylevelconfiguration")
FLOW_CONTROL_NAME = "gpu-admission-tenant-writes"
"""Cluster-scoped, like the ClusterRoles: left by the apply unless deleted."""


def patch(controlplane: ControlPlane, kind: str, operations: list[dict[str, Any]]) -> None:
    """A JSON patch of the webhook configuration of `kind` named gpu-admission."""
    controlplane.kubectl(
        "patch", kind, "gpu-admission", "--type=json", f"--patch={json.dumps(operations)}"
    )


def path_of(hook: dict[str, Any]) -> str:
    """Each webhook is served at its name's first label (``/validate-bindings``)."""
    name: str = hook["name"]
    return name.split(".")[0]


@contextmanager
def pointed_at(controlplane: ControlPlane, server: WebhookServer) -> Iterator[None]:
    """The applied configurations with their clientConfig patched to `server`'s URL."""
    applied_configs = {
        kind: controlplane.get_json(kind, "gpu-admission") for kind in CONFIGURATIONS
    }
    for kind in CONFIGURATIONS:
        operations = []
        for index, hook in enumerate(applied_configs[kind]["webhooks"]):
            client_config = f"/webhooks/{index}/clientConfig"
            url = f"{server.url}/{path_of(hook)}"
            operations += [
                {"op": "remove", "path": f"{client_config}/service"},
                {"op": "add", "path": f"{client_config}/url", "value": url},
                {"op": "add", "path": f"{client_config}/caBundle", "value": server.ca_bundle},
            ]
        patch(controlplane, kind, operations)
    try:
        yield
    finally:
        for kind, configuration in applied_configs.items():
            restore = []
            for index, hook in enumerate(configuration["webhooks"]):
                client_config = f"/webhooks/{index}/clientConfig"
                service = hook["clientConfig"]["service"]
                restore += [
                    {"op": "remove", "path": f"{client_config}/url"},
                    {"op": "remove", "path": f"{client_config}/caBundle"},
                    {"op": "add", "path": f"{client_config}/service", "value": service},
                ]
            patch(controlplane, kind, restore)


def test_every_object_kustomize_renders_is_stored_without_a_pod_security_warning(
    controlplane: ControlPlane, applied: CompletedProcess[str]
) -> None:
    for obj in kustomize(controlplane, "."):
        namespace = obj["metadata"].get("namespace")
        assert controlplane.exists(obj["kind"], obj["metadata"]["name"], namespace), obj["kind"]
    assert "PodSecurity" not in applied.stderr, applied.stderr


def test_the_stored_webhooks_are_the_rendered_ones_without_a_ca_bundle(
    controlplane: ControlPlane, applied: CompletedProcess[str]
) -> None:
    for kind, count in WEBHOOK_COUNTS.items():
        hooks = controlplane.get_json(kind, "gpu-admission")["webhooks"]
        assert len(hooks) == count, kind
        for hook in hooks:
            assert hook["clientConfig"] == {
                "service": {
                    "name": "gpu-admission",
                    "namespace": NAMESPACE,
                    "path": f"/{path_of(hook)}",
                    "port": 443,
                }
            }
            fails_open = hook["name"].startswith("warn-") or hook["name"] == POLICY_WEBHOOK
            assert hook["failurePolicy"] == ("Ignore" if fails_open else "Fail")
            assert hook["timeoutSeconds"] == 3


SERVE = f"system:serviceaccount:{NAMESPACE}:gpu-admission"
ROTATION = f"system:serviceaccount:{NAMESPACE}:gpu-admission-cert-rotation"


@pytest.mark.parametrize(
    ("who", "verb", "resource", "namespace", "allowed"),
    [
        (SERVE, "list", "nodes", None, True),
        (SERVE, "watch", "priorityclasses.scheduling.k8s.io", None, True),
        (SERVE, "get", "deployments.apps/llm", "ml", True),
        (SERVE, "list", "deployments.apps", "ml", True),
        (SERVE, "list", "pods", None, True),
        (SERVE, "delete", "pods", "ml", False),
        (SERVE, "get", "namespaces/ml", None, False),
        (SERVE, "get", "mutatingwebhookconfigurations/gpu-admission", None, True),
        (SERVE, "get", "validatingwebhookconfigurations/someone-else", None, False),
        (SERVE, "list", "mutatingwebhookconfigurations", None, False),
        (SERVE, "get", "pods/llm-0", "ml", True),
        (SERVE, "update", "mutatingwebhookconfigurations/gpu-admission", None, False),
        (SERVE, "patch", "validatingwebhookconfigurations/gpu-admission", None, False),
        (SERVE, "update", "secrets/gpu-admission-tls", NAMESPACE, False),
        (SERVE, "get", "secrets/hf-token", "ml", True),
        (SERVE, "get", "configmaps/settings", "ml", True),
        (SERVE, "list", "secrets", "ml", False),
        (SERVE, "watch", "configmaps", None, False),
        (SERVE, "get", "endpointslices.discovery.k8s.io/kubernetes", "default", True),
        (SERVE, "get", "endpointslices.discovery.k8s.io/other", "default", False),
        (SERVE, "create", "pods", NAMESPACE, False),
        (SERVE, "update", "nodes/cpu-a-0", None, False),
        (ROTATION, "update", "secrets/gpu-admission-tls", NAMESPACE, True),
        (ROTATION, "update", "secrets/gpu-admission-tls-ca", NAMESPACE, True),
        (ROTATION, "create", "secrets", NAMESPACE, False),
        (ROTATION, "list", "secrets", NAMESPACE, False),
        (ROTATION, "get", "secrets/gpu-admission-tls", "default", False),
        (ROTATION, "update", "mutatingwebhookconfigurations/gpu-admission", None, True),
        (ROTATION, "update", "validatingwebhookconfigurations/gpu-admission", None, True),
        (ROTATION, "update", "mutatingwebhookconfigurations/someone-else", None, False),
        (ROTATION, "delete", "mutatingwebhookconfigurations/gpu-admission", None, False),
        (ROTATION, "list", "nodes", None, False),
    ],
)
def test_each_service_account_may_do_what_its_process_needs_and_nothing_else(
    controlplane: ControlPlane,
    applied: CompletedProcess[str],
    who: str,
    verb: str,
    resource: str,
    namespace: str | None,
    allowed: bool,
) -> None:
    args = ["auth", "can-i", verb, resource, f"--as={who}"]
    args += ["--namespace", namespace] if namespace else []

    answer = controlplane.kubectl(*args, check=False).stdout.strip()

    assert answer == ("yes" if allowed else "no")


def test_a_rotation_job_started_from_the_cron_job_passes_restricted_pod_security(
    controlplane: ControlPlane, applied: CompletedProcess[str]
) -> None:
    created = controlplane.kubectl(
        "create", "job", "rotation-now", "--from=cronjob/gpu-admission-cert-rotation",
        "--namespace", NAMESPACE,
    )  # fmt: skip
    selector = "batch.kubernetes.io/job-name=rotation-now"

    [node] = controlplane.wait_for_bindings(NAMESPACE, selector, 1)

    assert "PodSecurity" not in created.stderr, created.stderr
    [pod] = controlplane.list_json("pods", NAMESPACE, selector)
    assert pod["spec"]["serviceAccountName"] == "gpu-admission-cert-rotation"
    assert node in {n.name for n in FLEET if not n.taints}


def test_the_replicas_pass_restricted_pod_security_and_spread_over_the_untainted_nodes(
    controlplane: ControlPlane, applied: CompletedProcess[str]
) -> None:
    nodes = controlplane.wait_for_bindings(NAMESPACE, SELECTOR, 3)

    untainted = {n.name for n in FLEET if not n.taints}
    assert set(nodes) == untainted
    assert max(Counter(nodes).values()) - min(Counter(nodes).values()) <= 1
    for pod in controlplane.list_json("pods", NAMESPACE, SELECTOR):
        assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"]) == (
            "system-cluster-critical",
            2000000000,
        )


def test_with_no_replica_serving_gpu_pods_are_refused_and_other_pods_created(
    controlplane: ControlPlane, applied: CompletedProcess[str], opted_in: str
) -> None:
    refused = controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in, check=False)
    controlplane.apply(example("cpu-pod.yaml"), namespace=opted_in)

    assert refused.returncode != 0
    assert 'failed calling webhook "mutate.gpu-admission.io"' in refused.stderr
    assert controlplane.exists("pod", "etl", opted_in)


def test_pointed_at_the_webhook_process_the_applied_webhooks_mutate_and_validate(
    controlplane: ControlPlane,
    applied: CompletedProcess[str],
    admission: WebhookServer,
    opted_in: str,
) -> None:
    with pointed_at(controlplane, admission):
        controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in)
        denied = controlplane.apply(
            example("denied/borrowed-priority.yaml"), namespace=opted_in, check=False
        )

    pod = controlplane.get_json("pod", "embedder", opted_in)
    assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"]) == (
        "inference-priority",
        1000000,
    )
    assert {
        "key": "gpu-pool",
        "operator": "Equal",
        "value": "inference",
        "effect": "NoSchedule",
    } in pod["spec"]["tolerations"]
    assert DENIED.search(denied.stderr)
    for kind in CONFIGURATIONS:
        assert (
            "service" in controlplane.get_json(kind, "gpu-admission")["webhooks"][0]["clientConfig"]
        )


def test_reapplying_the_base_keeps_the_ca_bundle_that_install_or_cert_manager_set(
    controlplane: ControlPlane, applied: CompletedProcess[str], admission: WebhookServer
) -> None:
    bundle = "clientConfig/caBundle"
    for kind, count in WEBHOOK_COUNTS.items():
        add = [
            {"op": "add", "path": f"/webhooks/{i}/{bundle}", "value": admission.ca_bundle}
            for i in range(count)
        ]
        patch(controlplane, kind, add)
    try:
        controlplane.kubectl("apply", "-k", str(DEPLOY))

        for kind in CONFIGURATIONS:
            for hook in controlplane.get_json(kind, "gpu-admission")["webhooks"]:
                assert hook["clientConfig"].get("caBundle") == admission.ca_bundle
    finally:
        for kind, count in WEBHOOK_COUNTS.items():
            remove = [{"op": "remove", "path": f"/webhooks/{i}/{bundle}"} for i in range(count)]
            patch(controlplane, kind, remove)


@pytest.mark.parametrize(
    "overlay", ["overlays/default", "overlays/overflow", "overlays/cert-manager"]
)
def test_every_overlay_passes_the_apiservers_validation(
    controlplane: ControlPlane, applied: CompletedProcess[str], overlay: str
) -> None:
    """A server-side dry run; cert-manager's own kinds are left out (no CRDs here)."""
    objects = [
        o
        for o in kustomize(controlplane, overlay)
        if not o["apiVersion"].startswith("cert-manager.io/")
    ]

    result = controlplane.kubectl(
        "apply", "-f", "-", "--dry-run=server", "--output=json",
        input=yaml.safe_dump_all(objects),
    )  # fmt: skip

    stored = json.loads(result.stdout)["items"]
    assert [(o["kind"], o["metadata"]["name"]) for o in stored] == [
        (o["kind"], o["metadata"]["name"]) for o in objects
    ]
    for configuration in (o for o in stored if o["kind"].endswith("WebhookConfiguration")):
        annotations = configuration["metadata"].get("annotations", {})
        assert ("cert-manager.io/inject-ca-from" in annotations) == (
            overlay == "overlays/cert-manager"
        )
