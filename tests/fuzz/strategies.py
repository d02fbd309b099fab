"""Adversarial admission reviews: realistic objects, then broken on purpose.

The objects start as what kube-apiserver sends (the property tests' pods, as pods
or as the pod templates of Deployments, Jobs, CronJobs, PyTorchJobs and RayClusters,
and autoscalers that target them), in AdmissionReviews of every operation and
subresource. Then a few mutations are written over them at random places, the
envelope included: a value of another type, nesting hundreds of levels deep, sheer
size (long strings, long lists, many keys), unicode keys and values, and odd
quantities. Values are built once and repeated, so a megabyte costs the generator
no more than a byte.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from itertools import islice
from typing import Any

import orjson
from hypothesis import strategies as st

from benchmarks.engine.run import cpu_pod, denied_pod, inference_pod, mig_pod, training_pod
from tests.builders import claiming_pod, container, pod
from tests.engine.test_properties import json_values, pods

Json = Any
Strategy = st.SearchStrategy

QUANTITIES: tuple[Json, ...] = (
    "1", "0", "-1", "+1", "8", "9", "1.5", "0.5", ".5", "5.", "1000m", "1500m", "1e3", "1E",
    "1Ei", "1e400", "1e-400", "9" * 40, "0x10", " 1", "1 ", "1\n", "\uff11", "\u0661", "NaN", "Infinity",
    "-0", "1n", "1Ki", "1.0001", "", "m", "e3",
    1, 0, -1, 1.5, 2**63, -(2**63), 10**30, 1e308, 5e-324, True, None, [], {},
)  # fmt: skip
"""Quantities as written, whole, fractional, huge, tiny, of no format and of other types."""

WORKLOAD_LABELS = ("inference", "training", "", "Inference", "x" * 64)
GPU_NAMES = ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.5gb", "nvidia.com/mig-")

DEEP_LEVELS = (50, 99, 100, 101, 150, 600, 1_000, 1_100)
"""Nesting around the engine's limit (100), where Python's recursion once broke (600),
and past what orjson decodes (1,024), which the HTTP edge refuses by itself."""


def unicode_text(max_size: int = 12) -> Strategy[str]:
    """Any text UTF-8 can carry (lone surrogates cannot be sent as JSON)."""
    return st.text(st.characters(codec="utf-8"), max_size=max_size)


def nested(levels: int, leaf: Json) -> Json:
    """`levels` mappings and lists, alternating, around `leaf` (built without recursion)."""
    value = leaf
    for level in range(levels):
        value = {"a": value} if level % 2 else [value]
    return value


@functools.cache
def hostile_values() -> Strategy[Json]:
    """A value to write over a part of an object: one in ten is large or deep."""
    small = st.one_of(
        json_values(max_leaves=8),
        st.sampled_from(QUANTITIES),
        unicode_text(),
        st.dictionaries(unicode_text(), unicode_text(), max_size=4),
        st.integers(),
        st.floats(),
    )
    return st.tuples(st.integers(0, 9), small, large_values()).map(
        lambda drawn: drawn[2] if drawn[0] == 0 else drawn[1]
    )


@functools.cache
def large_values() -> Strategy[Json]:
    """Long strings, long lists, many keys, deep nesting."""
    repeated = st.tuples(json_values(max_leaves=3), st.integers(0, 30_000))
    return st.one_of(
        st.integers(1, 1_000_000).map(lambda n: "x" * n),
        st.integers(1, 200_000).map(lambda n: "0," * n),
        st.tuples(st.sampled_from(DEEP_LEVELS), json_values(max_leaves=2)).map(
            lambda pair: nested(*pair)
        ),
        repeated.map(lambda pair: [pair[0]] * pair[1]),
        st.integers(0, 20_000).map(lambda n: {f"k{i}": "v" for i in range(n)}),
        st.integers(0, 20_000).map(lambda n: {f"{GPU_NAMES[3]}{i}": "1" for i in range(n)}),
    )


def clone(value: Json) -> Json:
    """A copy of `value` sharing no mapping or list with it, made without recursion (a value
    may be nested far deeper than Python recurses); shared parts become separate copies."""
    if not isinstance(value, dict | list):
        return value
    root = dict(value) if isinstance(value, dict) else list(value)
    stack: list[dict[str, Json] | list[Json]] = [root]
    while stack:
        node = stack.pop()
        keys = node.keys() if isinstance(node, dict) else range(len(node))
        for key in keys:
            child = node[key]  # type: ignore[index]
            if isinstance(child, dict | list):
                copied = dict(child) if isinstance(child, dict) else list(child)
                node[key] = copied  # type: ignore[index]
                stack.append(copied)
    return root


def slots(value: Json) -> Iterator[tuple[dict[str, Json] | list[Json], str | int]]:
    """Every (container, key or index) inside `value`, without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                yield item, key
                stack.append(child)
        elif isinstance(item, list):
            for index, child in enumerate(item):
                yield item, index
                stack.append(child)


