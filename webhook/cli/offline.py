"""`gpu-admission check`, `explain`, `policy schema` and `policy test`: the policy, offline.

Exit status: 0 when everything is allowed (or passes), 1 on a denial (or a
failed case), 2 on a usage error or input that cannot be read; `check
--warnings-exit-code N` makes it N when everything is admitted but with warnings.

The engine, the policy model and the YAML reader are imported when a command runs,
not when its arguments are added: `--help` starts without them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.cli.policy_option import add_policy_option, load_engine
from webhook.errors import PolicyError

if TYPE_CHECKING:
    from webhook.offline.evaluation import Report

__all__ = ["add_offline_commands", "add_policy_offline_commands"]

OK, DENIED, USAGE = 0, 1, 2
OUTPUTS = ("text", "json", "yaml", "junit")
TEST_OUTPUTS = ("text", "junit")
STDOUT = "-"

CHECK_EPILOG = """\
Each Pod, and each pod template of a Deployment, StatefulSet, DaemonSet,
ReplicaSet, Job, CronJob or a kind of the policy's workloadKinds (PyTorchJob,
RayCluster, JobSet, ... by default), is judged as at CREATE in an opted-in namespace:
requests defaulted from limits, mutated, the patch applied, then validated.
Each ResourceClaimTemplate and ResourceClaim (resource.k8s.io v1, v1beta2 or
v1beta1) is judged as at its CREATE, and is what the pods' claims of Dynamic
Resource Allocation naming it in its namespace ask for (one without a namespace
is in every pod's); a claim naming one not among the files is not judged, with a
warning. Other kinds are reported as skipped. A DIR stands for every *.yaml, *.yml and
*.json file under it at any depth, in path order, hidden ones left out (as
kubectl apply -R -f DIR). Warnings are those kubectl would print.
--output json|yaml prints a CheckReport (structure documented in
webhook/offline/report_data.py); --output junit prints JUnit XML, a testsuite
per file and a testcase per pod or pod template (webhook/offline/junit.py).
Exit status: 0 all allowed, 1 any denial, 2 unreadable input or policy; with
--warnings-exit-code N, N when all are allowed but some with warnings (1 fails
a CI job on warnings; a code of its own, such as 3, lets the CI tell them apart,
e.g. GitLab's allow_failure: exit_codes: [3]).
"""

EXPLAIN_EPILOG = """\
The file holds one object, and may hold the ResourceClaimTemplates and
ResourceClaims its pods' claims name: each is explained after it.
"""

TEST_EPILOG = """\
Each *.yaml file under DIR is a case: object, expect (allowed|denied), and
optionally rules (exactly the rules that fail), patch (operations the
mutation contains), pods (fragments a mutated pod contains) and claims (the
ResourceClaimTemplates and ResourceClaims the object's pods name).
--output junit prints JUnit XML instead of a line per case: a testcase per case,
a failure with each way it differs from what it expects (expected ..., got ...),
an error for a case that cannot be run (webhook/offline/junit.py).
Exit status: 0 all cases pass, 1 any fails, 2 no cases or unreadable policy.
"""


def add_offline_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `check` and `explain` to the gpu-admission command."""
    check = commands.add_parser(
        "check",
        help="evaluate manifests offline: verdict, rules, mutation, placement",
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "files", nargs="+", metavar="FILE", help="manifest YAML or JSON, or a DIR; - for stdin"
    )
    add_policy_option(check)
    check.add_argument(
        "--output", "-o", choices=OUTPUTS, default="text", help="report format (default: text)"
    )
    check.add_argument(
        "--warnings-exit-code",
        type=_exit_code,
        default=OK,
        metavar="N",
        help="exit status when every pod is admitted but kubectl would print warnings "
        "(default: 0; 1 to fail on warnings)",
    )
    check.set_defaults(run=_check)

    explain_command = commands.add_parser(
        "explain",
        help="say in prose what would become of one object",
        epilog=EXPLAIN_EPILOG,
    )
    explain_command.add_argument(
        "file",
        metavar="FILE",
        help="one object's YAML, with the ResourceClaimTemplates and ResourceClaims its "
        "pods name; - for stdin",
    )
    add_policy_option(explain_command)
    explain_command.set_defaults(run=_explain)


def add_policy_offline_commands(
    policy_commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Add `schema` and `test` to the `gpu-admission policy` commands."""
    schema = policy_commands.add_parser(
        "schema", help="print the JSON Schema of policy files (editors validate with it)"
    )
    schema.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        default=STDOUT,
        help="write it to PATH instead of standard output "
        "(make schema writes the committed policies/schema.json)",
    )
    schema.set_defaults(run=_policy_schema)

    test = policy_commands.add_parser(
        "test",
        help="run a folder of policy test cases",
        epilog=TEST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    test.add_argument("directory", type=Path, metavar="DIR")
    add_policy_option(test)
    test.add_argument(
        "--output",
        "-o",
        choices=TEST_OUTPUTS,
        default="text",
        help="text: a line per case; junit: JUnit XML (default: text)",
    )
    test.set_defaults(run=_policy_test)


def _check(args: argparse.Namespace) -> int:
    from webhook.offline.documents import ManifestError, manifest_names, read_manifest_files
    from webhook.offline.evaluation import evaluate

    try:
        engine = load_engine(args.policy)
        sources = manifest_names(args.files)
        documents = read_manifest_files(sources, sys.stdin)
    except (PolicyError, ManifestError) as error:
        return _usage_error(str(error))
    report = evaluate(engine, documents)
    sys.stdout.write(_render(report, args.output, sources))
    if not report.allowed:
        return DENIED
    return args.warnings_exit_code if report.warnings else OK


def _render(report: Report, output: str, sources: list[str]) -> str:
    if output == "json":
        import json

        from webhook.offline.report_data import report_data

        return json.dumps(report_data(report), indent=2, ensure_ascii=False) + "\n"
    if output == "yaml":
        from webhook.offline.report_data import report_data
        from webhook.offline.yaml_text import dump_yaml

        return dump_yaml(report_data(report))
    if output == "junit":
        from webhook.offline.junit import report_junit

        return report_junit(report, sources)
    from webhook.offline.text import report_text

    return report_text(report)


def _explain(args: argparse.Namespace) -> int:
    from webhook.offline.claim_documents import is_claim_object
    from webhook.offline.documents import ManifestError, read_manifest_files
    from webhook.offline.evaluation import evaluate
    from webhook.offline.prose import explain, explain_claim_object

    try:
        engine = load_engine(args.policy)
        documents = read_manifest_files([args.file], sys.stdin)
    except (PolicyError, ManifestError) as error:
        return _usage_error(str(error))
    subjects = [d for d in documents if not is_claim_object(d.object)] or documents
    if len(subjects) != 1:
        return _usage_error(
            f"explain takes one object; {args.file} holds {len(subjects)} "
            "(gpu-admission check takes several)"
        )
    report = evaluate(engine, documents)
    for skipped in report.skipped:
        print(f"{skipped.object.describe}: nothing to explain, {skipped.reason}")
    explained = [explain(p) for p in report.pods]
    explained += [explain_claim_object(c) for c in report.claim_objects]
    print("\n".join(explained), end="")
    return OK if report.allowed else DENIED


def _policy_schema(args: argparse.Namespace) -> int:
    from webhook.engine import RULES
    from webhook.policy.schema import policy_schema_text

    text = policy_schema_text(RULES.names)
    if args.output == STDOUT:
        sys.stdout.write(text)
        return OK
    path = Path(args.output)
    try:
        path.write_text(text, "utf-8")
    except OSError as error:
        return _usage_error(f"cannot write {path}: {error}")
    print(f"wrote {path}")
    return OK


def _policy_test(args: argparse.Namespace) -> int:
    from webhook.offline.cases import case_files, run_cases

    directory: Path = args.directory
    if not directory.is_dir():
        return _usage_error(f"{directory}: not a directory")
    if not case_files(directory):
        return _usage_error(f"{directory}: no test cases (*.yaml)")
    try:
        engine = load_engine(args.policy)
    except PolicyError as error:
        return _usage_error(str(error))
    if args.output == "junit":
        from webhook.offline.junit import cases_junit

        results = list(run_cases(engine, directory))
        sys.stdout.write(cases_junit(results, str(directory), engine.policy.source))
        return OK if all(result.passed for result in results) else DENIED
    passed = failed = 0
    for result in run_cases(engine, directory):
        if result.passed:
            passed += 1
            print(f"PASS {result.name}")
        else:
            failed += 1
            print(f"FAIL {result.name}: {'; '.join(result.problems)}")
    print(f"{passed + failed} cases: {passed} passed, {failed} failed")
    return DENIED if failed else OK


def _exit_code(text: str) -> int:
    try:
        code = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an exit status: {text!r}") from None
    if not 0 <= code <= 255:
        raise argparse.ArgumentTypeError(f"an exit status is 0 to 255, got {text}")
    return code


def _usage_error(message: str) -> int:
    print(f"gpu-admission: {message}", file=sys.stderr)
    return USAGE
