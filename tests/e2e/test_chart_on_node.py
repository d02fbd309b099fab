"""The chart as a platform team runs it: the built image, three replicas on a real node.

A control plane of its own with one node of real parts (:mod:`.realnode`): the
service's image is built from the project's Dockerfile (:mod:`.image`) and imported
into the node's containerd; `helm install` runs the chart with a policy of a team's
own (another workload label, pool label and taint than the default), into a
namespace of the platform team's choosing, under the team's own names (nameOverride,
fullnameOverride), the webhooks' clientConfig as shipped (the Service, no URL). kube-apiserver then calls the replicas
through the Service's ClusterIP, which only kube-proxy's rules on the node translate.

The GPU nodes are registered without kubelets, labelled as GPU Feature Discovery and
an operator label them; the only node that runs anything is the CPU node the
replicas run on. Tests run in file order: install, admission, a replica deleted, a
rolling upgrade, a drain, uninstall.
"""

from __future__ import annotations

import calendar
import dataclasses
import json
import os
import signal
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

from .admission_fixtures import REPO
from .admission_fixtures import class_pod as gpu_class_pod
from .conftest import E2E_MODE
from .helm_cli import run_helm
from .image import BuiltImage, ImageToolsMissing, ensure_image
from .nodes import FLEET, POOL_LABEL, NodeSpec, Taint, register_node
from .realnode.cluster import NODE_NAME, RealNodeCluster, node_prerequisites

CHART = REPO / "deploy" / "helm" / "gpu-admission"
# Not the chart's usual namespace: the webhooks, the audit and the policy read from the
# cluster follow the release's namespace.
NAMESPACE = "platform-admission"
RELEASE = "ml-platform"
# The team's own names for the release's objects (the chart's nameOverride and
# fullnameOverride): the replicas, `certs rotate` and the audit are told them.
APP_NAME = "ml-admission"
FULLNAME = "ml-admission-webhook"
TEAM_LABEL = "team.example/class"
TEAM_POOL_LABEL = "example.com/pool"
TENANT = "team-ml"
REPLICAS = 3
CONFIGURATIONS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
# How long after a replica's process dies kube-apiserver may still be sent to it:
# kubelet sees the exit (PLEG, about a second), the endpoint goes unready, kube-proxy
# resyncs (at least a second apart). Measured here: about 1 s.
KUBELET_NOTICES_SECONDS = 5.0


def team_policy(directory: Path) -> Path:
    """The default policy with a team's own workload label and pool label (and so
    pool taint key: taints default to <pool label>=<pool>:NoSchedule)."""
    text = (REPO / "policies" / "default.yaml").read_text("utf-8")
    text = text.replace("gpu-admission.io/workload", TEAM_LABEL)
    text = text.replace("pool: gpu-pool ", f"pool: {TEAM_POOL_LABEL} ")
    assert TEAM_POOL_LABEL in text, "the default policy's pool label line changed"
    path = directory / "team-policy.yaml"
    path.write_text(text, "utf-8")
    return path


def team_gpu_nodes() -> list[NodeSpec]:
    """The fleet's GPU nodes as the team labels and taints its pools."""
    nodes = []
    for node in FLEET:
        if node.pool is None:
            continue  # CPU nodes without kubelets would take the replicas and never run them
        labels = {(TEAM_POOL_LABEL if k == POOL_LABEL else k): v for k, v in node.labels.items()}
        taints = tuple(Taint(TEAM_POOL_LABEL, t.value, t.effect) for t in node.taints)
        nodes.append(dataclasses.replace(node, labels=labels, taints=taints))
    return nodes


def class_pod(name: str, label: str = TEAM_LABEL) -> dict[str, Any]:
    return gpu_class_pod(name, label)


