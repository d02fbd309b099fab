"""What a ResourceClaim or ResourceClaimTemplate (``resource.k8s.io/v1``) asks for, in GPU
terms.

A claim's ``spec.devices.requests`` each ask for devices of one DeviceClass
(``exactly``), or for the first of several alternatives that can be had
(``firstAvailable``). A request of a DeviceClass the policy names as GPUs or MIG
slices (``dra.deviceClasses``) is a GPU ask; the others (a NIC, an FPGA) are none of
the policy's business. A template holds a claim's spec under ``spec.spec``.

The devices a request may get are narrowed by CEL selectors. The ones the policy can
judge are conjunctions of equalities of the attributes it knows (``type``, the product
and the MIG profile, in the domain of one of its drivers)::

    device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-40GB"
    device.attributes['gpu.nvidia.com'].profile == '1g.5gb' && device.driver == 'gpu.nvidia.com'

Any other expression (a memory comparison, a ``||``, a function call) is kept as
written and reported as not judged: the ask is then judged by what it is known to
want, never by a guess at what the expression means.

Which DeviceClasses give GPUs is one view, ``GpuClasses``: the policy's, and the
cluster's own classes whose selectors pick its GPU drivers' devices (worked out once
per inventory, ``webhook.engine.dra.capacity``). Mutation, validation and the offline
check all read claims through it, so they never differ on which containers hold GPUs.

kube-scheduler meets a ``firstAvailable`` request with the first of its alternatives
that can be had on the node it tries (k8s.io/dynamic-resource-allocation's structured
allocator walks them in order, and falls back to the next when the pod's other requests
leave none of the earlier): every alternative is a way the pod may run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.engine.dra.api import TEMPLATE
from webhook.errors import MalformedObject
from webhook.policy.compiled import GPU_DEVICE, MIG_DEVICE, DraSettings

EXACT_COUNT = "ExactCount"
ALL = "All"
MAX_REQUESTS = 32
"""kube-apiserver's own limit on a claim's requests (and on a request's alternatives)."""


@dataclass(frozen=True)
class GpuClasses:
    """The DeviceClasses whose devices are GPUs (``gpu``) or MIG devices (``mig``): the
    policy's (``dra.deviceClasses``), and the cluster's others whose selectors pick
    devices of the policy's GPU drivers (an administrator's class of one GPU model, the
    classes the NVIDIA DRA driver installs under other names)."""

    settings: DraSettings
    others: Mapping[str, str] = field(default_factory=dict)
    """The cluster's GPU DeviceClasses the policy does not name, by kind."""

    def kind_of(self, device_class: str) -> str | None:
        """``gpu`` or ``mig`` for a GPU DeviceClass, None for any other."""
        return self.settings.device_kind(device_class) or self.others.get(device_class)

    def names(self, kind: str) -> list[str]:
        """The DeviceClasses of `kind`, the policy's first, each sorted."""
        named = self.settings.gpu_classes if kind == GPU_DEVICE else self.settings.mig_classes
        return sorted(named) + sorted(c for c, k in self.others.items() if k == kind)


@dataclass(frozen=True, slots=True, order=True)
class ClaimSource:
    """The object a pod's claim comes from: a ResourceClaimTemplate the pod's own claim is
    made from, or a ResourceClaim it shares, by name in the pod's namespace."""

    kind: str
    """``ResourceClaimTemplate`` or ``ResourceClaim``."""
    name: str

    def describe(self) -> str:
        return f"{self.kind} {self.name!r}"


@dataclass(frozen=True, slots=True)
class Ask:
    """One way a request can be met: devices of one DeviceClass."""

    request: str
    """The request's name (``request/subrequest`` for an alternative)."""
    device_class: str
    kind: str | None
    """``gpu``, ``mig`` or None: what the policy makes of the DeviceClass and selectors."""
    all_devices: bool
    """``allocationMode: All``: every matching device of a node."""
    count: int
    """How many devices, for ``ExactCount`` (1 unless given)."""
    product: str | None = None
    """The product a selector asks for, e.g. ``NVIDIA A100-SXM4-40GB``."""
    profile: str | None = None
    """The MIG profile a selector asks for, e.g. ``1g.5gb``."""
    unjudged: tuple[str, ...] = ()
    """The selectors' expressions the policy cannot judge, as written."""

    @property
    def is_gpu(self) -> bool:
        return self.kind is not None

    def describe(self) -> str:
        amount = "all" if self.all_devices else str(self.count)
        what = "MIG device" if self.kind == MIG_DEVICE else "GPU"
        plural = "" if amount == "1" else "s"
        details = [f"profile {self.profile}"] if self.profile else []
        details += [f"product {self.product}"] if self.product else []
        extra = f" ({', '.join(details)})" if details else ""
        return f"{amount} {what}{plural}{extra} of DeviceClass {self.device_class}"


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request of a claim: one ask, or alternatives of which the first that can be
    had is allocated (``firstAvailable``)."""

    name: str
    alternatives: tuple[Ask, ...]

    @property
    def is_gpu(self) -> bool:
        """Whether every way of meeting it gives GPUs."""
        return bool(self.alternatives) and all(ask.is_gpu for ask in self.alternatives)

    @property
    def may_be_gpu(self) -> bool:
        """Whether some way of meeting it gives GPUs: a container using it may hold them."""
        return any(ask.is_gpu for ask in self.alternatives)

    @property
    def may_give_no_gpu(self) -> tuple[Ask, ...]:
        """Its alternatives that give no GPU, when some other gives GPUs: ways the pod may
        run holding other devices where it meant to hold GPUs."""
        if not self.may_be_gpu:
            return ()
        return tuple(ask for ask in self.alternatives if not ask.is_gpu)


@dataclass(frozen=True, slots=True)
class ClaimAsks:
    """What one claim asks for."""

    source: ClaimSource
    requests: tuple[DeviceRequest, ...]
    gpu_requests: tuple[DeviceRequest, ...] = ()
    """Those of `requests` that may give GPUs (worked out once: the rules ask often)."""

    @classmethod
    def of(cls, source: ClaimSource, requests: tuple[DeviceRequest, ...]) -> ClaimAsks:
        return cls(source, requests, tuple(r for r in requests if r.may_be_gpu))

    @property
    def asks_gpus(self) -> bool:
        return bool(self.gpu_requests)


def claim_asks(classes: GpuClasses | DraSettings, source: ClaimSource, obj: Any) -> ClaimAsks:
    """What the claim or template `obj` (as JSON) asks for, with `classes` the GPU
    DeviceClasses (settings alone: the policy's only). Raises MalformedObject for one
    kube-apiserver would not have stored (a wrong shape, a negative count)."""
    if isinstance(classes, DraSettings):
        classes = GpuClasses(classes)
    root = _mapping(obj, "")
    spec = _mapping(root.get("spec"), "spec")
    if source.kind == TEMPLATE:
        spec = _mapping(spec.get("spec"), "spec.spec")
        where = "spec.spec.devices"
    else:
        where = "spec.devices"
    devices = _mapping(spec.get("devices"), where, optional=True)
    requests = _list(devices.get("requests"), f"{where}.requests")
    parsed = tuple(
        _request(classes, raw, f"{where}.requests[{index}]")
        for index, raw in enumerate(requests[:MAX_REQUESTS])
    )
    return ClaimAsks.of(source, parsed)


def _request(classes: GpuClasses, raw: Any, where: str) -> DeviceRequest:
    request = _mapping(raw, where)
    name = request.get("name")
    if not isinstance(name, str):
        raise MalformedObject(f"{where}.name", "must be a string")
    exactly = request.get("exactly")
    if exactly is not None:
        return DeviceRequest(name, (_ask(classes, name, exactly, f"{where}.exactly"),))
    alternatives = _list(request.get("firstAvailable"), f"{where}.firstAvailable")
    asks = []
    for index, sub in enumerate(alternatives[:MAX_REQUESTS]):
        sub_where = f"{where}.firstAvailable[{index}]"
        sub_name = _mapping(sub, sub_where).get("name")
        if not isinstance(sub_name, str):
            raise MalformedObject(f"{sub_where}.name", "must be a string")
        asks.append(_ask(classes, f"{name}/{sub_name}", sub, sub_where))
    return DeviceRequest(name, tuple(asks))


def _ask(classes: GpuClasses, name: str, raw: Any, where: str) -> Ask:
    fields = _mapping(raw, where)
    device_class = fields.get("deviceClassName")
    if not isinstance(device_class, str):
        raise MalformedObject(f"{where}.deviceClassName", "must be a string")
    mode = fields.get("allocationMode", EXACT_COUNT) or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise MalformedObject(f"{where}.allocationMode", "must be ExactCount or All")
    count = fields.get("count", 1)
    if count is None:
        count = 1
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise MalformedObject(f"{where}.count", "must be a whole number of at least 1")
    selected = _selectors(classes.settings, fields.get("selectors"), f"{where}.selectors")
    kind = classes.kind_of(device_class)
    if kind is not None and selected.kind is not None:
        kind = selected.kind  # a GPU class narrowed to MIG devices by a selector, say
    return Ask(
        request=name,
        device_class=device_class,
        kind=kind,
        all_devices=mode == ALL,
        count=count,
        product=selected.product,
        profile=selected.profile,
        unjudged=selected.unjudged,
    )


@dataclass(frozen=True, slots=True)
class _Selected:
    kind: str | None = None
    product: str | None = None
    profile: str | None = None
    unjudged: tuple[str, ...] = ()


_STRING = r"""(?:"(?P<{0}d>[^"\\]*)"|'(?P<{0}s>[^'\\]*)')"""
_ATTRIBUTE = re.compile(
    r"""^device\.attributes\[\s*{domain}\s*\](?:\.(?P<dotted>[A-Za-z_][A-Za-z0-9_]*)"""
    r"""|\[\s*{key}\s*\])\s*==\s*{value}$""".format(
        domain=_STRING.format("domain"), key=_STRING.format("key"), value=_STRING.format("value")
    )
)
_DRIVER = re.compile(r"^device\.driver\s*==\s*{value}$".format(value=_STRING.format("value")))


def _selectors(settings: DraSettings, raw: Any, where: str) -> _Selected:
    selectors = _list(raw, where)
    wanted: dict[str, str] = {}
    unjudged: list[str] = []
    for index, selector in enumerate(selectors[:MAX_REQUESTS]):
        cel = _mapping(_mapping(selector, f"{where}[{index}]").get("cel"), f"{where}[{index}].cel")
        expression = cel.get("expression")
        if not isinstance(expression, str):
            raise MalformedObject(f"{where}[{index}].cel.expression", "must be a string")
        terms = _equalities(settings, expression)
        if terms is None:
            unjudged.append(expression)
            continue
        for attribute, value in terms:
            if wanted.get(attribute, value) != value:
                unjudged.append(expression)  # asks two values at once: nothing matches
                break
            wanted[attribute] = value
    kind = wanted.get(settings.type_attribute)
    return _Selected(
        kind=kind if kind in (GPU_DEVICE, MIG_DEVICE) else None,
        product=wanted.get(settings.product_attribute),
        profile=wanted.get(settings.profile_attribute),
        unjudged=tuple(unjudged),
    )


def _equalities(settings: DraSettings, expression: str) -> list[tuple[str, str]] | None:
    """The (attribute, value) pairs `expression` is the conjunction of, or None when it is
    anything else. ``device.driver == ...`` terms are checked, not kept."""
    found: list[tuple[str, str]] = []
    for term in expression.split("&&"):
        term = term.strip()
        while term.startswith("(") and term.endswith(")"):
            term = term[1:-1].strip()
        driver = _DRIVER.match(term)
        if driver is not None:
            if _quoted(driver, "value") not in settings.drivers:
                return None
            continue
        match = _ATTRIBUTE.match(term)
        if match is None:
            return None
        domain = _quoted(match, "domain")
        attribute = match.group("dotted") or _quoted(match, "key")
        if domain not in settings.drivers or attribute not in settings.attributes:
            return None
        found.append((attribute, _quoted(match, "value")))
    return found


def _quoted(match: re.Match[str], name: str) -> str:
    double = match.group(f"{name}d")
    return double if double is not None else match.group(f"{name}s") or ""


def _mapping(value: Any, where: str, optional: bool = False) -> Mapping[str, Any]:
    if isinstance(value, dict):
        return value
    if value is None and optional:
        return {}
    reason = "must be a mapping" if value is not None else "is required"
    raise MalformedObject(where or "object", reason)


def _list(value: Any, where: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise MalformedObject(where, "must be a list")
    return value
