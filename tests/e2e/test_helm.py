"""The Helm chart (deploy/helm/gpu-admission) installed, upgraded and uninstalled by the
real helm on the real kube-apiserver.

Without a kubelet the chart's Deployment never runs a replica, so the release is
installed with `webhooks.url` pointing at a `gpu-admission serve` process of the test,
and that process serves the certificate the chart generated (read back from the
Secret; `certificates.selfSigned.extraIPAddresses` puts 127.0.0.1 in it). So every
admission call below proves that kube-apiserver trusts the chart's caBundle for the
chart's serving certificate, before and after an upgrade.

The session's other tests need the configurations named gpu-admission to reach the
`admission` fixture's process and the PriorityClasses to exist: the module hands the
classes to the release (Helm adopts objects carrying its ownership metadata), and at the
end re-creates them and registers the `admission` process again.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.deploy.test_helm_values import EVERY_VALUE
from webhook.install.chart import short_name
from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.policy import load_default_policy

from . import prometheus_operator
from .admission_fixtures import REPO, example
from .admission_fixtures import class_pod as gpu_class_pod
from .build_controlplane import GoToolchainMissing, pinned_helm_version, pinned_kubernetes_version
from .conftest import E2E_MODE
from .controlplane import ControlPlane
from .helm_cli import run_helm
from .webhook_server import WEBHOOK_TIMEOUT_SECONDS, WebhookServer

CHART = REPO / "deploy" / "helm" / "gpu-admission"
NAMESPACE = "gpu-admission"
RELEASE = "gpu-admission"
CONFIGURATIONS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
PRIORITY_CLASSES = ("inference-priority", "training-priority")
KUBE_VERSION = ("--kube-version", pinned_kubernetes_version())
"""`helm template` renders for this release: without a cluster Helm 3 assumes v1.20, below
the chart's kubeVersion (>=1.30), and refuses; Helm 4 assumes a recent one."""
FORCE_CONFLICTS = ("--force-conflicts",) if pinned_helm_version().startswith("v4.") else ()
"""Helm 4 applies server-side and must be told to take over fields another manager (an
earlier `gpu-admission install`) owns; Helm 3 patches client-side and has no such flag."""


def webhook_keys() -> list[str]:
    endpoint = Endpoint(ca_bundle="", url="https://unused")
    return [
        short_name(hook["name"])
        for configuration in render_webhook_configurations(load_default_policy(), endpoint)
        for hook in configuration["webhooks"]
    ]


@dataclass
class Release:
    controlplane: ControlPlane
    helm_binary: Path
    home: Path
    server: WebhookServer
    values: list[str] = field(default_factory=list)

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_helm(
            self.helm_binary, self.controlplane.kubeconfig, self.home, NAMESPACE, *args, check=check
        )

    def secret(self, name: str) -> dict[str, bytes]:
        data = self.controlplane.get_json("secret", name, NAMESPACE)["data"]
        return {key: base64.b64decode(value) for key, value in data.items()}

    def ca_bundles(self) -> set[str]:
        return {
            hook["clientConfig"]["caBundle"]
            for kind in CONFIGURATIONS
            for hook in self.controlplane.get_json(kind, "gpu-admission")["webhooks"]
        }


def wait_until_gone(controlplane: ControlPlane) -> None:
    """A gpu-admission namespace left terminating by an earlier test refuses new objects."""

    def gone() -> bool:
        if not controlplane.exists("namespace", NAMESPACE):
            return True
        controlplane.finish_terminating_pods(NAMESPACE)
        return False

    controlplane.wait_for(gone, timeout=90, what="the gpu-admission namespace to be deleted")


def adopt_priority_classes(controlplane: ControlPlane) -> None:
    """The classes the `admission` fixture applied, marked as the release's: Helm adopts
    an existing object only with its ownership label and annotations."""
    for name in PRIORITY_CLASSES:
        controlplane.kubectl(
            "annotate", "priorityclass", name, "--overwrite",
            f"meta.helm.sh/release-name={RELEASE}", f"meta.helm.sh/release-namespace={NAMESPACE}",
        )  # fmt: skip
        controlplane.kubectl(
            "label", "priorityclass", name, "--overwrite", "app.kubernetes.io/managed-by=Helm"
        )