@dataclass
class Release:
    cluster: RealNodeCluster
    helm_binary: Path
    home: Path
    image: BuiltImage
    values: Path

    def helm(
        self, *args: str, check: bool = True, timeout: float = 400
    ) -> subprocess.CompletedProcess[str]:
        return run_helm(
            self.helm_binary,
            self.cluster.kubeconfig,
            self.home,
            NAMESPACE,
            *args,
            check=check,
            timeout=timeout,
        )

    def replicas(self) -> list[dict[str, Any]]:
        return self.cluster.list_json(
            "pod", NAMESPACE, selector="app.kubernetes.io/component=webhook"
        )

    def ready_replicas(self) -> list[dict[str, Any]]:
        return [pod for pod in self.replicas() if _ready(pod)]

    def wait_ready(self, count: int = REPLICAS, timeout: float = 180) -> list[dict[str, Any]]:
        def settled() -> list[dict[str, Any]] | None:
            pods = self.replicas()
            ready = [pod for pod in pods if _ready(pod)]
            alive = [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]
            if len(ready) != count or len(alive) != count:
                return None
            # Ready is not yet served: kube-apiserver reaches a replica only once
            # kube-proxy has a rule for it (a second or so later).
            addresses = {pod["status"]["podIP"] for pod in ready}
            return ready if self.service_endpoints() == addresses else None

        return self.cluster.wait_for(settled, timeout=timeout, what=f"{count} served replicas")

    def service_endpoints(self) -> set[str]:
        """The pod addresses kube-proxy's rules send the webhook Service's port to."""
        rules = self.cluster.in_node("iptables", "-t", "nat", "-S").stdout
        marker = f'"{NAMESPACE}/{FULLNAME}:https -> '
        return {
            line.split(marker, 1)[1].split(":", 1)[0]
            for line in rules.splitlines()
            if line.startswith("-A KUBE-SVC-") and marker in line
        }


def _ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@dataclass
class SteadyCreation:
    """Class pods created one after another through kube-apiserver, every answer kept."""

    cluster: RealNodeCluster
    namespace: str
    prefix: str
    created: int = 0
    failures: list[str] = field(default_factory=list)
    # When each failure came, on time.monotonic()'s clock.
    failed_at: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> SteadyCreation:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=60)

    def _failed(self, message: str) -> None:
        self.failures.append(message)
        self.failed_at.append(time.monotonic())

    def _run(self) -> None:
        url = f"{self.cluster.api_url}/api/v1/namespaces/{self.namespace}/pods"
        with httpx.Client(verify=self.cluster.admin_ssl_context(), timeout=30) as client:
            number = 0
            while not self._stop.is_set():
                number += 1
                name = f"{self.prefix}-{number}"
                try:
                    reply = client.post(url, json=class_pod(name))
                except httpx.HTTPError as error:
                    self._failed(f"{name}: {error!r}")
                    continue
                if reply.status_code == 201:
                    self.created += 1
                else:
                    self._failed(f"{name}: {reply.status_code} {reply.text[:800]}")
                self._stop.wait(0.1)


@pytest.fixture(scope="module")
def node_cluster(
    controlplane_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNodeCluster]:
    missing = node_prerequisites()
    if missing:
        message = f"a real node needs {', '.join(missing)}"
        if E2E_MODE == "required":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    cluster = RealNodeCluster(controlplane_bin_dir, tmp_path_factory.mktemp("real-node"))
    cluster.start()
    try:
        for node in team_gpu_nodes():
            register_node(cluster, node)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def service_image(node_cluster: RealNodeCluster) -> BuiltImage:
    try:
        image = ensure_image()
    except ImageToolsMissing as error:
        if E2E_MODE == "required":
            pytest.fail(str(error), pytrace=False)
        pytest.skip(str(error))
    node_cluster.load_image(image.archive)
    return image


