"""The `--policy` option of the commands that put a policy to use, and the engine it makes.

A policy is put to use through an ``Engine``, which refuses one whose `enforcement`
names a rule it does not have; so `serve`, `policy validate`, `check`, `explain` and
`policy test` all load their policy here, and refuse the same policies.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from webhook.engine import Engine
from webhook.policy import load_default_policy, load_policy_file


def add_policy_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", type=Path, help="policy YAML (default: the embedded policy)")


def load_engine(path: Path | None) -> Engine:
    """The engine on the policy file at `path`, or on the embedded policy when None.

    Raises PolicyError, naming file, field and reason, for a policy that cannot serve."""
    return Engine(load_default_policy() if path is None else load_policy_file(path))
