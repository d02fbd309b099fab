"""A checked, read-only view of a pod as received.

The pod stays the plain mapping kube-apiserver sent; this view only finds the
parts the rules read, once per review, and checks they have the shape
Kubernetes would accept. A wrong shape raises MalformedObject with the path.
Objects are JSON as decoded, so mappings are dicts (checked as such: the
Mapping ABC check is several times slower on this hot path).

The views are built for each review and never changed, but are not frozen dataclasses:
a frozen dataclass sets each field through ``object.__setattr__``, which made building
the views of a pod a tenth of a review's time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.engine.decision import echo
from webhook.engine.dra.api import CLAIM, TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.quantities import parse_quantity
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy

CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_QUANTITY_TYPES = frozenset({str, int, float})
"""JSON quantity types; bool (a subclass of int) is deliberately not among them."""


@dataclass(slots=True)
class GpuQuantity:
    """One GPU resource (`nvidia.com/gpu`, `nvidia.com/mig-*`) of one container, as written."""

    resource: str
    request: Any
    limit: Any
    value: Decimal | None
    """What the scheduler counts: the request, defaulted from the limit; None if unreadable."""


@dataclass(frozen=True, slots=True)
class ContainerClaim:
    """A claim of the pod one container uses: the pod's claim `name`, all its requests or
    only `request`."""

    name: str
    request: str | None = None


@dataclass(slots=True)
class Container:
    list_name: str
    """`containers`, `initContainers` or `ephemeralContainers`."""
    index: int
    name: str
    raw: Mapping[str, Any]
    requests: Mapping[str, Any]
    limits: Mapping[str, Any]
    env: Sequence[Mapping[str, Any]]
    is_sidecar: bool
    """An init container with `restartPolicy: Always` runs beside the app containers."""
    gpu: tuple[GpuQuantity, ...]
    """Its GPU resources, limits first, then requests without a limit."""
    claims: tuple[ContainerClaim, ...] = ()
    """The pod's claims it uses (`resources.claims`)."""

    def requests_gpu(self) -> bool:
        """Whether it asks for any GPU (a positive or an unreadable amount)."""
        return any(q.value is None or q.value != 0 for q in self.gpu)

    @property
    def path(self) -> str:
        return f"/spec/{self.list_name}/{self.index}"

    @property
    def describe(self) -> str:
        kind = {"containers": "container", "initContainers": "init container"}.get(
            self.list_name, "ephemeral container"
        )
        return f"{kind} {echo(self.name)}"


@dataclass(slots=True)
class PodView:
    raw: Mapping[str, Any]
    name: str
    labels: Mapping[str, str]
    spec: Mapping[str, Any]
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    ephemeral_containers: tuple[Container, ...]
    node_selector: Mapping[str, str]
    required_terms: Sequence[Mapping[str, Any]] | None
    """Required node affinity terms, or None when the pod has none."""
    tolerations: Sequence[Mapping[str, Any]]
    priority_class_name: str | None
    node_name: str | None
    """The node the pod is bound to by hand (`spec.nodeName`): no scheduler will place it."""
    resource_claims: Mapping[str, ClaimSource | None] = dataclasses.field(default_factory=dict)
    """The pod's claims (`spec.resourceClaims`) by name, each with the template or claim it
    comes from (None: neither is named, which kube-apiserver allows for a claim set
    aside for later)."""

    def all_containers(self) -> tuple[Container, ...]:
        return self.init_containers + self.containers + self.ephemeral_containers

    def runnable_containers(self) -> tuple[Container, ...]:
        """Containers that hold resources: init and regular (ephemeral ones cannot)."""
        return self.init_containers + self.containers


