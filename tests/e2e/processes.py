"""One control-plane component as a child process: start, health-check, stop.

Each component writes stdout and stderr to its own log file; when it fails to
become healthy or dies, the error carries the tail of that log, because the
reason (a bad flag, a port in use, a certificate problem) is always there.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

LOG_TAIL_LINES = 40

_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000


class ComponentFailed(RuntimeError):
    """A component exited or never became healthy."""


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: ask Linux to SIGKILL it when the
    # test process dies, so a crashed or killed pytest leaves no apiserver or
    # etcd behind holding ports and memory.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _enter_network_namespace(path: Path) -> Callable[[], None]:
    """A pre-exec step that moves the child into the network namespace at `path`
    and nothing else: unlike ``ip netns exec`` it keeps the mount namespace, so
    kubelet's volume mounts are the ones containerd and runc see."""

    def enter() -> None:
        _die_with_parent()
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(path, os.O_RDONLY)
        try:
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {path}")
        finally:
            os.close(fd)

    return enter


class Component:
    """A started component process and its log."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        log_path: Path,
        *,
        network_namespace: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """``network_namespace``: the path of a namespace (``/run/netns/<name>``) the
        process runs in; ``env``: added to the test's environment."""
        self.name = name
        self.command = list(command)
        self.log_path = log_path
        self.network_namespace = network_namespace
        self.env = env
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env} if self.env else None,
                preexec_fn=(
                    _die_with_parent
                    if self.network_namespace is None
                    else _enter_network_namespace(self.network_namespace)
                ),
            )

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log written)"
        return "\n".join(text.splitlines()[-lines:])

    def _failure(self, reason: str) -> ComponentFailed:
        return ComponentFailed(
            f"{self.name} {reason}; last lines of {self.log_path}:\n{self.log_tail()}"
        )

    def check_running(self) -> None:
        """Raise if the process has exited (a control plane component never should)."""
        if self._process is None:
            raise ComponentFailed(f"{self.name} was never started")
        code = self._process.poll()
        if code is not None:
            raise self._failure(f"exited with code {code}")

    def wait_healthy(self, probe: Callable[[], bool], timeout: float) -> float:
        """Poll ``probe`` until it succeeds; return the seconds it took.

        Exiting early is reported at once instead of after the whole timeout.
        """
        started = time.monotonic()
        while True:
            self.check_running()
            if probe():
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise self._failure(f"was not healthy within {timeout:g}s")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL at once, as the OOM killer does: no signal handler runs, no
        connection is closed politely."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGKILL)
        process.wait()

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds: the polite way first so
        that etcd closes its database cleanly."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
