"""`gpu-admission certs`: make the webhook's certificates, and renew them in a cluster.

``generate`` writes a CA and a serving certificate for a Service to a directory and
prints the ``caBundle``; ``rotate`` renews the serving certificate held in a Secret
(and, on request, the CA) and keeps every webhook ``caBundle`` trusting it. Bad input
exits 2 with one line on stderr saying what to change.

Each command is two steps below: the parser it adds, and the function it runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any, TypeAlias

from webhook.cli.cluster_options import (
    CREDENTIALS_HELP,
    add_cluster_options,
    run_against_cluster,
)
from webhook.install.names import APP_LABELS, WEBHOOK_CONFIGURATION
from webhook.tls.files import existing_ca, write_key_pair
from webhook.tls.pki import (
    CertificateAuthority,
    IssuedCertificate,
    ca_bundle,
    create_ca,
    issue_service_certificate,
    subject_alt_names,
)
from webhook.tls.rotation import (
    DEFAULT_THRESHOLD,
    RotationError,
    RotationRequest,
    ca_common_name,
    rotate,
)

__all__ = ["add_certs_commands"]

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

DEFAULT_OUT = Path("certs/dev")
DEFAULT_DAYS = 365
DEFAULT_CA_DAYS = 3650

ROTATE_EPILOG = """\
Secrets: NAME (type kubernetes.io/tls: tls.crt, tls.key, ca.crt), mounted by the pods,
which reload it; NAME-ca (ca.crt, ca.key), mounted by nothing. From the files of
`certs generate`:
  kubectl -n NS create secret tls NAME --cert=tls.crt --key=tls.key
  kubectl -n NS create secret generic NAME-ca --from-file=ca.crt --from-file=ca.key

CA rotation takes two runs:
  1. certs rotate --rotate-ca: a new CA is added to every caBundle next to the old one,
     and the Secret gets a leaf from the new CA; both leaves are trusted meanwhile.
  2. once every replica serves the new leaf (its Secret volume has been updated, up to
     a minute or two, and it reloads within seconds), certs rotate --drop-old-ca leaves
     only the new CA in the caBundles.
