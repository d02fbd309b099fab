"""The ResourceClaimTemplates and ResourceClaims among the documents checked together, as
the pods among them would find them in the cluster.

Offline there is no cluster to read a pod's templates and claims from: the documents
checked together (one ``check`` run, one ``explain``, one ``policy test`` case) are all
there is. A pod's claim is judged when the object it names is among them in the pod's
namespace: that of a document giving its namespace, or of one giving none (a manifest
without namespaces is applied to one, ``kubectl apply -n NS``). An object named but not
among them is not known to be missing (it may be in the cluster already), so its claim
is not judged and the report says so (``ClaimObjects.looked_up`` is False).

The DeviceClasses among them are read as the cluster's would be: one whose selectors
pick the policy's GPU drivers' devices gives GPUs (``webhook.engine.dra.capacity``), so a
claim of it is judged, and mutated, as a GPU claim, as in a cluster holding that class.

kube-apiserver stores claims and sends them to webhooks as ``resource.k8s.io/v1``;
manifests may still be written for v1beta2, whose layout is v1's, or v1beta1, whose
requests name their DeviceClass, count and selectors beside their name where v1 puts them
under ``exactly``. Such a request is moved under ``exactly``, as kube-apiserver converts
it, so that what it asks is read the same whatever the version written.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from webhook.engine.dra.api import DEVICE_CLASS, GROUP, PLURALS, TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.dra.resource_slices import device_class_facts
from webhook.engine.inventory import UNKNOWN, DeviceClassFacts, Inventory

V1 = f"{GROUP}/v1"
V1BETA1 = f"{GROUP}/v1beta1"
VERSIONS = (V1, f"{GROUP}/v1beta2", V1BETA1)
"""The versions read: those whose requests are read as v1's (v1beta1's once moved)."""
RESOURCES = PLURALS
_BESIDE_EXACTLY = frozenset({"name", "firstAvailable", "exactly"})
"""The fields of a v1beta1 request that stay where they are in v1."""


def is_claim_object(obj: Mapping[str, Any]) -> bool:
    """Whether `obj` is a ResourceClaimTemplate or ResourceClaim, of any version."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    return (
        isinstance(kind, str)
        and kind in RESOURCES
        and isinstance(api_version, str)
        and api_version.startswith(f"{GROUP}/")
    )


def is_device_class(obj: Mapping[str, Any]) -> bool:
    """Whether `obj` is a DeviceClass, of any version (its selectors read alike)."""
    api_version = obj.get("apiVersion")
    return (
        obj.get("kind") == DEVICE_CLASS
        and isinstance(api_version, str)
        and api_version.startswith(f"{GROUP}/")
    )


def unread_version(obj: Mapping[str, Any]) -> str | None:
    """Why the claim object `obj` is not read (a version other than `VERSIONS`), or None."""
    if obj.get("apiVersion") in VERSIONS:
        return None
    read = ", ".join(version.removeprefix(f"{GROUP}/") for version in VERSIONS)
    return f"{obj.get('apiVersion')} {obj.get('kind')} is not read: only {read}"


def as_v1(obj: dict[str, Any]) -> dict[str, Any]:
    """The claim object `obj` as kube-apiserver would send it, ``resource.k8s.io/v1``.

    A part of the wrong shape is left as it is: reading the object says what is wrong."""
    if obj.get("apiVersion") == V1:
        return obj
    converted = copy.deepcopy(obj)
    converted["apiVersion"] = V1
    if obj.get("apiVersion") == V1BETA1:
        for request in _requests(converted):
            if (
                isinstance(request, dict)
                and "exactly" not in request
                and "deviceClassName" in request
            ):
                moved = {k: v for k, v in request.items() if k not in _BESIDE_EXACTLY}
                for key in moved:
                    del request[key]
                request["exactly"] = moved
    return converted


def _requests(obj: dict[str, Any]) -> list[Any]:
    spec: Any = obj.get("spec")
    if obj.get("kind") == TEMPLATE:
        spec = spec.get("spec") if isinstance(spec, dict) else None
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    return requests if isinstance(requests, list) else []


@dataclass(frozen=True)
class ClaimDocuments:
    """The claim objects of some documents, by namespace ("" for those giving none), each
    as v1."""

    by_namespace: Mapping[str, Mapping[ClaimSource, Any]] = field(default_factory=dict)
    device_classes: Mapping[str, DeviceClassFacts] = field(default_factory=dict)
    """The DeviceClasses among them, by name."""

    @classmethod
    def of(cls, objects: Iterable[dict[str, Any]]) -> ClaimDocuments:
        """Those of `objects` that are claim objects of a version read, with a name; of two
        of one name in one namespace the later, as `kubectl apply` leaves it. And the
        DeviceClasses, the later of two of one name."""
        by_namespace: dict[str, dict[ClaimSource, Any]] = {}
        classes: dict[str, DeviceClassFacts] = {}
        for obj in objects:
            if is_device_class(obj):
                facts = device_class_facts(obj)
                if facts is not None:
                    classes[facts.name] = facts
                continue
            if not is_claim_object(obj) or unread_version(obj) is not None:
                continue
            metadata = obj.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            name, namespace = metadata.get("name"), metadata.get("namespace") or ""
            if not isinstance(name, str) or not name or not isinstance(namespace, str):
                continue
            by_namespace.setdefault(namespace, {})[ClaimSource(obj["kind"], name)] = as_v1(obj)
        return cls(by_namespace, classes)

    @cached_property
    def inventory(self) -> Inventory:
        """What the documents say of the cluster: their DeviceClasses, when they hold any
        (nothing else is known: no nodes, PriorityClasses or ResourceSlices)."""
        if not self.device_classes:
            return UNKNOWN
        return Inventory(device_classes=dict(self.device_classes))

    def seen_from(self, namespace: str) -> ClaimObjects:
        """The objects a pod in `namespace` ("" when not given) may name: those of its
        namespace, and those giving none; one of its namespace wins over one giving none."""
        found = {**self.by_namespace.get("", {})}
        if namespace:
            found.update(self.by_namespace.get(namespace, {}))
        return ClaimObjects(found=found, looked_up=False) if found else NO_CLAIMS
