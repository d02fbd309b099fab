"""The arms of `benchmarks.apiserver`: what admits the pods, and switching between them.

| arm | admission | server |
|---|---|---|
| `none` | no configuration | none |
| `ours` | the shipped configurations | `python -m webhook.cli serve`, default policy |
| `ours-dra` | the same, for the DRA pod | a second `serve` (DRA policy, live inventory) |
| `ours-cel-scope` | the same, pods' scope by CEL alone (no objectSelector) | the same `serve` |
| `allow-python` | the same configurations | `benchmarks.common.stub_webhook`: allowed, no patch |
| `allow-go` | the same configurations | `benchmarks/apiserver/allow_go`, Go net/http: allowed |
| `patch-floor` | the same configurations | `benchmarks.common.stub_webhook --patch`: our patch |
| `cel` | MutatingAdmissionPolicy + ValidatingAdmissionPolicy | none |

Every webhook arm registers what `render_webhook_configurations` renders for a URL
endpoint (as the e2e harness's ``WebhookServer.register`` does, the same timeout),
with only the URL changed: the same matchConditions, namespace selector and rules.
All servers run all along, each from the same serving certificate; an arm only
changes which one kube-apiserver is configured to call.

`ours-dra` creates the engine benchmark's DRA pod (one A100 through a
ResourceClaimTemplate) where the other arms create the device-plugin pod. Its server
serves the engine benchmark's policy (the inference pool giving GPUs through the device
plugin and DRA, as during a migration) with the live inventory on, as in a cluster: it
reads the template the pod names from kube-apiserver at `mutate` and at `validate`.
NVIDIA's GPU DeviceClass is created once, the template in each namespace the arm's pods
go to (``Arms.prepare``).

Switching is checked, not waited out: every configuration of the other arms is
deleted, then a dry-run CREATE of the benchmark pod is repeated until kube-apiserver
neither mutates it nor calls any webhook (its webhook metrics do not move) and a pod
that any validation here denies is admitted; then the arm's objects are created and
the probes repeated until they show the arm: the mutation (`ours`, `patch-floor`,
`cel`) or its absence, both webhooks called (webhook arms), the bad pod denied
(`ours`, `cel`).
"""

from __future__ import annotations

import copy
import os
import ssl
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from benchmarks.apiserver.cel import policy_objects
from benchmarks.apiserver.load import benchmark_pod
from benchmarks.apiserver.metrics import WEBHOOK_FAMILY, histogram_totals
from benchmarks.common.cluster import Api, wait_until
from benchmarks.common.go_program import build_go_program
from benchmarks.common.processes import children_matching
from benchmarks.engine.run import bench_policy_text, dra_template, nvidia_gpu_class
from tests.e2e.ports import free_ports
from tests.e2e.probes import http_ok
from tests.e2e.processes import Component
from tests.e2e.webhook_server import WEBHOOK_TIMEOUT_SECONDS, WebhookServer
from webhook.engine import AdmissionRequest, Engine
from webhook.install.configurations import (
    MUTATING_WEBHOOK,
    POD_UPDATE_WEBHOOK,
    UNCLASSED_MUTATING_WEBHOOK,
    UNCLASSED_VALIDATING_WEBHOOK,
    VALIDATING_WEBHOOK,
    Endpoint,
    gpu_relevance_condition,
    render_webhook_configurations,
    scheduling_change_condition,
)
from webhook.policy import Policy, load_policy_text

REPOSITORY = Path(__file__).resolve().parents[2]
GO_SOURCE = Path(__file__).resolve().parent / "allow_go"
PRIORITY_CLASSES = REPOSITORY / "deploy" / "base" / "priorityclasses.yaml"

NONE, OURS, OURS_DRA, OURS_CEL_SCOPE, ALLOW_PYTHON, ALLOW_GO, PATCH_FLOOR, CEL = (
    "none",
    "ours",
    "ours-dra",
    "ours-cel-scope",
    "allow-python",
    "allow-go",
    "patch-floor",
    "cel",
)
ARMS = (NONE, OURS, OURS_DRA, OURS_CEL_SCOPE, ALLOW_PYTHON, ALLOW_GO, PATCH_FLOOR, CEL)
WEBHOOK_ARMS = (OURS, OURS_DRA, OURS_CEL_SCOPE, ALLOW_PYTHON, ALLOW_GO, PATCH_FLOOR)
MUTATING_ARMS = (OURS, OURS_DRA, OURS_CEL_SCOPE, PATCH_FLOOR, CEL)
DENYING_ARMS = (OURS, OURS_DRA, OURS_CEL_SCOPE, CEL)
DRA_ARMS = (OURS_DRA,)
"""The arms whose pods claim their GPU through DRA."""
SWITCH_TIMEOUT = 60.0


