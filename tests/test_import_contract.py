"""The import contract of pyproject.toml holds the engine to its layer, through any chain.

`make lint` runs the linter on the tree as it is; here it runs on a copy with one
planted import, to prove the contract can fail: an engine module that imports the
live inventory reaches the Kubernetes client only indirectly, which the contract
once let through.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_of_the_tree(destination: Path) -> Path:
    shutil.copytree(REPO / "webhook", destination / "webhook")
    shutil.copy(REPO / "pyproject.toml", destination / "pyproject.toml")
    return destination


def test_the_tree_as_it_is_keeps_the_contract(tmp_path: Path) -> None:
    result = lint_imports(copy_of_the_tree(tmp_path))

    assert result.returncode == 0, result.stdout + result.stderr


def test_an_engine_module_importing_the_inventory_breaks_it(tmp_path: Path) -> None:
    tree = copy_of_the_tree(tmp_path)
    pod = tree / "webhook" / "engine" / "pod.py"
    pod.write_text(pod.read_text("utf-8") + "\nimport webhook.kube_inventory  # noqa\n", "utf-8")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "webhook.engine.pod -> webhook.kube_inventory" in result.stdout
