"""Admission requests as kube-apiserver sends them to webhooks, for the matching tests.

Pods as users write them, near the edges the matchConditions draw: with and without the
workload label; containers, init containers and debug containers asking for GPUs by
the policy's resource names, by other names of its domains, by other vendors' names or
none; the variables the runtime reads as device requests and others; tolerations of the
pools' taint, of every taint, of the taints every pod gets; a node named by hand; the
policy's PriorityClasses and others; claims named. Their CREATE, the updates the API
lets through (labels, annotations, images, tolerations added, scheduling gates lifted
with a node selector set), debug containers added, a status written, a binding. The
workloads of every kind the policy knows holding such pods as templates, ResourceClaims
and their templates asking for the policy's DeviceClasses or others, ConfigMaps and
Secrets with or without keys named as device-request variables.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from hypothesis import strategies as st

from tests.conftest import admission_review
from webhook.engine.dra.api import GROUP as DRA_GROUP
from webhook.engine.dra.api import VERSION as DRA_VERSION
from webhook.engine.templates import CONTROLLER_KINDS
from webhook.policy import Policy
from webhook.policy.compiled import TemplateKind

Json = dict[str, Any]
Strategy = st.SearchStrategy

OTHER_RESOURCES = ("cpu", "memory", "amd.com/gpu", "example.com/fpga", "nvidia.com")
OTHER_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "PATH", "nvidia_visible_devices")
OTHER_PRIORITIES = ("system-cluster-critical", "batch-low", "")
EVERY_POD_GETS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
)
OTHER_CLASSES = ("fpga.example.com", "gpu.amd.com", "gpu.nvidia.com.other")


def resource_names(policy: Policy) -> tuple[str, ...]:
    mig = f"{policy.mig_prefix}1g.10gb"
    named = (policy.gpu_resource, mig, *sorted(policy.other_gpu_resources))
    return (*named, *sorted(policy.dra_extended_resources), *OTHER_RESOURCES)


@st.composite
def containers(draw: Any, policy: Policy, name: str, resources: bool = True) -> Json:
    container: Json = {"name": name, "image": draw(st.sampled_from(("app:1", "app:2")))}
    if resources and draw(st.booleans()):
        names = draw(st.lists(st.sampled_from(resource_names(policy)), max_size=2, unique=True))
        sides = draw(st.sampled_from((("limits",), ("requests",), ("limits", "requests"))))
        container["resources"] = {side: {n: "1" for n in names} for side in sides}
    if draw(st.integers(0, 3)) == 0:
        env_names = (*sorted(policy.requested_device_env), *OTHER_ENV)
        names = draw(st.lists(st.sampled_from(env_names), min_size=1, max_size=2, unique=True))
        container["env"] = [{"name": n, "value": "0"} for n in names]
    if draw(st.integers(0, 5)) == 0:
        prefix = draw(st.sampled_from(("NVIDIA_VISIBLE_", "NVIDIA_", "APP_", "")))
        source: Json = {"configMapRef": {"name": "settings"}}
        container["envFrom"] = [{**source, "prefix": prefix} if prefix else source]
    return container


def tolerations(policy: Policy) -> Strategy[Json]:
    keys = sorted({t.key for t in policy.gpu_taints})
    return st.one_of(
        st.sampled_from(EVERY_POD_GETS),
        st.just({"operator": "Exists"}),
        st.just({"key": "", "operator": "Exists", "effect": "NoSchedule"}),
        st.builds(
            lambda key, value: {"key": key, "operator": "Equal", "value": value},
            st.sampled_from((*keys, "dedicated", "spot")),
            st.sampled_from(("training", "inference", "x")),
        ),
    )


@st.composite
def pod_specs(draw: Any, policy: Policy) -> Json:
    count = draw(st.integers(1, 2))
    spec: Json = {"containers": [draw(containers(policy, f"c{i}")) for i in range(count)]}
    if draw(st.integers(0, 3)) == 0:
        spec["initContainers"] = [draw(containers(policy, "init"))]
    spec["tolerations"] = list(EVERY_POD_GETS)
    spec["tolerations"] += draw(st.lists(tolerations(policy), max_size=2))
    if draw(st.integers(0, 5)) == 0:
        spec["nodeName"] = draw(st.sampled_from(("gpu-1", "cpu-0", "")))
    if draw(st.integers(0, 3)) == 0:
        classes = (*sorted(policy.governed_priority_classes), *OTHER_PRIORITIES)
        spec["priorityClassName"] = draw(st.sampled_from(classes))
    if draw(st.integers(0, 5)) == 0:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    if draw(st.integers(0, 4)) == 0:
        spec["schedulingGates"] = [{"name": "example.com/queue"}]
    return spec


@st.composite
def pod_metadata(draw: Any, policy: Policy, name: str = "p") -> Json:
    labels: Json = draw(st.sampled_from(({}, {"app": "web"})))
    if draw(st.booleans()):
        labels = {**labels, policy.workload_label: draw(st.sampled_from((*policy.classes, "x")))}
    metadata: Json = {"name": name, "namespace": "ml"}
    if labels:
        metadata["labels"] = labels
    return metadata


@st.composite
def pods(draw: Any, policy: Policy) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": draw(pod_metadata(policy)),
        "spec": draw(pod_specs(policy)),
    }


@st.composite
def pod_updates(draw: Any, policy: Policy, old: Json) -> Json:
    """`old` changed as the API lets a pod's update change it."""
    new = copy.deepcopy(old)
    metadata, spec = new["metadata"], new["spec"]
    changes = ("labels", "unlabel", "model", "annotate", "cdi", "image", "tolerate", "ungate")
    change = draw(st.sampled_from(changes))
    if change == "labels":
        metadata["labels"] = {**metadata.get("labels", {}), policy.workload_label: "training"}
    elif change == "unlabel":
        metadata.pop("labels", None)
    elif change == "model":
        model = draw(st.sampled_from(("A100", "H100", "")))
        metadata["labels"] = {**metadata.get("labels", {}), policy.gpu_model_label: model}
    elif change == "annotate":
        metadata["annotations"] = {"example.com/note": "x"}
    elif change == "cdi":
        key = draw(st.sampled_from(("nvidia.cdi.k8s.io/pod", "cdi.k8s.io/x", "xcdi.k8s.io/y")))
        metadata["annotations"] = {**metadata.get("annotations", {}), key: "nvidia.com/gpu=all"}
    elif change == "image":
        spec["containers"][0]["image"] = "app:3"
    elif change == "tolerate":
        spec["tolerations"] = [*spec["tolerations"], draw(tolerations(policy))]
    elif spec.pop("schedulingGates", None) is not None:
        spec["nodeSelector"] = {"gpu-pool": draw(st.sampled_from(("training", "cpu")))}
    return new