@pytest.fixture(scope="module")
def release(
    controlplane: ControlPlane,
    controlplane_bin_dir: Path,
    admission: WebhookServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Release]:
    """`helm install` of the chart, its webhooks sent to a serve process of the test that
    serves the chart's own certificate."""
    work = tmp_path_factory.mktemp("helm")
    server = WebhookServer(work / "server")
    timeouts = [f"webhooks.timeoutSeconds.{k}={WEBHOOK_TIMEOUT_SECONDS}" for k in webhook_keys()]
    values = [
        f"webhooks.url={server.url}",
        "certificates.selfSigned.extraIPAddresses={127.0.0.1}",
        *timeouts,
    ]
    released = Release(controlplane, controlplane_bin_dir / "helm", work / "home", server, values)
    wait_until_gone(controlplane)
    controlplane.apply((REPO / "deploy" / "base" / "namespace.yaml").read_text("utf-8"))
    for kind in CONFIGURATIONS:
        controlplane.delete(kind, ["gpu-admission"])
    adopt_priority_classes(controlplane)
    for kind in ("flowschema", "prioritylevelconfiguration"):  # another install's, if any
        controlplane.delete(kind, ["gpu-admission-tenant-writes"])
    try:
        # The classes' fields belong to the field manager of `gpu-admission install` when an
        # earlier test installed with it: taking them over is what --force-conflicts says
        # (to Helm 4; Helm 3 does not apply server-side).
        released.helm(
            "install", RELEASE, str(CHART), *FORCE_CONFLICTS,
            *[a for v in values for a in ("--set", v)],
        )  # fmt: skip
        serving = released.secret("gpu-admission-tls")
        pki = work / "chart-pki"
        pki.mkdir()
        server.cert_path, server.key_path = pki / "tls.crt", pki / "tls.key"
        server.cert_path.write_bytes(serving["tls.crt"])
        server.key_path.write_bytes(serving["tls.key"])
        server.trust(serving["ca.crt"])
        server.start()
        yield released
    finally:
        server.stop()
        released.helm("uninstall", RELEASE, "--wait", check=False)
        controlplane.delete_namespace(NAMESPACE)
        controlplane.apply((REPO / "deploy" / "base" / "priorityclasses.yaml").read_text("utf-8"))
        admission.register(controlplane.kubeconfig)


def test_helm_is_the_pinned_release_and_says_so(controlplane_bin_dir: Path) -> None:
    version = subprocess.run(
        [str(controlplane_bin_dir / "helm"), "version", "--template", "{{.Version}}"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip

    assert version == pinned_helm_version()
    assert (controlplane_bin_dir / ".helm.version").read_text().strip() == version


@pytest.mark.parametrize(
    "names",
    [
        pytest.param([], id="the-charts-names"),
        pytest.param(
            ["--set", "nameOverride=ml-admission", "--set", "fullnameOverride=ml-gpu-webhooks"],
            id="the-teams-names",
        ),
    ],
)
def test_every_value_a_platform_team_sets_renders_objects_kube_apiserver_accepts(
    controlplane: ControlPlane,
    controlplane_bin_dir: Path,
    admission: WebhookServer,
    tmp_path: Path,
    names: list[str],
) -> None:
    """The chart with every value of tests/deploy/test_helm_values.py set, in a namespace
    of its own, under the chart's names or a team's (nameOverride, fullnameOverride),
    through kube-apiserver's validation and admission (a server-side dry run).
    The Prometheus Operator's kinds are judged by its own CRDs in the test below. The
    session's webhook configurations (a URL, made by a client, not by kubectl apply) are
    taken away meanwhile: kubectl would merge the chart's Service into them beside it."""
    values = tmp_path / "every-value.yaml"
    values.write_text(yaml.safe_dump(EVERY_VALUE), "utf-8")
    namespace = "platform-admission"
    rendered = run_helm(
        controlplane_bin_dir / "helm", controlplane.kubeconfig, tmp_path / "home", namespace,
        "template", RELEASE, str(CHART), "--values", str(values), *names, *KUBE_VERSION,
    ).stdout  # fmt: skip
    objects = [
        o for o in yaml.safe_load_all(rendered)
        if o and not o["apiVersion"].startswith("monitoring.coreos.com/")
    ]  # fmt: skip
    controlplane.create_namespace(namespace)
    for kind in CONFIGURATIONS:
        controlplane.delete(kind, ["gpu-admission"])
    try:
        applied = controlplane.kubectl(
            "apply", "--dry-run=server", "-n", namespace, "-f", "-",
            input=yaml.safe_dump_all(objects),
        )  # fmt: skip
    finally:
        admission.register(controlplane.kubeconfig)
        # Gone before the next parameter's dry run, which needs the same namespace.
        controlplane.delete_namespace(namespace)

    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "ServiceAccount", "FlowSchema", "MutatingWebhookConfiguration"} <= kinds
    assert applied.stdout.count("(server dry run)") == len(objects)


def test_the_prometheus_operator_objects_of_every_value_are_accepted_by_its_own_crds(
    controlplane: ControlPlane, controlplane_bin_dir: Path, tmp_path: Path
) -> None:
    """The chart's ServiceMonitor and PrometheusRule with every value set (intervals,
    relabelings, the rule labels and runbook links), through kube-apiserver's validation
    against the CRDs of a Prometheus Operator release (a server-side dry run)."""
    values = tmp_path / "every-value.yaml"
    values.write_text(yaml.safe_dump(EVERY_VALUE), "utf-8")
    rendered = run_helm(
        controlplane_bin_dir / "helm", controlplane.kubeconfig, tmp_path / "home",
        "platform-admission", "template", RELEASE, str(CHART), "--values", str(values),
        *KUBE_VERSION,
    ).stdout  # fmt: skip
    objects = [
        o for o in yaml.safe_load_all(rendered)
        if o and o["apiVersion"].startswith("monitoring.coreos.com/")
    ]  # fmt: skip
    try:
        definitions = prometheus_operator.crds("servicemonitors", "prometheusrules")
    except GoToolchainMissing as error:  # as the Kueue tests: required runs fail
        if E2E_MODE == "required":
            pytest.fail(str(error), pytrace=False)
        pytest.skip(str(error))
    names = [crd["metadata"]["name"] for crd in definitions]
    wanted = {o["metadata"]["namespace"] for o in objects}
    created = sorted(n for n in wanted if not controlplane.exists("namespace", n))
    try:
        controlplane.apply(yaml.safe_dump_all(definitions))
        controlplane.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            *(f"crd/{name}" for name in names),
        )  # fmt: skip
        for namespace in wanted:
            controlplane.create_namespace(namespace)
        applied = controlplane.kubectl(
            "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(objects)
        )
    finally:  # the session's later tests see the cluster as it was
        controlplane.delete("crd", names)
        for namespace in created:
            controlplane.delete_namespace(namespace, wait=False)

    assert sorted(o["kind"] for o in objects) == ["PrometheusRule", "ServiceMonitor"]
    assert applied.stdout.count("(server dry run)") == len(objects)