@dataclass(frozen=True)
class ProbeResult:
    refused: str | None
    """Why the benchmark pod was refused (e.g. by a validating policy whose mutating
    twin is not in effect yet); None when admitted."""
    mutated: bool
    mutated_fields: dict[str, Any]
    bad_denied: bool
    webhook_calls: dict[str, float]


def mutated_fields(pod: dict[str, Any]) -> dict[str, Any]:
    """What gpu-admission's mutation of the benchmark pod touches."""
    spec = pod.get("spec", {})
    return {
        "affinity": spec.get("affinity"),
        "tolerations": spec.get("tolerations"),
        "priorityClassName": spec.get("priorityClassName"),
        "priority": spec.get("priority"),
        "resources": [c.get("resources") for c in spec.get("containers", [])],
    }


def cel_scoped(
    policy: Policy, mutating: dict[str, Any], validating: dict[str, Any]
) -> list[dict[str, Any]]:
    """The configurations with the pods' scope decided by CEL alone, as they were shipped
    before class pods were told apart by an objectSelector: one mutating and one
    validating pod webhook, each with the condition that also looks for the label."""
    relevant = {"name": "gpu-relevant-pod", "expression": gpu_relevance_condition(policy)}
    changed = {"name": "scheduling-changed", "expression": scheduling_change_condition()}
    kept = {MUTATING_WEBHOOK: [relevant], VALIDATING_WEBHOOK: [relevant, changed]}
    dropped = (UNCLASSED_MUTATING_WEBHOOK, UNCLASSED_VALIDATING_WEBHOOK, POD_UPDATE_WEBHOOK)
    configurations = copy.deepcopy([mutating, validating])
    for configuration in configurations:
        hooks = []
        for hook in configuration["webhooks"]:
            if hook["name"] in dropped:
                continue
            if hook["name"] in kept:
                hook.pop("objectSelector", None)
                hook["matchConditions"] = kept[hook["name"]]
            if hook["name"] == VALIDATING_WEBHOOK:
                hook["rules"][0]["operations"] = ["CREATE", "UPDATE"]
            hooks.append(hook)
        configuration["webhooks"] = hooks
    return configurations