"""


def add_certs_commands(commands: Commands) -> None:
    """Add ``certs generate`` and ``certs rotate`` to the ``gpu-admission`` parser."""
    certs = commands.add_parser("certs", help="make and renew the webhook's certificates")
    certs_commands = certs.add_subparsers(title="certs commands")
    _add_generate(certs_commands)
    _add_rotate(certs_commands)


def _fail(command: str, message: str) -> int:
    print(f"gpu-admission certs {command}: {message}", file=sys.stderr)
    return 2


def _note(line: str) -> None:
    """What a person reads goes to stderr, so stdout holds only the caBundle:
    ``CA_BUNDLE=$(gpu-admission certs generate ...)`` works."""
    print(line, file=sys.stderr)


# --- certs generate ----------------------------------------------------------------------------


def _add_generate(commands: Commands) -> None:
    generate = commands.add_parser(
        "generate",
        help="write a CA and a serving certificate for a Service; print the caBundle",
        description="Write ca.crt, ca.key, tls.crt and tls.key (keys 0600) to --out, reusing "
        "a CA already there; print the base64 caBundle on stdout, the rest on stderr.",
    )
    generate.add_argument("--service", required=True, help="the webhook's Service name")
    generate.add_argument("--namespace", required=True, help="the Service's namespace")
    generate.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"directory (default: {DEFAULT_OUT}/)"
    )
    generate.add_argument(
        "--days", type=int, default=DEFAULT_DAYS, help="serving certificate lifetime"
    )
    generate.add_argument("--ca-days", type=int, default=DEFAULT_CA_DAYS, help="new CA lifetime")
    generate.add_argument(
        "--dns", action="append", default=[], metavar="NAME", help="one more DNS name"
    )
    generate.add_argument(
        "--ip", action="append", default=[], metavar="ADDRESS", help="one IP address"
    )
    generate.set_defaults(run=_generate)


def _generate(args: argparse.Namespace) -> int:
    problem = _lifetime_problem(args.days, args.ca_days)
    if problem is not None:
        return _fail("generate", problem)
    out: Path = args.out
    try:
        found = existing_ca(out)
        ca = found or create_ca(ca_common_name(dt.datetime.now(dt.UTC)), days=args.ca_days)
        serving = issue_service_certificate(
            ca,
            args.service,
            args.namespace,
            dns_names=args.dns,
            ip_addresses=args.ip,
            days=args.days,
        )
    except (ValueError, TypeError) as error:
        return _fail("generate", str(error))
    except OSError as error:
        return _fail("generate", f"cannot read {out}: {error}")
    # Written only once both are made, so bad input leaves no half-made directory.
    try:
        if found is None:
            write_key_pair(out, "ca", ca)
        cert_path, key_path = write_key_pair(out, "tls", serving)
    except OSError as error:
        return _fail("generate", f"cannot write to {out}: {error}")
    _note(f"CA ({'created' if found is None else 'reused'}): {_ca_files(out, ca)}")
    _note(_serving_files(cert_path, key_path, serving, ca))
    _note("caBundle for the webhook configurations, on stdout:")
    print(ca_bundle(ca.certificate))
    return 0


def _lifetime_problem(days: int, ca_days: int) -> str | None:
    if days < 1:
        return f"--days must be at least 1, got {days}"
    if ca_days <= days:
        return (
            f"--ca-days ({ca_days}) must be more than --days ({days}): "
            "a CA must outlive the certificates it issues"
        )
    return None


def _ca_files(out: Path, ca: CertificateAuthority) -> str:
    expiry = ca.certificate.not_valid_after_utc
    return f"{out / 'ca.crt'}, {out / 'ca.key'}; expires {expiry:%Y-%m-%d}"


def _serving_files(
    cert_path: Path, key_path: Path, serving: IssuedCertificate, ca: CertificateAuthority
) -> str:
    """Where the serving certificate is, until when, what it covers, and a warning when
    the CA cut it short."""
    expiry = serving.certificate.not_valid_after_utc
    names, addresses = subject_alt_names(serving.certificate)
    lines = [
        f"serving certificate: {cert_path}, {key_path}; expires {expiry:%Y-%m-%d}",
        f"  covers: {', '.join([*names, *addresses])}",
    ]
    if expiry >= ca.certificate.not_valid_after_utc:  # cut short to the CA's expiry
        lines.append(
            f"warning: the CA expires first, so the serving certificate ends with it on "
            f"{expiry:%Y-%m-%d}; rotate the CA (certs rotate --rotate-ca)"
        )
    return "\n".join(lines)


# --- certs rotate ------------------------------------------------------------------------------


def _add_rotate(commands: Commands) -> None:
    parser = commands.add_parser(
        "rotate",
        help="renew the serving certificate in its Secret and update the caBundles",
        description="Renew the leaf in the Secret when less than --threshold of its life is "
        "left (or with --force), and make every gpu-admission webhook caBundle trust its CA. "
        + CREDENTIALS_HELP,
        epilog=ROTATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_rotated_objects(parser)
    _add_renewal_options(parser)
    _add_ca_rotation_options(parser)
    parser.set_defaults(run=_rotate)


def _add_rotated_objects(parser: argparse.ArgumentParser) -> None:
    """Which cluster, which Secrets, which Service and webhook configurations."""
    add_cluster_options(parser)
    parser.add_argument("--namespace", required=True, help="namespace of the Secrets")
    parser.add_argument("--secret", required=True, help="the serving Secret (kubernetes.io/tls)")
    parser.add_argument("--ca-secret", help="the CA Secret (default: SECRET-ca)")
    parser.add_argument(
        "--service", help="make sure the leaf covers this Service's names in NAMESPACE"
    )
    parser.add_argument(
        "--webhook-configuration",
        default=WEBHOOK_CONFIGURATION,
        help="name of the Mutating- and ValidatingWebhookConfiguration "
        f"(default: {WEBHOOK_CONFIGURATION})",
    )


def _add_renewal_options(parser: argparse.ArgumentParser) -> None:
    """When the leaf is renewed, and how long new certificates live."""
    parser.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help="renew when less than this fraction of the leaf's lifetime is left (default: 0.33)",
    )
    parser.add_argument("--force", action="store_true", help="renew the leaf now")
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS, help="new leaf lifetime")
    parser.add_argument("--ca-days", type=int, default=DEFAULT_CA_DAYS, help="new CA lifetime")


def _add_ca_rotation_options(parser: argparse.ArgumentParser) -> None:
    """The two runs of a CA rotation, and the wait between a caBundle and a leaf."""
    which_ca = parser.add_mutually_exclusive_group()
    which_ca.add_argument(
        "--rotate-ca",
        action="store_true",
        help="new CA, trusted next to the old one, and a leaf from it",
    )
    which_ca.add_argument(
        "--drop-old-ca",
        action="store_true",
        help="trust only the current CA (after --rotate-ca, once every replica serves the "
        "new leaf)",
    )
    parser.add_argument(
        "--propagation-delay",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="wait between a caBundle change and a leaf that needs it (default: 5)",
    )


def _rotation_request(args: argparse.Namespace) -> RotationRequest:
    """What ``rotate`` is asked for; ValueError for settings that make no sense."""
    return RotationRequest(
        namespace=args.namespace,
        secret=args.secret,
        ca_secret=args.ca_secret or f"{args.secret}-ca",
        service=args.service,
        threshold=args.threshold,
        force=args.force,
        rotate_ca=args.rotate_ca,
        drop_old_ca=args.drop_old_ca,
        days=args.days,
        ca_days=args.ca_days,
        propagation_delay=args.propagation_delay,
    )


def _rotate(args: argparse.Namespace) -> int:
    try:
        request = _rotation_request(args)
    except ValueError as error:
        return _fail("rotate", str(error))
    return run_against_cluster("certs rotate", args, lambda api: _rotate_in(api, args, request))


def _rotate_in(api: Any, args: argparse.Namespace, request: RotationRequest) -> int:
    # The Kubernetes client is imported only for the command that needs it.
    from webhook.kube.secrets import KubeCertificateStore

    try:
        store = KubeCertificateStore(
            api, args.namespace, args.webhook_configuration, labels=APP_LABELS
        )
        report = rotate(store, request)
    except (RotationError, ValueError) as error:
        return _fail("rotate", str(error))
    for line in report.lines:
        print(line)
    return 0
