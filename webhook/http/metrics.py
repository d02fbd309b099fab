"""Prometheus metrics of the service, served on ``GET /metrics`` of the metrics port.

Every ``Metrics`` has its own ``CollectorRegistry``, so each app (and each test) counts
only what it saw. The series:

- ``gpu_admission_requests_total{webhook,operation,decision,rule}``: reviews answered;
  ``decision`` is ``allowed``, ``denied`` or ``error`` (the engine failed, or the body
  was not an AdmissionReview, or the review was refused only by rules that could not
  judge it: no live inventory, a claim or pod that could not be read). A denial counts
  once per violated enforced rule, with ``rule`` naming it, and so does an error of rules
  that could not judge; an admission or any other error counts once with ``rule=""``. Besides,
  any review counts once per rule in ``warn`` mode under ``decision="warned"`` and
  once per rule in ``audit`` mode under ``decision="audited"``, and a review skipped
  by a policy exemption once under ``decision="exempted"`` (``rule=""``); so
  ``allowed`` plus ``denied`` (by review) is still every answered review.
- ``gpu_admission_review_duration_seconds{webhook}``: time to answer one review.
- ``gpu_admission_policy_reloads_total{result}``: new policy file contents tried,
  ``success`` or ``failure``.
- ``gpu_admission_policy_valid``: 1 while the policy file compiles, 0 while the last
  good policy serves in place of a broken file.
- ``gpu_admission_policy_last_reload_timestamp_seconds``: when the policy serving now
  was loaded.
- ``gpu_admission_policy_info{revision}``: 1 for the revision of the policy serving now
  (``Policy.revision``, the annotation mutated pods carry).
- ``gpu_admission_connections_cut_total{reason}``: connections the server closed on its
  own (``webhook.http.limits``): ``idle``, ``head_timeout``, ``head_too_large``,
  ``body_timeout``, ``evicted`` (an older connection waiting for a request, closed to
  make room) or ``no_room`` (a new connection while every other one was busy).
- ``gpu_admission_connections_delayed_total``: new connections past their source
  address's allowance that waited for their turn before their TLS handshake
  (``webhook.http.tls_gate``); those that would have waited too long are cut as
  ``source_rate``.
- ``gpu_admission_review_worker_restarts_total{reason}``: review workers replaced
  (``webhook.http.offload``): ``deadline`` (killed, stuck past its deadline) or ``died``.
- ``gpu_admission_certificate_expiry_timestamp_seconds``: when the serving certificate
  expires (once ``watch_certificate`` is given the served certificate).
- ``gpu_admission_inventory_synced{kind}``: 1 once the live cache of ``nodes`` or
  ``priorityclasses`` has listed them, 0 while the policy's static figures serve
  instead (only with the live inventory on, see ``watch_inventory``).
- ``gpu_admission_inventory_sync_age_seconds{kind}``: seconds since that cache was last
  known current (a list, a watch event or bookmark, or a watch that ended normally);
  +Inf before its first sync.
- ``gpu_admission_inventory_watch_events_total{kind}``: watch events the live cache of
  that kind applied (bookmarks included); ``gpu_admission_inventory_changes_total{kind}``:
  those that changed what it holds, each a new snapshot for the engine.
- ``gpu_admission_webhook_configuration_mismatch{webhook}``: 1 for each webhook whose
  installed configuration does not send what the policy serving now needs (rules,
  namespace opt-in, objectSelector, matchConditions; ``webhook.install.scope``), 0 for
  each that does; as of the last comparison (with a Kubernetes client only, see
  ``webhook.service.webhook_scope``).
"""

from __future__ import annotations

import bisect
import functools
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from webhook.tls.served import CertificateState

__all__ = ["CONTENT_TYPE", "DURATION_BUCKETS", "Metrics", "ReviewCounts"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

#: A review takes well under a millisecond on a warm engine; the top buckets catch a
#: starved process long before kube-apiserver's timeout (3 s as shipped).
DURATION_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)


