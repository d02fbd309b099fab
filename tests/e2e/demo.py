"""`make demo`: gpu-admission on a local control plane, with the sample workloads.

Starts the control plane, the GPU fleet and the real `gpu-admission serve`,
applies examples/ to an opted-in namespace, prints where each pod landed and
why each denied example was refused, then leaves everything up (with a
kubeconfig to point kubectl at) until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from .admission_fixtures import EXAMPLES, OPT_IN, REPO
from .build_controlplane import ensure_binaries
from .controlplane import ControlPlane
from .nodes import FLEET, register_fleet
from .webhook_server import WebhookServer

NAMESPACE = "demo"
SETTLE_SECONDS = 20


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    work_dir = Path(tempfile.mkdtemp(prefix="gpu-admission-demo-"))
    with ControlPlane(ensure_binaries(), work_dir / "controlplane") as plane:
        register_fleet(plane)
        plane.apply((REPO / "deploy" / "base" / "priorityclasses.yaml").read_text("utf-8"))
        server = WebhookServer(work_dir / "gpu-admission")
        server.start(kubeconfig=plane.kubeconfig)  # the live inventory of this cluster
        try:
            server.register(plane.kubeconfig)
            plane.create_namespace(NAMESPACE, OPT_IN)
            _apply_workloads(plane)
            _apply_denied(plane)
            print(f"\nexport KUBECONFIG={plane.kubeconfig}")
            print(f"kubectl: {plane.kubectl_binary}")
            print(f"logs:    {plane.log_dir} and {server.work_dir}")
            print("Ctrl-C stops everything.", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                stop.wait()
        finally:
            server.stop()
    return 0


def _apply_workloads(plane: ControlPlane) -> None:
    print(f"== workloads applied to namespace {NAMESPACE} (opted in)")
    for path in sorted(EXAMPLES.glob("*.yaml")):
        result = plane.apply(path.read_text("utf-8"), namespace=NAMESPACE, check=False)
        print(
            f"$ kubectl apply -f examples/{path.name}\n{(result.stdout or result.stderr).strip()}"
        )
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline and _unbound(plane):
        time.sleep(1)
    pools = {n.name: n.pool or "cpu" for n in FLEET}
    print(f"\n{'POD':40} {'NODE':28} {'POOL':10} PRIORITY")
    for pod in sorted(plane.list_json("pods", NAMESPACE), key=lambda p: p["metadata"]["name"]):
        node = pod["spec"].get("nodeName") or "(pending)"
        print(
            f"{pod['metadata']['name']:40} {node:28} {pools.get(node, '-'):10} "
            f"{pod['spec'].get('priority', 0)}"
        )


def _apply_denied(plane: ControlPlane) -> None:
    print("\n== pods that break a rule")
    for path in sorted((EXAMPLES / "denied").glob("*.yaml")):
        result = plane.apply(path.read_text("utf-8"), namespace=NAMESPACE, check=False)
        print(f"$ kubectl apply -f examples/denied/{path.name}\n{result.stderr.strip()}\n")


def _unbound(plane: ControlPlane) -> bool:
    return any(not p["spec"].get("nodeName") for p in plane.list_json("pods", NAMESPACE))


if __name__ == "__main__":
    sys.exit(main())
