"""One webhook, declared once: what it matches, how it is judged, how it fails.

A ``Handler`` is everything the project says of one webhook. The webhook configurations
(``webhook.install.configurations``), the scope checks of the live ones
(``webhook.install.scope``), the HTTP routes and the metrics' labels (``webhook.http``)
are all made from it, so none of them can disagree with another:

- ``name``: the first label of the webhook's name (``validate-bindings`` of
  ``validate-bindings.gpu-admission.io``), its path (``/validate-bindings``) and the
  value of its metrics' ``webhook`` label;
- ``rules``: the operations, group and resources it matches, each operation with the
  judge that answers it (``ResourceRule``); a function of the policy, since the
  policy's workload kinds are rules too;
- ``selector``: whether pods carrying the workload label go to it or those without it
  (kube-apiserver's objectSelector; ``LabelSelector.matches`` is its Python twin);
- ``conditions``: its matchConditions, the CEL of each made from the policy, and the
  Python twin of each (``Handler.sends``), held to the CEL by kube-apiserver's own;
- ``failure_policy``, ``namespaces``: ``Fail`` or ``Ignore``; the opted-in namespaces or
  the service's own;
- ``retired``: a webhook no longer installed, still answered at its path for the
  configurations installed before (an upgrade rolls the replicas before them).

A judge is one call: the engine and a ``Review`` (the request and what was read for it)
in, a ``Decision`` out. It never asks which webhook it was called for: a route knows its
handler, and its handler knows the judge of each operation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from webhook.engine.autoscalers import ScaleTarget
from webhook.engine.decision import Decision
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.inventory import UNKNOWN, Inventory
from webhook.engine.request import AdmissionRequest
from webhook.policy.compiled import Policy

if TYPE_CHECKING:
    from webhook.engine.review import Engine

__all__ = [
    "CLASSED",
    "FAIL",
    "IGNORE",
    "OPTED_IN",
    "OWN_NAMESPACE",
    "UNCLASSED",
    "Condition",
    "Handler",
    "Judge",
    "LabelSelector",
    "Reads",
    "ResourceRule",
    "Review",
    "reads_nothing",
]

FAIL = "Fail"
IGNORE = "Ignore"

OPTED_IN = "opted-in"
"""The namespaces that opted in with the policy's label, never the control plane's nor the
service's own."""
OWN_NAMESPACE = "own"
"""The service's own namespace only."""

DOMAIN = "gpu-admission.io"
"""What every webhook's name ends with."""


@dataclass(frozen=True, slots=True)
class Review:
    """One admission request and what was read from the cluster for it."""

    request: AdmissionRequest
    inventory: Inventory = UNKNOWN
    """What the cluster has now (the policy's static figures until it has synced)."""
    claims: ClaimObjects = NO_CLAIMS
    """The templates, claims (and, for a binding, the pod) its rule ``reads``."""
    scaled: Mapping[str, Any] | None = None
    """For an autoscaler, the workload it targets as the cluster has it."""
    target: ScaleTarget | None = None
    """For an autoscaler, what it scales, when the caller worked it out to read ``scaled``."""


Judge = Callable[["Engine", Review], Decision]
"""One operation of one webhook answered by the engine."""

Reads = Callable[["Engine", AdmissionRequest, ClaimObjects], tuple[ClaimSource, ...]]
"""The objects of the cluster a review needs read before it is judged, given those read so
far (a binding needs its pod before the pod's claims)."""


def reads_nothing(
    engine: Engine, request: AdmissionRequest, read: ClaimObjects
) -> tuple[ClaimSource, ...]:
    return ()


@dataclass(frozen=True, eq=False)
class ResourceRule:
    """Some resources of one API group, and the judge of each operation on them: one entry
    of a webhook's ``rules``, its operations in the order ``judges`` gives them."""

    group: str
    versions: tuple[str, ...]
    resources: tuple[str, ...]
    """Resource names, a subresource after a slash (``pods/binding``)."""
    judges: Mapping[str, Judge | None]
    """CREATE, UPDATE, ... and the judge of each; None for one the service answers
    itself, not the engine (the policy ConfigMap's, whose check needs the live
    configurations and a worker of its own)."""
    reads: Reads = reads_nothing
    reads_afresh: bool = False
    """Whether what ``reads`` names is read at every review, never taken from what other
    reviews read a moment ago (a binding's: its claims may have been replaced since)."""

    def configuration(self) -> dict[str, Any]:
        """The rule as a webhook configuration holds it."""
        return {
            "operations": list(self.judges),
            "apiGroups": [self.group],
            "apiVersions": list(self.versions),
            "resources": list(self.resources),
            "scope": "Namespaced",
        }

    def request_keys(self) -> list[tuple[str, str, str]]:
        """(group, resource[/subresource], operation) of each request the rule matches."""
        return [(self.group, r, op) for r in self.resources for op in self.judges]


