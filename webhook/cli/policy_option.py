"""The `--policy` option of the commands that put a policy to use, and the engine it makes.

A policy is put to use through an ``Engine``, which refuses one whose `enforcement`
names a rule it does not have; so `serve`, `check`, `explain`, `policy test` and `audit`
all load their policy here, through ``webhook.engine.serving``, and refuse the same policies.

The engine and the policy model (pydantic) are imported when a policy is loaded, not
when the option is added: `--help` and commands without a policy start without them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from webhook.engine import Engine


STDIN = Path("-")


def add_policy_option(parser: argparse.ArgumentParser, stdin: bool = True) -> None:
    """`--policy FILE`; with `stdin`, `--policy -` reads it from standard input (not for
    `serve`, which reads the file again when it changes)."""
    dash = ", - for standard input" if stdin else ""
    parser.add_argument(
        "--policy", type=Path, help=f"policy YAML{dash} (default: the embedded policy)"
    )


def load_engine(path: Path | None) -> Engine:
    """The engine on the policy file at `path`, or on the embedded policy when None.

    Raises PolicyError, naming file, field and reason, for a policy that cannot serve."""
    from webhook.engine.serving import (
        embedded_serving_engine,
        serving_engine,
        serving_engine_from_file,
    )

    if path is None:
        return embedded_serving_engine()
    if path == STDIN:
        return serving_engine(sys.stdin.read(), "-")
    return serving_engine_from_file(path)
