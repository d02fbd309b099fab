"""Serve a changed policy file without a restart; keep the last good policy on a bad edit.

The policy usually comes from a ConfigMap volume, which kubelet updates by a symlink
swap, so the reloader polls a hash of the file (``webhook.service.file_poll``, the mechanism
the certificate reloader uses). Changed contents are compiled in a worker thread and
made an ``Engine`` by ``serving_engine``, exactly as ``policy validate`` and the policy
ConfigMap's webhook load them: every problem is found, a rule name the engine does not
have among them.

A policy that compiles, and that the engine accepts, becomes the new ``engine`` in
one step: a review reads ``engine`` once when it starts, so reviews in flight finish
with the engine they started with and the next ones get the new one. A policy that
does not compile, or that the engine refuses, changes nothing that serves: its
problems are logged, once per distinct content (with file, line, field path and
reason; the first ``LOGGED_PROBLEMS``, then a count of the others), the first is shown
in the ``/readyz`` detail with a count of the others, and the
``gpu_admission_policy_valid`` metric says so, until a later edit compiles. The
policy ConfigMap's webhook refuses most such edits before they reach the file; one made
while no replica was serving reaches it, and is kept out here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from webhook.engine import Engine
from webhook.engine.serving import serving_engine
from webhook.errors import PolicyError
from webhook.http.metrics import Metrics
from webhook.policy import Policy
from webhook.service.file_poll import DEFAULT_INTERVAL, FilePoller

__all__ = ["PolicyReloader"]

log = logging.getLogger("gpu_admission.policy")

LOGGED_PROBLEMS = 20
"""Most problems of one refused policy logged line by line (as many as the policy
ConfigMap's webhook lists); the others are counted on one more line."""


@dataclass(frozen=True)
class _Loaded:
    engine: Engine
    at: dt.datetime


class PolicyReloader:
    """Keeps ``engine`` serving the last policy ``path`` held that compiled.

    ``policy`` is what the file held at start (loaded by the caller, who refuses to
    start on a broken file). ``poll`` looks once; ``watch`` polls every ``interval``
    seconds on the running event loop until cancelled.
    """

    def __init__(
        self,
        path: Path,
        policy: Policy,
        *,
        interval: float = DEFAULT_INTERVAL,
        metrics: Metrics | None = None,
    ) -> None:
        self.path = path
        self._poller = FilePoller((path,), interval=interval, on_unreadable=self._unreadable)
        self._metrics = metrics
        self._lock = threading.Lock()
        self._loaded = _Loaded(Engine(policy), _now())
        self._error: PolicyError | None = None
        with contextlib.suppress(OSError):  # if gone since the caller read it, poll says so
            self._poller.seen(self._poller.read())
        if metrics is not None:
            metrics.policy_in_use(self._loaded.at.timestamp(), policy.revision)

    @property
    def engine(self) -> Engine:
        """The engine on the last good policy; read it once per review."""
        return self._loaded.engine

    @property
    def error(self) -> PolicyError | None:
        """Why the file as it is now does not serve, or None while it does."""
        with self._lock:
            return self._error

    def poll(self) -> bool:
        """Look at the file once; serve it if it changed and compiles.

        Returns whether a new policy now serves.
        """
        engine = self._prepare()
        return engine is not None and self._install(engine)

    async def watch(self) -> None:
        """Poll forever on the running loop; reading and compiling in a worker thread."""
        await self._poller.run(self._prepare, self._install, what="the policy file")

    def readiness(self) -> tuple[bool, str]:
        """A ``/readyz`` check. A broken file does not make the replica unready: the last
        good policy serves, and taking every replica out would fail every review."""
        with self._lock:
            loaded, error = self._loaded, self._error
        at = loaded.at.isoformat(timespec="seconds")
        if error is None:
            return True, f"{self.path}, loaded at {at}"
        more = error.count - 1
        others = f" (and {more} more problem{'s' if more > 1 else ''}; see the log)" if more else ""
        return (
            True,
            f"serving last good policy from {at}; current file invalid: "
            f"{error.problems[0]}{others}",
        )

    def _prepare(self) -> Engine | None:
        contents = self._poller.look()
        if contents is None:
            return None
        try:
            text = contents[0].decode("utf-8")
        except UnicodeDecodeError as error:
            self._refuse(PolicyError(str(self.path), "", f"cannot read: {error}"))
            return None
        try:
            return serving_engine(text, str(self.path))
        except PolicyError as error:
            self._refuse(error)
            return None

    def _install(self, engine: Engine) -> bool:
        loaded = _Loaded(engine, _now())
        with self._lock:
            self._loaded = loaded
            self._error = None
        if self._metrics is not None:
            self._metrics.policy_loaded(loaded.at.timestamp(), engine.policy.revision)
        log.info(
            "policy reloaded",
            extra={
                "policy_file": str(self.path),
                "pools": len(engine.policy.pools),
                "classes": len(engine.policy.classes),
            },
        )
        return True

    def _unreadable(self, error: OSError) -> None:
        self._refuse(PolicyError(str(self.path), "", f"cannot read: {error.strerror or error}"))

    def _refuse(self, error: PolicyError) -> None:
        with self._lock:
            self._error = error
            since = self._loaded.at.isoformat(timespec="seconds")
        if self._metrics is not None:
            self._metrics.policy_refused()
        for problem in error.problems[:LOGGED_PROBLEMS]:
            log.error(
                "not reloading the policy: still serving the last good policy",
                extra={
                    "policy_file": problem.source,
                    "line": problem.line,
                    "path": problem.path,
                    "reason": problem.reason,
                    "problems": error.count,
                    "serving_since": since,
                },
            )
        if error.count > LOGGED_PROBLEMS:
            log.error(
                "not reloading the policy: more problems than logged",
                extra={
                    "policy_file": error.source,
                    "problems": error.count,
                    "not_logged": error.count - LOGGED_PROBLEMS,
                    "serving_since": since,
                },
            )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
