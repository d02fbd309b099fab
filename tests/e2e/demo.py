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

from .admission_fixtures import EXAMPLES, OPT_IN, REPO
from .build_controlplane import ensure_binaries
from .controlplane import ControlPlane
from .nodes import FLEET, POOL_LABEL, register_fleet
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
    with ControlPlane(binaries, work_dir / "controlplane") as plane:
        _step(f"{len(FLEET)} nodes, labelled as GPU Feature Discovery labels them")
        register_fleet(plane)
        plane.apply((REPO / "deploy" / "base" / "priorityclasses.yaml").read_text("utf-8"))
        server = WebhookServer(work_dir / "gpu-admission")
        policy = options.policy or "the embedded default policy"
        _step(f"gpu-admission serving {policy}, with the live inventory of this cluster")
        server.start(options.policy, kubeconfig=plane.kubeconfig)
        try:
            server.register(plane.kubeconfig)
            plane.create_namespace(options.namespace, OPT_IN)
            _apply_workloads(plane, options.namespace)
            _apply_denied(plane, options.namespace)
            _next_steps(plane, server, options.namespace)
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


def _next_steps(plane: ControlPlane, server: WebhookServer, namespace: str) -> None:
    print(
        "\n== try next, in another shell\n"
        f"export KUBECONFIG={plane.kubeconfig} PATH={plane.kubectl_binary.parent}:$PATH\n"
        f"kubectl -n {namespace} get pods -o wide       # where each pod landed\n"
        f"kubectl -n {namespace} get pod embedder -o jsonpath='{{.metadata.annotations}}'"
        "   # what was injected\n"
        f"kubectl -n {namespace} apply -f examples/denied/too-many-gpus.yaml   # refused\n"
        ".venv/bin/gpu-admission check --admitted examples/training-job.yaml   # offline\n"
        ".venv/bin/gpu-admission audit                   # what runs, judged\n"
        f"logs: {plane.log_dir} and {server.work_dir}\n"
        "Ctrl-C stops everything.",
        flush=True,
    )


def _apply_workloads(plane: ControlPlane, namespace: str) -> None:
    print(f"\n== workloads applied to namespace {namespace} (opted in)")
    for path in sorted(EXAMPLES.glob("*.yaml")):
        result = plane.apply(path.read_text("utf-8"), namespace=namespace, check=False)
        print(f"$ kubectl apply -f examples/{path.name}\n{_answer(result)}")
    expected = sum(_pods_of(path) for path in EXAMPLES.glob("*.yaml"))
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline and not _settled(plane, namespace, expected):
        time.sleep(1)
    pools = {
        node["metadata"]["name"]: node["metadata"].get("labels", {}).get(POOL_LABEL, "cpu")
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


def _apply_denied(plane: ControlPlane, namespace: str) -> None:
    print("\n== pods that break a rule")
    for path in sorted((EXAMPLES / "denied").glob("*.yaml")):
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
