"""`gpu-admission version`: what is installed, as kubectl and helm print theirs.

Text by default (one line, as `--version`), or `-o json|yaml` for scripts: the package's
version, the AdmissionReview version the webhooks speak, the Python and the platform it
runs on.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any

import yaml

OUTPUTS = ("text", "json", "yaml")
ADMISSION_REVIEW = "admission.k8s.io/v1"


def add_version_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    version = commands.add_parser(
        "version",
        help="print the installed version",
        description="Print the installed version: text (as --version), or JSON or YAML "
        "with the AdmissionReview version the webhooks speak, Python and the platform.",
    )
    version.add_argument("-o", "--output", choices=OUTPUTS, default="text")
    version.set_defaults(run=_version)


def version_info() -> dict[str, Any]:
    from webhook.cli.main import package_version

    return {
        "version": package_version(),
        "admissionReview": ADMISSION_REVIEW,
        "python": platform.python_version(),
        "platform": f"{sys.platform}/{platform.machine()}",
    }


def _version(args: argparse.Namespace) -> int:
    from webhook.cli.main import PROG

    info = version_info()
    if args.output == "json":
        print(json.dumps(info, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(info, sort_keys=False), end="")
    else:
        print(f"{PROG} {info['version']}")
    return 0
