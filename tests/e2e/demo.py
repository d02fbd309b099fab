"""`make demo`: gpu-admission on a local control plane, with the sample workloads.

Starts the control plane, the GPU fleet and the real `gpu-admission serve`,
applies examples/ to an opted-in namespace, prints where each pod landed and
why each denied example was refused, then leaves everything up (with a
kubeconfig to point kubectl at) until Ctrl-C, saying what to try next. Each step
says what it does as it starts; a cold build of the control plane says how long
it has left. `make demo POLICY=my-policy.yaml NAMESPACE=team-a` serves another
policy into another namespace.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from webhook.engine.mutate import INJECTED_ANNOTATION as INJECTED
from webhook.install.configurations import TIMEOUT_SECONDS
from webhook.install.priority_classes import priority_class_objects
from webhook.policy import Policy, load_default_policy, load_policy_file

from .admission_fixtures import EXAMPLES
from .build_controlplane import ensure_binaries
from .controlplane import ControlPlane
from .nodes import FLEET, register_fleet
from .policy_world import examples_for, fleet_for, pool_of_node
from .webhook_server import WebhookServer

NAMESPACE = "demo"
SETTLE_SECONDS = 90


def main(argv: list[str] | None = None) -> int:
    options = _options(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    work_dir = Path(tempfile.mkdtemp(prefix="gpu-admission-demo-"))
    _step("the control plane's binaries (built once per release, then cached)")
    binaries = ensure_binaries()
    _step("etcd, kube-apiserver, kube-scheduler and kube-controller-manager")
    policy = load_policy_file(options.policy) if options.policy else load_default_policy()
    # Another policy's cluster: the same machines under its labels and taints, and the
    # examples in its words (tests/e2e/policy_world.py).
    fleet = fleet_for(policy) if options.policy else FLEET
    examples = examples_for(policy, work_dir) if options.policy else EXAMPLES
    with ControlPlane(binaries, work_dir / "controlplane") as plane:
        _step(f"{len(fleet)} nodes, labelled as GPU Feature Discovery labels them")
        register_fleet(plane, fleet)
        plane.apply(yaml.safe_dump_all(priority_class_objects(policy)))
        server = WebhookServer(work_dir / "gpu-admission")
        served = options.policy or "the embedded default policy"
        _step(f"gpu-admission serving {served}, with the live inventory of this cluster")
        server.start(options.policy, kubeconfig=plane.kubeconfig)
        try:
            # The shipped configurations' timeout, as docs/webhooks.md says.
            server.register(plane.kubeconfig, timeout_seconds=TIMEOUT_SECONDS)
            key, value = policy.namespace_opt_in
            plane.create_namespace(options.namespace, {key: value})
            if examples != EXAMPLES:
                print(f"\nexamples/ in the words of {options.policy}: {examples}")
            _apply_workloads(plane, policy, examples, options.namespace)
            _apply_denied(plane, examples, options.namespace)
            _next_steps(plane, server, examples, options)
            with contextlib.suppress(KeyboardInterrupt):
                stop.wait()
        finally:
            server.stop()
    return 0


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument("--policy", type=Path, help="policy YAML (default: the embedded one)")
    parser.add_argument("--namespace", default=NAMESPACE, help=f"default: {NAMESPACE}")
    return parser.parse_args(argv)


def _step(what: str) -> None:
    print(f"[demo] {what} ...", flush=True)


def _next_steps(
    plane: ControlPlane, server: WebhookServer, examples: Path, options: argparse.Namespace
) -> None:
    namespace = options.namespace
    denied = _shown(examples / "denied" / "too-many-gpus.yaml", examples)
    policy = f" --policy {options.policy}" if options.policy else ""
    print(
        "\n== try next, in another shell\n"
        f"export KUBECONFIG={plane.kubeconfig} PATH={plane.kubectl_binary.parent}:$PATH\n"
        f"kubectl -n {namespace} get pods -o wide       # where each pod landed\n"
        f"kubectl -n {namespace} get pod embedder -o jsonpath='{{.metadata.annotations}}'"
        "   # what was injected\n"
        f"kubectl -n {namespace} apply -f {denied}   # refused\n"
        f".venv/bin/gpu-admission check{policy} --admitted "
        f"{_shown(examples / 'training-job.yaml', examples)}   # offline\n"
        f".venv/bin/gpu-admission audit{policy}                   # what runs, judged\n"
        f"logs: {plane.log_dir} and {server.work_dir}\n"
        "Ctrl-C stops everything.",
        flush=True,
    )


def _shown(path: Path, examples: Path) -> str:
    """A file of examples/ as a command shows it: examples/NAME, or the file written in
    another policy's words."""
    return f"examples/{path.relative_to(examples)}" if examples == EXAMPLES else str(path)


def _apply_workloads(plane: ControlPlane, policy: Policy, examples: Path, namespace: str) -> None:
    print(f"\n== workloads applied to namespace {namespace} (opted in)")
    for path in sorted(examples.glob("*.yaml")):
        result = plane.apply(path.read_text("utf-8"), namespace=namespace, check=False)
        print(f"$ kubectl apply -f examples/{path.name}\n{_answer(result)}")
    expected = sum(_pods_of(path) for path in examples.glob("*.yaml"))
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline and not _settled(plane, namespace, expected):
        time.sleep(1)
    pools = {
        node["metadata"]["name"]: pool_of_node(policy, node["metadata"].get("labels", {}))
        for node in plane.list_json("nodes")
    }
    print(f"\n{'POD':28} {'NODE':23} {'POOL':10} {'PRIORITY':9} INJECTED")
    for pod in sorted(plane.list_json("pods", namespace), key=lambda p: p["metadata"]["name"]):
        node = pod["spec"].get("nodeName") or "(pending)"
        injected = pod["metadata"].get("annotations", {}).get(INJECTED, "-")
        print(
            f"{pod['metadata']['name']:28} {node:23} {pools.get(node, '-'):10} "
            f"{pod['spec'].get('priority', 0):<9} {injected}"
        )


def _apply_denied(plane: ControlPlane, examples: Path, namespace: str) -> None:
    print("\n== pods that break a rule")
    for path in sorted((examples / "denied").glob("*.yaml")):
        result = plane.apply(path.read_text("utf-8"), namespace=namespace, check=False)
        # another policy may admit it
        print(f"$ kubectl apply -f examples/denied/{path.name}\n{_answer(result)}\n")


def _answer(result: subprocess.CompletedProcess[str]) -> str:
    """What kubectl said, all of it: its output, then its errors and warnings."""
    return "\n".join(part.strip() for part in (result.stdout, result.stderr) if part.strip())


def _pods_of(path: Path) -> int:
    """How many pods the objects of `path` make: a Pod one, a Deployment its replicas, a
    Job as many as run at once (its parallelism, at most its completions)."""
    count = 0
    for obj in yaml.safe_load_all(path.read_text("utf-8")):
        spec = (obj or {}).get("spec", {})
        kind = (obj or {}).get("kind")
        if kind == "Pod":
            count += 1
        elif kind in ("Deployment", "StatefulSet", "ReplicaSet"):
            count += spec.get("replicas", 1)
        elif kind == "Job":
            count += min(spec.get("parallelism", 1), spec.get("completions", 1))
    return count


def _settled(plane: ControlPlane, namespace: str, expected: int) -> bool:
    """Every pod the workloads make exists (their controllers make them in their own time)
    and is bound to a node."""
    pods = plane.list_json("pods", namespace)
    return len(pods) >= expected and all(p["spec"].get("nodeName") for p in pods)


if __name__ == "__main__":
    sys.exit(main())
