"""`gpu-admission policy validate FILE...`: each policy file loaded as the service would
serve it, and every problem of each printed on a line of its own. `-` reads a policy from standard
input; a folder stands for every *.yaml and *.yml file in it (not in its subfolders, as
`kubectl -f DIR` without -R: a policy repository keeps its test cases in a subfolder).

A problem reads `file:line: path: reason` (the line of the offending key or value; a
missing field at the mapping that lacks it). Every file is checked, even after one
fails; the exit code is 1 when any did. A file whose `# yaml-language-server: $schema=`
line names a schema file that is not there (a copy of a shipped policy names
`schema.json`) gets a warning saying how to write it (webhook.policy.schema_modeline),
which fails nothing. The engine and the policy model are imported
when the command runs, not when it is added to the parser.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webhook.cli.parsing import add_file_arguments, file_names

POLICY_SUFFIXES = (".yaml", ".yml")


def add_validate_command(
    policy_commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """`policy validate`, added to the `policy` group's subparsers."""
    validate = policy_commands.add_parser(
        "validate",
        help="check policy files: every problem, with its line",
        description="Load each policy file as `serve` would and print every problem "
        "as FILE:LINE: PATH: REASON. Exit 1 if any file has a problem.",
    )
    add_file_arguments(validate, "policy YAML, or a DIR of them")
    validate.set_defaults(run=validate_policies)


def validate_policies(args: argparse.Namespace) -> int:
    from webhook.engine.serving import serving_engine
    from webhook.errors import PolicyError
    from webhook.policy.schema_modeline import missing_schema

    failed = False
    names = file_names(args)
    if not names:
        print("gpu-admission: policy validate: give FILE, -f FILE, a DIR or -", file=sys.stderr)
        return 2
    for path in _policy_paths(names):
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            print(f"{path}: cannot read: {_reason(error)}", file=sys.stderr)
            failed = True
            continue
        warning = missing_schema(path, text) if str(path) != "-" else None
        if warning is not None:
            print(warning, file=sys.stderr)
        try:
            policy = serving_engine(text, str(path)).policy
        except PolicyError as error:
            for problem in error.problems:
                print(problem, file=sys.stderr)
            if error.unlisted:
                print(f"{path}: and {error.unlisted:,} more problems", file=sys.stderr)
            failed = True
            continue
        print(f"{path}: ok ({len(policy.pools)} pools, {len(policy.classes)} classes)")
    return 1 if failed else 0


def _policy_paths(names: list[str]) -> list[Path]:
    """Each named file, `-` as it is, a folder replaced by the *.yaml and *.yml in it
    (a folder without any is kept, to be reported)."""
    paths: list[Path] = []
    for name in names:
        path = Path(name)
        found = sorted(p for p in path.glob("*") if p.is_file() and p.suffix in POLICY_SUFFIXES)
        paths += found if name != "-" and found else [path]
    return paths


def _reason(error: Exception) -> str:
    """Why a file cannot be read, in words (no errno)."""
    if isinstance(error, FileNotFoundError):
        return "no such file or folder"
    if isinstance(error, IsADirectoryError):
        return "a folder without policy files (*.yaml, *.yml)"
    if isinstance(error, PermissionError):
        return "permission denied"
    if isinstance(error, UnicodeDecodeError):
        return f"not UTF-8 text ({error.reason})"
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return str(error)