@pytest.fixture(scope="module")
def release(
    node_cluster: RealNodeCluster,
    service_image: BuiltImage,
    controlplane_bin_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Release:
    home = tmp_path_factory.mktemp("helm-home")
    policy = team_policy(home)
    values = home / "team-values.yaml"
    printed = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "manifests", "helm-values", "--policy", str(policy)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    values.write_text(printed.stdout, "utf-8")
    installed = Release(node_cluster, controlplane_bin_dir / "helm", home, service_image, values)
    node_cluster.create_namespace(TENANT, {"gpu-admission.io/enabled": "true"})
    installed.helm(
        "install", RELEASE, str(CHART), "--create-namespace", "-f", str(values),
        "--set", f"image.repository={service_image.repository}",
        "--set", f"image.tag={service_image.tag}",
        "--set", "image.pullPolicy=Never",
        "--set", f"nameOverride={APP_NAME}",
        "--set", f"fullnameOverride={FULLNAME}",
        "--wait", "--timeout", "5m",
    )  # fmt: skip
    installed.wait_ready()
    return installed


def test_three_replicas_of_the_built_image_become_ready_through_their_own_probes(
    release: Release,
) -> None:
    pods = release.wait_ready()

    assert len(pods) == REPLICAS
    for pod in pods:
        assert pod["spec"]["nodeName"] == NODE_NAME
        (container,) = pod["spec"]["containers"]
        assert container["image"] == release.image.reference
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_each_replica_runs_as_65532_on_a_read_only_root_with_its_secret_and_policy_mounted(
    release: Release,
) -> None:
    pod = release.ready_replicas()[0]["metadata"]["name"]
    script = (
        "import os, pathlib, json\n"
        "try:\n"
        "    pathlib.Path('/written').write_text('x'); writable = True\n"
        "except OSError:\n"
        "    writable = False\n"
        "mounts = [line.split()[1] for line in open('/proc/self/mounts')]\n"
        "print(json.dumps({'uid': os.getuid(), 'gid': os.getgid(), 'root_writable': writable,"
        " 'mounts': mounts}))\n"
    )
    result = release.cluster.kubectl("exec", "-n", NAMESPACE, pod, "--", "python3", "-c", script)
    seen = json.loads(result.stdout)

    assert (seen["uid"], seen["gid"]) == (65532, 65532)
    assert seen["root_writable"] is False
    assert any(m.startswith("/etc/gpu-admission") for m in seen["mounts"]), seen["mounts"]


def test_kube_apiserver_calls_the_replicas_through_the_service_as_shipped(
    release: Release,
) -> None:
    for kind in CONFIGURATIONS:
        for hook in release.cluster.get_json(kind, FULLNAME)["webhooks"]:
            assert "url" not in hook["clientConfig"]
            assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE
    service = release.cluster.get_json("service", FULLNAME, NAMESPACE)
    rules = release.cluster.in_node("iptables", "-t", "nat", "-S", "KUBE-SERVICES").stdout

    assert service["spec"]["clusterIP"] in rules


def test_class_pods_are_mutated_and_other_gpu_pods_denied_as_the_team_policy_says(
    release: Release,
) -> None:
    cluster = release.cluster
    cluster.apply(json.dumps(class_pod("served")), namespace=TENANT)
    refused = cluster.apply(
        json.dumps(class_pod("default-label", label="gpu-admission.io/workload")),
        namespace=TENANT,
        check=False,
    )

    spec = cluster.get_json("pod", "served", TENANT)["spec"]
    assert spec["priorityClassName"] == "inference-priority"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    keys = {e["key"] for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]}
    assert TEAM_POOL_LABEL in keys
    assert {t["key"] for t in spec["tolerations"]} >= {TEAM_POOL_LABEL}
    assert refused.returncode != 0
    assert f"has no label {TEAM_LABEL}" in refused.stderr


def test_helm_test_proves_the_webhooks_answer_through_the_service(release: Release) -> None:
    result = release.helm("test", RELEASE, "--logs", timeout=300, check=False)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "/mutate: allowed" in result.stdout, result.stdout
    assert "/validate-unclassed: denied:" in result.stdout, result.stdout
    assert f"has no label {TEAM_LABEL}" in result.stdout  # the team's policy judged it


def test_a_replica_deleted_under_steady_creation_fails_no_creation(release: Release) -> None:
    victim = release.ready_replicas()[0]["metadata"]["name"]

    with SteadyCreation(release.cluster, TENANT, "during-delete") as creation:
        time.sleep(3)
        release.cluster.kubectl("delete", "pod", "-n", NAMESPACE, victim, "--wait=false")
        release.cluster.wait_for(
            lambda: not release.cluster.exists("pod", victim, NAMESPACE),
            timeout=90,
            what=f"{victim} to be gone",
        )
        release.wait_ready()
        time.sleep(3)

    assert creation.failures == []
    assert creation.created > 20


