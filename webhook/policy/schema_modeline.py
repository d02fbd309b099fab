"""The `# yaml-language-server: $schema=...` line of a policy file: the JSON Schema editors
check it with, where that schema is, and a copy of the policy naming another.

The line is read as yaml-language-server (Red Hat's YAML extension of VS Code, and the
YAML language server other editors run) reads it: the first whole-line comment
`# yaml-language-server: ...` (or `# $schema: ...`), and in it `$schema=<where>`.
`<where>` is a URL when it starts with `http` or `file:`, otherwise a path; a relative
one is taken from the folder of the YAML file, never from where the editor runs. The
shipped policies name `schema.json`, which sits beside them in the package and the
repository, and nowhere else: a copy of one names a schema that is not there, and editors
check nothing, silently.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Modeline", "missing_schema", "modeline", "naming_schema", "without_modeline"]

_MODELINE = re.compile(r"^#\s+(?:yaml-language-server\s*:|\$schema:)")
_SCHEMA = re.compile(r"\$schema(?:=|:\s*)(\S+)")
_URL_PREFIXES = ("http", "file:")


@dataclass(frozen=True, slots=True)
class Modeline:
    line: int
    """1-based."""
    schema: str
    """What `$schema` names, as written."""

    @property
    def is_path(self) -> bool:
        return not self.schema.startswith(_URL_PREFIXES)

    def schema_path(self, policy: Path) -> Path:
        """The file it names, for the policy file at `policy`. A path is a path whole: the
        language server resolves it from the policy's folder into a file URI (`#` in it
        escaped, so no fragment), as yamlSchemaService's getSchemaForResource does."""
        named = Path(self.schema)
        return named if named.is_absolute() else policy.parent / named


def modeline(text: str) -> Modeline | None:
    """The schema line of `text`, or None when it has none (or its first names no schema)."""
    for number, line in enumerate(text.splitlines(), start=1):
        comment = line.strip()
        if _MODELINE.match(comment):
            found = _SCHEMA.search(comment)
            return Modeline(number, found.group(1)) if found else None
    return None


def missing_schema(policy: Path, text: str) -> str | None:
    """The warning for the policy file at `policy` whose schema line names a file that is
    not there, saying how to write it; None when there is no such line, it names a URL,
    or the file is there."""
    found = modeline(text)
    if found is None or not found.is_path:
        return None
    schema = found.schema_path(policy)
    try:
        if schema.is_file():
            return None
    except OSError as error:  # a name too long for the file system, say
        return (
            f"{policy}:{found.line}: warning: $schema={found.schema} names {schema}, which "
            f"cannot be looked for ({error.strerror or error}): editors check this policy "
            "against no schema"
        )
    return (
        f"{policy}:{found.line}: warning: $schema={found.schema} names {schema}, which is not "
        "there: editors check this policy against no schema; write it with "
        f"`gpu-admission policy schema --output-file {shlex.quote(str(schema))}` "
        "(`gpu-admission policy init FILE` writes a policy and its schema together)"
    )


def naming_schema(text: str, schema: str) -> str:
    """`text` with its schema line naming `schema` (a line added first when it has none)."""
    found = modeline(text)
    if found is None:
        return f"# yaml-language-server: $schema={schema}\n{text}"
    lines = text.splitlines(keepends=True)
    index = found.line - 1
    named = _SCHEMA.search(lines[index])
    assert named is not None  # modeline found it on this line
    start, end = named.span(1)
    lines[index] = lines[index][:start] + schema + lines[index][end:]
    return "".join(lines)


def without_modeline(text: str) -> str:
    """`text` without its schema line (a copy deployed away from the schema it names)."""
    found = modeline(text)
    if found is None:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[: found.line - 1] + lines[found.line :])
