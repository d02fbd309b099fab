"""`gpu-admission policy init FILE`: a policy of one's own to edit, and the JSON Schema that
editors check it with, beside it.

FILE gets a shipped policy (the default one, or `--from overflow`), and
`<FILE's name without .yaml>.schema.json` beside it gets the policy schema, the one
`policy schema` prints; FILE's `# yaml-language-server: $schema=` line names that file
by a path relative to FILE (`./httpd.schema.json`: a bare name starting with `http`
would be read as a URL), so the pair can be moved or committed together and the
editor still finds the schema. A schema named after its policy, rather than one
`schema.json` per folder, lets policies that differ live in one folder, each with its
own schema, and never meets a `schema.json` of something else there.

Nothing is overwritten without `--force`: when FILE or its schema exists, nothing is
written and the exit status is 2, as for every usage error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from webhook.cli.usage import unwritable, usage_error

__all__ = ["SOURCES", "add_init_command", "init_policy", "schema_beside"]

SOURCES = ("default", "overflow")
"""The shipped policies to start from (webhook/policies/<name>.yaml)."""
POLICY_SUFFIXES = (".yaml", ".yml")
SCHEMA_SUFFIX = ".schema.json"


def add_init_command(policy_commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`policy init`, added to the `policy` group's subparsers."""
    init = policy_commands.add_parser(
        "init",
        help="write a policy to start from, and its JSON Schema beside it for editors",
        description="Write a shipped policy to FILE and the policy's JSON Schema beside "
        "it as NAME.schema.json (for FILE NAME.yaml), FILE's `# yaml-language-server: "
        "$schema=` line naming it, so an editor checks FILE wherever the pair is kept. "
        "Existing files are left alone (exit 2) unless --force.",
    )
    init.add_argument(
        "file", metavar="FILE", help="the policy file to write, ending in .yaml or .yml"
    )
    init.add_argument(
        "--from",
        dest="source",
        choices=SOURCES,
        default="default",
        help="the shipped policy to start from",
    )
    init.add_argument(
        "--force", action="store_true", help="overwrite FILE and its schema when they exist"
    )
    init.set_defaults(run=init_policy)


def schema_beside(policy: Path) -> Path:
    """Where the schema of the policy file `policy` goes: `team.yaml` -> `team.schema.json`."""
    return policy.with_name(policy.stem + SCHEMA_SUFFIX)


def init_policy(args: argparse.Namespace) -> int:
    from webhook.engine import RULES
    from webhook.policy.schema import policy_schema_text
    from webhook.policy.schema_modeline import naming_schema
    from webhook.policy.shipped import shipped_text

    policy = Path(args.file)
    problem = _refusal(policy, args.force)
    if problem is not None:
        return usage_error(problem)
    schema = schema_beside(policy)
    schema_existed = schema.exists()
    problem = unwritable(schema, policy_schema_text(RULES.names))
    if problem is None:
        text = naming_schema(shipped_text(f"{args.source}.yaml"), f"./{schema.name}")
        problem = unwritable(policy, text)
        if problem is not None and not schema_existed:
            schema.unlink(missing_ok=True)  # a pair, or nothing new
    if problem is not None:
        return usage_error(problem)
    print(f"wrote {policy} (the {args.source} policy)")
    print(f"wrote {schema} (its JSON Schema, named by {policy}'s first line)")
    return 0


def _refusal(policy: Path, force: bool) -> str | None:
    """Why FILE cannot be written, or None."""
    if str(policy) == "-":
        return "policy init writes two files: name FILE, not - (standard output)"
    if policy.suffix not in POLICY_SUFFIXES:
        return f"{policy}: name the policy file *.yaml or *.yml, as policy validate DIR reads"
    if any(c.isspace() for c in policy.name):
        return f"{policy}: a name without spaces: the $schema line ends at the first one"
    try:
        policy.name.encode("utf-8")
    except UnicodeError:
        return f"{str(policy)!r}: a name in UTF-8: the policy's $schema line names its schema by it"
    try:
        return _in_the_way(policy, force)
    except OSError as error:
        return f"{policy}: {error.strerror or error}"


def _in_the_way(policy: Path, force: bool) -> str | None:
    """The folder missing, or the file that is a folder or would be overwritten, or None."""
    if not policy.parent.is_dir():
        return f"{policy}: no folder {policy.parent}"
    schema = schema_beside(policy)
    folders = [p for p in (policy, schema) if p.is_dir()]
    if folders:
        return f"{folders[0]} is a folder"
    existing = [str(p) for p in (policy, schema) if p.exists()]
    if existing and not force:
        them = " and ".join(existing)
        verb = "exists" if len(existing) == 1 else "exist"
        return f"{them} already {verb}: nothing written; --force overwrites"
    return None
