"""No function of the package is over 60 lines, its signature and docstring included: a
longer one is a function doing several things, each of which deserves a name."""

from __future__ import annotations

import ast
from pathlib import Path

import webhook

MOST_LINES = 60


def functions_over(limit: int) -> list[str]:
    package = Path(webhook.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - first + 1
                if lines > limit:
                    found.append(f"{path.relative_to(package)}:{node.lineno} {node.name} {lines}")
    return found


def test_no_function_of_the_package_is_over_60_lines() -> None:
    assert functions_over(MOST_LINES) == []


def test_a_function_over_the_limit_would_be_found() -> None:
    assert functions_over(5) != []