def test_a_replica_killed_under_steady_creation_fails_only_what_reached_it_before_kubelet_saw(
    release: Release,
) -> None:
    """SIGKILL of a replica's process, as the OOM killer does: no preStop, no drain.
    kube-apiserver retries neither a refused connection nor one the kernel reset as it
    closed the dead process's sockets, so with failurePolicy Fail a creation sent to the
    dead replica before kubelet marks it unready fails; nothing after that second does,
    and the replica comes back on its own."""
    victim = release.ready_replicas()[0]
    container_id = victim["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    tasks = release.cluster.ctr("tasks", "list").stdout.splitlines()
    (pid,) = [line.split()[1] for line in tasks if line.startswith(container_id)]

    with SteadyCreation(release.cluster, TENANT, "during-kill") as creation:
        time.sleep(3)
        killed_at = time.monotonic()
        os.kill(int(pid), signal.SIGKILL)
        release.cluster.wait_for(
            lambda: _restarted(release, victim["metadata"]["name"]),
            timeout=90,
            what="the killed replica to be restarted",
        )
        release.wait_ready()
        time.sleep(3)

    assert creation.created > 20
    for message, when in zip(creation.failures, creation.failed_at, strict=True):
        # kube-apiserver could not call the webhook (how the call failed, refused, reset or
        # cut short, is the kernel's and Go's to say): not a denial, not our answer
        assert ": 500 " in message and "failed calling webhook" in message, message
        assert 0 <= when - killed_at < KUBELET_NOTICES_SECONDS, (message, when - killed_at)


BLIND = "gpu-admission-blind"
BLIND_LABEL = "test.gpu-admission.io/replica"
READYZ_IN_POD = (
    "import json, ssl, urllib.request, urllib.error\n"
    "context = ssl._create_unverified_context()\n"
    "try:\n"
    "    reply = urllib.request.urlopen('https://127.0.0.1:8443/readyz', context=context)\n"
    "except urllib.error.HTTPError as error:\n"
    "    reply = error\n"
    "print(reply.read().decode())\n"
)


def blind_replica(release: Release) -> str:
    """One more replica of the release's own pod template, behind the same Service, run
    as a ServiceAccount with no rights: it serves TLS and answers reviews, but cannot
    list the Nodes and PriorityClasses its judgements rest on."""
    template = release.cluster.get_json("deployment", FULLNAME, NAMESPACE)["spec"]["template"]
    template["metadata"]["labels"][BLIND_LABEL] = "blind"
    template["spec"]["serviceAccountName"] = BLIND
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": BLIND, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {BLIND_LABEL: "blind"}},
            "template": template,
        },
    }
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": BLIND}}
    release.cluster.apply(json.dumps(account), namespace=NAMESPACE)
    release.cluster.apply(json.dumps(deployment), namespace=NAMESPACE)
    return f"{BLIND_LABEL}=blind"


def _running_for(pod: dict[str, Any], seconds: float) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses", [])
    running = statuses[0].get("state", {}).get("running") if statuses else None
    if not running or statuses[0].get("restartCount", 0):
        return False
    started = time.strptime(running["startedAt"], "%Y-%m-%dT%H:%M:%SZ")
    return time.time() - calendar.timegm(started) >= seconds


def test_a_replica_that_cannot_read_the_cluster_is_unready_sent_nothing_and_fails_nothing(
    release: Release,
) -> None:
    """A replica that cannot judge (its inventory never synced) takes no review: its
    /readyz fails, the endpoints leave it out, its peers answer every creation. Given the
    rights, it syncs, becomes ready and is served like the others."""
    cluster = release.cluster
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": BLIND},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": FULLNAME},
        "subjects": [{"kind": "ServiceAccount", "name": BLIND, "namespace": NAMESPACE}],
    }  # fmt: skip
    try:
        with SteadyCreation(cluster, TENANT, "beside-blind") as creation:
            selector = blind_replica(release)
            # Running for three readiness periods (5 s each), never restarted.
            (pod,) = cluster.wait_for(
                lambda: [p for p in cluster.list_json("pod", NAMESPACE, selector)
                         if _running_for(p, 16)] or None,
                timeout=180, what="the blind replica to run",
            )  # fmt: skip
            name = pod["metadata"]["name"]
            readyz = cluster.kubectl(
                "exec", "-n", NAMESPACE, name, "--", "python3", "-c", READYZ_IN_POD
            ).stdout
            unready_pod = cluster.get_json("pod", name, NAMESPACE)
            served_while_unready = release.service_endpoints()
            cluster.apply(json.dumps(binding))
            cluster.wait_for(
                lambda: _ready(cluster.get_json("pod", name, NAMESPACE))
                and pod["status"]["podIP"] in release.service_endpoints(),
                timeout=180, what="the blind replica, given rights, to be served",
            )  # fmt: skip
            time.sleep(3)
    finally:
        cluster.kubectl("delete", "deployment", BLIND, "-n", NAMESPACE, "--ignore-not-found")
        cluster.kubectl("delete", "clusterrolebinding", BLIND, "--ignore-not-found")
        cluster.wait_for(
            lambda: not cluster.list_json("pod", NAMESPACE, f"{BLIND_LABEL}=blind"),
            timeout=90, what="the blind replica to be gone",
        )  # fmt: skip
        cluster.kubectl("delete", "serviceaccount", BLIND, "-n", NAMESPACE, "--ignore-not-found")

    document = json.loads(readyz)
    assert document["checks"]["inventory"]["ok"] is False, document
    assert "not synced yet" in document["checks"]["inventory"]["detail"]
    assert "forbidden" in document["checks"]["inventory"]["detail"].lower()
    assert not _ready(unready_pod)
    assert unready_pod["status"]["podIP"] not in served_while_unready
    assert len(served_while_unready) == REPLICAS
    assert creation.failures == []
    assert creation.created > 20


