"""Run the e2e control plane by hand: ``python -m tests.e2e``.

Starts the control plane with the GPU fleet, prints how to point kubectl at
it and keeps it up until Ctrl-C; handy while developing a webhook against it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

from .build_controlplane import ensure_binaries
from .controlplane import ControlPlane
from .nodes import register_fleet


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ControlPlane(ensure_binaries()) as plane:
        register_fleet(plane)
        print(f"export KUBECONFIG={plane.kubeconfig}")
        print(f"kubectl: {plane.kubectl_binary}")
        print(f"logs:    {plane.log_dir}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
