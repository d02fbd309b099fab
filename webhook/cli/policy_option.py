"""The `--policy` option of the commands that put a policy to use, and the engine it makes.

A policy is put to use through an ``Engine``, which refuses one whose `enforcement`
names a rule it does not have; so `serve`, `policy validate`, `check`, `explain` and
`policy test` all load their policy here, and refuse the same policies.

The engine and the policy model (pydantic) are imported when a policy is loaded, not
when the option is added: `--help` and commands without a policy start without them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from webhook.engine import Engine


def add_policy_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", type=Path, help="policy YAML (default: the embedded policy)")


def load_engine(path: Path | None) -> Engine:
    """The engine on the policy file at `path`, or on the embedded policy when None.

    Raises PolicyError, naming file, field and reason, for a policy that cannot serve."""
    from webhook.engine import Engine
    from webhook.engine.rules import RULES
    from webhook.policy import load_default_policy, load_policy_file

    if path is None:
        return Engine(load_default_policy())
    return Engine(load_policy_file(path, rule_names=RULES.names))
