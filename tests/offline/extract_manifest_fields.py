"""Generate webhook/offline/schemas/manifest-fields.json from Kubernetes' own OpenAPI.

    .venv/bin/python -m tests.offline.extract_manifest_fields          # write the file
    .venv/bin/python -m tests.offline.extract_manifest_fields --check  # exit 1 if it differs

The source is `api/openapi-spec/v3/` of the `k8s.io/kubernetes` module of the release the
project pins (KUBERNETES_VERSION, as in tests/e2e/controlplane/go.mod), read from the Go
module cache (`go mod download k8s.io/kubernetes@v1.36.3` puts it there; GOMODCACHE, or
GOPATH/pkg/mod, or ~/go/pkg/mod). From it the file keeps, for each kind that
webhook.offline.manifest_fields checks (ROOTS), the types reachable from it: each type's
property names and each property's type, nothing else (no descriptions, no defaults).

A property's type is the name of a definition (`io.k8s.api.core.v1.PodSpec`), a
JSON type (`string`, `integer`, `boolean`, `number`, `object`), or either prefixed by
`[]` (a list of it) or `map[string]` (a mapping of it). Only names kept under `types`
have fields to check; the others (Quantity, IntOrString, Time, RawExtension, free-form
objects) are values. A `status` is typed `object`: manifests do not write one and the
engine never reads it, and its types would make the file a third larger.

tests/offline/test_manifest_fields.py checks the committed file against this output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

KUBERNETES_VERSION = "v1.36.3"
REPO = Path(__file__).resolve().parents[2]
OUTPUT = REPO / "webhook" / "offline" / "schemas" / "manifest-fields.json"

ROOTS: dict[str, dict[str, tuple[str, str]]] = {
    # apiVersion -> kind -> (OpenAPI v3 file, definition)
    "v1": {"Pod": ("api__v1_openapi.json", "io.k8s.api.core.v1.Pod")},
    "apps/v1": {
        kind: ("apis__apps__v1_openapi.json", f"io.k8s.api.apps.v1.{kind}")
        for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")
    },
    "batch/v1": {
        kind: ("apis__batch__v1_openapi.json", f"io.k8s.api.batch.v1.{kind}")
        for kind in ("Job", "CronJob")
    },
    **{
        f"resource.k8s.io/{version}": {
            kind: (
                f"apis__resource.k8s.io__{version}_openapi.json",
                f"io.k8s.api.resource.{version}.{kind}",
            )
            for kind in ("ResourceClaim", "ResourceClaimTemplate", "DeviceClass")
        }
        # The versions webhook.offline.claim_documents reads.
        for version in ("v1", "v1beta2", "v1beta1")
    },
}
NOT_DESCENDED = frozenset({"status"})
"""Properties typed `object` whatever their definition says (see the module's docstring)."""
REF_PREFIX = "#/components/schemas/"


def module_cache() -> Path:
    """The Go module cache, where `go mod download` puts modules."""
    for variable in ("GOMODCACHE", "GOPATH"):
        value = os.environ.get(variable)
        if value:
            first = value.split(os.pathsep)[0]
            return Path(first) if variable == "GOMODCACHE" else Path(first) / "pkg" / "mod"
    go = shutil.which("go")
    if go is not None:
        result = subprocess.run(
            [go, "env", "GOMODCACHE"], capture_output=True, text=True, check=False
        )
        if result.returncode == 0 and result.stdout.strip():
            return Path(result.stdout.strip())
    return Path.home() / "go" / "pkg" / "mod"


def openapi_dir() -> Path:
    """`api/openapi-spec/v3` of k8s.io/kubernetes at KUBERNETES_VERSION (it may be absent)."""
    return module_cache() / f"k8s.io/kubernetes@{KUBERNETES_VERSION}" / "api/openapi-spec/v3"


def extract(source: Path) -> dict[str, Any]:
    """The schema file's content, from the OpenAPI v3 documents under `source`."""
    documents: dict[str, Mapping[str, Any]] = {}
    kinds: dict[str, dict[str, str]] = {}
    types: dict[str, dict[str, str]] = {}
    for api_version, by_kind in ROOTS.items():
        for kind, (file_name, root) in by_kind.items():
            if file_name not in documents:
                text = (source / file_name).read_text("utf-8")
                documents[file_name] = json.loads(text)["components"]["schemas"]
            kinds.setdefault(api_version, {})[kind] = root
            _collect(documents[file_name], [root], types)
    return {
        "source": f"k8s.io/kubernetes {KUBERNETES_VERSION} api/openapi-spec/v3",
        "kinds": kinds,
        "types": dict(sorted(types.items())),
    }


def render(schema: Mapping[str, Any]) -> str:
    """The file's text: one line per type, so that a change of Kubernetes reads as a diff."""
    lines = ["{", f'"source":{json.dumps(schema["source"])},']
    lines.append(f'"kinds":{_compact(schema["kinds"])},')
    lines.append('"types":{')
    entries = [f"{json.dumps(name)}:{_compact(fields)}" for name, fields in schema["types"].items()]
    lines.append(",\n".join(entries))
    lines.append("}}")
    return "\n".join(lines) + "\n"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _collect(
    definitions: Mapping[str, Any], pending: list[str], types: dict[str, dict[str, str]]
) -> None:
    while pending:
        name = pending.pop()
        if name in types:
            continue
        properties = definitions[name].get("properties")
        if not properties:
            continue  # a value: Quantity, IntOrString, Time, RawExtension, FieldsV1
        fields: dict[str, str] = {}
        for key, schema in sorted(properties.items()):
            fields[key] = "object" if key in NOT_DESCENDED else _type_of(schema)
            pending.extend(_referenced(schema) if key not in NOT_DESCENDED else ())
        types[name] = fields


def _type_of(schema: Mapping[str, Any]) -> str:
    reference = _reference(schema)
    if reference is not None:
        return reference
    if schema.get("type") == "array":
        return "[]" + _type_of(schema.get("items", {}))
    additional = schema.get("additionalProperties")
    if schema.get("type") == "object" and isinstance(additional, Mapping):
        return "map[string]" + _type_of(additional)
    kind = schema.get("type")
    return kind if isinstance(kind, str) else "object"


def _reference(schema: Mapping[str, Any]) -> str | None:
    ref = schema.get("$ref")
    if ref is None:
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            ref = all_of[0].get("$ref")
    if isinstance(ref, str) and ref.startswith(REF_PREFIX):
        return ref.removeprefix(REF_PREFIX)
    return None


def _referenced(schema: Mapping[str, Any]) -> Iterable[str]:
    name = _type_of(schema).removeprefix("[]").removeprefix("map[string]")
    return [name] if "." in name else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs")
    parser.add_argument("--source", type=Path, default=None, help="the OpenAPI v3 folder")
    args = parser.parse_args(argv)
    source = args.source or openapi_dir()
    if not source.is_dir():
        print(f"{source}: not found (go mod download k8s.io/kubernetes@{KUBERNETES_VERSION})")
        return 2
    text = render(extract(source))
    if args.check:
        if OUTPUT.read_text("utf-8") != text:
            print(f"{OUTPUT.relative_to(REPO)} is out of date: run {__spec__.name}")
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, "utf-8")
    print(f"wrote {OUTPUT.relative_to(REPO)} ({len(text)} bytes, {text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
