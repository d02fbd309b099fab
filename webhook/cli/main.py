"""The `gpu-admission` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from webhook.cli.certs import add_certs_commands
from webhook.cli.install import add_install_commands
from webhook.cli.manifests import add_manifest_commands
from webhook.cli.offline import add_offline_commands
from webhook.cli.policy_option import add_policy_option, load_engine
from webhook.errors import PolicyError
from webhook.service.file_poll import DEFAULT_INTERVAL
from webhook.service.logs import configure_logging


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    code: int = args.run(args)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-admission",
        description="Admission webhooks that put GPU workloads on the right nodes.",
    )
    commands = parser.add_subparsers(title="commands")

    serve = commands.add_parser("serve", help="run the admission service over HTTPS")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8443)
    serve.add_argument(
        "--metrics-port",
        type=_port,
        default=9090,
        help="plain-HTTP port of GET /metrics on the same host; 0 serves no metrics "
        "(default: 9090)",
    )
    add_policy_option(serve)
    serve.add_argument("--tls-cert", type=Path, help="serving certificate (PEM)")
    serve.add_argument("--tls-key", type=Path, help="serving key (PEM)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    serve.add_argument(
        "--reload-interval",
        type=_positive_seconds,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help="seconds between looks at the certificate and policy files (default: 5)",
    )
    serve.add_argument(
        "--inventory",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep a live inventory of Nodes and PriorityClasses and judge against it "
        "(default: on inside a cluster or with --kubeconfig, off otherwise)",
    )
    serve.add_argument(
        "--kubeconfig",
        type=Path,
        help="cluster for the live inventory (default: the in-cluster service account)",
    )
    serve.set_defaults(run=_serve)

    policy = commands.add_parser("policy", help="work with policy files")
    policy_commands = policy.add_subparsers(title="policy commands")
    validate = policy_commands.add_parser("validate", help="check policy files")
    validate.add_argument("files", nargs="+", type=Path)
    validate.set_defaults(run=_policy_validate)
    add_offline_commands(commands, policy_commands)
    add_certs_commands(commands)
    add_install_commands(commands)
    add_manifest_commands(commands)
    return parser


def _serve(args: argparse.Namespace) -> int:
    from webhook.service.serve import ServeSettings, serve

    if (args.tls_cert is None) != (args.tls_key is None):
        print("gpu-admission: give both --tls-cert and --tls-key, or neither", file=sys.stderr)
        return 2
    try:
        policy = load_engine(args.policy).policy
    except PolicyError as error:
        print(f"gpu-admission: refusing to serve a broken policy: {error}", file=sys.stderr)
        return 2
    inventory = args.inventory
    if inventory is None:
        inventory = args.kubeconfig is not None or in_cluster()
    if inventory and args.kubeconfig is None and not in_cluster():
        print(
            "gpu-admission: --inventory needs --kubeconfig outside a cluster",
            file=sys.stderr,
        )
        return 2
    configure_logging(args.log_level)
    settings = ServeSettings(
        host=args.host,
        port=args.port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        log_level=args.log_level,
        reload_interval=args.reload_interval,
        policy_file=args.policy,
        inventory=inventory,
        kubeconfig=args.kubeconfig,
        metrics_port=args.metrics_port,
    )
    serve(policy, settings)
    return 0


def in_cluster() -> bool:
    """Whether this process runs in a pod (kubelet sets these for every container)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and bool(
        os.environ.get("KUBERNETES_SERVICE_PORT")
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text}")
    return port


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return seconds


def _policy_validate(args: argparse.Namespace) -> int:
    failed = False
    for path in args.files:
        try:
            policy = load_engine(path).policy
        except PolicyError as error:
            print(error, file=sys.stderr)
            failed = True
            continue
        print(f"{path}: ok ({len(policy.pools)} pools, {len(policy.classes)} classes)")
    return 1 if failed else 0
