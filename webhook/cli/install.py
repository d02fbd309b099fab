"""The `install` and `uninstall` commands.

``install`` makes sure of the certificates first (``webhook.tls.provision``: created
when missing, renewed when due), then applies the base with the caBundle filled and
the webhook configurations last, and waits for a replica; ``uninstall`` removes the
webhook configurations first. Credentials are kubectl's (``--kubeconfig``,
``$KUBECONFIG``, ``~/.kube/config``, in-cluster; ``--context``); a cluster that cannot
be reached, refused credentials, an action RBAC forbids or any refusal exits 1 with
one line (``webhook.cli.cluster_options``).

``install --dry-run`` means what it means to kubectl: ``client`` prints the objects as
YAML and sends nothing (no cluster needed; the caBundle is left empty, since the CA
lives in the cluster); ``server`` sends every write with ``dryRun=All``, so
kube-apiserver validates and admits each and stores none, and says what would change.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from webhook.cli.cluster_options import (
    CREDENTIALS_HELP,
    add_cluster_options,
    run_against_cluster,
)
from webhook.engine.serving import EMBEDDED_SOURCE, serving_engine
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
from webhook.policy.load import default_policy_text
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
DRY_RUN_MODES = ("none", "client", "server")
SERVER_DRY_RUN = "(server dry run)"


def add_install_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    install = commands.add_parser(
        "install",
        help="install gpu-admission into a cluster (certificates, objects, webhooks)",
        description="Install gpu-admission into the namespace gpu-admission: generate or "
        "reuse certificates, apply deploy/base with the caBundle filled, wait until ready. "
        + CREDENTIALS_HELP,
    )
    add_cluster_options(install)
    install.add_argument(
        "--dry-run",
        choices=DRY_RUN_MODES,
        default="none",
        help="client: print the objects as YAML, send nothing; server: send every write "
        "with dryRun=All, store nothing, say what would change (default: none)",
    )
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
        description="Remove gpu-admission: the webhook configurations first, then the "
        "namespace gpu-admission and the cluster-scoped objects. " + CREDENTIALS_HELP,
    )
    add_cluster_options(uninstall)
    uninstall.add_argument(
        "--keep-priority-classes",
        action="store_true",
        help="keep the PriorityClasses install made for the policy's classes (pods may "
        "still use them)",
    )
    uninstall.set_defaults(run=_uninstall)


def _install(args: argparse.Namespace) -> int:
    try:
        policy_text = args.policy.read_text("utf-8") if args.policy else default_policy_text()
        source = str(args.policy) if args.policy else EMBEDDED_SOURCE
        policy = serving_engine(policy_text, source).policy
    except (OSError, PolicyError) as error:
        print(f"gpu-admission install: {error}", file=sys.stderr)
        return 2
    if args.dry_run == "client":
        return _print_install(args, policy, policy_text)
    if args.dry_run == "server":
        return run_against_cluster(
            "install", args, lambda api: _dry_run_on_server(api, args, policy, policy_text)
        )
    return run_against_cluster(
        "install", args, lambda api: _install_into(api, args, policy, policy_text)
    )


def _print_install(args: argparse.Namespace, policy: Any, policy_text: str) -> int:
    """``--dry-run=client``: every object install would apply, as YAML, and nothing sent."""
    import yaml

    plan = render_install(policy, policy_text, "", image=args.image)
    documents = [*plan.objects, plan.mutating, plan.validating]
    sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
    print(
        f"gpu-admission install: client dry run, nothing sent. The caBundles are empty here: "
        f"install fills them with the CA of Secret {NAMESPACE}/{CA_SECRET}, and creates the "
        f"certificate Secrets {CA_SECRET} and {TLS_SECRET} when missing.",
        file=sys.stderr,
    )
    return 0


def _dry_run_on_server(api: Any, args: argparse.Namespace, policy: Any, policy_text: str) -> int:
    """``--dry-run=server``: the writes of install, each with ``dryRun=All``.

    The certificate Secrets are read, never written: an existing CA fills the caBundles
    as install would; without one, install would create it, and the caBundles are sent
    empty. kube-apiserver cannot dry-run an object into a namespace that does not exist
    yet, so on a first install the namespaced objects are listed, not sent."""
    from webhook.kube.client import apply_webhook_configurations, object_exists, server_dry_run
    from webhook.kube.secrets import KubeCertificateStore

    store = KubeCertificateStore(api, NAMESPACE, WEBHOOK_CONFIGURATION, labels=APP_LABELS)
    try:
        if store.read_secret(CA_SECRET) is None:
            bundle = ""
            print(
                f"certificates: Secrets {NAMESPACE}/{CA_SECRET} and {NAMESPACE}/{TLS_SECRET} "
                f"would be created (not in a dry run; the caBundles are sent empty)"
            )
        else:
            bundle = installed_ca_bundle(store, CA_SECRET)
            print(
                f"certificates: the CA of Secret {NAMESPACE}/{CA_SECRET} fills the caBundles "
                "(a leaf due for renewal is renewed by install, not in a dry run)"
            )
    except RotationError as error:
        print(f"gpu-admission install: {error}", file=sys.stderr)
        return 1
    plan = render_install(policy, policy_text, bundle, image=args.image)
    if object_exists(api, "v1", "Namespace", NAMESPACE):
        sent, unsent = plan.objects, []
    else:
        sent = [o for o in plan.objects if "namespace" not in o["metadata"]]
        unsent = [o for o in plan.objects if "namespace" in o["metadata"]]
    for outcome in server_dry_run(api, sent):
        print(f"{outcome} {SERVER_DRY_RUN}")
    for obj in unsent:
        print(
            f"{obj['kind']}/{obj['metadata']['name']} created {SERVER_DRY_RUN}: not sent, "
            f"the namespace {NAMESPACE} does not exist yet"
        )
    apply_webhook_configurations(api, plan.mutating, plan.validating, dry_run=True)
    print(f"the webhook configurations {WEBHOOK_CONFIGURATION} replaced {SERVER_DRY_RUN}")
    return 0


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


HELM_RELEASE_NAME = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"


def _helm_release(api: Any) -> tuple[str, str] | None:
    """(namespace, name) of the Helm release the installed webhook configurations belong
    to; None for configurations `install` made, or none."""
    from webhook.kube.webhook_configurations import read_webhook_configurations

    for configuration in read_webhook_configurations(api, WEBHOOK_CONFIGURATION, timeout=30):
        metadata = (configuration or {}).get("metadata") or {}
        if (metadata.get("labels") or {}).get("app.kubernetes.io/managed-by") != "Helm":
            continue
        annotations = metadata.get("annotations") or {}
        return (
            str(annotations.get(HELM_RELEASE_NAMESPACE, "?")),
            str(annotations.get(HELM_RELEASE_NAME, "?")),
        )
    return None


def _uninstall_from(api: Any, args: argparse.Namespace) -> int:
    from webhook.kube.client import (
        delete_objects,
        delete_webhook_configurations,
        labelled_objects,
    )

    release = _helm_release(api)
    if release is not None:
        namespace, name = release
        print(
            f"gpu-admission uninstall: the webhook configurations {WEBHOOK_CONFIGURATION} "
            f"belong to the Helm release {namespace}/{name}, which `helm uninstall {name} "
            f"--namespace {namespace}` removes; nothing deleted",
            file=sys.stderr,
        )
        return 2
    # Webhook configurations first: nothing may call a service that is going away.
    delete_webhook_configurations(api, WEBHOOK_CONFIGURATION)
    print(f"deleted the webhook configurations {WEBHOOK_CONFIGURATION}")
    leftovers = [
        o
        for o in reversed(base_objects())
        if o["kind"] not in WEBHOOK_KINDS and o["kind"] != "PriorityClass"
    ]
    if not args.keep_priority_classes:
        # The installed policy's classes, whatever their names: those install labelled.
        leftovers += labelled_objects(
            api, "scheduling.k8s.io/v1", "PriorityClass", dict(APP_LABELS)
        )
    # Deleting the namespace removes the Secrets, ConfigMap and pods with it.
    for deleted in delete_objects(api, leftovers):
        print(f"deleted {deleted}")
    return 0
