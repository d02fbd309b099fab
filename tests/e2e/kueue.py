"""Kueue's real manager (``cmd/kueue`` of the release ``kueue/go.mod`` pins), run
against a control plane.

Kueue runs as the control plane does: a process on 127.0.0.1, here with the admin
kubeconfig, its webhooks registered by URL. What its release installs besides the
manager is read from the release's own source in Go's module cache (``go mod download``
of the pinned version), so a bump of ``kueue/go.mod`` brings its CRDs and webhooks along:

* the CRDs of ``config/components/crd``, with the conversion webhook its kustomization
  patches into some of them, each pointed at the process;
* the webhook configurations of ``config/components/webhook``, named as
  ``config/default`` names them and pointed at the process. The webhooks the release
  keeps out of its own and kube-system's namespaces (pods, Deployments, StatefulSets)
  are limited instead to the namespaces labelled ``MANAGED_LABEL``: the selector the
  configuration gives the pod integration (``managedJobsNamespaceSelector``), so Kueue
  never touches the pods of kube-system or of the session's other tests.

``internalCertManagement`` is off: the webhooks serve a certificate of the test's own
PKI. Kueue then reads the metrics server's pair from a fixed path,
``/etc/kueue/metrics/certs``, and exits without it; so the process runs in a mount
namespace of its own, where a read-only overlay adds that directory to ``/etc`` and
nothing of the machine changes (``python -m tests.e2e.kueue LAYER KUEUE ARGS...``).
"""

from __future__ import annotations

import copy
import ctypes
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
import yaml

from webhook.install.configurations import Endpoint
from webhook.kube.client import api_client, apply_webhook_configurations
from webhook.tls.files import write_key_pair
from webhook.tls.pki import ca_bundle, create_ca, issue_serving_certificate

from .build_controlplane import KUEUE_MODULE, KUEUE_MODULE_DIR, GoToolchainMissing
from .conftest import E2E_MODE
from .controlplane import START_TIMEOUT, ControlPlane
from .module_source import module_source
from .ports import free_ports
from .probes import http_ok
from .processes import LOG_TAIL_LINES, Component
from .waiting import wait_for

T = TypeVar("T")

API_VERSION = "kueue.x-k8s.io/v1beta2"
CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
# The label that puts a Job in a LocalQueue (and so under Kueue).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
# Namespaces Kueue's pod integration may act in: only those a test labels so.
MANAGED_LABEL = "kueue.e2e.gpu-admission.io/managed"
MANAGED = {MANAGED_LABEL: "true"}
# Kueue's frameworks here: Jobs, and plain pods (which also needs the selector above).
FRAMEWORKS = ("batch/job", "pod")
# Kueue's webhook and metrics pairs are read by path: its webhook directory is chosen in
# the configuration, the metrics one is fixed (see the module's docstring).
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
# Kueue adds it to a ResourceFlavor once its controller has seen the flavor.
IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
PROBE_FLAVOR = "e2e-kueue-probe"

__all__ = [
    "API_VERSION",
    "MANAGED",
    "MANAGED_LABEL",
    "QUEUE_NAME_LABEL",
    "Kueue",
    "cluster_queue",
    "condition",
    "kueue_fixture",
    "local_queue",
    "resource_flavor",
]


# -- the release's manifests ---------------------------------------------------------


def release_source(module_dir: Path = KUEUE_MODULE_DIR) -> Path:
    """The source tree of the Kueue release ``module_dir``'s go.mod pins, in Go's module
    cache: downloaded if it is not there yet (the build downloaded it already)."""
    return module_source(KUEUE_MODULE, module_dir)


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text("utf-8"))


def _pointed_at(client_config: Mapping[str, Any], endpoint: Endpoint) -> dict[str, Any]:
    """A clientConfig of the release (a path of its webhook Service) as one reaching the
    process at ``endpoint``: kube-apiserver calls the same path, by URL."""
    return endpoint.client_config(client_config["service"]["path"])


def release_crds(source: Path, endpoint: Endpoint) -> list[dict[str, Any]]:
    """The CRDs as the release installs them: the bases its CRD kustomization lists, with
    the conversion webhook its patches add (v1beta1 is served, v1beta2 stored, and Kueue
    converts), reached at ``endpoint``."""
    directory = source / "config" / "components" / "crd"
    kustomization = _yaml(directory / "kustomization.yaml")
    crds = {
        crd["metadata"]["name"]: crd
        for crd in (_yaml(directory / path) for path in kustomization["resources"])
    }
    for entry in kustomization.get("patches", []):
        patch = _yaml(directory / entry["path"])
        conversion = copy.deepcopy(patch["spec"]["conversion"])
        webhook = conversion["webhook"]
        webhook["clientConfig"] = _pointed_at(webhook["clientConfig"], endpoint)
        crds[patch["metadata"]["name"]]["spec"]["conversion"] = conversion
    return list(crds.values())