def _review(obj: Json, **fields: Any) -> Json:
    return admission_review(obj, uid="matching", **fields)["request"]


@st.composite
def pod_requests(draw: Any, policy: Policy) -> Json:
    pod = draw(pods(policy))
    name = pod["metadata"]["name"]
    shape = draw(st.sampled_from(("create", "update", "debug", "status", "binding")))
    if shape == "create":
        return _review(pod, name=name)
    if shape == "update":
        return _review(
            draw(pod_updates(policy, pod)), operation="UPDATE", old_object=pod, name=name
        )
    if shape == "debug":
        debugged = copy.deepcopy(pod)
        debugger = draw(containers(policy, "debugger", resources=False))
        debugged["spec"]["ephemeralContainers"] = [debugger]
        sub = {"operation": "UPDATE", "sub_resource": "ephemeralcontainers", "name": name}
        return _review(debugged, old_object=pod, **sub)
    if shape == "status":
        status = {**pod, "status": {"phase": "Running"}}
        sub = {"operation": "UPDATE", "sub_resource": "status", "name": name}
        return _review(status, old_object=pod, **sub)
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": "ml"},
        "target": {"kind": "Node", "name": "gpu-1"},
    }
    return _review(binding, kind="Binding", sub_resource="binding", name=name)


def _holding(path: str, template: Json, as_list: bool) -> Json:
    """An object holding `template` at the path pattern, `*` a list item or a map value."""
    tokens = path.split("/")[1:]
    value: Any = template
    for token in reversed(tokens):
        wrapped = [value] if as_list else {"Worker": value}
        value = wrapped if token == "*" else {token: value}
    return value  # type: ignore[no-any-return]


def _merged(into: Json, other: Json) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merged(into[key], value)
        else:
            into[key] = value


