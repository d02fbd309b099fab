"""The package's dependency ranges (pyproject.toml) and the exact set CI, `make` and the
image install (requirements.lock): every range holds its locked version, and what is
installed here is what the lock says."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPOSITORY = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPOSITORY / "pyproject.toml").read_text("utf-8"))["project"]


def locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPOSITORY / "requirements.lock").read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, pinned = line.partition("==")
            pins[canonicalize_name(name)] = pinned.strip()
    return pins


def requirements() -> list[Requirement]:
    declared = [*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["test"]]
    return [Requirement(text) for text in declared]


def test_every_dependency_is_a_range_not_a_pin() -> None:
    for requirement in requirements():
        assert not any(s.operator == "==" for s in requirement.specifier), requirement


def test_every_range_holds_the_version_the_lock_installs() -> None:
    pins = locked()

    for requirement in requirements():
        pinned = pins.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"{requirement.name} is not in requirements.lock"
        assert requirement.specifier.contains(pinned), (requirement, pinned)


def test_what_is_installed_is_what_the_lock_says() -> None:
    for requirement in requirements():
        name = canonicalize_name(requirement.name)
        assert version(requirement.name) == locked()[name], requirement.name
