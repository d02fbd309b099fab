"""`gpu-admission audit`: what the policy makes of the pods and workloads already running.

Exit status: 0 when nothing would be denied, 1 when something would, 2 on a usage
error, a policy that cannot serve, or a cluster that cannot be read (Pods included).
Also `serve --audit-interval`, the same audit repeated by the service.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webhook.cli.policy_option import load_engine
from webhook.engine import Engine
from webhook.engine.templates import POD, TemplateKind
from webhook.errors import PolicyError
from webhook.install.names import DEPLOYMENT, NAMESPACE
from webhook.kube.api_errors import ApiException, api_error_message
from webhook.kube.client import api_client
from webhook.kube.listing import PAGE_SIZE, installed_policy
from webhook.offline.audit import Finding
from webhook.offline.audit_report import AuditOutcome, AuditScope, audit_data, audit_text
from webhook.offline.yaml_text import dump_yaml
from webhook.policy import load_policy_text
from webhook.service.audit import audit_cluster

__all__ = ["add_audit_commands", "add_audit_interval_option", "audit_interval"]

OK, DENIED, USAGE = 0, 1, 2
OUTPUTS = ("text", "json", "yaml")

EPILOG = f"""\
Lists every Pod, and every Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
CronJob and kind of the policy's workloadKinds, in the namespaces carrying the
policy's opt-in label (--all-namespaces: in every namespace the webhooks could
cover, to preview a rollout), and judges each as the webhooks would judge its
CREATE today: a pod as its creator sent it (status and the scheduler's node set
aside), our mutation applied, then validated; a workload by each pod template.
Pods created before gpu-admission was installed were never mutated; they are
judged as if created now. Capacity rules judge against the cluster's Nodes and
PriorityClasses as they are. Pages of {PAGE_SIZE} objects; progress on stderr.
Exit status: 0 nothing would be denied, 1 something would, 2 usage or cluster error.
"""


def add_audit_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = commands.add_parser(
        "audit",
        help="judge the pods and workloads already running, as the webhooks would",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument(
        "--kubeconfig",
        type=Path,
        help="cluster to audit (default: $KUBECONFIG, else ~/.kube/config, else the "
        "in-cluster service account)",
    )
    audit.add_argument(
        "--all-namespaces",
        "-A",
        action="store_true",
        help="audit every namespace the webhooks could cover, opted in or not",
    )
    audit.add_argument("--only-denied", action="store_true", help="list only what would be denied")
    audit.add_argument(
        "--output", "-o", choices=OUTPUTS, default="text", help="report format (default: text)"
    )
    source = audit.add_mutually_exclusive_group()
    source.add_argument("--policy", type=Path, help="policy YAML (default: the embedded policy)")
    source.add_argument(
        "--policy-from-cluster",
        action="store_true",
        help=f"the policy the installed service serves (its ConfigMap in {NAMESPACE})",
    )
    audit.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    audit.set_defaults(run=_audit)


def _audit(args: argparse.Namespace) -> int:
    try:
        api = api_client(_kubeconfig(args.kubeconfig))
    except Exception as error:  # the client raises several kinds for a bad configuration
        return _usage_error(f"no Kubernetes client: {error}")
    try:
        engine = _engine(api, args)
        progress = _Progress(enabled=not args.quiet)
        run = audit_cluster(
            api,
            engine,
            all_namespaces=args.all_namespaces,
            keep=_keep(args),
            listed=progress,
        )
        progress.done()
    except PolicyError as error:
        return _usage_error(str(error))
    except ApiException as error:
        return _usage_error(f"cannot read the cluster: {api_error_message(error)}")
    except LookupError as error:
        return _usage_error(str(error))
    finally:
        api.close()
    outcome = AuditOutcome(
        policy=engine.policy.source,
        scope=AuditScope(args.all_namespaces, run.namespaces),
        summary=run.summary,
        findings=run.findings,
        unlisted=run.unlisted,
    )
    sys.stdout.write(_render(outcome, args.output, args.only_denied))
    if POD.kind in run.unlisted:
        return _usage_error(f"Pods could not be listed: {run.unlisted[POD.kind]}")
    return DENIED if run.summary.denied else OK


def _engine(api: Any, args: argparse.Namespace) -> Engine:
    if not args.policy_from_cluster:
        return load_engine(args.policy)
    source, text = installed_policy(api, NAMESPACE, DEPLOYMENT)
    return Engine(load_policy_text(text, source))


def _keep(args: argparse.Namespace) -> Callable[[Finding], bool]:
    """Which findings the report lists: the text lists only broken ones anyway."""
    if args.only_denied:
        return lambda finding: finding.verdict == "denied"
    if args.output == "text":
        return lambda finding: finding.verdict in ("denied", "warned", "audited")
    return lambda finding: True


def _render(outcome: AuditOutcome, output: str, only_denied: bool) -> str:
    if output == "json":
        return json.dumps(audit_data(outcome), indent=2, ensure_ascii=False) + "\n"
    if output == "yaml":
        return dump_yaml(audit_data(outcome))
    return audit_text(outcome, only_denied=only_denied)


def _kubeconfig(given: Path | None) -> Path | None:
    """The kubeconfig given, else $KUBECONFIG's first file, else ~/.kube/config if it
    exists; None (the in-cluster account) otherwise."""
    if given is not None:
        return given
    for candidate in os.environ.get("KUBECONFIG", "").split(os.pathsep):
        if candidate:
            return Path(candidate)
    default = Path.home() / ".kube" / "config"
    return default if default.is_file() else None


class _Progress:
    """One line on stderr per page beyond the first, and a last one: quiet on a small
    cluster, a sign of life on a large one."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.listed: dict[str, int] = {}

    def __call__(self, kind: TemplateKind, listed: int) -> None:
        self.listed[kind.kind] = listed
        if self.enabled and listed >= PAGE_SIZE:
            print(f"gpu-admission audit: {listed:,} {kind.kind}s listed ...", file=sys.stderr)

    def done(self) -> None:
        if self.enabled and sum(self.listed.values()) >= PAGE_SIZE:
            print(f"gpu-admission audit: {_listed_line(self.listed)}", file=sys.stderr)


def _listed_line(listed: dict[str, int]) -> str:
    return "listed " + ", ".join(f"{n:,} {kind}s" for kind, n in listed.items() if n)


# -- serve --audit-interval ---------------------------------------------------------

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)?$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def add_audit_interval_option(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--audit-interval",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="audit the pods and workloads running every DURATION (600, 10m, 1h; 0: never) "
        "and publish PolicyReports and metrics (default: 1h inside a cluster, never outside)",
    )


def audit_interval(args: argparse.Namespace, in_cluster: bool) -> float | None:
    """Seconds between two audits by `serve`, or None for none."""
    from webhook.service.audit_schedule import DEFAULT_IN_CLUSTER_INTERVAL

    given: float | None = args.audit_interval
    if given is None:
        return DEFAULT_IN_CLUSTER_INTERVAL if in_cluster else None
    return given or None


def _duration(text: str) -> float:
    match = _DURATION.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (600, 10m, 1h)")
    return float(match.group(1)) * _UNIT[match.group(2)]


def _usage_error(message: str) -> int:
    print(f"gpu-admission: {message}", file=sys.stderr)
    return USAGE