@st.composite
def workload_requests(draw: Any, policy: Policy) -> Json:
    kind: TemplateKind = draw(st.sampled_from((*CONTROLLER_KINDS, *policy.workload_kinds)))
    obj: Json = {
        "apiVersion": f"{kind.group}/v1" if kind.group else "v1",
        "kind": kind.kind,
        "metadata": {"name": "w", "namespace": "ml"},
    }
    for path in kind.paths:
        template = {"metadata": draw(pod_metadata(policy)), "spec": draw(pod_specs(policy))}
        template["metadata"].pop("name")
        _merged(obj, _holding(path, template, draw(st.booleans())))
    fields = {"kind": kind.kind, "group": kind.group, "resource": kind.resource, "name": "w"}
    if draw(st.booleans()):
        return _review(obj, **fields)
    return _review(obj, operation="UPDATE", old_object=obj, **fields)


@st.composite
def device_requests(draw: Any, policy: Policy) -> Json:
    classes = (*sorted(policy.dra.device_classes), *OTHER_CLASSES)
    if draw(st.booleans()):
        return {"name": "r", "exactly": {"deviceClassName": draw(st.sampled_from(classes))}}
    picked = draw(st.lists(st.sampled_from(classes), min_size=1, max_size=2, unique=True))
    return {
        "name": "r",
        "firstAvailable": [{"name": f"s{i}", "deviceClassName": c} for i, c in enumerate(picked)],
    }


@st.composite
def claim_requests(draw: Any, policy: Policy) -> Json:
    spec = {"devices": {"requests": [draw(device_requests(policy))]}}
    template = draw(st.booleans())
    kind = "ResourceClaimTemplate" if template else "ResourceClaim"
    obj: Json = {
        "apiVersion": f"{DRA_GROUP}/{DRA_VERSION}",
        "kind": kind,
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"spec": spec} if template else spec,
    }
    resource = "resourceclaimtemplates" if template else "resourceclaims"
    fields = {"group": DRA_GROUP, "version": DRA_VERSION, "resource": resource, "name": "c"}
    return _review(obj, kind=kind, **fields)


CONSUMERS = (
    {"resource": "pods", "name": "server", "uid": "u1"},
    {"resource": "pods", "name": "server", "uid": "u2"},
    {"resource": "pods", "name": "worker", "uid": "u3"},
    {"apiGroup": "example.com", "resource": "jobs", "name": "server", "uid": "u4"},
)


@st.composite
def claim_status_requests(draw: Any, policy: Policy) -> Json:
    """A claim's status written: reserved for consumers (pods or others) before and after,
    with or without an allocation (kube-scheduler's, a driver's, a release)."""
    spec = {"devices": {"requests": [draw(device_requests(policy))]}}
    claim: Json = {
        "apiVersion": f"{DRA_GROUP}/{DRA_VERSION}",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": spec,
    }
    old, new = copy.deepcopy(claim), copy.deepcopy(claim)
    for obj in (old, new):
        reserved = draw(st.lists(st.sampled_from(CONSUMERS), max_size=2, unique_by=str))
        status: Json = {"allocation": {"devices": {"results": []}}} if draw(st.booleans()) else {}
        if reserved:
            status["reservedFor"] = reserved
        if status:
            obj["status"] = status
    fields = {"group": DRA_GROUP, "version": DRA_VERSION, "resource": "resourceclaims"}
    return _review(
        new, kind="ResourceClaim", operation="UPDATE", old_object=old, sub_resource="status",
        name="c", **fields,
    )  # fmt: skip


@st.composite
def key_holder_requests(draw: Any, policy: Policy) -> Json:
    names = (*sorted(policy.requested_device_env), *OTHER_ENV, "config.yaml")
    keys = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
    secret = draw(st.booleans())
    field = draw(st.sampled_from(("data", "binaryData") if not secret else ("data", "stringData")))
    encoded = field in ("binaryData",) or (secret and field == "data")
    value = base64.b64encode(b"all").decode() if encoded else "all"
    kind = "Secret" if secret else "ConfigMap"
    obj: Json = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "k", "namespace": "ml"}}
    if keys:
        obj[field] = {key: value for key in keys}
    resource = "secrets" if secret else "configmaps"
    return _review(obj, kind=kind, resource=resource, name="k")


def admission_requests(policy: Policy) -> Strategy[Json]:
    return st.one_of(
        pod_requests(policy),
        workload_requests(policy),
        claim_requests(policy),
        claim_status_requests(policy),
        key_holder_requests(policy),
    )
