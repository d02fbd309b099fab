"""The `gpu-admission` command.

Each module of a command group (certs, install, ...) imports what its commands need:
the engine and pydantic, the Kubernetes client, cryptography, uvicorn. So that
`gpu-admission --help`, `--version` and each command start without what the other
commands need, ``COMMAND_GROUPS`` names every top-level command with its help, and
only the group of the command on the command line is imported and added in full;
the others are listed by name and help alone. A new command group is one function
importing its module and one entry in ``COMMAND_GROUPS`` (tests/cli/test_main_startup.py
checks that the entries say what the modules add).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias, cast

from webhook.cli.parsing import CommandParser
from webhook.cli.policy_option import add_policy_option, load_engine
from webhook.errors import PolicyError

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

PROG = "gpu-admission"
DISTRIBUTION = "gpu-admission"
"""The installed package whose version `--version` prints."""


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_of(arguments))
    args = parser.parse_args(arguments)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    code: int = args.run(args)
    return code


class CommandGroup(NamedTuple):
    """Top-level commands that one module adds to the parser."""

    commands: Mapping[str, str]
    """Each command the group adds, in the order it adds them -> its help."""
    add: Callable[[Commands], None]
    """Imports the group's module and adds its commands in full."""


def build_parser(command: str | None = None, every_group: bool = False) -> argparse.ArgumentParser:
    """The parser with `command`'s group (or, with `every_group`, each group) in full, and
    the other commands by name and help alone."""
    parser = CommandParser(
        prog=PROG,
        description="Admission webhooks that put GPU workloads on the right nodes.",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the installed version and exit"
    )
    # Each command's parser is a CommandParser too (and so are theirs): an unknown option
    # is refused with the usage of the command it was given to.
    commands = cast(Commands, parser.add_subparsers(title="commands", parser_class=CommandParser))
    for group in COMMAND_GROUPS:
        if every_group or command in group.commands:
            group.add(commands)
        else:
            for name, help_text in group.commands.items():
                commands.add_parser(name, help=help_text, add_help=False)
    return parser


def full_parser() -> argparse.ArgumentParser:
    """The parser with every command in full (for shell completion; imports every group)."""
    return build_parser(every_group=True)


def _command_of(arguments: Sequence[str]) -> str | None:
    """The top-level command on a command line: its first word that is not an option (the
    top-level options take no values)."""
    return next((word for word in arguments if not word.startswith("-")), None)


class _VersionAction(argparse.Action):
    """`--version`: the version of the installed package, read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"{PROG} {package_version()}")
        parser.exit()


def package_version() -> str:
    """The version of the installed gpu-admission distribution (its metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown (not installed as a package)"


def _add_serve_command(commands: Commands) -> None:
    from webhook.cli.audit_options import add_audit_interval_option
    from webhook.service.file_poll import DEFAULT_INTERVAL

    serve = commands.add_parser("serve", help=SERVE_HELP)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on for HTTPS")
    serve.add_argument("--port", type=int, default=8443, help="HTTPS port of the webhooks")
    serve.add_argument(
        "--metrics-port",
        type=_port,
        default=9090,
        help="plain-HTTP port of GET /metrics on the same host; 0 serves no metrics "
        "(default: 9090)",
    )
    add_policy_option(serve, stdin=False)
    serve.add_argument("--tls-cert", type=Path, help="serving certificate (PEM)")
    serve.add_argument("--tls-key", type=Path, help="serving key (PEM)")
    serve.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning"], help="log level"
    )
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
        "(default: on inside a cluster or with --kubeconfig or --context, off otherwise)",
    )
    serve.add_argument(
        "--kubeconfig",
        type=Path,
        help="cluster for the live inventory (default: the in-cluster service account)",
    )
    serve.add_argument("--context", metavar="NAME", help="kubeconfig context of the live inventory")
    _add_connection_options(serve)
    _add_install_name_option(serve)
    add_audit_interval_option(serve)
    serve.set_defaults(run=_serve)


def _add_connection_options(serve: argparse.ArgumentParser) -> None:
    """How the admission port's door paces new connections, and whose it never paces."""
    serve.add_argument(
        "--new-connections-per-source",
        type=_positive_rate,
        default=50.0,
        metavar="PER_SECOND",
        help="new TLS connections one source address may open a second, after a burst of "
        "four times as many; past that they wait their turn, up to 1 s, before their "
        "handshake, and are closed past that (default: 50)",
    )
    serve.add_argument(
        "--apiserver-source",
        action="append",
        type=_source_network,
        default=[],
        metavar="CIDR",
        help="an address or CIDR kube-apiserver reaches the service from, whose new "
        "connections are never paced (repeatable; the addresses the cluster's `kubernetes` "
        "EndpointSlice lists are learned besides)",
    )