def _namespace_limited(webhook_dir: Path) -> set[str]:
    """The webhooks the release gives a namespaceSelector (in its kustomization's
    patches): those of the pod-based integrations, which must stay out of kube-system."""
    kustomization = _yaml(webhook_dir / "kustomization.yaml")
    return {
        hook["name"]
        for entry in kustomization.get("patches", [])
        for hook in yaml.safe_load(entry["patch"]).get("webhooks", [])
        if "namespaceSelector" in hook
    }


def release_webhook_configurations(
    source: Path, endpoint: Endpoint, managed: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Kueue's Mutating- and ValidatingWebhookConfiguration, named with the release's
    prefix, each webhook reached at ``endpoint``; those the release limits by namespace
    are limited to the namespaces labelled ``managed``."""
    config = source / "config"
    prefix = _yaml(config / "default" / "kustomization.yaml").get("namePrefix", "")
    webhook_dir = config / "components" / "webhook"
    limited = _namespace_limited(webhook_dir)
    configurations = list(yaml.safe_load_all((webhook_dir / "manifests.yaml").read_text("utf-8")))
    for configuration in configurations:
        configuration["metadata"]["name"] = prefix + configuration["metadata"]["name"]
        for hook in configuration["webhooks"]:
            hook["clientConfig"] = _pointed_at(hook["clientConfig"], endpoint)
            if hook["name"] in limited:
                hook["namespaceSelector"] = {"matchLabels": dict(managed)}
    return configurations


def release_namespace(source: Path) -> str:
    """The namespace the release installs Kueue in (``kueue-system``)."""
    namespace: str = _yaml(source / "config" / "default" / "kustomization.yaml")["namespace"]
    return namespace


def manager_configuration(
    *,
    namespace: str,
    cert_dir: Path,
    webhook_port: int,
    metrics_port: int,
    health_port: int,
    managed: Mapping[str, str],
) -> dict[str, Any]:
    """Kueue's Configuration for a manager out of cluster, alone and on loopback ports."""
    return {
        "apiVersion": CONFIG_API_VERSION,
        "kind": "Configuration",
        # Unset, Kueue takes the namespace of the pod it runs in, from the service
        # account's files: on a CI machine that is itself a pod, the CI's namespace.
        "namespace": namespace,
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        # One manager: nothing to elect, and no Lease left behind in its namespace.
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        # The pod integration requires it, and Kueue refuses one that matches kube-system
        # or its own namespace.
        "managedJobsNamespaceSelector": {"matchLabels": dict(managed)},
        "integrations": {"frameworks": list(FRAMEWORKS)},
        # The visibility API server would read its pair from another fixed path
        # (/visibility) and needs an APIService; the tests do not use it.
        "featureGates": {"VisibilityOnDemand": False},
    }


# -- what tests create -----------------------------------------------------------------


def resource_flavor(
    name: str,
    node_labels: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A ResourceFlavor: the nodes of ``node_labels``; Kueue puts the labels in an
    admitted workload's nodeSelector and adds ``tolerations`` (e.g. of a pool's taint)."""
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    if tolerations:
        spec["tolerations"] = [dict(toleration) for toleration in tolerations]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def cluster_queue(name: str, flavor: str, quotas: Mapping[str, str]) -> dict[str, Any]:
    """A ClusterQueue of every namespace with the nominal ``quotas`` (resource: quantity)
    of one flavor. A workload asking for a resource not in ``quotas`` is never admitted."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": list(quotas),
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": resource, "nominalQuota": quantity}
                                for resource, quantity in quotas.items()
                            ],
                        }
                    ],
                }
            ],
        },
    }