def _restarted(release: Release, name: str) -> bool:
    pod = release.cluster.get_json("pod", name, NAMESPACE)
    return pod["status"]["containerStatuses"][0].get("restartCount", 0) > 0


def test_a_rolling_upgrade_under_steady_creation_fails_no_creation(release: Release) -> None:
    upgraded_tag = f"{release.image.tag}-upgraded"
    release.cluster.ctr(
        "images", "tag", release.image.reference, f"{release.image.repository}:{upgraded_tag}"
    )

    with SteadyCreation(release.cluster, TENANT, "during-upgrade") as creation:
        time.sleep(3)
        release.helm(
            "upgrade", RELEASE, str(CHART), "--reuse-values",
            "--set", f"image.tag={upgraded_tag}", "--wait", "--timeout", "5m",
        )  # fmt: skip
        release.wait_ready()
        time.sleep(3)

    images = {pod["spec"]["containers"][0]["image"] for pod in release.ready_replicas()}
    assert images == {f"{release.image.repository}:{upgraded_tag}"}
    assert creation.failures == []
    assert creation.created > 20


def test_a_drain_of_the_node_stops_at_the_disruption_budget(release: Release) -> None:
    cluster = release.cluster
    budget = cluster.get_json("poddisruptionbudget", FULLNAME, NAMESPACE)
    try:
        drained = cluster.kubectl(
            "drain", NODE_NAME, "--ignore-daemonsets", "--delete-emptydir-data",
            "--pod-selector=app.kubernetes.io/component=webhook", "--timeout=40s",
            check=False,
        )  # fmt: skip
        serving = release.ready_replicas()
        # Admission still answers with the one replica the budget keeps.
        cluster.apply(json.dumps(class_pod("during-drain")), namespace=TENANT)
    finally:
        cluster.kubectl("uncordon", NODE_NAME)

    assert drained.returncode != 0
    assert "disruption budget" in drained.stderr
    assert len(serving) == budget["spec"]["minAvailable"]
    release.wait_ready()


def test_the_network_policy_admits_the_webhook_port_from_the_sources_set_only(
    release: Release,
) -> None:
    """With networkPolicy.webhookSources, the policy admits the webhook port from those
    addresses only. The bridge CNI does not enforce NetworkPolicy: a tenant's pod still
    connects here, where Calico or Cilium would drop its SYN. kube-apiserver's calls
    reach a replica from the address kube-proxy masquerades them to (the node's, as
    they come from outside the pod range): that is the address to list."""
    cluster = release.cluster
    seen_from = _apiserver_source_seen_by_replicas(release)
    release.helm(
        "upgrade", RELEASE, str(CHART), "--reuse-values",
        "--set", f"networkPolicy.webhookSources={{{seen_from}/32}}", "--wait",
    )  # fmt: skip
    policy = cluster.get_json("networkpolicy", FULLNAME, NAMESPACE)
    cluster.apply(json.dumps(class_pod("after-network-policy")), namespace=TENANT)
    replica = release.ready_replicas()[0]["status"]["podIP"]
    reached = _tenant_connects(release, replica, 8443)

    (webhook_rule, _metrics_rule) = policy["spec"]["ingress"]
    assert webhook_rule["from"] == [
        {"ipBlock": {"cidr": f"{seen_from}/32"}},
        # `helm test`'s pod, of the release's namespace alone.
        {"podSelector": {"matchLabels": {
            "app.kubernetes.io/name": APP_NAME, "app.kubernetes.io/component": "test",
        }}},
    ]  # fmt: skip
    assert reached, "the bridge CNI enforced a NetworkPolicy: update the docstring and docs"