def _smaller_than(value: Json, values: int) -> bool:
    """Whether `value` holds fewer than `values` values: what may be copied hundreds of times
    and still make a body kube-apiserver could send (3 MiB)."""
    return next(islice(slots(value), values - 1, None), None) is None


@st.composite
def mutated(draw: st.DrawFn, document: Json, at_most: int = 3) -> Json:
    """`document` (copied) with up to `at_most` of its parts written over, removed or grown."""
    document = clone(document)
    for _ in range(draw(st.integers(0, at_most))):
        places = list(slots(document))
        if not places or draw(st.integers(0, 30)) == 0:
            return clone(draw(hostile_values()))
        parent, key = places[draw(st.integers(0, len(places) - 1))]
        how = draw(st.sampled_from(["replace", "replace", "remove", "grow", "rename", "wrap"]))
        if how == "replace":
            parent[key] = clone(draw(hostile_values()))  # type: ignore[index]
        elif how == "remove":
            del parent[key]  # type: ignore[arg-type]
        elif how == "grow":
            copies = draw(st.integers(2, 300)) if _smaller_than(parent[key], 5_000) else 2  # type: ignore[index]
            parent[key] = [clone(parent[key]) for _ in range(copies)]  # type: ignore[index]
        elif how == "rename" and isinstance(parent, dict):
            parent[draw(unicode_text(max_size=300))] = parent.pop(key)  # type: ignore[arg-type]
        elif how == "wrap":
            parent[key] = nested(draw(st.sampled_from(DEEP_LEVELS)), parent[key])  # type: ignore[index]
    return document


