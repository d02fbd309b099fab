"""Kubeconfig files for the admin user and the control-plane components."""

from __future__ import annotations

from pathlib import Path

import yaml

from .pki import KeyPairPaths


def write_kubeconfig(
    path: Path, *, server: str, ca_cert: Path, client: KeyPairPaths, user: str
) -> Path:
    """Write a kubeconfig with one cluster, one user (a client certificate) and one
    context, all named after ``user`` so a file read alone says whose it is."""
    credentials = {"client-certificate": str(client.cert), "client-key": str(client.key)}
    return _write(path, server, ca_cert, user, credentials)


def write_token_kubeconfig(
    path: Path, *, server: str, ca_cert: Path, token: str, user: str
) -> Path:
    """The same with a bearer token (a ServiceAccount's, or one the apiserver refuses)."""
    return _write(path, server, ca_cert, user, {"token": token})


def _write(path: Path, server: str, ca_cert: Path, user: str, credentials: dict[str, str]) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "e2e",
                "cluster": {"server": server, "certificate-authority": str(ca_cert)},
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": user, "context": {"cluster": "e2e", "user": user}}],
        "current-context": user,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
