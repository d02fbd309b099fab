"""`gpu-admission manifests`: rewrite or check the files of deploy/ generated from the package."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from webhook.engine.serving import embedded_serving_engine, serving_engine_from_file
from webhook.errors import PolicyError
from webhook.install.chart import helm_values
from webhook.install.guards import guard_files
from webhook.install.kueue import flavors_yaml
from webhook.install.manifests import (
    SYNC_COMMAND,
    scope_annotation_note,
    stale_files,
    sync,
    webhooks_yaml,
)
from webhook.install.overlay import OVERLAY_FILES, overlay_files
from webhook.install.rule_lists import UnreadableRuleList
from webhook.policy.compiled import Policy


def add_manifest_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `manifests sync` and `manifests webhooks` to the gpu-admission command."""
    manifests = commands.add_parser("manifests", help="the kustomize tree in deploy/")
    manifest_commands = manifests.add_subparsers(title="manifests commands")

    sync_parser = manifest_commands.add_parser(
        "sync", help="rewrite the files of deploy/ generated from the package"
    )
    sync_parser.add_argument(
        "--deploy-dir",
        type=Path,
        help="the deploy/ directory (default: deploy/ of the repository holding the "
        "current directory, found as git finds its root)",
    )
    sync_parser.add_argument(
        "--check", action="store_true", help="only list stale files; exit 1 if there are any"
    )
    sync_parser.set_defaults(run=_sync)

    webhooks = manifest_commands.add_parser(
        "webhooks",
        help="print the webhook configurations for the in-cluster Service, and the "
        "annotation of the policy's ConfigMap",
    )
    webhooks.add_argument("--policy", type=Path, help="policy YAML (default: the embedded one)")
    webhooks.set_defaults(run=_webhooks)

    values = manifest_commands.add_parser(
        "helm-values",
        help="print the Helm values that install the chart with a policy: the policy and "
        "the scope of its webhooks (helm install -f)",
    )
    values.add_argument("--policy", type=Path, required=True, help="policy YAML")
    values.set_defaults(run=_helm_values)

    _add_overlay_command(manifest_commands)
    _add_guards_command(manifest_commands)

    flavors = manifest_commands.add_parser(
        "kueue-flavors",
        help="print a Kueue ResourceFlavor per pool of the policy: its nodes' pool label and "
        "taints (kubectl apply -f -)",
    )
    flavors.add_argument("--policy", type=Path, help="policy YAML (default: the embedded one)")
    flavors.set_defaults(run=_kueue_flavors)


def _sync(args: argparse.Namespace) -> int:
    deploy_dir: Path | None = args.deploy_dir or repository_deploy_dir(Path.cwd())
    if deploy_dir is None:
        print(
            f"gpu-admission: no deploy/ directory in {Path.cwd()} or above it (a directory "
            "with deploy/kustomization.yaml and pyproject.toml); run in the repository or "
            "pass --deploy-dir",
            file=sys.stderr,
        )
        return 2
    if not (deploy_dir / "kustomization.yaml").is_file():
        print(
            f"gpu-admission: {deploy_dir} is not the deploy/ directory (no kustomization.yaml)",
            file=sys.stderr,
        )
        return 2
    try:
        return _check(deploy_dir) if args.check else _write(deploy_dir)
    except UnreadableRuleList as error:
        print(f"gpu-admission: {error}; nothing written", file=sys.stderr)
        return 2


def _check(deploy_dir: Path) -> int:
    stale = stale_files(deploy_dir)
    for path in stale:
        print(f"{path}: stale, run `{SYNC_COMMAND}`")
    return 1 if stale else 0


def _write(deploy_dir: Path) -> int:
    for path in sync(deploy_dir):
        print(f"{path}: written")
    return 0


def repository_deploy_dir(start: Path) -> Path | None:
    """deploy/ of the nearest directory at or above `start` that holds both
    deploy/kustomization.yaml and pyproject.toml (the repository's root), or None."""
    for directory in (start, *start.parents):
        deploy = directory / "deploy"
        if (deploy / "kustomization.yaml").is_file() and (directory / "pyproject.toml").is_file():
            return deploy
    return None


def _helm_values(args: argparse.Namespace) -> int:
    """The policy, as its file holds it, and what it decides of each webhook: the chart
    renders its webhook configurations from them, and refuses a policy without them."""
    try:
        policy = serving_engine_from_file(args.policy).policy
        text = args.policy.read_text("utf-8")
    except (PolicyError, OSError) as error:
        print(error, file=sys.stderr)
        return 2
    sys.stdout.write(f"# Rendered by `gpu-admission manifests helm-values` from {args.policy}.\n")
    sys.stdout.write(helm_values(policy, text))
    return 0


