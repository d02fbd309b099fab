"""Whether the installed webhook configurations send what the policy serving now needs.

Installed from another policy (a chart rendered from the default one, or a policy
ConfigMap edited since), the configurations select pods by a workload label the
policy does not use, or look for GPU resources, taints and classes it no longer
names: its pods are never mutated nor judged, and no review says so. A thread of its
own reads both configurations (``webhook.kube.webhook_configurations``) at start,
every ``interval`` and shortly after each policy reload, and compares them with the
policy (``webhook.install.scope``). A mismatch is logged (once each time it changes),
shown in ``/readyz`` under ``webhook-configurations`` and counted in
``gpu_admission_webhook_configuration_mismatch{webhook}``, which
deploy/monitoring/alerts.yaml alerts on.

It never makes the replica unready. The configurations are the cluster's, not the
replica's: every replica sees the same mismatch, so unready would take them all out,
and with ``failurePolicy: Fail`` every pod the configurations do send would be refused,
which is far worse than the pods they miss. The replica's answers stay right for what
reaches it, and the fix (apply the configurations of the policy) is an operator's
action that needs no replica down. A read that fails (no RBAC rule yet, the
API unreachable) is shown, and the last comparison stands.

The webhooks last read are kept for the policy ConfigMap's webhook (``judge``: a
``ScopeCheck``), which judges an edit of the policy that needs another scope
(``webhook.http.policy.verdict``) without waiting on the API in the review: what it
compares with is at most ``interval`` old, or a policy reload's. Before it refuses one,
it asks ``fresh_judge``, which reads the configurations again: a replica that started
before the configurations were applied never refuses a policy for configurations that
are there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.http.metrics import Metrics
from webhook.http.policy.verdict import SCOPE_NOT_COMPARED
from webhook.install.names import INSTALL_NAME, handlers_of_install
from webhook.install.scope import (
    FIX,
    SCOPE_ANNOTATION,
    LiveWebhooks,
    ScopeDifference,
    needed_webhooks,
    scope_differences,
    scope_digest,
    scope_refusal,
)
from webhook.policy import Policy

__all__ = ["FIX", "INTERVAL", "NOT_COMPARED", "ScopeCheck", "WebhookScope"]

log = logging.getLogger("gpu_admission.webhook_scope")

INTERVAL = 60.0
"""Seconds between two comparisons; a policy reload brings the next one forward."""

POLICY_LOOK = 1.0
"""Seconds between two looks at whether the policy serving now was replaced."""

STOP_JOIN_TIMEOUT = 5.0

NOT_COMPARED = (
    "gpu-admission: the webhook scope this policy needs could not be compared with the "
    "live webhook configurations, which this replica has not read (not yet, no RBAC rule "
    "to get them, or no cluster: its /readyz says which). If it changes the workload or "
    "opt-in label, a taint or a GPU resource, " + FIX
)
"""The warning of a policy admitted with its scope not compared."""


@dataclass(frozen=True)
class ScopeCheck:
    """The policy ConfigMap webhook's judge of a policy's scope (``ScopeJudge`` of
    ``webhook.http.policy.verdict``), against the `live` webhooks (None: not known)."""

    live: LiveWebhooks | None
    annotation: str = SCOPE_ANNOTATION
    warning: str = NOT_COMPARED
    install_name: str = INSTALL_NAME
    """Whose webhooks: a name travels to the review worker where a registry would not."""

    @property
    def key(self) -> str:
        return "unknown" if self.live is None else self.live.digest

    def verdict(self, name: str, policy: Policy, annotation: str | None) -> str | None:
        """Admitted when the annotation is the digest of the scope `policy` needs (what
        rendered the ConfigMap applies those configurations next) or when the live
        configurations send what it needs; not compared when none are known; refused
        otherwise, saying what differs and ``FIX``."""
        if annotation is not None and annotation == scope_digest(policy):
            return None
        if self.live is None:
            return SCOPE_NOT_COMPARED
        handlers = handlers_of_install(self.install_name)
        differences = scope_differences(policy, *self.live.configurations(), handlers)
        return scope_refusal(name, differences) if differences else None


#: Reads the live (mutating, validating) configurations; None for one not there.
ReadConfigurations = Callable[[], tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]]


@dataclass(frozen=True)
class Comparison:
    """The last comparison: when, of which policy, and what differed."""

    at: float
    policy: Policy
    differences: tuple[ScopeDifference, ...]


class WebhookScope:
    """Compares the configurations ``read`` gives with ``policy()``, in a daemon thread."""

    def __init__(
        self,
        read: ReadConfigurations,
        policy: Callable[[], Policy],
        metrics: Metrics,
        *,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        read_in_review: ReadConfigurations | None = None,
        install_name: str = INSTALL_NAME,
    ) -> None:
        """`read_in_review` is the read ``fresh_judge`` makes while a review waits, bounded
        well within the webhook's timeout (`read` unless given); `install_name` names the
        install whose webhooks are compared (``webhook.install.names.handlers_of_install``)."""
        self._read = read
        self._read_in_review = read if read_in_review is None else read_in_review
        self._policy = policy
        self._metrics = metrics
        self._interval = interval
        self._clock = clock
        self._install_name = install_name
        self._handlers = handlers_of_install(install_name)
        self._last: Comparison | None = None
        self._live: LiveWebhooks | None = None
        self._error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the webhook configurations are already being compared")
        self._thread = threading.Thread(target=self._loop, name="webhook-scope", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = STOP_JOIN_TIMEOUT) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        due = self._clock()
        compared: Policy | None = None
        while not self._stop.is_set():
            policy = self._policy()
            if policy is not compared or self._clock() >= due:
                self.compare_once(policy)
                compared, due = policy, self._clock() + self._interval
            self._stop.wait(min(POLICY_LOOK, self._interval))

    def compare_once(
        self, policy: Policy | None = None, read: ReadConfigurations | None = None
    ) -> tuple[ScopeDifference, ...] | None:
        """One comparison with ``policy`` (the one serving now when None), of what `read`
        gives (the thread's read when None); None when the configurations could not be
        read (the error is kept for ``/readyz``)."""
        policy = self._policy() if policy is None else policy
        try:
            mutating, validating = (self._read if read is None else read)()
        except Exception as error:  # never end the thread: the next read may work
            if str(error) != self._error:
                log.warning(
                    "the webhook configurations cannot be read; their scope is not checked",
                    extra={"reason": str(error)},
                )
            self._error = str(error)
            return None
        self._error = None
        self._live = LiveWebhooks.read(mutating, validating)
        differences = tuple(scope_differences(policy, mutating, validating, self._handlers))
        self._report(differences)
        needed = needed_webhooks(policy, self._handlers)
        compared = [name for hooks in needed.values() for name in hooks]
        self._metrics.webhook_configurations_compared(
            compared, {difference.webhook for difference in differences}
        )
        self._last = Comparison(self._clock(), policy, differences)
        return differences

    def judge(self) -> ScopeCheck:
        """The judge of a policy's scope against the configurations as last read (a failed
        read since leaves them), which are unknown before the first read that worked."""
        return ScopeCheck(self._live, install_name=self._install_name)

    def fresh_judge(self) -> ScopeCheck:
        """The judge of a policy's scope against the configurations read again now; waits on
        the API (the policy ConfigMap's webhook asks it only before a refusal, and a
        configuration applied a second ago must count). A failed read leaves the last that
        worked, and the refusal stands on it: a read slower than the review may wait
        (kube-apiserver then gives up and, the policy's webhook failing open, admits the
        policy unchecked) is cut short instead."""
        self.compare_once(read=self._read_in_review)
        return self.judge()

    def _report(self, differences: tuple[ScopeDifference, ...]) -> None:
        before = None if self._last is None else self._last.differences
        if differences == before:
            return
        if differences:
            log.warning(
                "the webhook configurations do not send what the policy needs: "
                "its pods are not all mutated nor judged; " + FIX,
                extra={"differences": [str(difference) for difference in differences]},
            )
        elif before:
            log.info("the webhook configurations send what the policy needs again")

    def readiness(self) -> tuple[bool, str]:
        """Always ready (see the module's docstring); the detail says what differs."""
        last, error = self._last, self._error
        failed = f"cannot be read ({error})" if error else ""
        if last is None:
            return True, failed or "not compared with the policy yet"
        ago = f"compared {self._clock() - last.at:.0f}s ago"
        if failed:
            ago = f"{failed}; {ago}"
        if not last.differences:
            return True, f"send what the policy needs ({ago})"
        listed = "; ".join(str(difference) for difference in last.differences)
        return True, f"differ from what the policy needs ({ago}): {listed}; {FIX}"
