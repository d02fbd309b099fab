"""The webhooks of the service, in order, and their rules worked out for one policy.

``HandlerRegistry`` holds the handlers in the order their configurations list them
(mutating first). ``Routes`` is the registry for one policy: for each handler, the judge
of each (group, resource, operation) it matches, looked up in a dict; and, for a request
that did not come through a handler's own path (a caller offline, or webhook
configurations installed before each webhook had a path of its own), the handler
kube-apiserver would call, found from the same declarations: the first of its side whose
rules and object selector match. The matchConditions are not evaluated there: they only
ever keep from the service requests it would admit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from webhook.engine.handlers.declaration import (
    Handler,
    Reads,
    ResourceRule,
    request_key,
)
from webhook.engine.request import AdmissionRequest
from webhook.errors import GpuAdmissionError
from webhook.policy.compiled import Policy

Key = tuple[str, str, str]


class HandlerConflict(GpuAdmissionError):
    """Two handlers under one name, or one handler matching a request twice."""


class HandlerRegistry:
    """The webhooks, each declared once, in the order of their configurations."""

    def __init__(self, handlers: Iterable[Handler]) -> None:
        self._handlers = tuple(handlers)
        self._by_name: dict[str, Handler] = {}
        for handler in self._handlers:
            if handler.name in self._by_name:
                raise HandlerConflict(f"two webhooks are named {handler.name!r}")
            self._by_name[handler.name] = handler

    def __iter__(self) -> Iterator[Handler]:
        return iter(self._handlers)

    def __len__(self) -> int:
        return len(self._handlers)

    def named(self, name: str) -> Handler:
        """The handler of that name; KeyError for none."""
        return self._by_name[name]

    def mutating(self) -> tuple[Handler, ...]:
        """The mutating webhooks installed (not ``retired``), in order."""
        return tuple(h for h in self._handlers if h.mutating and not h.retired)

    def validating(self) -> tuple[Handler, ...]:
        """The validating webhooks installed (not ``retired``), in order."""
        return tuple(h for h in self._handlers if not h.mutating and not h.retired)

    def installed(self) -> tuple[Handler, ...]:
        """The webhooks of the configurations, mutating then validating: every one but the
        ``retired``."""
        return (*self.mutating(), *self.validating())

    def with_handler(self, handler: Handler) -> HandlerRegistry:
        """This registry and ``handler`` after the others of its side."""
        sides = (
            tuple(h for h in self._handlers if h.mutating),
            tuple(h for h in self._handlers if not h.mutating),
        )
        return HandlerRegistry((*sides[0], *sides[1], handler))

    def replacing(self, handler: Handler) -> HandlerRegistry:
        """This registry with ``handler`` in the place of the one of its name; KeyError for
        none."""
        self.named(handler.name)
        return HandlerRegistry(handler if h.name == handler.name else h for h in self._handlers)

    def routes(self, policy: Policy) -> Routes:
        return Routes.of(self, policy)


@dataclass(frozen=True)
class Routes:
    """A registry's rules worked out for one policy (see the module's docstring)."""

    registry: HandlerRegistry
    policy: Policy
    own: dict[str, dict[Key, ResourceRule]]
    """Per handler's name, its rule of each request key."""
    by_key: dict[Key, tuple[tuple[Handler, ResourceRule], ...]]
    """Per request key, the handlers judged by the engine that match it, in order."""

    @classmethod
    def of(cls, registry: HandlerRegistry, policy: Policy) -> Routes:
        own: dict[str, dict[Key, ResourceRule]] = {}
        by_key: dict[Key, list[tuple[Handler, ResourceRule]]] = {}
        for handler in registry:
            table = own[handler.name] = {}
            for rule in handler.rules(policy):
                for key in rule.request_keys():
                    if key in table:
                        raise HandlerConflict(f"{handler.name} matches {key} twice")
                    if rule.judges[key[2]] is None:
                        continue  # answered by the service itself
                    table[key] = rule
                    by_key.setdefault(key, []).append((handler, rule))
        return cls(registry, policy, own, {k: tuple(v) for k, v in by_key.items()})

    def route(self, handler: str, request: AdmissionRequest) -> tuple[Handler, ResourceRule] | None:
        """The handler and rule that judge ``request`` sent to ``handler``'s path: its own,
        or (from configurations of before, which sent every request to ``/mutate`` or
        ``/validate``) the handler of its side that matches; None when no handler judges
        it (it is admitted). KeyError for a handler not in the registry."""
        named = self.registry.named(handler)
        rule = self.own[handler].get(request_key(request))
        if rule is not None:
            return named, rule
        return self.matching(request, mutating=named.mutating)

    def matching(
        self, request: AdmissionRequest, mutating: bool | None = None
    ) -> tuple[Handler, ResourceRule] | None:
        """The first handler (of the mutating or validating side, or of either) whose rules
        and object selector match ``request``, with its rule; failing that, the first
        whose rules match (a pod of no class at its CREATE, which no mutating webhook is
        sent, is read by the classed one's judge, which says so of a malformed pod and
        admits the others unchanged, as the one ``/mutate`` path of before did); None for
        none."""
        unselected: tuple[Handler, ResourceRule] | None = None
        for handler, rule in self.by_key.get(request_key(request), ()):
            if mutating is not None and handler.mutating != mutating:
                continue
            if handler.selector is None or handler.selector.matches(self.policy, request):
                return handler, rule
            unselected = unselected or (handler, rule)
        return unselected

    def sent(self, request: AdmissionRequest, *, mutating: bool) -> bool:
        """Whether kube-apiserver sends ``request``, in an opted-in namespace, to a webhook
        of that side that judges it: its rules, its object selector and its matchConditions
        (their twins) all let it through. What no webhook is sent is admitted as written."""
        return any(
            handler.mutating == mutating
            and not handler.retired
            and (handler.selector is None or handler.selector.matches(self.policy, request))
            and handler.sends(self.policy, request)
            for handler, _ in self.by_key.get(request_key(request), ())
        )

    def reads_scale_target(self, handler: str, request: AdmissionRequest) -> bool:
        """Whether ``request`` sent to ``handler``'s path waits for the workload an
        autoscaler targets to be read."""
        found = self.route(handler, request)
        return found is not None and found[0].reads_scale_target

    def reads(self, request: AdmissionRequest, handler: str | None = None) -> Reads | None:
        """What ``request`` needs read before it is judged: by ``handler``'s rule, or by the
        first matching handler's."""
        rule = self._rule(request, handler)
        return None if rule is None else rule.reads

    def reads_afresh(self, request: AdmissionRequest, handler: str | None = None) -> bool:
        """Whether what ``request`` needs read must be read now, never taken from what
        other reviews read a moment ago."""
        rule = self._rule(request, handler)
        return rule is not None and rule.reads_afresh

    def _rule(self, request: AdmissionRequest, handler: str | None) -> ResourceRule | None:
        rule = self.own[handler].get(request_key(request)) if handler is not None else None
        if rule is None:
            found = self.matching(request)
            rule = None if found is None else found[1]
        return rule
