"""Load a policy from YAML text or a file, with errors naming file, path and reason.

`policy validate`, `serve`, the reloader and the offline commands all load a
policy here and make an engine of it (which refuses rule names it does not
have), so a policy that validates is exactly a policy that serves.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from webhook.errors import PolicyError
from webhook.policy.catalog import MigCatalog, default_catalog
from webhook.policy.compile import compile_policy
from webhook.policy.compiled import Policy
from webhook.policy.model import PolicySpec
from webhook.policy.shipped import shipped_text

DEFAULT_POLICY = "default.yaml"


def load_policy_text(text: str, source: str, catalog: MigCatalog | None = None) -> Policy:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise PolicyError(source, where, f"not valid YAML: {problem}") from error
    if not isinstance(data, dict):
        raise PolicyError(source, "", "expected a mapping with apiVersion, kind, pools, classes")
    try:
        spec = PolicySpec.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        more = len(error.errors()) - 1
        reason = first["msg"] + (
            f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        )
        raise PolicyError(source, format_location(first["loc"]), reason) from error
    return compile_policy(spec, catalog or default_catalog(), source)


def load_policy_file(path: Path, catalog: MigCatalog | None = None) -> Policy:
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(str(path), "", f"cannot read: {error}") from error
    return load_policy_text(text, str(path), catalog)


def default_policy_text() -> str:
    return shipped_text(DEFAULT_POLICY)


def load_default_policy() -> Policy:
    return load_policy_text(default_policy_text(), f"policies/{DEFAULT_POLICY} (embedded)")


def format_location(location: tuple[int | str, ...]) -> str:
    """Turn pydantic's ('classes', 'training', 'pools', 0) into classes.training.pools[0]."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path
