"""Run the admission service over HTTPS with uvicorn, reloading certificate and policy.

The TLS context of a ``CertificateReloader`` serves every connection (through
``webhook.http.tls_gate``, which bounds new connections per source before their
handshake, rather than through uvicorn's ``ssl=``), and the reloader's watcher runs as a
task on uvicorn's own event loop, so a renewed certificate reaches new connections
without a restart (see ``webhook.service.certificate_reload``).
A policy file is watched the same way by a ``PolicyReloader`` (``webhook.service.policy_reload``);
the embedded default policy never changes, so nothing watches it.

With the live inventory on, an ``InventoryWatcher`` (``webhook.kube.inventory``) keeps
Nodes and PriorityClasses in threads of its own; each review is handed its latest
snapshot, ``/readyz`` and ``/metrics`` say how current it is. With a client of the
cluster (the inventory's or the audit's), a ``WebhookScope`` (``webhook.service.webhook_scope``)
compares the installed webhook configurations with the policy serving now, and gives the
policy ConfigMap's webhook the configurations it last read.

The edge is bounded: every connection gets the timeouts and caps of
``webhook.http.limits`` (uvicorn's protocol with what it lacks), bodies are read within a
memory budget (``webhook.http.body``) and large ones judged in a worker process
(``webhook.http.offload``). uvicorn is kept rather than another server for two reasons:
it serves from the very ``SSLContext`` the certificate reloader swaps pairs into, and its
HTTP/1.1 protocol is a class that a few overridden callbacks extend with the deadlines
it lacks. ``/metrics`` is served in plain HTTP on a port of its own
(``--metrics-port``, 9090) by a second uvicorn server on the same event loop, which
stops with the first.

One server process per replica: replicas scale out, and on a 2-core machine two
processes sharing the same reviews used more CPU per review than one (950 to 985 against
775 to 812 us per pod, a /mutate and a /validate over kept-alive TLS connections).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import socket
import ssl
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from webhook.engine import Engine
from webhook.engine.inventory import Inventory
from webhook.http.app import create_app
from webhook.http.claim_reader import ReadClaim
from webhook.http.limits import CUT_REASONS, EdgeLimits, guarded_protocol
from webhook.http.memory import keep_large_blocks_mapped, trim_periodically
from webhook.http.metrics import Metrics
from webhook.http.metrics_app import create_metrics_app
from webhook.http.offload import ReviewWorker
from webhook.http.readiness import Readiness
from webhook.http.scaled_workloads import ScaledWorkloads
from webhook.http.tls_gate import SOURCE_RATE, ApiserverSources, SourceRate, gated_tls
from webhook.install.names import INSTALL_NAME
from webhook.kube.apiserver_endpoints import apiserver_addresses
from webhook.kube.claims import fetch_claim_object
from webhook.kube.client import api_client
from webhook.kube.inventory import InventoryWatcher
from webhook.kube.targets import fetch_scale_target
from webhook.kube.webhook_configurations import read_webhook_configurations
from webhook.policy import Policy
from webhook.service.apiserver_sources import keep_learning
from webhook.service.audit_schedule import AuditMetrics, PeriodicAudit
from webhook.service.certificate_reload import CertificateReloader, InvalidKeyPair, KeyPairFiles
from webhook.service.file_poll import DEFAULT_INTERVAL
from webhook.service.frozen_heap import FreezeAfterLists, each
from webhook.service.inventory import (
    MissingClassReport,
    inventory_options,
    inventory_readiness,
)
from webhook.service.namespace import service_namespace
from webhook.service.policy_reload import PolicyReloader
from webhook.service.webhook_scope import ScopeCheck, WebhookScope
from webhook.tls.dev import ensure_dev_serving_certificate

METRICS_PORT = 9090
GRACEFUL_SHUTDOWN_SECONDS = 5
#: Seconds a read of the webhook configurations may take (a thread of its own waits).
SCOPE_READ_TIMEOUT = 10.0
#: Seconds each of the two reads may take while a policy review waits on them: both well
#: within the policy webhook's timeoutSeconds (3), with the policy's compiling after them.
SCOPE_READ_IN_REVIEW_TIMEOUT = 0.75

log = logging.getLogger("gpu_admission.serve")

#: Polls some files on the running event loop until cancelled.
Watcher = Callable[[], Coroutine[object, object, None]]


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 8443
    tls_cert: Path | None = None
    tls_key: Path | None = None
    log_level: str = "info"
    #: Seconds between two looks at the certificate files and the policy file.
    reload_interval: float = DEFAULT_INTERVAL
    #: The file ``policy`` was loaded from, watched for changes; None for the embedded one.
    policy_file: Path | None = None
    #: Keep a live inventory of Nodes and PriorityClasses (see ``webhook.kube.inventory``).
    inventory: bool = False
    #: Where the cluster is for the inventory; None: the in-cluster service account.
    kubeconfig: Path | None = None
    #: The kubeconfig context to use; None: the kubeconfig's current-context.
    context: str | None = None
    #: Plain-HTTP port of ``/metrics`` on ``host``; 0 serves no metrics.
    metrics_port: int = METRICS_PORT
    #: Timeouts and caps of every connection.
    limits: EdgeLimits = field(default_factory=EdgeLimits)
    #: Seconds between two audits of what runs (``webhook.service.audit_schedule``); None: none.
    audit_interval: float | None = None
    #: The name the install gave its webhook configurations and policy ConfigMap
    #: (``webhook.install.names.INSTALL_NAME`` unless the chart's ``fullnameOverride``).
    install_name: str = INSTALL_NAME


def cache_directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-admission"


def serving_certificate(settings: ServeSettings) -> tuple[Path, Path]:
    """The certificate to serve: the one given, or a generated dev certificate for localhost."""
    if settings.tls_cert and settings.tls_key:
        return settings.tls_cert, settings.tls_key
    directory = cache_directory() / "dev-certs"
    paths = ensure_dev_serving_certificate(directory)
    log.warning(
        "no --tls-cert/--tls-key given: serving a self-signed development certificate",
        extra={"certificate": str(paths.cert), "ca": str(paths.ca_cert)},
    )
    return paths.cert, paths.key


def serve(policy: Policy, settings: ServeSettings) -> None:
    """Serve until SIGINT or SIGTERM; certificate and policy files are watched all along."""
    metrics = Metrics()
    keep_large_blocks_mapped()
    certificate = _certificate_reloader(settings)
    metrics.watch_certificate(certificate.state)
    engine, policy_check, policy_watcher = _policy_serving(policy, settings, metrics)
    readiness = Readiness(
        checks={"policy": policy_check, "certificate": certificate.state.readiness}
    )
    inventory = _live_inventory(policy, settings, engine, readiness, metrics)
    api = _audit_api(settings, inventory)
    audit = _periodic_audit(settings, api, engine, inventory, metrics)
    if audit is not None:
        readiness.checks["pod-security"] = audit.pod_security_readiness
    scope = _webhook_scope(
        inventory.api if inventory is not None else api,
        engine,
        readiness,
        metrics,
        settings.install_name,
    )
    worker = ReviewWorker(on_restart=metrics.worker_restarted)
    app = _admission_app(engine, readiness, metrics, inventory, worker, scope)
    apiserver = ApiserverSources(settings.limits.apiserver_sources)
    server = _admission_server(app, settings, certificate.context, metrics, apiserver)
    log.info(
        "serving",
        extra={"url": f"https://{settings.host}:{settings.port}", "policy": policy.source},
    )
    metrics_server = _metrics_server(metrics, settings) if settings.metrics_port else None
    watchers = _watchers(certificate, policy_watcher)
    cluster = inventory.api if inventory is not None else api
    if cluster is not None:
        read = functools.partial(apiserver_addresses, cluster)
        watchers["apiserver-sources"] = functools.partial(keep_learning, apiserver, read)
    _run(server, metrics_server, watchers, _Companions(worker, inventory, audit, scope))


def _certificate_reloader(settings: ServeSettings) -> CertificateReloader:
    """The TLS context to serve from, reloaded when the certificate files change; exits
    when the certificate and key cannot be used."""
    cert, key = serving_certificate(settings)
    try:
        return CertificateReloader(
            KeyPairFiles(cert=cert, key=key), interval=settings.reload_interval
        )
    except (InvalidKeyPair, OSError) as error:
        log.error(
            "refusing to serve: the certificate and key cannot be used",
            extra={"certificate": str(cert), "key": str(key), "reason": str(error)},
        )
        raise SystemExit(2) from None


@dataclass(frozen=True)
class _LiveInventory:
    """Nodes and PriorityClasses kept by a watcher of the cluster, and the reader of the
    workloads autoscalers target in the same cluster."""

    watcher: InventoryWatcher
    scaled_workloads: ScaledWorkloads
    api: Any = None
    claims: ReadClaim | None = None

    def current(self) -> Inventory:
        return self.watcher.current


def _live_inventory(
    policy: Policy,
    settings: ServeSettings,
    engine: Callable[[], Engine],
    readiness: Readiness,
    metrics: Metrics,
) -> _LiveInventory | None:
    """The live inventory when ``settings`` ask for one (not started yet), with its
    /readyz check and its metrics; exits when no Kubernetes client can be made."""
    if not settings.inventory:
        return None
    api = _kubernetes_client(settings)
    freeze = FreezeAfterLists()
    watcher = InventoryWatcher(
        api,
        **inventory_options(policy),
        on_change=each(freeze, MissingClassReport(lambda: engine().policy)),
    )
    freeze.follow(watcher.status)
    readiness.checks["inventory"] = lambda: inventory_readiness(
        watcher.status(), watcher.current, engine().policy
    )
    metrics.watch_inventory(watcher.sync_age_seconds, watcher.watch_events)
    return _LiveInventory(
        watcher,
        functools.partial(fetch_scale_target, api),
        api,
        functools.partial(fetch_claim_object, api),
    )


def _audit_api(settings: ServeSettings, inventory: _LiveInventory | None) -> Any:
    """The client the audit uses: the live inventory's, else one of its own; None without
    an audit. Exits when none can be made."""
    if settings.audit_interval is None:
        return None
    if inventory is not None and inventory.api is not None:
        return inventory.api
    try:
        return api_client(settings.kubeconfig, settings.context)
    except Exception as error:  # the client raises several kinds for a bad configuration
        log.error(
            "refusing to serve: no Kubernetes client for the audit",
            extra={"kubeconfig": str(settings.kubeconfig or "default"), "reason": str(error)},
        )
        raise SystemExit(2) from None


def _periodic_audit(
    settings: ServeSettings,
    api: Any,
    engine: Callable[[], Engine],
    inventory: _LiveInventory | None,
    metrics: Metrics,
) -> PeriodicAudit | None:
    """The audit of what runs every ``settings.audit_interval`` (not started yet), against
    the live inventory when there is one, never of the namespace the replica runs in
    (``webhook.service.namespace``), which the webhooks never cover."""
    if settings.audit_interval is None:
        return None
    namespace = service_namespace()
    log.info(
        "auditing what runs",
        extra={"interval_seconds": settings.audit_interval, "service_namespace": namespace},
    )
    return PeriodicAudit(
        api,
        engine,
        settings.audit_interval,
        AuditMetrics(metrics.registry),
        inventory=None if inventory is None else inventory.current,
        service_namespace=namespace,
    )


def _webhook_scope(
    api: Any,
    engine: Callable[[], Engine],
    readiness: Readiness,
    metrics: Metrics,
    install_name: str = INSTALL_NAME,
) -> WebhookScope | None:
    """The comparison of the webhook configurations `install_name` with the policy serving
    now (not started yet), with its /readyz check; None without a Kubernetes client."""
    if api is None:
        return None
    read = functools.partial(read_webhook_configurations, api, install_name)
    scope = WebhookScope(
        functools.partial(read, timeout=SCOPE_READ_TIMEOUT),
        lambda: engine().policy,
        metrics,
        read_in_review=functools.partial(read, timeout=SCOPE_READ_IN_REVIEW_TIMEOUT),
        install_name=install_name,
    )
    readiness.checks["webhook-configurations"] = scope.readiness
    return scope


def _admission_app(
    engine: Callable[[], Engine],
    readiness: Readiness,
    metrics: Metrics,
    inventory: _LiveInventory | None,
    worker: ReviewWorker,
    scope: WebhookScope | None = None,
) -> FastAPI:
    return create_app(
        engine,
        readiness,
        metrics=metrics,
        inventory=None if inventory is None else inventory.current,
        scaled_workloads=None if inventory is None else inventory.scaled_workloads,
        worker=worker,
        claims=None if inventory is None else inventory.claims,
        # Without a client of the cluster, a policy's scope is admitted not compared.
        scope_judge=functools.partial(ScopeCheck, None) if scope is None else scope.judge,
        fresh_scope_judge=None if scope is None else scope.fresh_judge,
    )


def _admission_server(
    app: FastAPI,
    settings: ServeSettings,
    context: ssl.SSLContext,
    metrics: Metrics,
    apiserver: ApiserverSources,
) -> uvicorn.Server:
    """The HTTPS server of ``app``: TLS from ``context`` behind a bound on new connections
    per source but `apiserver`'s (``webhook.http.tls_gate``), the edge's limits on every
    connection, each connection cut off or refused counted in ``metrics``."""
    limits = settings.limits
    metrics.expect_cuts((*CUT_REASONS, SOURCE_RATE))
    protocol = guarded_protocol(limits, metrics.connection_cut)
    rate = SourceRate(limits.new_connections_per_second, limits.new_connection_burst)
    gate = gated_tls(
        protocol,
        context,
        rate,
        limits.handshake_seconds,
        metrics.connection_cut,
        max_wait=limits.new_connection_wait_seconds,
        on_delayed=metrics.connection_delayed,
        apiserver=apiserver,
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        # uvicorn is given no TLS: the gate does it, after its look at the source.
        http=cast(Any, gate),
        timeout_keep_alive=settings.limits.idle_seconds,
        log_config=None,
        log_level=settings.log_level,
        access_log=False,
        # kube-apiserver connects directly: no proxy's X-Forwarded-* headers are to be
        # believed, and the middleware that reads them would run on every request.
        proxy_headers=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    config.load()
    if config.ssl is not None or config.http_protocol_class is not gate:
        raise RuntimeError("uvicorn does not serve through the TLS gate")
    if not issubclass(protocol, HttpToolsProtocol):
        raise RuntimeError("uvicorn does not serve with the guarded protocol")
    return _AdmissionServer(config)


def _watchers(certificate: CertificateReloader, policy: Watcher | None) -> dict[str, Watcher]:
    """What runs beside the servers on their event loop, by task name: the certificate's
    and the policy's file polls, and the heap's trimmer."""
    watchers: dict[str, Watcher] = {
        "certificate-reloader": certificate.watch,
        "memory-trimmer": trim_periodically,
    }
    if policy is not None:
        watchers["policy-reloader"] = policy
    return watchers


@dataclass(frozen=True)
class _Companions:
    """What runs beside the event loop, in a process or threads of its own: the review
    worker, the live inventory, the audit and the comparison of the webhook configurations."""

    worker: ReviewWorker
    inventory: _LiveInventory | None
    audit: PeriodicAudit | None = None
    scope: WebhookScope | None = None

    def start(self) -> None:
        self.worker.start()
        if self.inventory is not None:
            self.inventory.watcher.start()
        if self.audit is not None:
            self.audit.start()
        if self.scope is not None:
            self.scope.start()

    def stop(self) -> None:
        if self.scope is not None:
            self.scope.stop()
        if self.audit is not None:
            self.audit.stop()
        self.worker.stop()
        if self.inventory is not None:
            self.inventory.watcher.stop()


def _run(
    server: uvicorn.Server,
    metrics_server: _MetricsServer | None,
    watchers: dict[str, Watcher],
    companions: _Companions,
) -> None:
    """Serve until ``server`` stops, its companions started first and stopped after."""
    companions.start()
    # What was built so far lives as long as the process: keep it out of the collector's
    # full passes, which otherwise walk it all (20-35 ms) while thousands of connections
    # come and go. (A frozen object left in a cycle is never collected; only the first
    # policy, replaced on reload, could be, once.)
    gc.freeze()
    try:
        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
            runner.run(_serve_and_watch(server, metrics_server, watchers))
    finally:
        companions.stop()


class _AdmissionServer(uvicorn.Server):
    """A uvicorn server that, stopped by a signal, returns rather than raise the signal
    again once it has stopped (uvicorn's way to exit with the signal's status). Raised
    again, SIGTERM ended the process before ``_run`` stopped what runs beside the server:
    the review worker was left running without a parent, and multiprocessing's resource
    tracker reported the worker's queues as "leaked semaphore objects"."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            self._captured_signals.clear()  # stopped in order; exit 0