class Metrics:
    """The service's series, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # python_gc_* (collections by generation: a full one walks the whole inventory)
        # and process_* (CPU seconds, resident memory, open files), as every Python
        # service that prometheus-client serves exports them.
        GCCollector(registry=self.registry)
        ProcessCollector(registry=self.registry)
        self._reviews = ReviewCounts(DURATION_BUCKETS)
        self.registry.register(self._reviews)
        self._policy_series()
        self.connections_cut = Counter(
            "gpu_admission_connections_cut",
            "Connections the server closed on its own, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.connections_delayed = Counter(
            "gpu_admission_connections_delayed",
            "New connections that waited for their source's turn before their TLS handshake.",
            registry=self.registry,
        )
        self.worker_restarts = Counter(
            "gpu_admission_review_worker_restarts",
            "Review workers replaced, by reason: deadline (stuck, killed) or died.",
            ["reason"],
            registry=self.registry,
        )
        for reason in ("deadline", "died"):
            self.worker_restarts.labels(reason=reason)
        self.webhook_configuration_mismatch = Gauge(
            "gpu_admission_webhook_configuration_mismatch",
            "1 while the installed webhook does not send what the policy needs, else 0.",
            ["webhook"],
            registry=self.registry,
        )
        self.policy_valid.set(1)
        self.policy_last_reload.set(time.time())
        self._compared_webhooks: set[str] = set()

    def _policy_series(self) -> None:
        """The series of the policy serving: reloads, validity, when and which revision."""
        self.policy_reloads = Counter(
            "gpu_admission_policy_reloads",
            "New policy file contents tried, by result.",
            ["result"],
            registry=self.registry,
        )
        self.policy_valid = Gauge(
            "gpu_admission_policy_valid",
            "1 while the policy file compiles; 0 while the last good policy serves instead.",
            registry=self.registry,
        )
        self.policy_last_reload = Gauge(
            "gpu_admission_policy_last_reload_timestamp_seconds",
            "Unix time the policy serving now was loaded.",
            registry=self.registry,
        )
        self.policy_info = Gauge(
            "gpu_admission_policy_info",
            "1 for the revision of the policy serving now (the first 12 hex digits of the "
            "SHA-256 of its text, as mutated pods are annotated with).",
            ["revision"],
            registry=self.registry,
        )
        for result in ("success", "failure"):
            self.policy_reloads.labels(result=result)

    def review(
        self,
        webhook: str,
        operation: str,
        decision: str,
        rules: Sequence[str],
        seconds: float,
        flagged: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Count one answered review: once per rule in ``rules``, once if there are none;
        then once per ``(decision, rule)`` in ``flagged`` (warned, audited, exempted).
        Called on the event loop only."""
        reviews = self._reviews
        for rule in rules or ("",):
            reviews.count((webhook, operation, decision, rule))
        for flag, rule in flagged:
            reviews.count((webhook, operation, flag, rule))
        reviews.time(webhook, seconds)

    def expect_cuts(self, reasons: Sequence[str]) -> None:
        """Show ``reasons`` at 0 until a connection is cut off for them."""
        for reason in reasons:
            self.connections_cut.labels(reason=reason)

    def connection_cut(self, reason: str) -> None:
        """The server closed a connection on its own (a timeout, a cap)."""
        self.connections_cut.labels(reason=reason).inc()

    def connection_delayed(self) -> None:
        """A new connection waited for its source's turn (``webhook.http.tls_gate``)."""
        self.connections_delayed.inc()

    def worker_restarted(self, reason: str) -> None:
        """A review worker was replaced (``webhook.http.offload``)."""
        self.worker_restarts.labels(reason=reason).inc()

    def policy_in_use(self, at: float, revision: str = "") -> None:
        """A valid policy of `revision`, loaded at ``at``, serves (at start, or after a
        reload)."""
        self.policy_valid.set(1)
        self.policy_last_reload.set(at)
        self.policy_info.clear()
        self.policy_info.labels(revision=revision).set(1)

    def policy_loaded(self, at: float, revision: str = "") -> None:
        """A changed policy file compiled and now serves."""
        self.policy_reloads.labels(result="success").inc()
        self.policy_in_use(at, revision)

    def policy_refused(self) -> None:
        """A changed policy file did not compile; the last good policy keeps serving."""
        self.policy_reloads.labels(result="failure").inc()
        self.policy_valid.set(0)

    def webhook_configurations_compared(
        self, compared: Iterable[str], differing: Collection[str]
    ) -> None:
        """The webhooks ``compared`` with what the policy needs; those ``differing`` are 1,
        the others 0 (a webhook compared before and no longer there included)."""
        for webhook in self._compared_webhooks.union(compared, differing):
            self.webhook_configuration_mismatch.labels(webhook=webhook).set(
                1 if webhook in differing else 0
            )
        self._compared_webhooks.update(compared, differing)

    def watch_certificate(self, state: CertificateState) -> None:
        """Report the expiry of whichever certificate ``state`` holds when scraped (an app
        serving no certificate of its own, as in tests, has no such series)."""
        expiry = Gauge(
            "gpu_admission_certificate_expiry_timestamp_seconds",
            "Unix time the serving certificate expires.",
            registry=self.registry,
        )
        expiry.set_function(lambda: state.not_after.timestamp())

    def watch_inventory(
        self,
        ages: Callable[[], Mapping[str, float | None]],
        events: Callable[[], Mapping[str, tuple[int, int]]] | None = None,
    ) -> None:
        """Report the live inventory: ``ages()`` gives, by kind, the seconds since the
        cache was known current, None for a kind never synced; ``events()``, by kind, the
        watch events applied and how many of them changed the cache."""
        if events is not None:
            self.registry.register(WatchEvents(events))
        synced = Gauge(
            "gpu_admission_inventory_synced",
            "1 once the live cache of this kind has synced; 0 while static figures serve.",
            ["kind"],
            registry=self.registry,
        )
        age = Gauge(
            "gpu_admission_inventory_sync_age_seconds",
            "Seconds since the live cache of this kind was last known current.",
            ["kind"],
            registry=self.registry,
        )
        for kind in ages():
            synced.labels(kind=kind).set_function(functools.partial(_synced, ages, kind))
            age.labels(kind=kind).set_function(functools.partial(_age, ages, kind))

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)


