"""`gpu-admission check`, `explain`, `policy schema` and `policy test`: the policy, offline.

Exit status: 0 when everything is allowed (or passes), 1 on a denial (or a
failed case), 2 on a usage error or input that cannot be read (2 wins over 1); `check
--warnings-exit-code N` makes it N when everything is admitted but with warnings.
Input that cannot be read (a missing file, not YAML, not a Kubernetes object, a case
that is not a case) is an error entry of the report, in every format, and the other
files are still judged: a CI job always gets its report. A policy that cannot be loaded
judges nothing: it fails at once (in JUnit, as a report with one error testcase).

The engine, the policy model and the YAML reader are imported when a command runs,
not when its arguments are added: `--help` starts without them.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.cli.parsing import add_file_arguments, file_names
from webhook.cli.policy_init import add_init_command
from webhook.cli.policy_option import add_policy_option, load_engine
from webhook.cli.usage import USAGE, unwritable, usage_error
from webhook.errors import PolicyError

if TYPE_CHECKING:
    from webhook.engine import Engine
    from webhook.offline.cases import CaseResult
    from webhook.offline.documents import ManifestsRead
    from webhook.offline.evaluation import Report

__all__ = ["add_offline_commands", "add_policy_offline_commands"]

OK, DENIED = 0, 1
OUTPUTS = ("text", "json", "yaml", "junit")
TEST_OUTPUTS = ("text", "json", "yaml", "junit")
SCHEMA_FORMATS = ("json", "yaml")
STDOUT = STDIN = "-"
CHECK_SCHEMA = "check-report.schema.json"
TEST_SCHEMA = "policy-test-report.schema.json"

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
The text report is a line per object (verdict, kind/namespace/name, the pod template
of a workload, file:line, the first line of the denial, or what the mutation
injected and how many warnings) and a summary; --detailed adds each rule's outcome,
the placement and the mutation. --output json|yaml prints a CheckReport, whose JSON
Schema `gpu-admission check --print-schema` prints; --output junit prints JUnit XML,
a testsuite per file and a testcase per pod or pod template. A file that cannot be
read is an error in every format (a testcase with <error> in JUnit), and the other
files are still judged. --admitted prints the objects instead, as they would be
admitted (a Pod mutated, a Job's or CronJob's templates mutated, the rest as
written), for `kubectl apply -f -` or a diff; a refused one is left out and its
denial printed to standard error.
Exit status: 0 all allowed, 1 any denial, 2 any unreadable input or a broken
policy (2 wins over 1); with --warnings-exit-code N, N when all are allowed but
some with warnings (1 fails a CI job on warnings; a code of its own, such as 3,
lets the CI tell them apart, e.g. GitLab's allow_failure: exit_codes: [3]).
"""

EXPLAIN_EPILOG = """\
One object (a Pod, or a workload and each of its pod templates) is explained alone,
with the ResourceClaimTemplates and ResourceClaims its pods' claims name after it.
Several objects (several files, a file of several, or a DIR, read as check reads
them) are each explained in turn, in the order check lists them, each headed by its
line of check's report (verdict, kind/namespace/name, the pod template of a
workload, file:line) with its explanation indented under it, and check's summary
ends them; a file that cannot be read is its ERROR line.
Exit status: 0 all allowed, 1 any denial, 2 any unreadable input or a broken
policy (2 wins over 1).
"""

TEST_EPILOG = """\
Each FILE is a case, each *.yaml and *.yml file under a DIR too: object, expect
(allowed|denied), and optionally rules (exactly the rules that fail), patch
(operations the mutation contains), pods (fragments a mutated pod contains),
claims (the ResourceClaimTemplates and ResourceClaims the object's pods name),
and workload and gpuModel (the class and GPU model of the object's pods, written
as the policy's podLabels, so the cases hold when the policy renames those keys).
--run REGEX runs only the cases whose name (the path in its DIR, or the FILE as
given) it matches. --output json|yaml prints a PolicyTestReport, whose JSON Schema
`gpu-admission policy test --print-schema` prints; --output junit prints JUnit XML:
a testcase per case, a failure with each way it differs from what it expects
(expected ..., got ...), an error for a case that cannot be run.
Exit status: 0 all cases pass, 1 any fails, 2 any case cannot be run (a missing
path, a folder without cases, a file that is not a case), no case selected, or a
broken policy (2 wins over 1).
"""


