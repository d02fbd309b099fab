"""Which cluster, as which user: the credentials every command finds the way kubectl does.

In order, the first that applies:

1. ``--kubeconfig FILE``: that file alone (it must exist);
2. ``$KUBECONFIG``: a list of files separated by ``os.pathsep``, merged as kubectl
   merges them (the first file to name a cluster, user or context wins, and so does
   the first ``current-context``); files that do not exist are skipped;
3. ``~/.kube/config``;
4. the service account of the pod this runs in (``KUBERNETES_SERVICE_HOST``).

``context`` picks a context of the kubeconfig instead of its ``current-context``.
The merge is the kubernetes client's own ``KubeConfigMerger``; only its choice of
``current-context`` (the last file's) is corrected to kubectl's (the first file's).
Nothing is ever written back to a kubeconfig file.

Whatever goes wrong (no credentials anywhere, a file that is not a kubeconfig, an
unknown context) raises ``CredentialsError`` with one line naming what was tried.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import (
    ENV_KUBECONFIG_PATH_SEPARATOR,
    KubeConfigLoader,
    KubeConfigMerger,
)

from webhook.errors import GpuAdmissionError

__all__ = [
    "CONNECT_RETRIES",
    "Credentials",
    "CredentialsError",
    "kubeconfig_files",
    "resolve_credentials",
]

CONNECT_RETRIES = 1
"""A refused or timed-out connection is tried once more, then reported: no long loop. A
read that fails (a TLS handshake or an answer that does not come) is not retried."""


class CredentialsError(GpuAdmissionError):
    """No usable credentials; the message is one line saying what was tried and why."""


@dataclass(frozen=True)
class Credentials:
    """A client configuration and where it came from (for messages)."""

    configuration: Any
    """A ``kubernetes.client.Configuration``."""
    source: str
    """``kubeconfig /path (context NAME)`` or ``the in-cluster service account``."""

    @property
    def server(self) -> str:
        """The API server's URL."""
        return str(self.configuration.host)


def kubeconfig_files(
    kubeconfig: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> tuple[list[Path], str]:
    """The kubeconfig files to merge, in order, and what was looked at (for messages).

    An empty list means none applies: the caller falls back to the in-cluster account.
    """
    environ = os.environ if environ is None else environ
    if kubeconfig is not None:
        return [kubeconfig], f"--kubeconfig {kubeconfig}"
    listed = environ.get("KUBECONFIG", "")
    if listed:
        paths = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
        return [p for p in paths if p.is_file()], f"$KUBECONFIG={listed}"
    default = (home if home is not None else Path.home()) / ".kube" / "config"
    return ([default] if default.is_file() else []), str(default)


def resolve_credentials(
    kubeconfig: Path | None = None,
    context: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Credentials:
    """The credentials a command uses: see the module's docstring for the order."""
    environ = os.environ if environ is None else environ
    if kubeconfig is not None and not kubeconfig.is_file():
        raise CredentialsError(f"kubeconfig {kubeconfig}: no such file")
    files, tried = kubeconfig_files(kubeconfig, environ=environ, home=home)
    if files:
        credentials = _from_kubeconfig(files, context)
    elif context is not None:
        raise CredentialsError(
            f"context {context!r}: no kubeconfig file found ({_nothing_at(tried)})"
        )
    elif environ.get("KUBERNETES_SERVICE_HOST") and environ.get("KUBERNETES_SERVICE_PORT"):
        credentials = _in_cluster()
    else:
        raise CredentialsError(
            f"no cluster credentials: {_nothing_at(tried)}, and not in a pod "
            "(KUBERNETES_SERVICE_HOST is not set); give --kubeconfig FILE"
        )
    credentials.configuration.retries = urllib3.Retry(
        total=3, connect=CONNECT_RETRIES, read=0, backoff_factor=0.2
    )
    return credentials


def _nothing_at(tried: str) -> str:
    if tried.startswith("$KUBECONFIG="):
        return f"no file of {tried} exists"
    return f"no --kubeconfig, $KUBECONFIG is not set, {tried} does not exist"


def _from_kubeconfig(files: list[Path], context: str | None) -> Credentials:
    names = ", ".join(map(str, files))
    documents = [_read_document(path) for path in files]
    joined = ENV_KUBECONFIG_PATH_SEPARATOR.join(map(str, files))
    merged = KubeConfigMerger(joined).config  # type: ignore[no-untyped-call]
    # kubectl: the first file that sets current-context wins (the client takes the last).
    current = next((d["current-context"] for d in documents if d.get("current-context")), None)
    contexts = list(dict.fromkeys(c["name"] for d in documents for c in d.get("contexts") or []))
    chosen = context or current
    if chosen is None:
        raise CredentialsError(
            f"kubeconfig {names}: no current-context; give --context ({_known(contexts)})"
        )
    if chosen not in contexts:
        how = "--context" if context else "current-context"
        raise CredentialsError(
            f"kubeconfig {names}: {how} {chosen!r} not found ({_known(contexts)})"
        )
    merged.value["current-context"] = chosen
    configuration = client.Configuration()
    try:
        # No config_persister: a refreshed token is never written back to the files.
        # config_base_path None: relative paths are read beside the file that holds them.
        loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=merged, active_context=chosen, config_base_path=None
        )
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, KeyError, TypeError) as error:
        raise CredentialsError(
            f"kubeconfig {names}, context {chosen!r}: {_one_line(error)}"
        ) from None
    return Credentials(configuration, f"kubeconfig {names} (context {chosen})")


def _read_document(path: Path) -> Mapping[str, Any]:
    """One kubeconfig file, checked to be a YAML mapping (the merger assumes it is)."""
    try:
        document = yaml.safe_load(path.read_text("utf-8"))
    except OSError as error:
        raise CredentialsError(f"kubeconfig {path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise CredentialsError(f"kubeconfig {path}: not YAML: {_one_line(error)}") from None
    if not isinstance(document, Mapping) or not document:
        raise CredentialsError(f"kubeconfig {path}: not a kubeconfig (no clusters, no contexts)")
    for key in ("clusters", "contexts", "users"):
        entries = document.get(key) or []
        if not isinstance(entries, list) or not all(
            isinstance(e, Mapping) and "name" in e for e in entries
        ):
            raise CredentialsError(f"kubeconfig {path}: {key} is not a list of named entries")
    return document


def _known(contexts: list[str]) -> str:
    return f"contexts: {', '.join(contexts)}" if contexts else "it has no contexts"


def _in_cluster() -> Credentials:
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except ConfigException as error:
        raise CredentialsError(f"in-cluster service account: {_one_line(error)}") from None
    return Credentials(configuration, "the in-cluster service account")


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