def _add_policy_commands(commands: Commands) -> None:
    from webhook.cli.offline import add_policy_offline_commands
    from webhook.cli.policy_validate import add_validate_command

    policy = commands.add_parser("policy", help=POLICY_HELP)
    policy_commands = policy.add_subparsers(title="policy commands")
    add_validate_command(policy_commands)
    add_policy_offline_commands(policy_commands)


def _add_offline_commands(commands: Commands) -> None:
    from webhook.cli.offline import add_offline_commands

    add_offline_commands(commands)


def _add_certs_commands(commands: Commands) -> None:
    from webhook.cli.certs import add_certs_commands

    add_certs_commands(commands)


def _add_install_commands(commands: Commands) -> None:
    from webhook.cli.install import add_install_commands

    add_install_commands(commands)


def _add_manifest_commands(commands: Commands) -> None:
    from webhook.cli.manifests import add_manifest_commands

    add_manifest_commands(commands)


def _add_audit_commands(commands: Commands) -> None:
    from webhook.cli.audit import add_audit_commands

    add_audit_commands(commands)


def _add_completion_command(commands: Commands) -> None:
    from webhook.cli.completion import add_completion_command

    add_completion_command(commands)


def _add_version_command(commands: Commands) -> None:
    from webhook.cli.version import add_version_command

    add_version_command(commands)


SERVE_HELP = "run the admission service over HTTPS"
POLICY_HELP = "work with policy files"
AUDIT_HELP = "judge the pods and workloads already running, as the webhooks would"

COMMAND_GROUPS: tuple[CommandGroup, ...] = (
    CommandGroup({"serve": SERVE_HELP}, _add_serve_command),
    CommandGroup({"policy": POLICY_HELP}, _add_policy_commands),
    CommandGroup(
        {
            "check": "evaluate manifests offline: verdict, rules, mutation, placement",
            "explain": "say in prose what would become of each object",
        },
        _add_offline_commands,
    ),
    CommandGroup({"certs": "make and renew the webhook's certificates"}, _add_certs_commands),
    CommandGroup(
        {
            "install": "install gpu-admission into a cluster (certificates, objects, webhooks)",
            "uninstall": "remove gpu-admission from a cluster, webhook configurations first",
        },
        _add_install_commands,
    ),
    CommandGroup({"manifests": "the kustomize tree in deploy/"}, _add_manifest_commands),
    CommandGroup({"audit": AUDIT_HELP}, _add_audit_commands),
    CommandGroup({"completion": "print a shell completion script"}, _add_completion_command),
    CommandGroup({"version": "print the installed version"}, _add_version_command),
)


def _serve(args: argparse.Namespace) -> int:
    from webhook.cli.audit_options import audit_interval
    from webhook.http.limits import EdgeLimits
    from webhook.service.logs import configure_logging
    from webhook.service.serve import ServeSettings, serve

    if (args.tls_cert is None) != (args.tls_key is None):
        print("gpu-admission: give both --tls-cert and --tls-key, or neither", file=sys.stderr)
        return 2
    if args.policy is not None and str(args.policy) == "-":
        print(
            "gpu-admission: serve reads its policy from a file it watches, not -", file=sys.stderr
        )
        return 2
    try:
        policy = load_engine(args.policy).policy
    except PolicyError as error:
        print(f"gpu-admission: refusing to serve a broken policy: {error}", file=sys.stderr)
        return 2
    inventory = args.inventory
    if inventory is None:
        inventory = args.kubeconfig is not None or args.context is not None or in_cluster()
    if inventory and args.kubeconfig is None and args.context is None and not in_cluster():
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
        context=args.context,
        metrics_port=args.metrics_port,
        audit_interval=audit_interval(args, in_cluster()),
        install_name=args.install_name,
        limits=EdgeLimits(
            new_connections_per_second=args.new_connections_per_source,
            new_connection_burst=max(1, round(4 * args.new_connections_per_source)),
            apiserver_sources=tuple(args.apiserver_source),
        ),
    )
    serve(policy, settings)
    return 0


def in_cluster() -> bool:
    """Whether this process runs in a pod (kubelet sets these for every container)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and bool(
        os.environ.get("KUBERNETES_SERVICE_PORT")
    )


def _source_network(text: str) -> str:
    from webhook.http.tls_gate import source_network

    try:
        return str(source_network(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text}")
    return port


def _add_install_name_option(serve: argparse.ArgumentParser) -> None:
    from webhook.install.names import INSTALL_NAME

    serve.add_argument(
        "--install-name",
        type=_install_name,
        default=INSTALL_NAME,
        metavar="NAME",
        help="the name the install gave its objects: the webhook configurations NAME, whose "
        "scope is compared with the policy's, and the policy ConfigMap NAME-policy "
        f"(default: {INSTALL_NAME}; the chart passes its fullname)",
    )


def _install_name(text: str) -> str:
    from webhook.install.names import install_name

    try:
        return install_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive_rate(text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not rate > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return rate


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return seconds