def local_queue(name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
    """A LocalQueue: what a Job names in its ``QUEUE_NAME_LABEL``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The status condition of type ``kind`` of a Kubernetes object, if it has one."""
    for found in obj.get("status", {}).get("conditions", []):
        if found.get("type") == kind:
            return dict(found)
    return None


# -- the manager -------------------------------------------------------------------------


class Kueue:
    """Kueue's manager running against one control plane, with its release's CRDs and
    webhook configurations installed; ``stop`` removes them again."""

    def __init__(self, controlplane: ControlPlane, binary: Path, work_dir: Path) -> None:
        self.controlplane = controlplane
        self.binary = binary
        self.work_dir = work_dir
        self.webhook_port, self.metrics_port, self.health_port = free_ports(3)
        ca = create_ca("kueue e2e CA")
        serving = issue_serving_certificate(
            ca, "kueue", dns_names=["localhost"], ip_addresses=["127.0.0.1"]
        )
        # The same pair serves the webhooks (certDir) and the metrics (the fixed path,
        # through the overlay's layer); Kueue wants both named tls.crt and tls.key.
        self.cert_dir = work_dir / "webhook-certs"
        write_key_pair(self.cert_dir, "tls", serving)
        self.etc_layer = work_dir / "etc-layer"
        write_key_pair(self.etc_layer / METRICS_CERT_DIR.relative_to("/etc"), "tls", serving)
        self.ca_path, _ = write_key_pair(work_dir / "pki", "ca", ca)
        self.endpoint = Endpoint(ca_bundle=ca_bundle(ca.certificate), url=self.url)
        self.config_path = work_dir / "kueue-config.yaml"
        self.log_path = work_dir / "logs" / "kueue.log"
        self._component: Component | None = None
        self._crds: list[str] = []
        self._configurations: list[tuple[str, str]] = []

    @property
    def url(self) -> str:
        """Where kube-apiserver reaches Kueue's webhooks."""
        return f"https://127.0.0.1:{self.webhook_port}"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Kueue:
        """Install the CRDs, start the manager, register its webhooks, and return once
        a flavor created through kube-apiserver was admitted by Kueue's webhooks and seen
        by its controllers. On failure everything is undone and the log's tail raised."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        source = release_source()
        self._install_crds(release_crds(source, self.endpoint))
        self.config_path.write_text(
            yaml.safe_dump(
                manager_configuration(
                    namespace=release_namespace(source),
                    cert_dir=self.cert_dir,
                    webhook_port=self.webhook_port,
                    metrics_port=self.metrics_port,
                    health_port=self.health_port,
                    managed=MANAGED,
                ),
                sort_keys=False,
            )
        )
        component = Component(
            "kueue",
            [
                sys.executable,
                "-m",
                __name__,
                str(self.etc_layer),
                str(self.binary),
                f"--config={self.config_path}",
                f"--kubeconfig={self.controlplane.kubeconfig}",
                # As the release runs it; the console encoder reads better in a tail.
                "--zap-log-level=2",
                "--zap-encoder=console",
            ],
            self.log_path,
        )
        component.start()
        self._component = component
        # Ready means the webhook server listens (Kueue's own readyz check).
        component.wait_healthy(
            http_ok(f"http://127.0.0.1:{self.health_port}/readyz"), START_TIMEOUT
        )
        self._register_webhooks(release_webhook_configurations(source, self.endpoint, MANAGED))
        self._probe()

    def _install_crds(self, crds: list[dict[str, Any]]) -> None:
        # Named first: what an apply stopped half-way created is removed too.
        self._crds = [crd["metadata"]["name"] for crd in crds]
        # Server-side: the Workload CRD is larger than the annotation a client-side apply
        # keeps of what it applied.
        self.controlplane.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input="\n---\n".join(json.dumps(crd) for crd in crds),
        )
        self.controlplane.kubectl(
            "wait",
            "--for=condition=Established",
            f"--timeout={START_TIMEOUT:g}s",
            *(f"customresourcedefinition/{name}" for name in self._crds),
        )

    def _register_webhooks(self, configurations: list[dict[str, Any]]) -> None:
        mutating, validating = sorted(
            configurations, key=lambda c: c["kind"] != "MutatingWebhookConfiguration"
        )
        self._configurations = [(c["kind"].lower(), c["metadata"]["name"]) for c in configurations]
        api = api_client(self.controlplane.kubeconfig)
        try:
            apply_webhook_configurations(api, mutating, validating)
        finally:
            api.close()

    def _probe(self) -> None:
        """Create a flavor (its webhooks must answer kube-apiserver, failurePolicy Fail),
        wait until Kueue's controller marks it in use, then delete it (the controller lets
        an unused flavor go)."""
        self.controlplane.apply(json.dumps(resource_flavor(PROBE_FLAVOR)))

        def finalized() -> bool:
            flavor = self.controlplane.get_json("resourceflavor", PROBE_FLAVOR)
            return IN_USE_FINALIZER in flavor["metadata"].get("finalizers", [])

        self.wait_for(finalized, START_TIMEOUT, "Kueue's controllers to see the probe flavor")
        self.controlplane.delete("resourceflavor", [PROBE_FLAVOR])
        self.wait_for(
            lambda: not self.controlplane.exists("resourceflavor", PROBE_FLAVOR),
            START_TIMEOUT,
            "Kueue to let the probe flavor go",
        )

    def stop(self) -> None:
        """Unregister the webhooks (kube-apiserver must stop calling a stopped Kueue:
        failurePolicy Fail would refuse every Job), stop the manager, remove the CRDs;
        safe to call twice."""
        for kind, name in self._configurations:
            self.controlplane.delete(kind, [name])
        self._configurations = []
        if self._component is not None:
            self._component.stop()
            self._component = None
        self._remove_crds()

    def _remove_crds(self) -> None:
        """Delete the CRDs and so every Kueue object. What still carries a finalizer has
        it taken off first: only Kueue would remove it, and it no longer runs."""
        crds = [c for c in self._crds if self.controlplane.exists("customresourcedefinition", c)]
        self._crds = []
        if not crds:
            return
        for crd in crds:
            for obj in self.controlplane.list_json(crd):
                if obj["metadata"].get("finalizers"):
                    metadata = obj["metadata"]
                    namespace = (
                        ["--namespace", metadata["namespace"]] if "namespace" in metadata else []
                    )
                    self.controlplane.kubectl(
                        "patch",
                        crd,
                        metadata["name"],
                        *namespace,
                        "--type=merge",
                        "--patch",
                        json.dumps({"metadata": {"finalizers": None}}),
                    )
        self.controlplane.delete("customresourcedefinition", crds)
        wait_for(
            lambda: not any(self.controlplane.exists("customresourcedefinition", c) for c in crds),
            START_TIMEOUT,
            "Kueue's CRDs to be deleted",
        )

    # -- diagnostics ---------------------------------------------------------------------

    def check_running(self) -> None:
        """Raise ComponentFailed (with the log's tail) if the manager has exited."""
        if self._component is not None:
            self._component.check_running()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if self._component is None:
            return "(Kueue is not running)"
        return self._component.log_tail(lines)

    def wait_for(
        self, predicate: Callable[[], T | None], timeout: float = 60.0, what: str = "condition"
    ) -> T:
        """``waiting.wait_for`` whose failure ends with the tail of Kueue's log, where
        the reason an object was not admitted is."""

        def checked() -> T | None:
            self.check_running()
            return predicate()

        return wait_for(
            checked,
            timeout,
            what,
            interval=0.5,
            describe_last=lambda: f"last lines of {self.log_path}:\n{self.log_tail()}",
        )

    # -- reading what Kueue did ----------------------------------------------------------

    def create_namespace(self, name: str) -> str:
        """A namespace Kueue manages (pods included), ready for pods."""
        return self.controlplane.create_namespace(name, MANAGED)

    def workload_of(self, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
        """The Workload Kueue made for the object ``kind``/``name`` (its owner), if any."""
        for workload in self.controlplane.list_json("workloads.kueue.x-k8s.io", namespace):
            owners = workload["metadata"].get("ownerReferences", [])
            if any(o.get("kind") == kind and o.get("name") == name for o in owners):
                return workload
        return None


# -- the fixture ---------------------------------------------------------------------------


@pytest.fixture(scope="module", name="kueue")
def kueue_fixture(
    controlplane: ControlPlane,
    controlplane_bin_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Kueue]:
    """Kueue's manager on the session's control plane, for one module's tests: create
    namespaces with ``kueue.create_namespace`` (labelled ``MANAGED``) and the queues with
    ``controlplane.apply``; delete what is cluster-scoped before the module ends, while
    Kueue still runs to lift its finalizers. A module imports it as ``kueue_fixture``
    and lists it in its ``__all__`` (as conftest.py its fixtures); pytest knows it as
    ``kueue``."""
    manager = Kueue(controlplane, controlplane_bin_dir / "kueue", tmp_path_factory.mktemp("kueue"))
    try:
        manager.start()
    except GoToolchainMissing as error:
        if E2E_MODE == "required":
            pytest.fail(str(error), pytrace=False)
        pytest.skip(str(error))
    try:
        yield manager
    finally:
        manager.stop()


# -- the mount namespace ---------------------------------------------------------------

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY = 0x1
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_PR_SET_PDEATHSIG = 1


def _checked(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def exec_with_etc_layer(layer: Path, command: Sequence[str]) -> NoReturn:
    """Run ``command`` (in place of this process) seeing ``/etc`` with ``layer`` on top.

    The overlay is mounted in a mount namespace of the process's own, made private first
    so that nothing propagates to the machine's. As root that is all; otherwise a user
    namespace in which the user is root comes with it (overlayfs may be mounted there).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    _checked(libc.unshare(_CLONE_NEWNS | (0 if uid == 0 else _CLONE_NEWUSER)), "unshare")
    if uid != 0:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
        Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
        # New credentials clear the parent-death signal Component asked for: ask again.
        _checked(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL), "prctl")
    _checked(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")
    options = f"lowerdir={layer}:/etc".encode()
    _checked(libc.mount(b"overlay", b"/etc", b"overlay", _MS_RDONLY, options), "overlay on /etc")
    os.execv(command[0], list(command))


if __name__ == "__main__":
    exec_with_etc_layer(Path(sys.argv[1]), sys.argv[2:])
