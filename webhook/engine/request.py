"""What the engine needs to know of an admission request, independent of its wire form."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, compress
from typing import Any

MAX_DEPTH = 100
"""The deepest nesting of mappings and lists an object may have.

The deepest field of any pod template we judge is about 20 levels down (a
JobSet's `spec.replicatedJobs[0].template.spec.template.spec.affinity.podAffinity.
preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.
matchExpressions[0].values[0]`), so no real object comes near 100. kube-apiserver's
JSON decoding (sigs.k8s.io/json, Go's encoding/json scanner; apimachinery's
`util/json`) stops at 10,000 levels, far more than Python can walk recursively:
comparing or copying such a value raises RecursionError past about 1,000 frames
(`sys.getrecursionlimit()`), less what the server's own stack uses. At 100, every
recursive step of the engine (template comparison at UPDATE, the values of node
selector expressions) stays far inside that."""

_CONTAINERS = frozenset({dict, list})


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    uid: str
    operation: str
    """CREATE, UPDATE, DELETE or CONNECT."""
    group: str
    version: str
    kind: str
    resource: str
    subresource: str
    namespace: str
    name: str
    object: Any
    """The object as received (CREATE, UPDATE); a plain mapping, never a model."""
    old_object: Any = None
    dry_run: bool = False

    @property
    def is_pod(self) -> bool:
        return self.group == "" and self.kind == "Pod"

    @property
    def is_pod_create(self) -> bool:
        return self.is_pod and self.operation == "CREATE" and not self.subresource

    @property
    def is_pod_update(self) -> bool:
        """An update of the pod itself (not of its status, binding or other subresource)."""
        return self.is_pod and self.operation == "UPDATE" and not self.subresource

    @property
    def is_ephemeral_containers_update(self) -> bool:
        return self.is_pod and self.subresource == "ephemeralcontainers"


def nesting_problem(request: AdmissionRequest) -> str | None:
    """Why the object or old object cannot be judged (it nests deeper than MAX_DEPTH, and
    where), or None. A walk level by level, with no recursion, run before anything else."""
    for value, where in ((request.object, "object"), (request.old_object, "oldObject")):
        if not _nests_within(value, MAX_DEPTH):
            return f"{_too_deep_path(value, where)}: nests deeper than {MAX_DEPTH} levels"
    return None


def _nests_within(value: Any, limit: int) -> bool:
    """Whether `value` has at most `limit` levels of mappings and lists. The filters run
    in C, so a 7 MB object takes tens of milliseconds."""
    level = [value] if type(value) in _CONTAINERS else []
    for _ in range(limit):
        if not level:
            return True
        children = list(chain.from_iterable(v.values() if type(v) is dict else v for v in level))
        level = list(compress(children, map(_CONTAINERS.__contains__, map(type, children))))
    return not level


_PATH_TOKENS = 8
"""How many steps of the path to a too deep value a message names."""


def _too_deep_path(value: Any, where: str) -> str:
    """The first steps of a path that goes deeper than MAX_DEPTH, e.g.
    `object.spec.template.spec.a.b[0].c.d...` (called only when there is one). Each
    node links to its parent's, so a path is spelled out only once, for the message."""
    Link = tuple[Any, str] | None  # (the parent's link, the step from it)
    stack: list[tuple[Any, int, Link]] = [(value, 0, None)]
    while stack:
        node, depth, link = stack.pop()
        if depth > MAX_DEPTH:
            steps: list[str] = []
            while link is not None:
                link, step = link
                steps.append(step)
            return where + "".join(reversed(steps[-_PATH_TOKENS:])) + "..."
        items = node.items() if type(node) is dict else enumerate(node)
        for key, child in items:
            if type(child) in _CONTAINERS:
                step = f"[{key}]" if isinstance(key, int) else f".{key}"
                stack.append((child, depth + 1, (link, step)))
    return where