class _FollowingServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the main one and is stopped by it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class _MetricsServer:
    server: uvicorn.Server
    listening: socket.socket


def _metrics_server(metrics: Metrics, settings: ServeSettings) -> _MetricsServer | None:
    """The server of ``/metrics``, on a socket bound already; None, with an error logged,
    when the port cannot be had: a replica without metrics still admits pods, and one
    that does not start refuses them all (``failurePolicy: Fail``)."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((settings.host, settings.metrics_port))
    except OSError as error:
        listening.close()
        log.error(
            "serving no metrics: their port cannot be bound",
            extra={"port": settings.metrics_port, "reason": str(error)},
        )
        return None
    config = uvicorn.Config(
        create_metrics_app(metrics),
        host=settings.host,
        port=settings.metrics_port,
        http=guarded_protocol(settings.limits),
        timeout_keep_alive=settings.limits.idle_seconds,
        lifespan="off",
        log_config=None,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    log.info("serving metrics", extra={"url": f"http://{settings.host}:{settings.metrics_port}"})
    return _MetricsServer(_FollowingServer(config), listening)


def _kubernetes_client(settings: ServeSettings) -> Any:
    """A client of the cluster in ``settings``; exits when none can be made of it."""
    try:
        api = api_client(settings.kubeconfig, settings.context)
    except Exception as error:  # the client raises several kinds for a bad configuration
        where = str(settings.kubeconfig) if settings.kubeconfig else "the in-cluster account"
        log.error(
            "refusing to serve: no Kubernetes client for the live inventory",
            extra={"kubeconfig": where, "reason": str(error)},
        )
        raise SystemExit(2) from None
    log.info(
        "live inventory of Nodes and PriorityClasses on",
        extra={"kubeconfig": str(settings.kubeconfig or "in-cluster")},
    )
    return api


def _policy_serving(
    policy: Policy, settings: ServeSettings, metrics: Metrics
) -> tuple[Callable[[], Engine], Callable[[], tuple[bool, str]], Watcher | None]:
    """The engine of each review, the policy's /readyz check and what watches its file."""
    if settings.policy_file is None:
        engine = Engine(policy)
        return (lambda: engine), (lambda: (True, policy.source)), None
    reloader = PolicyReloader(
        settings.policy_file, policy, interval=settings.reload_interval, metrics=metrics
    )
    return (lambda: reloader.engine), reloader.readiness, reloader.watch


async def _serve_and_watch(
    server: uvicorn.Server, metrics: _MetricsServer | None, watchers: dict[str, Watcher]
) -> None:
    tasks = [asyncio.create_task(watch(), name=name) for name, watch in watchers.items()]
    following = None
    if metrics is not None:
        serving = metrics.server.serve(sockets=[metrics.listening])
        following = asyncio.create_task(serving, name="metrics-server")
    try:
        await server.serve()
    finally:
        if metrics is not None and following is not None:
            metrics.server.should_exit = True
            await following
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