def read_pod(pod: Any, policy: Policy, path: str = "") -> PodView:
    """Check the shape of a pod (or a pod template: metadata + spec) and view it.

    The path of a field a MalformedObject names is ``path`` and the field's own. Paths
    are spelled out only for the error raised: formatting each one up front, for the
    errors almost no pod has, took a third of the time of reading a pod."""
    obj = _mapping(pod, path or "object")
    metadata = _mapping(obj.get("metadata"), path, "metadata", optional=True)
    spec = _mapping(obj.get("spec"), path, "spec")
    labels = _string_map(metadata.get("labels"), path, "metadata.labels")
    name = metadata.get("name") or metadata.get("generateName") or ""
    if not isinstance(name, str):
        raise MalformedObject(f"{path}metadata.name", "must be a string")
    init_containers = _containers(spec, "initContainers", path, policy)
    containers = _containers(spec, "containers", path, policy)
    ephemeral_containers = _containers(spec, "ephemeralContainers", path, policy)
    if spec.get("containers") is None:
        raise MalformedObject(f"{path}spec.containers", "a pod needs a list of containers")
    priority_class_name = spec.get("priorityClassName")
    if priority_class_name is not None and not isinstance(priority_class_name, str):
        raise MalformedObject(f"{path}spec.priorityClassName", "must be a string")
    node_name = spec.get("nodeName")
    if node_name is not None and not isinstance(node_name, str):
        raise MalformedObject(f"{path}spec.nodeName", "must be a string")
    return PodView(
        raw=obj,
        name=name,
        labels=labels,
        spec=spec,
        containers=containers,
        init_containers=init_containers,
        ephemeral_containers=ephemeral_containers,
        node_selector=_string_map(spec.get("nodeSelector"), path, "spec.nodeSelector"),
        required_terms=_required_terms(spec, path),
        tolerations=_tolerations(spec.get("tolerations"), path),
        priority_class_name=priority_class_name or None,
        node_name=node_name or None,
        resource_claims=_resource_claims(spec.get("resourceClaims"), path),
    )


_LIST_FIELDS = {list_name: f"spec.{list_name}" for list_name in CONTAINER_LISTS}


def _containers(
    spec: Mapping[str, Any], list_name: str, path: str, policy: Policy
) -> tuple[Container, ...]:
    items = spec.get(list_name)
    if items is None:
        return ()
    result = []
    field = _LIST_FIELDS[list_name]
    for index, raw in enumerate(_mappings(items, path, field)):
        try:
            result.append(_container(raw, list_name, index, policy))
        except MalformedObject as error:  # its path is the container's own field's
            raise MalformedObject(f"{path}{field}[{index}]{error.path}", error.reason) from None
    return tuple(result)


def _container(raw: Mapping[str, Any], list_name: str, index: int, policy: Policy) -> Container:
    """One container; the paths of its errors start at the container (`.resources`)."""
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise MalformedObject(".name", "must be a string")
    resources = _mapping(raw.get("resources"), "", ".resources", optional=True)
    requests = _mapping(resources.get("requests"), "", ".resources.requests", optional=True)
    limits = _mapping(resources.get("limits"), "", ".resources.limits", optional=True)
    for kind, quantities in (("requests", requests), ("limits", limits)):
        for resource, value in quantities.items():
            if value.__class__ not in _QUANTITY_TYPES:
                raise MalformedObject(
                    f".resources.{kind}.{resource}", "a quantity must be a string"
                )
    return Container(
        list_name=list_name,
        index=index,
        name=name or f"#{index}",
        raw=raw,
        requests=requests,
        limits=limits,
        env=_mappings(raw.get("env"), "", ".env"),
        is_sidecar=list_name == "initContainers" and raw.get("restartPolicy") == "Always",
        gpu=_gpu_quantities(policy, requests, limits),
        claims=_container_claims(resources.get("claims")),
    )


def _container_claims(value: Any) -> tuple[ContainerClaim, ...]:
    """A container's `resources.claims`; paths start at the container."""
    if value is None:
        return ()
    claims = []
    for index, item in enumerate(_mappings(value, "", ".resources.claims")):
        name, request = item.get("name"), item.get("request")
        if not isinstance(name, str) or not name:
            raise MalformedObject(f".resources.claims[{index}].name", "must be a claim's name")
        if request is not None and not isinstance(request, str):
            raise MalformedObject(f".resources.claims[{index}].request", "must be a string")
        claims.append(ContainerClaim(name, request or None))
    return tuple(claims)


def _resource_claims(value: Any, path: str) -> Mapping[str, ClaimSource | None]:
    """The pod's `spec.resourceClaims` by name."""
    if value is None:
        return {}
    claims: dict[str, ClaimSource | None] = {}
    for index, item in enumerate(_mappings(value, path, "spec.resourceClaims")):
        where = f"{path}spec.resourceClaims[{index}]"
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise MalformedObject(f"{where}.name", "must be a claim's name")
        template, claim = item.get("resourceClaimTemplateName"), item.get("resourceClaimName")
        for field, named in (("resourceClaimTemplateName", template), ("resourceClaimName", claim)):
            if named is not None and not isinstance(named, str):
                raise MalformedObject(f"{where}.{field}", "must be a string")
        if template and claim:
            raise MalformedObject(
                where, "names both a resourceClaimTemplateName and a resourceClaimName"
            )
        claims[name] = (
            ClaimSource(TEMPLATE, template)
            if template
            else ClaimSource(CLAIM, claim)
            if claim
            else None
        )
    return claims