def _overlay(args: argparse.Namespace) -> int:
    """The overlay's files, each written (the folder made when missing)."""
    base = args.base
    if base is not None and Path(base).is_absolute():
        # kustomize reads a local base only by a path relative to the overlay.
        base = os.path.relpath(base, args.output_dir.resolve())
    if base is None:
        deploy_dir = repository_deploy_dir(Path.cwd())
        if deploy_dir is None:
            print(
                f"gpu-admission: no deploy/ directory in {Path.cwd()} or above it; pass --base "
                "(a path relative to the overlay, or a remote reference to deploy/base)",
                file=sys.stderr,
            )
            return 2
        target = args.output_dir.resolve()
        base = os.path.relpath(deploy_dir.resolve() / "base", target)
    try:
        policy = serving_engine_from_file(args.policy).policy
        text = args.policy.read_text("utf-8")
        files = overlay_files(policy, text, base)
        args.output_dir.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (args.output_dir / name).write_text(content, "utf-8")
        # A file an earlier run wrote that this policy needs no more (its classes now
        # all named as the base's): gone, not left beside a kustomization that omits it.
        for name in OVERLAY_FILES - files.keys():
            (args.output_dir / name).unlink(missing_ok=True)
    except (PolicyError, OSError) as error:
        print(f"gpu-admission: {error}", file=sys.stderr)
        return 2
    for name in files:
        print(f"{args.output_dir / name}: written")
    print(
        f"gpu-admission: apply with `kubectl apply -k {args.output_dir}`; namespaces opt in "
        f"with {policy.namespace_opt_in[0]}={policy.namespace_opt_in[1]}",
        file=sys.stderr,
    )
    return 0


def _add_overlay_command(
    manifest_commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    overlay = manifest_commands.add_parser(
        "overlay",
        help="write a kustomize overlay installing deploy/base with a policy: its ConfigMap, "
        "webhook configurations and PriorityClasses (kubectl apply -k DIR)",
    )
    overlay.add_argument("--policy", type=Path, required=True, help="policy YAML")
    overlay.add_argument(
        "--output-dir", type=Path, required=True, help="the overlay's folder (made if missing)"
    )
    overlay.add_argument(
        "--base",
        help="the base as the overlay names it: a path relative to the overlay or a remote "
        "reference (github.com/ORG/gpu-admission/deploy/base?ref=TAG); default: deploy/base "
        "of the repository holding the current directory, relative to the overlay",
    )
    overlay.set_defaults(run=_overlay)


def _add_guards_command(
    manifest_commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    guards = manifest_commands.add_parser(
        "guards",
        help="write the optional guards of deploy/guards/ for a policy: the priority-class "
        "quota, its admission configuration and the opt-in label's policy",
    )
    guards.add_argument("--policy", type=Path, required=True, help="policy YAML")
    guards.add_argument(
        "--output-dir", type=Path, required=True, help="where the files are written"
    )
    guards.set_defaults(run=_guards)


def _guards(args: argparse.Namespace) -> int:
    """The guards' files for the policy, each written (the folder made when missing)."""
    try:
        policy = serving_engine_from_file(args.policy).policy
        files = guard_files(policy, str(args.policy))
        args.output_dir.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (args.output_dir / name).write_text(content, "utf-8")
    except (PolicyError, OSError) as error:
        print(f"gpu-admission: {error}", file=sys.stderr)
        return 2
    for name in files:
        print(f"{args.output_dir / name}: written")
    key, value = policy.namespace_opt_in
    print(
        f"gpu-admission: each file says how it is applied; the quota grants the classes to "
        f"a namespace labelled {key}={value}",
        file=sys.stderr,
    )
    return 0


def _kueue_flavors(args: argparse.Namespace) -> int:
    policy = _policy(args)
    if policy is None:
        return 2
    sys.stdout.write(
        f"# Rendered by `gpu-admission manifests kueue-flavors` from {policy.source}.\n"
    )
    sys.stdout.write(flavors_yaml(policy))
    return 0


def _webhooks(args: argparse.Namespace) -> int:
    policy = _policy(args)
    if policy is None:
        return 2
    header = f"# Rendered by `gpu-admission manifests webhooks` from {policy.source}.\n"
    header += scope_annotation_note(policy)
    sys.stdout.write(webhooks_yaml(policy, header))
    return 0


def _policy(args: argparse.Namespace) -> Policy | None:
    """The policy of ``--policy`` (the embedded one without it), or None once its error
    is printed."""
    try:
        engine = (
            embedded_serving_engine()
            if args.policy is None
            else serving_engine_from_file(args.policy)
        )
    except PolicyError as error:
        print(error, file=sys.stderr)
        return None
    return engine.policy
