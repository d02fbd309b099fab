"""`gpu-admission audit`: what the policy makes of the pods and workloads already running.

Exit status: 0 when nothing would be denied, 1 when something would, 2 on a usage
error, a policy that cannot serve, or a cluster that cannot be read (Pods included).
`serve --audit-interval` (webhook.cli.audit_options) repeats the same audit in the service.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webhook.cli.cluster_options import CREDENTIALS_HELP, add_cluster_options, fail
from webhook.cli.policy_option import load_engine
from webhook.engine import Engine
from webhook.engine.serving import serving_engine
from webhook.engine.templates import POD, TemplateKind
from webhook.errors import PolicyError
from webhook.install.names import INSTALL_NAME, NAMESPACE
from webhook.kube.api_errors import CLUSTER_ERRORS, cluster_error_message
from webhook.kube.client import api_client, check_reachable
from webhook.kube.credentials import CredentialsError
from webhook.kube.listing import AUDIT_PAGE_SIZE, MAX_OBJECT_SIZE, installed_policy
from webhook.offline.audit import Finding
from webhook.offline.audit_report import AuditOutcome, AuditScope, audit_data, audit_text
from webhook.offline.yaml_text import dump_yaml
from webhook.service.audit import audit_cluster

__all__ = ["add_audit_commands"]

OK, DENIED, USAGE = 0, 1, 2
COMMAND = "audit"
OUTPUTS = ("text", "json", "yaml")

EPILOG = f"""\
Lists every Pod, and every Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
CronJob and kind of the policy's workloadKinds, in the namespaces carrying the
policy's opt-in label (--all-namespaces: in every namespace the webhooks could
cover, to preview a rollout), never in kube-system, kube-node-lease or the
service's own (--service-namespace), which the webhooks never cover, and judges
each as the webhooks would judge its CREATE today: a pod as its creator sent it
(status and the scheduler's node set aside), our mutation applied, then
validated; a workload by each pod template.
Pods created before gpu-admission was installed were never mutated; they are
judged as if created now. Capacity rules judge against the cluster's Nodes and
PriorityClasses as they are (with a DRA pool, its ResourceSlices and DeviceClasses
too). A pod's claims of Dynamic Resource Allocation are judged by the
ResourceClaimTemplates and ResourceClaims they name, each read once (get); claims
of those the credentials may not read are warned of, not judged. A workload is
left to its controller only when that controller exists. Pages of
{AUDIT_PAGE_SIZE} objects, each parsed as it arrives and dropped once judged; an
object over {MAX_OBJECT_SIZE:,} characters of JSON is reported too large to be
judged (rule object-too-large). Progress on stderr.
Memory: -o json and -o yaml list every pod and template judged, so the report is
held whole until written (it grows with how many objects the audited namespaces
hold, each finding's strings cut short); text and --only-denied keep only what
they list. `serve --audit-interval` keeps only counts and at most 500 results
per namespace.
-n NAMESPACE (repeatable) narrows the audit to the namespaces named, as kubectl's
does; nothing is listed in the others. A named namespace the audit does not cover
(not opted in without --all-namespaces, never covered, or absent) is reported with
the reason, on stderr and in the report's scope.notAudited, and not audited.
Exit status: 0 nothing would be denied, 1 something would, 2 usage or cluster error
(or no namespace named with -n can be audited).
"""


def add_audit_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = commands.add_parser(
        "audit",
        help="judge the pods and workloads already running, as the webhooks would",
        epilog=f"{EPILOG}{CREDENTIALS_HELP}\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_cluster_options(audit)
    audit.add_argument(
        "--all-namespaces",
        "-A",
        action="store_true",
        help="audit every namespace the webhooks could cover, opted in or not",
    )
    audit.add_argument(
        "--namespace",
        "-n",
        action="append",
        dest="namespaces",
        metavar="NAMESPACE",
        help="audit only NAMESPACE (repeatable), which must be one the audit covers: opted "
        "in, or with --all-namespaces any the webhooks could cover; one that is not is "
        "reported with the reason, not audited",
    )
    audit.add_argument("--only-denied", action="store_true", help="list only what would be denied")
    audit.add_argument(
        "--output",
        "-o",
        choices=OUTPUTS,
        default="text",
        help="report format (default: text); json and yaml list, and hold, every finding",
    )
    source = audit.add_mutually_exclusive_group()
    source.add_argument(
        "--policy",
        type=Path,
        help="policy YAML, - for standard input (default: the embedded policy)",
    )
    source.add_argument(
        "--policy-from-cluster",
        action="store_true",
        help="the policy the installed service serves (the ConfigMap its Deployment mounts)",
    )
    audit.add_argument(
        "--service-namespace",
        default=NAMESPACE,
        metavar="NAMESPACE",
        help="where the service is installed: never audited, as its webhooks never cover it, "
        f"and where --policy-from-cluster reads the policy (default: {NAMESPACE})",
    )
    audit.add_argument(
        "--install-name",
        default=INSTALL_NAME,
        metavar="NAME",
        help="the Deployment whose policy --policy-from-cluster reads, as the install named "
        f"it (default: {INSTALL_NAME}; the chart's fullnameOverride)",
    )
    audit.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    audit.set_defaults(run=_audit)


def _audit(args: argparse.Namespace) -> int:
    try:
        api = api_client(args.kubeconfig, args.context)
    except CredentialsError as error:
        return fail(COMMAND, str(error), USAGE)
    try:
        check_reachable(api)
        engine = _engine(api, args)
        progress = _Progress(enabled=not args.quiet)
        run = audit_cluster(
            api,
            engine,
            all_namespaces=args.all_namespaces,
            service_namespace=args.service_namespace,
            keep=_keep(args),
            listed=progress,
            only=args.namespaces,
        )
        progress.done()
    except (PolicyError, LookupError) as error:
        return fail(COMMAND, str(error), USAGE)
    except CLUSTER_ERRORS as error:
        return fail(COMMAND, cluster_error_message(error, str(api.configuration.host)), USAGE)
    finally:
        api.close()
    for namespace, reason in run.not_audited.items():
        print(
            f"gpu-admission audit: namespace {namespace!r} not audited: {reason}", file=sys.stderr
        )
    if args.namespaces and not run.namespaces:
        return fail(COMMAND, "none of the namespaces named (-n) can be audited", USAGE)
    outcome = AuditOutcome(
        policy=engine.policy.source,
        scope=AuditScope(
            args.all_namespaces,
            run.namespaces,
            named=tuple(dict.fromkeys(args.namespaces or ())),
            not_audited=run.not_audited,
        ),
        summary=run.summary,
        findings=run.findings,
        unlisted=run.unlisted,
        flavors=run.flavors,
        below_baseline=run.below_baseline,
    )
    sys.stdout.write(_render(outcome, args.output, args.only_denied))
    if POD.kind in run.unlisted:
        return fail(COMMAND, f"Pods could not be listed: {run.unlisted[POD.kind]}", USAGE)
    return DENIED if run.summary.denied else OK


def _engine(api: Any, args: argparse.Namespace) -> Engine:
    if not args.policy_from_cluster:
        return load_engine(args.policy)
    source, text = installed_policy(api, args.service_namespace, args.install_name)
    return serving_engine(text, source)


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


class _Progress:
    """One line on stderr per page beyond the first, and a last one: quiet on a small
    cluster, a sign of life on a large one."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.listed: dict[str, int] = {}

    def __call__(self, kind: TemplateKind, listed: int) -> None:
        self.listed[kind.kind] = listed
        if self.enabled and listed >= AUDIT_PAGE_SIZE:
            print(f"gpu-admission audit: {listed:,} {kind.kind}s listed ...", file=sys.stderr)

    def done(self) -> None:
        if self.enabled and sum(self.listed.values()) >= AUDIT_PAGE_SIZE:
            print(f"gpu-admission audit: {_listed_line(self.listed)}", file=sys.stderr)


def _listed_line(listed: dict[str, int]) -> str:
    return "listed " + ", ".join(f"{n:,} {kind}s" for kind, n in listed.items() if n)