def _gpu_quantities(
    policy: Policy, requests: Mapping[str, Any], limits: Mapping[str, Any]
) -> tuple[GpuQuantity, ...]:
    if not requests and not limits:
        return ()
    is_gpu = policy.is_gpu_resource
    quantities = []
    for name, limit in limits.items():
        if is_gpu(name):
            request = requests.get(name)
            counted = request if request is not None else limit
            value = parse_quantity(counted) if counted is not None else None
            quantities.append(GpuQuantity(name, request, limit, value))
    for name, request in requests.items():
        if name not in limits and is_gpu(name):
            value = parse_quantity(request) if request is not None else None
            quantities.append(GpuQuantity(name, request, None, value))
    return tuple(quantities)


_AFFINITY = "spec.affinity"
_NODE_AFFINITY = f"{_AFFINITY}.nodeAffinity"
_REQUIRED = f"{_NODE_AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution"
_TERMS = f"{_REQUIRED}.nodeSelectorTerms"


def _required_terms(spec: Mapping[str, Any], path: str) -> Sequence[Mapping[str, Any]] | None:
    if spec.get("affinity") is None:
        return None  # most pods as created
    affinity = _mapping(spec.get("affinity"), path, _AFFINITY, optional=True)
    node_affinity = _mapping(affinity.get("nodeAffinity"), path, _NODE_AFFINITY, optional=True)
    required = _mapping(
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
        path,
        _REQUIRED,
        optional=True,
    )
    if not required:
        return None
    terms = _mappings(required.get("nodeSelectorTerms"), path, _TERMS)
    for index, term in enumerate(terms):
        where = f"{path}{_TERMS}[{index}]"
        for field in ("matchExpressions", "matchFields"):
            for expression in _mappings(term.get(field), where):
                _check_requirement(expression, where, field)
    return terms


def _check_requirement(expression: Mapping[str, Any], term: str, field: str) -> None:
    if not isinstance(expression.get("key"), str) or not isinstance(
        expression.get("operator"), str
    ):
        raise MalformedObject(f"{term}.{field}", "each requirement needs a string key and operator")
    values = expression.get("values")
    if values is not None and (
        not isinstance(values, list) or not all(isinstance(v, str) for v in values)
    ):
        raise MalformedObject(f"{term}.{field}.values", "must be a list of strings")


_TOLERATION_STRINGS = ("key", "operator", "value", "effect")


def _tolerations(value: Any, path: str) -> Sequence[Mapping[str, Any]]:
    """The tolerations, each field of the type Kubernetes gives it: the placement index
    looks taints up by key and value, which a list or a mapping cannot be."""
    tolerations = _mappings(value, path, "spec.tolerations")
    for index, toleration in enumerate(tolerations):
        for field in _TOLERATION_STRINGS:
            item = toleration.get(field)
            if item is not None and not isinstance(item, str):
                raise MalformedObject(
                    f"{path}spec.tolerations[{index}].{field}", "must be a string"
                )
        seconds = toleration.get("tolerationSeconds")
        if seconds is not None and (not isinstance(seconds, int) or isinstance(seconds, bool)):
            raise MalformedObject(
                f"{path}spec.tolerations[{index}].tolerationSeconds", "must be an integer"
            )
    return tolerations


def _mapping(value: Any, path: str, field: str = "", optional: bool = False) -> Mapping[str, Any]:
    """``value`` if it is a mapping (or {} if it is left out and ``optional``); else
    MalformedObject at ``path`` + ``field``."""
    if isinstance(value, dict):
        return value
    if value is None and optional:
        return {}
    reason = "must be a mapping" if value is not None else "is required"
    raise MalformedObject(path + field, reason)


def _mappings(value: Any, path: str, field: str = "") -> Sequence[Mapping[str, Any]]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise MalformedObject(path + field, "must be a list")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise MalformedObject(f"{path}{field}[{index}]", "must be a mapping")
    return value


def _string_map(value: Any, path: str, field: str) -> Mapping[str, str]:
    mapping = _mapping(value, path, field, optional=True)
    for key, item in mapping.items():
        if not isinstance(item, str):
            raise MalformedObject(f"{path}{field}.{key}", "must be a string")
    return mapping
