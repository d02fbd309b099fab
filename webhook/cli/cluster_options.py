"""``--kubeconfig`` and ``--context`` for every command that talks to a cluster.

``add_cluster_options(parser)`` adds both; ``cluster_client(args)`` makes the client
(credentials found as kubectl finds them: ``webhook.kube.credentials``) and checks
that the server answers; ``run_against_cluster`` runs a command's work with it and
turns every failure of the cluster (no credentials, unreachable, 401, 403, any
refusal) into one line on stderr and exit code 1, never a traceback.

The Kubernetes client is imported inside the functions, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "CREDENTIALS_HELP",
    "add_cluster_options",
    "cluster_client",
    "fail",
    "run_against_cluster",
]

CREDENTIALS_HELP = (
    "Credentials as kubectl finds them: --kubeconfig FILE, else $KUBECONFIG (files "
    "separated by ':', merged), else ~/.kube/config, else the in-cluster service account."
)


def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--kubeconfig FILE`` and ``--context NAME`` to ``parser``."""
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the "
        "in-cluster service account)",
    )
    parser.add_argument(
        "--context",
        metavar="NAME",
        help="kubeconfig context to use (default: its current-context)",
    )


def cluster_client(args: argparse.Namespace) -> Any:
    """A ``kubernetes.client.ApiClient`` for ``args.kubeconfig`` and ``args.context``,
    after the server has answered (``webhook.kube.client.check_reachable``).

    Raises ``CredentialsError`` or one of ``CLUSTER_ERRORS``; ``run_against_cluster``
    turns each into one line. The caller closes the client.
    """
    from webhook.kube.client import api_client, check_reachable

    api = api_client(getattr(args, "kubeconfig", None), getattr(args, "context", None))
    try:
        check_reachable(api)
    except BaseException:
        api.close()
        raise
    return api


def run_against_cluster(command: str, args: argparse.Namespace, work: Callable[[Any], int]) -> int:
    """``work(api)`` with the client of ``cluster_client(args)``, closed after; a failure
    of the cluster is printed as ``gpu-admission COMMAND: <one line>`` and returns 1."""
    from webhook.kube.api_errors import CLUSTER_ERRORS, cluster_error_message
    from webhook.kube.client import api_client, check_reachable
    from webhook.kube.credentials import CredentialsError

    try:
        api = api_client(getattr(args, "kubeconfig", None), getattr(args, "context", None))
    except CredentialsError as error:
        return fail(command, str(error))
    try:
        check_reachable(api)
        return work(api)
    except CLUSTER_ERRORS as error:
        return fail(command, cluster_error_message(error, str(api.configuration.host)))
    finally:
        api.close()


def fail(command: str, message: str, code: int = 1) -> int:
    """Print ``gpu-admission COMMAND: MESSAGE`` on stderr; return ``code``."""
    print(f"gpu-admission {command}: {message}", file=sys.stderr)
    return code
