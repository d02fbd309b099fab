"""CEL matchConditions that look into the pod templates of workload objects.

A workload is sent to us only when one of its templates is a pod the policy
has an opinion on (webhook.engine.handlers.cel.gpu_relevance_condition, applied to the
template). Each kind is told apart by its kind and group, and each of its
template paths is followed with `has()` at every step, so an object without
a template (or of another kind) evaluates to false rather than to an error,
which would deny it under failurePolicy Fail.

A `*` in a path matches every item of a list or every value of a map, which
CEL iterates differently: `exists` over a map binds its keys (strings), so the
item is `m[key]` for a string and the element itself otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from webhook.policy.compiled import TemplateKind

TemplateCondition = Callable[[str], str]
"""CEL of the pod-relevance check, given the CEL expression of a template."""


def workload_condition(kinds: tuple[TemplateKind, ...], relevant: TemplateCondition) -> str:
    """CEL: true for an object of `kinds` with a pod template `relevant` holds for.

    Kinds with the same template paths (Deployment, Job, ...) share one check.
    """
    by_paths: dict[tuple[str, ...], list[TemplateKind]] = {}
    for kind in kinds:
        by_paths.setdefault(kind.paths, []).append(kind)
    return " || ".join(
        f"(({' || '.join(_is_kind(kind) for kind in same)}) && "
        f"({' || '.join(f'({path_condition(path, relevant)})' for path in paths)}))"
        for paths, same in by_paths.items()
    )


def _is_kind(kind: TemplateKind) -> str:
    version = "object.apiVersion"
    group = f"{version}.startsWith('{kind.group}/')" if kind.group else f"{version} == 'v1'"
    return f"(object.kind == '{kind.kind}' && {group})"


def path_condition(pattern: str, relevant: TemplateCondition) -> str:
    """CEL following a template path pattern from `object` (`/spec/*/template`)."""
    tokens = pattern.split("/")[1:] if pattern else []
    return _follow("object", tokens, relevant, 0)


def _follow(expression: str, tokens: list[str], relevant: TemplateCondition, depth: int) -> str:
    if not tokens:
        return f"({relevant(expression)})"
    token, rest = tokens[0], tokens[1:]
    if token != "*":
        selected = f"{expression}.{token}"
        return f"has({selected}) && {_follow(selected, rest, relevant, depth)}"
    key, item = f"k{depth}", f"i{depth}"
    inner = _follow(item, rest, relevant, depth + 1)
    return (
        f"{expression}.exists({key}, [type({key}) == string ? {expression}[{key}] : {key}]"
        f".exists({item}, {inner}))"
    )
