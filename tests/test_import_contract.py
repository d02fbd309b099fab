"""The import contracts of pyproject.toml hold every wing to its layer.

`make lint` runs the linter on the tree as it is; here it runs on copies with one
planted fault each, to prove the contracts can fail: an import that runs up a
layer, an import between two wings of one layer, a module outside every wing,
and the Kubernetes client reached only through a chain of imports.
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


def plant(tree: Path, module: str, line: str) -> None:
    path = tree / "webhook" / module
    existing = path.read_text("utf-8") if path.exists() else ""
    path.write_text(existing + f"\n{line}  # noqa\n", "utf-8")


def test_an_engine_module_importing_the_inventory_breaks_the_layers(tmp_path: Path) -> None:
    tree = copy_of_the_tree(tmp_path)
    plant(tree, "engine/pod.py", "import webhook.kube.inventory")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "The wings form layers" in result.stdout
    assert "webhook.engine.pod -> webhook.kube.inventory" in result.stdout


def test_the_kube_wing_importing_the_install_wing_breaks_the_layers(tmp_path: Path) -> None:
    tree = copy_of_the_tree(tmp_path)
    plant(tree, "kube/secrets.py", "import webhook.install.configurations")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "webhook.kube.secrets -> webhook.install.configurations" in result.stdout


def test_a_module_outside_every_wing_breaks_the_layers(tmp_path: Path) -> None:
    tree = copy_of_the_tree(tmp_path)
    plant(tree, "helpers.py", "import json")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "webhook.helpers" in result.stdout + result.stderr


def test_the_client_reached_through_a_chain_breaks_the_kubernetes_contract(
    tmp_path: Path,
) -> None:
    tree = copy_of_the_tree(tmp_path)
    plant(tree, "kube/chain.py", "import kubernetes")
    plant(tree, "http/review.py", "import webhook.kube.chain")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "Only the kube wing" in result.stdout
    assert "webhook.http.review -> webhook.kube.chain" in result.stdout