@functools.cache
def catalogue() -> tuple[Json, ...]:
    """Pods as kube-apiserver sends them (the engine benchmark's, with managedFields and
    defaulted fields), and pods of each way around the policy once tried."""
    shared = {"nvidia.com/gpu.shared": "1"}
    debug = [container("debug", image="cuda:12")]
    return (
        inference_pod(), training_pod(), mig_pod(), denied_pod(), cpu_pod(),
        pod("inference", containers=[container(gpus=1)], nodeName="a100-0"),
        pod(containers=[container()], nodeName="v100-0"),
        pod(containers=[container()], priorityClassName="inference-priority"),
        pod("inference", containers=[container(gpus=0, limits={"cpu": "60"})]),
        pod("training", containers=[container(limits=shared, requests=shared)]),
        pod(containers=[container()], ephemeralContainers=debug),
        pod(containers=[container()], tolerations=[{"key": "gpu-pool", "operator": "Exists"}]),
        pod("training", containers=[container(gpus=1)], tolerations=[
            {"key": ["gpu-pool"], "operator": "Exists"},
        ]),
        pod(containers=[container()], tolerations=[
            {"key": "gpu-pool", "operator": "Equal", "value": {"pool": "training"}},
        ]),
        pod("inference", containers=[container(gpus=1)], tolerations=[
            {"key": "gpu-pool", "operator": "Equal", "value": "inference", "effect": "NoExecute",
             "tolerationSeconds": 30},
        ]),
        pod("training", containers=[container(gpus=8)], initContainers=[
            container("sidecar", gpus=1, restartPolicy="Always"), container("init", gpus=2)
        ]),
        claiming_pod(), claiming_pod(None, gpu="one-gpu", nic="nic"),
        pod(containers=[container()], resourceClaims=[{"name": "c", "resourceClaimName": "shared"}]),
        pod(containers=[container()], tolerations=[{"key": "gpu-pool", "operator": "Exists"}],
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "gpu-pool", "operator": "Exists"},
                    {"key": "nvidia-gpu-model", "operator": "DoesNotExist"},
                    {"key": "nvidia-gpu-model", "operator": "Gt", "values": ["9" * 30]},
                ]}]}}}),
        annotated(pod("training", containers=[container(gpus=1)]),
                  {"nvidia.cdi.k8s.io/pod": "nvidia.com/gpu=all", "cdi.k8s.io/x": ["all"]}),
        pod("training", containers=[container(gpus=1, volumeMounts=[
            {"name": "d", "mountPath": "/var/run/nvidia-container-devices/../nvidia-container-devices/all"},
            {"name": "h", "mountPath": ["not", "a", "path"]},
        ], securityContext={"privileged": True, "capabilities": {"add": ["SYS_ADMIN", 7, None]}})],
            volumes=[{"name": "d", "hostPath": {"path": "/dev/null"}},
                     {"name": "h", "hostPath": {"path": "//dev/./nvidia0"}},
                     {"name": ["x"], "hostPath": "not-a-mapping"}]),
        pod("inference", containers=[container(
            env=[{"name": "NVIDIA_IMEX_CHANNELS", "value": "all"}, {"name": ["NVIDIA_GDS"]}],
            envFrom=[{"prefix": "NV", "configMapRef": {"name": "c"}}, {"prefix": 5}, "x"],
            limits={"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "64"})]),
        pod(containers=[container(limits={"deviceclass.resource.kubernetes.io/mig.nvidia.com": "1"})]),
    )  # fmt: skip


@st.composite
def key_holders(draw: st.DrawFn, kind: str) -> Json:
    """A ConfigMap or Secret, some of whose keys are named as device requests."""
    names = (
        st.sampled_from(["NVIDIA_VISIBLE_DEVICES", "NVIDIA_IMEX_CHANNELS", "MODEL"])
        | unicode_text()
    )
    field = draw(st.sampled_from(["data", "binaryData", "stringData"]))
    keys = draw(
        st.dictionaries(names, st.sampled_from(["all", "MA=="]) | hostile_values(), max_size=4)
    )
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": "c", "namespace": "ml"},
        field: keys,
    }


def annotated(obj: Json, annotations: Json) -> Json:
    obj["metadata"]["annotations"] = annotations
    return obj


@st.composite
def workload_pods(draw: st.DrawFn) -> Json:
    """A pod of the catalogue or a generated one, mostly with a workload label and GPU
    resources to judge (generating a pod costs ten times as much as copying one)."""
    if draw(st.integers(0, 3)):
        return clone(draw(st.sampled_from(catalogue())))
    generated = clone(draw(pods()))
    labels = generated["metadata"].setdefault("labels", {})
    if draw(st.integers(0, 3)):
        labels["gpu-admission.io/workload"] = draw(st.sampled_from(WORKLOAD_LABELS))
    containers = generated["spec"].get("containers") or []
    if containers and draw(st.booleans()):
        amount = draw(st.sampled_from(QUANTITIES))
        resources = containers[0].setdefault("resources", {})
        resources.setdefault("limits", {})[draw(st.sampled_from(GPU_NAMES))] = amount
    return generated


def _template(pod: Json) -> Json:
    return {"metadata": pod.get("metadata", {}), "spec": pod.get("spec", {})}


WORKLOAD_KINDS: dict[str, tuple[str, str]] = {
    "Deployment": ("apps/v1", "deployments"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "Job": ("batch/v1", "jobs"),
    "CronJob": ("batch/v1", "cronjobs"),
    "PyTorchJob": ("kubeflow.org/v1", "pytorchjobs"),
    "RayCluster": ("ray.io/v1", "rayclusters"),
}
"""Kinds holding pod templates; the fuzzing policy names the last two (see FUZZ_POLICY)."""

FUZZ_POLICY = """
enforcement:
  default: enforce
  rules:
    mig-profile: warn
    gpu-quantity: audit
workloadKinds:
  - {group: kubeflow.org, kind: PyTorchJob, resource: pytorchjobs,
     templatePaths: [/spec/pytorchReplicaSpecs/*/template]}
  - {group: ray.io, kind: RayCluster, resource: rayclusters,
     templatePaths: [/spec/headGroupSpec/template, /spec/workerGroupSpecs/*/template]}
"""
"""Added to the default policy for the fuzz runs: a rule that warns and one that audits,
and wildcard template paths of both shapes."""


@st.composite
def workloads(draw: st.DrawFn) -> tuple[str, Json]:
    """(kind, object) of a workload whose templates are generated pods."""
    kind = draw(st.sampled_from(sorted(WORKLOAD_KINDS)))
    api_version = WORKLOAD_KINDS[kind][0]
    template = _template(draw(workload_pods()))
    if kind == "CronJob":
        spec: Json = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}
    elif kind == "PyTorchJob":
        worker = _template(draw(workload_pods()))
        spec = {"pytorchReplicaSpecs": {"Master": {"template": template}, "Worker": {"template": worker}}}  # fmt: skip
    elif kind == "RayCluster":
        workers = [{"template": _template(draw(workload_pods()))} for _ in range(draw(st.integers(0, 2)))]  # fmt: skip
        spec = {"headGroupSpec": {"template": template}, "workerGroupSpecs": workers}
    else:
        spec = {"replicas": draw(st.integers(0, 100)), "template": template}
    metadata = {"name": "w", "namespace": "ml"}
    return kind, {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


@st.composite
def autoscalers(draw: st.DrawFn) -> tuple[str, str, Json]:
    """(group, kind, object) of an HPA or a KEDA ScaledObject aimed at a workload."""
    kind = draw(st.sampled_from(sorted(WORKLOAD_KINDS)))
    api_version = WORKLOAD_KINDS[kind][0]
    target = {"apiVersion": api_version, "kind": kind, "name": "w"}
    replicas = draw(st.sampled_from([1, 8, 1000, 2**40, -1, "3", None]))
    if draw(st.booleans()):
        spec = {"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": replicas}
        obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": spec}
        return "autoscaling", "HorizontalPodAutoscaler", {"metadata": {"name": "a"}, **obj}
    spec = {"scaleTargetRef": target, "maxReplicaCount": replicas}
    obj = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "spec": spec}
    return "keda.sh", "ScaledObject", {"metadata": {"name": "a"}, **obj}


class Drawn:
    """A generated review, its body, and the workload an autoscaler in it targets (or None).
    Shown by its size and shape only: a falsifying example 1,000 levels deep or of a
    megabyte cannot be printed whole."""

    def __init__(self, review: Json, scaled: Json) -> None:
        self.review = review
        self.scaled = scaled
        self.body = encode(review)

    def __repr__(self) -> str:
        request = self.review.get("request") if isinstance(self.review, dict) else None
        request = request if isinstance(request, dict) else {}
        kind = request.get("kind")
        what = [
            f"{_short(kind.get('kind') if isinstance(kind, dict) else kind)}",
            f"{_short(request.get('operation'))}",
            f"subresource {_short(request.get('subResource'))}",
            f"{len(self.body):,} bytes",
        ]
        return f"Drawn({', '.join(what)}, starting {self.body[:300]!r})"


def _short(value: Json) -> str:
    text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return text[:40]


@st.composite
def reviews(draw: st.DrawFn) -> Drawn:
    """An AdmissionReview, mutated, and the workload its autoscaler targets (or None)."""
    choice = draw(st.sampled_from(["pod", "pod", "workload", "autoscaler", "keys"]))
    scaled: Json = None
    if choice == "keys":
        group, version = "", "v1"
        kind = draw(st.sampled_from(["ConfigMap", "Secret"]))
        resource = kind.lower() + "s"
        obj = draw(key_holders(kind))
    elif choice == "pod":
        group, version, kind, resource = "", "v1", "Pod", "pods"
        obj = draw(workload_pods())
    elif choice == "workload":
        kind, obj = draw(workloads())
        api_version, resource = WORKLOAD_KINDS[kind]
        group, _, version = api_version.rpartition("/")
    else:
        group, kind, obj = draw(autoscalers())
        version, resource = "v2", kind.lower() + "s"
        scaled = draw(mutated(draw(workloads())[1]))
    operation = draw(st.sampled_from(["CREATE", "CREATE", "UPDATE", "UPDATE", "DELETE", "CONNECT"]))
    subresource = draw(st.sampled_from(["", "", "", "status", "ephemeralcontainers", "scale"]))
    new = draw(mutated(obj))
    old = draw(st.sampled_from(["none", "same", "original", "mutated"]))
    old_object = draw(mutated(obj)) if old == "mutated" else {"same": new, "original": obj}.get(old)
    request = {
        "uid": draw(st.uuids().map(str) | unicode_text(max_size=40).filter(bool)),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "subResource": subresource,
        "namespace": draw(st.sampled_from(["ml", "", "kube-system"]) | unicode_text()),
        "name": draw(st.sampled_from(["p", "", "w"]) | unicode_text()),
        "operation": operation,
        "userInfo": {"username": "mallory", "groups": ["system:authenticated"]},
        "object": None if operation in ("DELETE", "CONNECT") and draw(st.booleans()) else new,
        "oldObject": old_object if operation != "CREATE" else None,
        "dryRun": draw(st.booleans()),
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    if not draw(st.integers(0, 19)):
        review = draw(mutated(review, at_most=2))
    return Drawn(review, scaled)


def encode(value: Json) -> bytes:
    """JSON of `value`, however deep: orjson when it can (up to 255 levels, 64-bit integers),
    else written out without recursion."""
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    parts: list[str] = []
    stack: list[Json] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            parts.append(item.text)
        elif isinstance(item, dict):
            stack.append(_Raw("}"))
            entries = list(item.items())
            for index in reversed(range(len(entries))):
                key, child = entries[index]
                stack.append(child)
                stack.append(_Raw(json.dumps(str(key)) + ":"))
                if index:
                    stack.append(_Raw(","))
            stack.append(_Raw("{"))
        elif isinstance(item, list):
            stack.append(_Raw("]"))
            for index in reversed(range(len(item))):
                stack.append(item[index])
                if index:
                    stack.append(_Raw(","))
            stack.append(_Raw("["))
        else:
            parts.append(json.dumps(item))
    return "".join(parts).encode("utf-8")


class _Raw:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text
