"""`gpu-admission policy validate FILE...`: each policy file loaded as the service would
serve it, and every problem of each printed on a line of its own.

A problem reads `file:line: path: reason` (the line of the offending key or value; a
missing field at the mapping that lacks it). Every file is checked, even after one
fails; the exit code is 1 when any did. The engine and the policy model are imported
when the command runs, not when it is added to the parser.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


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
    validate.add_argument("files", nargs="+", type=Path)
    validate.set_defaults(run=validate_policies)


def validate_policies(args: argparse.Namespace) -> int:
    from webhook.engine.serving import serving_engine
    from webhook.errors import PolicyError

    failed = False
    for path in args.files:
        try:
            text = path.read_text("utf-8")
            policy = serving_engine(text, str(path)).policy
        except (OSError, UnicodeDecodeError) as error:
            print(f"{path}: cannot read: {error}", file=sys.stderr)
            failed = True
            continue
        except PolicyError as error:
            for problem in error.problems:
                print(problem, file=sys.stderr)
            if error.unlisted:
                print(f"{path}: and {error.unlisted:,} more problems", file=sys.stderr)
            failed = True
            continue
        print(f"{path}: ok ({len(policy.pools)} pools, {len(policy.classes)} classes)")
    return 1 if failed else 0