class ReviewCounts(Collector):
    """``gpu_admission_requests_total`` and ``gpu_admission_review_duration_seconds``, kept
    as plain numbers and made series at each scrape.

    Counted on the event loop, once or more per review: prometheus_client's own Counter
    and Histogram check, take a lock and walk the buckets at each increment, about 8 µs a
    review of the 380 µs a replica spends on it (measured in-process). A scrape, from
    another thread, copies the tables first: copying a dict is one step the event loop
    cannot interleave with."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self._bounds = tuple(buckets)
        self._requests: dict[tuple[str, str, str, str], int] = {}
        self._durations: dict[str, list[float]] = {}
        """Webhook -> the count of each bucket (the last one +Inf), then the sum."""

    def count(self, labels: tuple[str, str, str, str]) -> None:
        self._requests[labels] = self._requests.get(labels, 0) + 1

    def time(self, webhook: str, seconds: float) -> None:
        durations = self._durations.get(webhook)
        if durations is None:
            durations = self._durations[webhook] = [0.0] * (len(self._bounds) + 2)
        durations[bisect.bisect_left(self._bounds, seconds)] += 1
        durations[-1] += seconds

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "gpu_admission_requests",
            "Admission reviews answered, by webhook, operation, decision and violated rule.",
            labels=["webhook", "operation", "decision", "rule"],
        )
        for labels, value in dict(self._requests).items():
            requests.add_metric(labels, value)
        yield requests
        durations = HistogramMetricFamily(
            "gpu_admission_review_duration_seconds",
            "Seconds to answer one admission review.",
            labels=["webhook"],
        )
        bounds = [*(_as_le(bound) for bound in self._bounds), "+Inf"]
        for webhook, counts in dict(self._durations).items():
            counts = list(counts)
            cumulative = [sum(counts[: index + 1]) for index in range(len(bounds))]
            durations.add_metric([webhook], list(zip(bounds, cumulative, strict=True)), counts[-1])
        yield durations


class WatchEvents(Collector):
    """``gpu_admission_inventory_watch_events_total{kind}`` and
    ``gpu_admission_inventory_changes_total{kind}``, read from the watches at each scrape."""

    def __init__(self, events: Callable[[], Mapping[str, tuple[int, int]]]) -> None:
        self._events = events

    def collect(self) -> Iterator[Metric]:
        received = CounterMetricFamily(
            "gpu_admission_inventory_watch_events",
            "Watch events the live inventory applied, by kind (bookmarks included).",
            labels=["kind"],
        )
        changed = CounterMetricFamily(
            "gpu_admission_inventory_changes",
            "Watch events that changed what the live inventory holds, by kind.",
            labels=["kind"],
        )
        for kind, (events, changes) in self._events().items():
            received.add_metric([kind], events)
            changed.add_metric([kind], changes)
        yield received
        yield changed


def _as_le(bound: float) -> str:
    """A bucket's ``le`` as prometheus_client's own histograms write it."""
    return str(floatToGoString(bound))  # type: ignore[no-untyped-call]


def _synced(ages: Callable[[], Mapping[str, float | None]], kind: str) -> float:
    return 0.0 if ages().get(kind) is None else 1.0


def _age(ages: Callable[[], Mapping[str, float | None]], kind: str) -> float:
    age = ages().get(kind)
    return float("inf") if age is None else age
