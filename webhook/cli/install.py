"""The `install` and `uninstall` commands.

``install`` makes sure of the certificates first (``webhook.tls.provision``: created
when missing, renewed when due), then applies the base with the caBundle filled and
the webhook configurations last, and waits for a replica; ``uninstall`` removes the
webhook configurations first. A failed API call exits 1 with kube-apiserver's message.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from webhook.cli.cluster_options import add_cluster_options, run_against_cluster
from webhook.errors import PolicyError
from webhook.install.names import (
    APP_LABELS,
    CA_SECRET,
    DEPLOYMENT,
    NAMESPACE,
    SERVICE,
    TLS_SECRET,
    WEBHOOK_CONFIGURATION,
)
from webhook.install.plan import WEBHOOK_KINDS, InstallError, base_objects, render_install
from webhook.policy import load_policy_text
from webhook.policy.load import DEFAULT_POLICY, default_policy_text
from webhook.tls.provision import installed_ca_bundle, provision
from webhook.tls.rotation import RotationError, RotationRequest

#: The certificates install keeps: a leaf for the Service and the CA that issued it,
#: renewed when due, without the wait of `certs rotate` after a caBundle change.
CERTIFICATES = RotationRequest(
    namespace=NAMESPACE,
    secret=TLS_SECRET,
    ca_secret=CA_SECRET,
    service=SERVICE,
    propagation_delay=0,
)

DEFAULT_WAIT_SECONDS = 300


def add_install_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    install = commands.add_parser(
        "install",
        help="install gpu-admission into a cluster (certificates, objects, webhooks)",
        description="Install gpu-admission into the namespace gpu-admission: generate or "
        "reuse certificates, apply deploy/base with the caBundle filled, wait until ready.",
    )
    add_cluster_options(install)
    install.add_argument("--policy", type=Path, help="policy YAML (default: the embedded one)")
    install.add_argument("--image", help="container image (default: the one in deploy/base)")
    install.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"wait this long for an available replica; 0 to not wait "
        f"(default {DEFAULT_WAIT_SECONDS})",
    )
    install.set_defaults(run=_install)

    uninstall = commands.add_parser(
        "uninstall",
        help="remove gpu-admission from a cluster, webhook configurations first",
    )
    add_cluster_options(uninstall)
    uninstall.add_argument(
        "--keep-priority-classes",
        action="store_true",
        help="keep inference-priority and training-priority (pods may still use them)",
    )
    uninstall.set_defaults(run=_uninstall)


def _install(args: argparse.Namespace) -> int:
    try:
        policy_text = args.policy.read_text("utf-8") if args.policy else default_policy_text()
        source = str(args.policy) if args.policy else f"policies/{DEFAULT_POLICY} (embedded)"
        policy = load_policy_text(policy_text, source)
    except (OSError, PolicyError) as error:
        print(f"gpu-admission install: {error}", file=sys.stderr)
        return 2
    return run_against_cluster(
        "install", args, lambda api: _install_into(api, args, policy, policy_text)
    )


def _install_into(api: Any, args: argparse.Namespace, policy: Any, policy_text: str) -> int:
    from webhook.kube.client import (
        apply_webhook_configurations,
        deployment_availability,
        server_side_apply,
    )
    from webhook.kube.secrets import KubeCertificateStore

    try:
        namespace = next(o for o in base_objects() if o["kind"] == "Namespace")
        server_side_apply(api, [namespace])
        store = KubeCertificateStore(api, NAMESPACE, WEBHOOK_CONFIGURATION, labels=APP_LABELS)
        for line in provision(store, CERTIFICATES).lines:
            print(line)
        bundle = installed_ca_bundle(store, CA_SECRET)
        plan = render_install(policy, policy_text, bundle, image=args.image)
        for applied in server_side_apply(api, plan.objects):
            print(f"applied {applied}")
        apply_webhook_configurations(api, plan.mutating, plan.validating)
        print(f"applied the webhook configurations {WEBHOOK_CONFIGURATION}")
        if args.wait > 0:
            _wait_available(lambda: deployment_availability(api, NAMESPACE, DEPLOYMENT), args.wait)
    except (InstallError, RotationError) as error:
        print(f"gpu-admission install: {error}", file=sys.stderr)
        return 1
    return 0


def _wait_available(availability: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    available, desired = availability()
    while available < 1:
        if time.monotonic() > deadline:
            raise InstallError(
                f"no replica of {NAMESPACE}/{DEPLOYMENT} became available in {seconds:g}s "
                f"({available}/{desired}); see `kubectl -n {NAMESPACE} describe deployment "
                f"{DEPLOYMENT}`. The webhooks are installed and fail closed for GPU pods in "
                "opted-in namespaces until a replica is ready"
            )
        time.sleep(2)
        available, desired = availability()
    print(f"{NAMESPACE}/{DEPLOYMENT}: {available}/{desired} replicas available")


def _uninstall(args: argparse.Namespace) -> int:
    return run_against_cluster("uninstall", args, lambda api: _uninstall_from(api, args))


def _uninstall_from(api: Any, args: argparse.Namespace) -> int:
    from webhook.kube.client import delete_objects, delete_webhook_configurations

    # Webhook configurations first: nothing may call a service that is going away.
    delete_webhook_configurations(api, WEBHOOK_CONFIGURATION)
    print(f"deleted the webhook configurations {WEBHOOK_CONFIGURATION}")
    leftovers = [
        o
        for o in reversed(base_objects())
        if not (args.keep_priority_classes and o["kind"] == "PriorityClass")
        and o["kind"] not in WEBHOOK_KINDS
    ]
    # Deleting the namespace removes the Secrets, ConfigMap and pods with it.
    for deleted in delete_objects(api, leftovers):
        print(f"deleted {deleted}")
    return 0