def request_key(request: AdmissionRequest) -> tuple[str, str, str]:
    """The ``ResourceRule.request_keys`` entry a request falls under. Versions are not compared:
    every webhook matches with ``matchPolicy: Equivalent``."""
    resource = request.resource
    if request.subresource:
        resource = f"{resource}/{request.subresource}"
    return (request.group, resource, request.operation)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An objectSelector on the workload label: pods that carry it (``Exists``) or do not
    (``DoesNotExist``).

    kube-apiserver matches it on labels it already has, before any CEL, and at an UPDATE
    calls the webhook when the old or the new object matches: removing the label never
    slips a pod past both."""

    operator: Literal["Exists", "DoesNotExist"]

    def configuration(self, policy: Policy) -> dict[str, Any]:
        return {"matchExpressions": [{"key": policy.workload_label, "operator": self.operator}]}

    def matches(self, policy: Policy, request: AdmissionRequest) -> bool:
        """The Python twin: whether kube-apiserver would send ``request`` to the webhook."""
        wanted = self.operator == "Exists"
        objects = (request.object, request.old_object)
        return any(
            (policy.workload_label in _labels(obj)) == wanted for obj in objects if obj is not None
        )


CLASSED = LabelSelector("Exists")
UNCLASSED = LabelSelector("DoesNotExist")


def _labels(obj: Any) -> Mapping[str, Any]:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


@dataclass(frozen=True, slots=True)
class Condition:
    """A matchCondition: its name, its CEL made from the policy, and its Python twin
    (``webhook.engine.handlers.twins``), which says of a request what the CEL says."""

    name: str
    cel: Callable[[Policy], str]
    twin: Callable[[Policy, AdmissionRequest], bool]

    def configuration(self, policy: Policy) -> dict[str, str]:
        return {"name": self.name, "expression": self.cel(policy)}


@dataclass(frozen=True, eq=False)
class Handler:
    """One webhook (see the module's docstring)."""

    name: str
    mutating: bool
    rules: Callable[[Policy], tuple[ResourceRule, ...]]
    summary: str
    """What the webhook is for, in a sentence: the first line of its entry in the docs."""
    selector: LabelSelector | None = None
    conditions: tuple[Condition, ...] = ()
    failure_policy: str = FAIL
    namespaces: str = OPTED_IN
    reads_scale_target: bool = False
    """Whether a review waits for the workload an autoscaler targets to be read."""
    retired: bool = False
    """No longer in the configurations nor the scope checks; still routed and judged, for
    the configurations of a release before until they are replaced."""

    @property
    def webhook_name(self) -> str:
        return f"{self.name}.{DOMAIN}"

    @property
    def path(self) -> str:
        return f"/{self.name}"

    def sends(self, policy: Policy, request: AdmissionRequest) -> bool:
        """Whether its matchConditions let kube-apiserver send ``request`` to it, as their
        twins say."""
        return all(condition.twin(policy, request) for condition in self.conditions)

    def judged_by_engine(self, policy: Policy) -> bool:
        """Whether the engine judges any of its requests (not the policy ConfigMap's)."""
        return any(j is not None for rule in self.rules(policy) for j in rule.judges.values())


@dataclass(frozen=True, eq=False)
class StaticRules:
    """The rules of a webhook whose resources no policy changes (a plain value, so that an
    engine pickles to the review worker)."""

    rules: tuple[ResourceRule, ...]

    def __call__(self, policy: Policy) -> tuple[ResourceRule, ...]:
        return self.rules


def static(*rules: ResourceRule) -> StaticRules:
    """The rules of a webhook whose resources no policy changes."""
    return StaticRules(rules)