def add_offline_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `check` and `explain` to the gpu-admission command."""
    check = commands.add_parser(
        "check",
        help="evaluate manifests offline: verdict, rules, mutation, placement",
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_file_arguments(check, "manifest YAML or JSON, or a DIR", unless="print_schema")
    add_policy_option(check)
    check.add_argument("--output", "-o", choices=OUTPUTS, default="text", help="report format")
    check.add_argument(
        "--detailed",
        "-v",
        "--verbose",
        action="store_true",
        help="text: each rule's outcome, the placement and the mutation of each pod "
        "(default: a line per object)",
    )
    check.add_argument(
        "--only-denied",
        action="store_true",
        help="list only the denied (and the unreadable); the summary still counts all "
        "(text, json, yaml; junit lists every object)",
    )
    check.add_argument(
        "--warnings-exit-code",
        type=_exit_code,
        default=OK,
        metavar="N",
        help="exit status when every pod is admitted but kubectl would print warnings "
        "(default: 0; 1 to fail on warnings)",
    )
    check.add_argument(
        "--admitted",
        action="store_true",
        help="print every object as it would be admitted instead of a report: YAML "
        "documents (a v1 List with -o json) that `kubectl apply -f -` takes; a refused "
        "object is left out and its denial printed to standard error",
    )
    _add_print_schema(check, "CheckReport of --output json|yaml")
    check.set_defaults(run=_check)

    explain_command = commands.add_parser(
        "explain",
        help="say in prose what would become of each object",
        epilog=EXPLAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_file_arguments(
        explain_command,
        "manifest YAML or JSON, or a DIR: one object with the ResourceClaimTemplates and "
        "ResourceClaims its pods name, or several",
    )
    add_policy_option(explain_command)
    explain_command.set_defaults(run=_explain)


def add_policy_offline_commands(
    policy_commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Add `schema`, `test` and `init` to the `gpu-admission policy` commands."""
    schema = policy_commands.add_parser(
        "schema", help="print the JSON Schema of policy files (editors validate with it)"
    )
    schema.add_argument(
        "--output",
        "-o",
        type=_schema_format,
        choices=SCHEMA_FORMATS,
        default="json",
        help="format of the schema",
    )
    schema.add_argument(
        "--output-file",
        metavar="PATH",
        default=STDOUT,
        help="write it to PATH instead of standard output "
        "(make schema writes the committed policies/schema.json) (default: standard output)",
    )
    schema.set_defaults(run=_policy_schema)

    test = policy_commands.add_parser(
        "test",
        help="run policy test cases: files, or folders of them",
        epilog=TEST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_file_arguments(test, "a case file, or a DIR of them", unless="print_schema")
    add_policy_option(test)
    test.add_argument(
        "--run",
        dest="run_pattern",
        type=_regex,
        metavar="REGEX",
        help="run only the cases whose name REGEX matches (searched, as go test -run) "
        "(default: every case)",
    )
    test.add_argument(
        "--output",
        "-o",
        choices=TEST_OUTPUTS,
        default="text",
        help="text: a line per case; json, yaml: a PolicyTestReport; junit: JUnit XML",
    )
    _add_print_schema(test, "PolicyTestReport of --output json|yaml")
    test.set_defaults(run=_policy_test)
    add_init_command(policy_commands)


def _add_print_schema(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--print-schema",
        action="store_true",
        help=f"print the JSON Schema of the {what} and exit",
    )


def _check(args: argparse.Namespace) -> int:
    from webhook.offline.documents import read_each_manifest
    from webhook.offline.evaluation import evaluate

    if args.print_schema:
        return _print_schema(CHECK_SCHEMA)
    names = file_names(args)
    if not names:
        return usage_error("check: give the manifests: FILE, -f FILE, a DIR or - for stdin")
    if _stdin_twice(args.policy, names):
        return usage_error("standard input is read once: --policy - or a file -, not both")
    try:
        engine = load_engine(args.policy)
    except PolicyError as error:
        return _policy_failure(args, "gpu-admission check", error)
    if args.admitted and args.output == "junit":
        return usage_error("check --admitted prints objects: -o yaml (the default) or json")
    read = read_each_manifest(names, sys.stdin)
    report = evaluate(engine, read.documents)
    if args.admitted:
        sys.stdout.write(_admitted(engine, read, report, args.output))
    else:
        sys.stdout.write(_render(report, read, args))
    return _exit_status(read, report, args.warnings_exit_code)


def _exit_status(read: ManifestsRead, report: Report, on_warnings: int = OK) -> int:
    """What check and explain exit with, each unreadable input said on stderr: 2 for any,
    else 1 for a denial, else `on_warnings` for a warning, else 0."""
    for problem in read.errors:
        print(f"gpu-admission: {problem}", file=sys.stderr)
    if read.errors:
        return USAGE
    if not report.allowed:
        return DENIED
    return on_warnings if report.warnings else OK


def _render(report: Report, read: ManifestsRead, args: argparse.Namespace) -> str:
    output, only_denied = args.output, args.only_denied
    if output in ("json", "yaml"):
        from webhook.offline.report_data import report_data

        return _dump(report_data(report, read.errors, only_denied), output)
    if output == "junit":
        from webhook.offline.junit import report_junit

        return report_junit(report, read.sources, read.errors)
    from webhook.offline.text import report_lines, report_text

    if args.detailed:
        return report_text(report, read.errors)
    return report_lines(report, read.errors, only_denied)


def _admitted(engine: Engine, read: ManifestsRead, report: Report, output: str) -> str:
    from webhook.offline.admitted import admitted

    found = admitted(engine, read.documents, report)
    for denial in found.denials:
        print(f"gpu-admission check: refused: {denial}", file=sys.stderr)
    if output == "json":
        return _dump({"apiVersion": "v1", "kind": "List", "items": found.objects}, "json")
    from webhook.offline.yaml_text import dump_yaml

    return "---\n".join(dump_yaml(obj) for obj in found.objects)


def _dump(data: object, output: str) -> str:
    if output == "json":
        import json

        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    from webhook.offline.yaml_text import dump_yaml

    return dump_yaml(data)


def _stdin_twice(policy: Path | None, names: list[str]) -> bool:
    """Whether standard input is named twice: by --policy - and a file, or by two files."""
    dashes = names.count(STDIN) + (policy is not None and str(policy) == STDIN)
    return dashes > 1


def _policy_failure(args: argparse.Namespace, suites: str, error: PolicyError) -> int:
    """A policy that cannot be loaded: on stderr, and in JUnit also as a report."""
    if args.output == "junit":
        from webhook.offline.junit import policy_error_junit

        sys.stdout.write(policy_error_junit(suites, str(args.policy), str(error)))
    return usage_error(str(error))


def _print_schema(name: str) -> int:
    from importlib.resources import files

    sys.stdout.write(files("webhook.offline").joinpath("schemas", name).read_text("utf-8"))
    return OK


def _explain(args: argparse.Namespace) -> int:
    from webhook.offline.documents import read_each_manifest
    from webhook.offline.evaluation import evaluate
    from webhook.offline.explained import explain_each, explain_one, subjects

    names = file_names(args)
    if _stdin_twice(args.policy, names):
        return usage_error("standard input is read once: --policy - or a file -, not both")
    try:
        engine = load_engine(args.policy)
    except PolicyError as error:
        return usage_error(str(error))
    read = read_each_manifest(names, sys.stdin)
    if not read.documents and not read.errors:
        return usage_error(f"explain: nothing to explain, no object in {', '.join(names)}")
    report = evaluate(engine, read.documents)
    if len(subjects(read.documents)) == 1 and not read.errors:
        sys.stdout.write(explain_one(report))
    else:  # as check lists them, an unreadable file as its ERROR line
        sys.stdout.write(explain_each(report, read.errors))
    return _exit_status(read, report)


def _policy_schema(args: argparse.Namespace) -> int:
    from webhook.engine import RULES
    from webhook.policy.schema import policy_schema_text

    text = policy_schema_text(RULES.names)
    if args.output == "yaml":
        import json

        text = _dump(json.loads(text), "yaml")
    if args.output_file == STDOUT:
        sys.stdout.write(text)
        return OK
    path = Path(args.output_file)
    problem = unwritable(path, text)
    if problem is not None:
        return usage_error(problem)
    print(f"wrote {path}")
    return OK


def _policy_test(args: argparse.Namespace) -> int:
    from webhook.offline.cases import case_sources, run_case_source

    if args.print_schema:
        return _print_schema(TEST_SCHEMA)
    names = file_names(args)
    if not names:
        return usage_error("policy test: give the cases: FILE, -f FILE, a DIR or - for stdin")
    sources = case_sources(names, args.run_pattern)
    if not sources:
        return usage_error(f"no case matches --run {args.run_pattern}")
    if _stdin_twice(args.policy, names):
        return usage_error("standard input is read once: --policy - or a case -, not both")
    try:
        engine = load_engine(args.policy)
    except PolicyError as error:
        return _policy_failure(args, "gpu-admission policy test", error)
    results = [run_case_source(engine, source, sys.stdin) for source in sources]
    sys.stdout.write(_render_cases(results, " ".join(names), engine.policy.source, args.output))
    if any(result.broken for result in results):
        return USAGE
    return OK if all(result.passed for result in results) else DENIED


def _render_cases(results: list[CaseResult], names: str, policy: str, output: str) -> str:
    if output == "junit":
        from webhook.offline.junit import cases_junit

        return cases_junit(results, names, policy)
    if output in ("json", "yaml"):
        from webhook.offline.cases import cases_data

        return _dump(cases_data(results, policy), output)
    lines = []
    for result in results:
        verdict = "PASS" if result.passed else "ERROR" if result.broken else "FAIL"
        problems = f": {'; '.join(result.problems)}" if result.problems else ""
        lines.append(f"{verdict} {result.name}{problems}\n")
    passed = sum(1 for result in results if result.passed)
    errors = sum(1 for result in results if result.broken)
    failed = len(results) - passed - errors
    summary = f"{len(results)} cases: {passed} passed, {failed} failed"
    lines.append(summary + (f", {errors} could not be run" if errors else "") + "\n")
    return "".join(lines)


def _schema_format(text: str) -> str:
    """`policy schema -o FORMAT`; before, -o named a file: say what names one now."""
    if text not in SCHEMA_FORMATS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a format ({', '.join(SCHEMA_FORMATS)}); -o/--output is the "
            f"format, as in every command: to write the schema to a file, use --output-file {text}"
        )
    return text


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as error:
        raise argparse.ArgumentTypeError(f"not a regular expression: {text!r} ({error})") from None
    return text


def _exit_code(text: str) -> int:
    try:
        code = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an exit status: {text!r}") from None
    if not 0 <= code <= 255:
        raise argparse.ArgumentTypeError(f"an exit status is 0 to 255, got {text}")
    return code