def _apiserver_source_seen_by_replicas(release: Release) -> str:
    """The source address of kube-apiserver's connections to the webhook Service, as
    the replicas see it (conntrack's reply tuple, after kube-proxy's NAT)."""
    service_ip = release.cluster.get_json("service", FULLNAME, NAMESPACE)["spec"]["clusterIP"]
    release.cluster.apply(json.dumps(class_pod("seen-from")), namespace=TENANT)
    table = release.cluster.in_node("conntrack", "-L", "-p", "tcp", "--orig-dst", service_ip).stdout
    replies = {
        line.split(" dst=")[2].split()[0] for line in table.splitlines() if line.count(" dst=") >= 2
    }
    assert len(replies) == 1, table
    return replies.pop()


def _tenant_connects(release: Release, address: str, port: int) -> bool:
    """Whether a pod of the tenant's namespace opens a TCP connection to address:port."""
    name = "reach-webhook-port"
    script = (
        "import socket, sys\n"
        f"socket.create_connection(({address!r}, {port}), timeout=5).close()\n"
        "print('connected')\n"
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "client",
                    "image": release.image.reference,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", script],
                }
            ],
        },
    }
    release.cluster.create_namespace("tenant-plain")
    release.cluster.apply(json.dumps(pod), namespace="tenant-plain")

    def finished() -> str | None:
        phase = release.cluster.get_json("pod", name, "tenant-plain")["status"].get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = release.cluster.wait_for(finished, timeout=90, what="the tenant's client pod")
    return phase == "Succeeded"


def test_the_audit_reads_the_policy_from_the_release_namespace(release: Release) -> None:
    release.cluster.apply(json.dumps(class_pod("audited")), namespace=TENANT)
    result = subprocess.run(
        [
            sys.executable, "-m", "webhook.cli", "audit", "--policy-from-cluster",
            "--service-namespace", NAMESPACE, "--install-name", FULLNAME,
            "--kubeconfig", str(release.cluster.kubeconfig),
            "--output", "json", "--quiet",
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    audited = [r for r in report["results"] if r["name"] == "audited" and r["kind"] == "Pod"]

    assert report["policy"].startswith(f"ConfigMap {NAMESPACE}/"), report["policy"]
    assert TENANT in report["scope"]["namespaces"]
    assert NAMESPACE not in report["scope"]["namespaces"]
    # The team's pod, judged by the team's policy, passes as it did at admission.
    assert [r["verdict"] for r in audited] == ["passed"], audited


def test_an_in_place_edit_needing_other_webhooks_is_refused_by_the_replicas_with_the_fix(
    release: Release,
) -> None:
    """`kubectl apply` of the release's policy ConfigMap with the workload label renamed
    and the chart's annotation left as it was: the replicas (through the Service) refuse
    it, naming what differs and the command that fixes it; nothing is stored."""
    cluster = release.cluster
    (configmap,) = [
        c
        for c in cluster.list_json("configmap", NAMESPACE)
        if c["metadata"]["name"].startswith(f"{FULLNAME}-policy")
    ]
    edited = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": configmap["metadata"]["name"],
            "namespace": NAMESPACE,
            "annotations": configmap["metadata"].get("annotations", {}),
        },
        "data": {
            key: text.replace(TEAM_LABEL, "team.example/renamed")
            for key, text in configmap["data"].items()
        },
    }

    refused = cluster.kubectl("apply", "-f", "-", input=json.dumps(edited), check=False)
    stored = cluster.get_json("configmap", configmap["metadata"]["name"], NAMESPACE)

    assert refused.returncode != 0
    assert "gpu-admission manifests helm-values --policy FILE" in refused.stderr
    assert "helm upgrade" in refused.stderr
    assert stored["data"] == configmap["data"]


def test_uninstall_leaves_no_webhook_configuration(release: Release) -> None:
    release.helm("uninstall", RELEASE, "--wait", "--timeout", "3m")

    for kind in CONFIGURATIONS:
        assert not release.cluster.exists(kind, FULLNAME)
    # Nothing is left calling a service that is gone: a GPU pod is created unjudged.
    release.cluster.apply(
        json.dumps(class_pod("after-uninstall", label="gpu-admission.io/workload")),
        namespace=TENANT,
    )