def test_install_stores_every_object_the_chart_renders(
    controlplane: ControlPlane, release: Release
) -> None:
    manifest = release.helm("get", "manifest", RELEASE).stdout
    objects = [o for o in yaml.safe_load_all(manifest) if o]

    assert {o["kind"] for o in objects} >= {
        "Deployment",
        "Secret",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "PriorityClass",
        "CronJob",
    }
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        assert controlplane.exists(obj["kind"], obj["metadata"]["name"], namespace), obj["kind"]


def test_kube_apiserver_trusts_the_charts_certificate_and_the_webhooks_mutate_and_validate(
    controlplane: ControlPlane, release: Release, opted_in: str
) -> None:
    controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in)
    denied = controlplane.apply(
        example("denied/borrowed-priority.yaml"), namespace=opted_in, check=False
    )

    pod = controlplane.get_json("pod", "embedder", opted_in)
    assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"]) == (
        "inference-priority",
        1000000,
    )
    assert "denied the request" in denied.stderr


class PodCreator:
    """Creates class pods one after another in a thread, counting what kube-apiserver
    answers, until stopped."""

    def __init__(self, controlplane: ControlPlane, namespace: str) -> None:
        self.client = httpx.Client(
            base_url=controlplane.api_url, verify=controlplane.admin_ssl_context(), timeout=30
        )
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.created: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _pod(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": "upgrade-",
                "labels": {"gpu-admission.io/workload": "inference"},
            },
            "spec": {
                "containers": [
                    {
                        "name": "server",
                        "image": "registry.example/server:1",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ]
            },
        }

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                response = self.client.post(self.path, json=self._pod())
            except httpx.HTTPError as error:
                self.failures.append(repr(error))
                continue
            if response.status_code == 201:
                pod = response.json()
                if pod["spec"].get("priority") != 1000000:
                    self.failures.append(f"not mutated: {pod['metadata']['name']}")
                self.created.append(time.monotonic())
            else:
                self.failures.append(f"{response.status_code}: {response.text[:500]}")

    def __enter__(self) -> PodCreator:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.client.close()