def bad_pod(name: str) -> dict[str, Any]:
    """The benchmark pod choosing its GPUs by hand: denied by `ours` and by `cel`."""
    pod = benchmark_pod(name)
    pod["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    return pod


# ------------------------------------------------------------------ the Go server


def build_allow_go(source: Path = GO_SOURCE) -> Path:
    """Build the Go program into the cache (once per version of its source)."""
    return build_go_program(source, "allow_go")


# ------------------------------------------------------------------ the arms


class Arms:
    """The servers every selected arm needs, and switching kube-apiserver between arms."""

    def __init__(
        self,
        api: Api,
        policy: Policy,
        work_dir: Path,
        arms: tuple[str, ...],
        probe_namespace: str,
        go_http1: bool = False,
        kubeconfig: Path | None = None,
    ) -> None:
        self.api, self.policy = api, policy
        self.work_dir, self.arms, self.probe_namespace = work_dir, arms, probe_namespace
        self.go_http1 = go_http1
        self.kubeconfig = kubeconfig
        self.ours = WebhookServer(work_dir / "ours")
        self.ours_dra = WebhookServer(work_dir / "ours-dra")
        self.dra_policy = load_policy_text(bench_policy_text(), "bench.yaml")
        self.components: dict[str, Component] = {}
        self.urls: dict[str, str] = {}
        self.pids: dict[str, int] = {}
        self.patch: list[dict[str, Any]] = []
        self.probes: dict[str, ProbeResult] = {}
        self._probes = 0
        self._objects: dict[str, list[dict[str, Any]]] = {}

    # -- start and stop ----------------------------------------------------

    def start(self) -> None:
        """Start every server the selected arms need and compute what they register."""
        for document in yaml.safe_load_all(PRIORITY_CLASSES.read_text("utf-8")):
            self.api.apply(document)
        self.api.create_namespace(self.probe_namespace, self.opt_in)
        self.clear()
        if any(arm in WEBHOOK_ARMS for arm in self.arms):
            # Its certificate serves every webhook arm.
            self.ours.start()
            self.urls[OURS] = self.ours.url
            (pid,) = children_matching(os.getpid(), "webhook.cli", "serve", str(self.ours.port))
            self.pids[OURS] = pid
            self.urls[OURS_CEL_SCOPE], self.pids[OURS_CEL_SCOPE] = self.ours.url, pid
        if OURS_DRA in self.arms:
            self._start_ours_dra()
        if PATCH_FLOOR in self.arms:
            self.patch = self.engine_patch()
            patch_file = self.work_dir / "patch.json"
            patch_file.write_bytes(orjson.dumps(self.patch))
            self._start_stub(PATCH_FLOOR, ["--patch", str(patch_file)])
        if ALLOW_PYTHON in self.arms:
            self._start_stub(ALLOW_PYTHON, [])
        if ALLOW_GO in self.arms:
            binary = build_allow_go()
            port = free_ports(1)[0]
            command = [str(binary), f"-addr=127.0.0.1:{port}"]
            command += [f"-cert={self.ours.cert_path}", f"-key={self.ours.key_path}"]
            if self.go_http1:
                command.append("-http1")
            self._start(ALLOW_GO, command, port)
        for arm in self.arms:
            self._objects[arm] = self._admission_objects(arm)

    def _start_ours_dra(self) -> None:
        if self.kubeconfig is None:
            raise ValueError("the ours-dra arm reads claims from the cluster: a kubeconfig")
        self.api.apply(nvidia_gpu_class())
        policy_file = self.work_dir / "bench-policy.yaml"
        policy_file.write_text(bench_policy_text(), "utf-8")
        self.ours_dra.start(policy_file, kubeconfig=self.kubeconfig)
        self.urls[OURS_DRA] = self.ours_dra.url
        port = str(self.ours_dra.port)
        (self.pids[OURS_DRA],) = children_matching(os.getpid(), "webhook.cli", "serve", port)
        self.prepare(OURS_DRA, self.probe_namespace)

    def prepare(self, arm: str, namespace: str) -> None:
        """What the arm's pods need in `namespace` besides the namespace: the template the
        DRA pod names."""
        if arm in DRA_ARMS:
            template = dra_template(namespace)
            path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates"
            self.api.call("POST", path, template, ok=(201, 409))

    @property
    def opt_in(self) -> dict[str, str]:
        key, value = self.policy.namespace_opt_in
        return {key: value}

    def _start_stub(self, arm: str, extra: list[str]) -> None:
        port = free_ports(1)[0]
        command = [sys.executable, "-m", "benchmarks.common.stub_webhook", "--port", str(port)]
        command += ["--tls-cert", str(self.ours.cert_path), "--tls-key", str(self.ours.key_path)]
        self._start(arm, [*command, *extra], port)

    def _start(self, arm: str, command: list[str], port: int) -> None:
        component = Component(arm, command, self.work_dir / "logs" / f"{arm}.log")
        component.start()
        self.components[arm] = component
        url = f"https://127.0.0.1:{port}"
        context = ssl.create_default_context(cafile=str(self.ours.ca_path))
        component.wait_healthy(http_ok(f"{url}/healthz", context), 30.0)
        self.urls[arm] = url
        assert component.pid is not None
        self.pids[arm] = component.pid

    def stop(self) -> None:
        for component in self.components.values():
            component.stop()
        self.ours.stop()
        self.ours_dra.stop()

    def check_running(self) -> None:
        for component in self.components.values():
            component.check_running()

    def webhook_pid(self, arm: str) -> int | None:
        return self.pids.get(arm)

    def go_stats(self) -> dict[str, int] | None:
        if ALLOW_GO not in self.urls:
            return None
        context = ssl.create_default_context(cafile=str(self.ours.ca_path))
        with urllib.request.urlopen(f"{self.urls[ALLOW_GO]}/stats", context=context) as reply:
            stats: dict[str, int] = orjson.loads(reply.read())
        return stats

    # -- what each arm registers ---------------------------------------------

    def _admission_objects(self, arm: str) -> list[dict[str, Any]]:
        if arm == NONE:
            return []
        if arm == CEL:
            return policy_objects(self.policy)
        server = self.ours_dra if arm in DRA_ARMS else self.ours
        endpoint = Endpoint(ca_bundle=server.ca_bundle, url=self.urls[arm])
        mutating, validating = render_webhook_configurations(
            self.dra_policy if arm in DRA_ARMS else self.policy,
            endpoint,
            timeout_seconds=WEBHOOK_TIMEOUT_SECONDS,
        )
        if arm == OURS_CEL_SCOPE:
            return cel_scoped(self.policy, mutating, validating)
        return [mutating, validating]

    def engine_patch(self) -> list[dict[str, Any]]:
        """The patch gpu-admission's engine returns for the benchmark pod as kube-apiserver
        sends it: the pod after the built-in admission plugins (a dry-run CREATE with no
        webhook or policy registered), without what is only set after admission."""
        status, pod = self.api.dry_run_pod(self.probe_namespace, benchmark_pod("patch-probe"))
        if status != 201:
            raise RuntimeError(f"dry-run of the benchmark pod failed: {status} {pod}")
        pod = copy.deepcopy(pod)
        for key in ("uid", "creationTimestamp", "resourceVersion", "generation"):
            pod["metadata"].pop(key, None)
        pod.pop("status", None)
        request = AdmissionRequest.pod_create(
            "patch-probe", self.probe_namespace, "patch-probe", pod
        )
        decision = Engine(self.policy).mutate(request)
        if not decision.allowed or not decision.patch:
            raise RuntimeError(f"the engine does not mutate the benchmark pod: {decision}")
        return list(decision.patch)

    # -- switching -----------------------------------------------------------

    def probe(self) -> ProbeResult:
        """Dry-run CREATEs of the benchmark pod and of a bad one, and the webhook calls
        kube-apiserver counted meanwhile."""
        before = histogram_totals(self.api.text("/metrics"), WEBHOOK_FAMILY)
        self._probes += 1
        status, pod = self.api.dry_run_pod(
            self.probe_namespace, benchmark_pod(f"probe-{self._probes}")
        )
        bad_status, _ = self.api.dry_run_pod(self.probe_namespace, bad_pod(f"bad-{self._probes}"))
        after = histogram_totals(self.api.text("/metrics"), WEBHOOK_FAMILY)
        calls = {
            name: totals.count - before[name].count if name in before else totals.count
            for name, totals in after.items()
        }
        fields = mutated_fields(pod) if status == 201 else {}
        return ProbeResult(
            refused=None if status == 201 else f"{status}: {pod.get('message')}",
            mutated=fields.get("priorityClassName") is not None,
            mutated_fields=fields,
            bad_denied=bad_status != 201,
            webhook_calls={name: count for name, count in calls.items() if count},
        )

    def _wait_probe(self, accept: Callable[[ProbeResult], bool], what: str) -> ProbeResult:
        found: list[ProbeResult] = []

        def accepted() -> bool:
            self.check_running()
            found.append(self.probe())
            return accept(found[-1])

        try:
            wait_until(accepted, SWITCH_TIMEOUT, what, interval=0.2)
        except TimeoutError as error:
            raise TimeoutError(f"{error}; last probe: {found[-1] if found else None}") from None
        return found[-1]

    def clear(self) -> None:
        """Delete every arm's objects and wait until none of them acts any more."""
        for objects in self._objects.values():
            for obj in objects:
                self.api.delete(obj)
        self._wait_probe(
            lambda p: not (p.refused or p.mutated or p.bad_denied or p.webhook_calls),
            "no webhook or policy acting on pods",
        )

    def switch(self, arm: str) -> ProbeResult:
        """Make ``arm`` the admission kube-apiserver applies, and wait until it does."""
        self.clear()
        for obj in self._objects[arm]:
            self.api.apply(obj)
        result = self._wait_probe(lambda p: self.shows(arm, p), f"the {arm} arm in effect")
        self.probes.setdefault(arm, result)
        return result

    @staticmethod
    def shows(arm: str, probe: ProbeResult) -> bool:
        called = {MUTATING_WEBHOOK, VALIDATING_WEBHOOK} <= probe.webhook_calls.keys()
        return (
            probe.refused is None
            and probe.mutated == (arm in MUTATING_ARMS)
            and probe.bad_denied == (arm in DENYING_ARMS)
            and called == (arm in WEBHOOK_ARMS)
        )
