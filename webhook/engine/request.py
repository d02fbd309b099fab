"""What the engine needs to know of an admission request, independent of its wire form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from webhook.engine.decision import Decision, malformed, too_large

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

MAX_VALUES = 100_000
"""The most JSON values (mappings, lists, strings, numbers, ...) an object may hold.

The engine's work grows with the containers, resources, env entries, tolerations,
terms and values it reads, about 5 to 15 µs each across the rules; at 100,000 the
slowest shapes found (a Deployment of 14,000 containers, a pod of 100,000 MIG
resources) are judged in 0.3 to 0.8 s on one shared core (benchmarks/engine/large_objects.py),
inside the webhooks' 3 s timeout, while a 7 MiB body is refused in tens of milliseconds.
Real objects hold hundreds of values, some thousands with long env lists and
managedFields; etcd's 1.5 MiB object limit holds about 100,000 short values at most.
A string counts as one value however long, so a config held in one env value is one.
The limit applies to the object as each webhook receives it: a pod just under it at
`mutate` can be over it at `validate`, once our patch has added to every container."""

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

    @classmethod
    def pod_create(cls, uid: str, namespace: str, name: str, pod: Any) -> AdmissionRequest:
        """The CREATE of `pod` as kube-apiserver would send it (offline, benchmarks)."""
        return cls(uid, "CREATE", "", "v1", "Pod", "pods", "", namespace, name, pod)

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


def refusal(request: AdmissionRequest) -> Decision | None:
    """The decision on an object too deep or too large to judge, or None. A walk level by
    level, with no recursion, run before anything else; it stops at either limit."""
    for value, where in ((request.object, "object"), (request.old_object, "oldObject")):
        if value is None or surely_within(value):
            continue  # a CREATE has no oldObject
        depth, values = measure(value)
        if depth > MAX_DEPTH:
            return malformed(
                f"{_too_deep_path(value, where)}: nests deeper than {MAX_DEPTH} levels"
            )
        if values > MAX_VALUES:
            return too_large(
                f"{where} holds more than {MAX_VALUES:,} values (mappings, lists, strings, "
                f"numbers); no pod or workload comes near that"
            )
    return None


_DEEPER = b"\n" + b" " * (2 * MAX_DEPTH)
"""In JSON indented by two spaces a level, the start of a member of a mapping or list
MAX_DEPTH levels down."""


def surely_within(value: Any) -> bool:
    """Whether `value` is certainly within MAX_DEPTH and MAX_VALUES by what its JSON text
    shows at C speed; False when that cannot tell (the walk of ``measure`` then does).

    orjson indents its JSON by two spaces a level (``OPT_INDENT_2``): each member of a
    mapping or list at level k (the value itself at 1) starts a line of its own indented
    2k spaces, empty mappings and lists are written inline (``{}``, ``[]``), and a string
    holds no newline byte (it is escaped). A value nested deeper than MAX_DEPTH has a
    mapping or list at level MAX_DEPTH + 1, a member of one at MAX_DEPTH, so a line
    indented 2 x MAX_DEPTH spaces; and as each value starts a line or a byte of its own,
    there are no more values than lines or bytes. One search for that indentation costs
    a pod about 2 µs where counting brackets in its compact text took 15 to 20 (and the
    walk twenty). Values JSON cannot encode (keys that are not strings, say) and nesting
    beyond orjson's limit are walked."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:
        return False
    if len(text) > MAX_VALUES:
        return False
    return _DEEPER not in text


def within(value: Any, max_values: int) -> bool:
    """Whether `value` nests at most MAX_DEPTH levels and holds at most `max_values`."""
    depth, values = measure(value, max_values)
    return depth <= MAX_DEPTH and values <= max_values


def measure(value: Any, max_values: int = MAX_VALUES) -> tuple[int, int]:
    """The levels of mappings and lists in `value` and how many values it holds, each
    counted up to one past its limit. One pass per level, whose loops run mostly in C: a
    pod takes about 10 µs, a 7 MB object some tens of milliseconds."""
    level = [value] if type(value) in _CONTAINERS else []
    depth, values = 0, 1
    while level and depth <= MAX_DEPTH and values <= max_values:
        depth += 1
        children: list[Any] = []
        for node in level:
            children += node.values() if type(node) is dict else node
        values += len(children)
        level = [child for child in children if type(child) in _CONTAINERS]
    return depth, values


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