def test_an_upgrade_changing_a_value_fails_no_pod_creation(
    controlplane: ControlPlane, release: Release, opted_in: str
) -> None:
    bundles = release.ca_bundles()
    with PodCreator(controlplane, opted_in) as creator:
        time.sleep(3)
        started = time.monotonic()
        release.helm(
            "upgrade", RELEASE, str(CHART), "--reuse-values",
            "--set", "webhooks.timeoutSeconds.mutate=9", "--set", "replicas=2",
        )  # fmt: skip
        finished = time.monotonic()
        time.sleep(3)

    assert creator.failures == []
    assert any(t < started for t in creator.created)
    assert any(started <= t <= finished for t in creator.created)
    assert any(t > finished for t in creator.created)
    mutating = controlplane.get_json("mutatingwebhookconfiguration", "gpu-admission")
    assert mutating["webhooks"][0]["timeoutSeconds"] == 9
    assert controlplane.get_json("deployment", "gpu-admission", NAMESPACE)["spec"]["replicas"] == 2
    assert release.ca_bundles() == bundles
    history = json.loads(release.helm("history", RELEASE, "--output", "json").stdout)
    assert [entry["status"] for entry in history][-1] == "deployed"


def test_an_upgrade_keeps_the_certificates_certs_rotate_renewed(
    controlplane: ControlPlane, release: Release, opted_in: str
) -> None:
    """The rotation CronJob's command, run as the operator would run it now."""
    rotated = subprocess.run(
        [
            sys.executable, "-m", "webhook.cli", "certs", "rotate", "--force",
            "--kubeconfig", str(controlplane.kubeconfig),
            "--namespace", NAMESPACE, "--secret", "gpu-admission-tls", "--service", "gpu-admission",
        ],
        capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
    )  # fmt: skip
    assert rotated.returncode == 0, rotated.stderr
    serving, ca, bundles = (
        release.secret("gpu-admission-tls"),
        release.secret("gpu-admission-tls-ca"),
        release.ca_bundles(),
    )

    release.helm("upgrade", RELEASE, str(CHART), "--reuse-values", "--set", "replicas=3")

    assert release.secret("gpu-admission-tls") == serving
    assert release.secret("gpu-admission-tls-ca") == ca
    assert release.ca_bundles() == bundles
    controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in)


TEAM_LABEL = "team.example/class"


def helm_values(policy: Path, directory: Path) -> Path:
    """What `gpu-admission manifests helm-values --policy POLICY` prints, as a file."""
    values = directory / f"{policy.stem}-values.yaml"
    printed = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "manifests", "helm-values", "--policy", str(policy)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    values.write_text(printed.stdout, "utf-8")
    return values


def class_pod(name: str, label: str) -> str:
    return json.dumps(gpu_class_pod(name, label))


def test_a_policy_of_its_own_labels_is_installed_with_webhooks_that_select_its_pods(
    controlplane: ControlPlane, release: Release, opted_in: str, tmp_path: Path
) -> None:
    """`--set-file policy=` alone is refused; the values `manifests helm-values` prints
    install the policy with webhooks selecting its workload label, not the default's."""
    policy = tmp_path / "team.yaml"
    policy.write_text(
        (REPO / "policies" / "default.yaml")
        .read_text("utf-8")
        .replace("gpu-admission.io/workload", TEAM_LABEL),
        "utf-8",
    )
    values = helm_values(policy, tmp_path)
    refused = release.helm(
        "upgrade", RELEASE, str(CHART), "--reuse-values", "--set-file", f"policy={policy}",
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "gpu-admission manifests helm-values --policy FILE" in refused.stderr

    release.helm("upgrade", RELEASE, str(CHART), "--reuse-values", "-f", str(values))
    release.server.start(policy)
    try:
        controlplane.apply(class_pod("team-pod", TEAM_LABEL), namespace=opted_in)
        refused_old = controlplane.apply(
            class_pod("old-label-pod", "gpu-admission.io/workload"),
            namespace=opted_in,
            check=False,
        )

        mutated = controlplane.get_json("pod", "team-pod", opted_in)["spec"]
        assert mutated.get("priorityClassName") == "inference-priority"
        # The default label is no class of this policy: a GPU pod carrying only it is
        # judged as a pod of no class, and told the label to set.
        assert refused_old.returncode != 0
        assert f"has no label {TEAM_LABEL}" in refused_old.stderr
    finally:
        default = helm_values(REPO / "policies" / "default.yaml", tmp_path)
        release.helm("upgrade", RELEASE, str(CHART), "--reuse-values", "-f", str(default))
        release.server.start()


def test_uninstall_leaves_no_webhook_configuration_and_nothing_of_the_release(
    controlplane: ControlPlane, release: Release, opted_in: str
) -> None:
    manifest = release.helm("get", "manifest", RELEASE).stdout
    objects = [o for o in yaml.safe_load_all(manifest) if o]

    release.helm("uninstall", RELEASE, "--wait")

    for kind in CONFIGURATIONS:
        assert not controlplane.exists(kind, "gpu-admission")
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        assert not controlplane.exists(obj["kind"], obj["metadata"]["name"], namespace), obj
    # Nothing is left calling a service that is gone: a GPU pod is created unjudged.
    controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in)
