"""Properties of the engine over generated pods (hypothesis).

Pods are plain dicts shaped like what kube-apiserver sends: workload and GPU
model labels, job labels, containers, init containers and sidecars with GPU and
MIG quantities (valid and odd), env, nodeSelector, node and pod affinity,
tolerations, priority, and unknown fields at every level. A second family of
strategies puts arbitrary JSON values in pod places.

Bugs these properties found are pinned at the end of the file: as regression
tests once fixed, as strict xfail examples while open (their inputs are kept out
of the generated data, see KNOWN_BUG_QUANTITIES).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator
from decimal import Decimal
from importlib import resources
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import claim_objects, claim_template, dra_engine, pod_create
from tests.builders import pod as builder_pod
from webhook.engine import Decision, Engine
from webhook.engine.dra.pod_claims import ClaimObjects, pod_claims
from webhook.engine.inventory import DeviceClassFacts, Inventory
from webhook.engine.pod import read_pod
from webhook.engine.quantities import parse_quantity
from webhook.policy.load import load_default_policy, load_policy_text

Json = Any
Pod = dict[str, Any]
Strategy = st.SearchStrategy

ENGINE = Engine(load_default_policy())
# overflow.yaml: inference may also use the training pool, and prefers its own
# (the only shipped policy with preferredPools).
OVERFLOW_ENGINE = Engine(
    load_policy_text(
        resources.files("webhook.policies").joinpath("overflow.yaml").read_text("utf-8"),
        "policies/overflow.yaml (embedded)",
    )
)

WORKLOAD = "gpu-admission.io/workload"
GPU_MODEL = "gpu-admission.io/gpu-model"
JOB_LABELS = (
    "batch.kubernetes.io/job-name",
    "training.kubeflow.org/job-name",
    "gpu-admission.io/job",
)
GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-"
VISIBLE = "NVIDIA_VISIBLE_DEVICES"
POOL_LABEL = "gpu-pool"
MODEL_LABEL = "nvidia-gpu-model"
UNKNOWN_PREFIX = "x-unknown-"
# Default policy: the inference pool has A100 (A100-SXM4-40GB, MIG mixed), the
# training pool V100 and A100 (no MIG); 8 GPUs per node everywhere.
CLASS_MODELS = {"inference": ("A100",), "training": ("V100", "A100")}
INFERENCE_MIG_PROFILES = ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")


def budget(examples: int) -> settings:
    """Example counts sized so the whole file runs in about 15 s on one CI core."""
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )


FAST = budget(70)

# Quantities that once made the engine raise; kept as regression examples below.
KNOWN_BUG_QUANTITIES = {"a million digits Ki": "9" * 1_000_000 + "Ki"}


review = pod_create


# ---------------------------------------------------------------- strategies


@functools.cache
def json_values(max_leaves: int = 8) -> Strategy[Json]:
    """Arbitrary JSON: what a body decoded by orjson can hold."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**63), max_value=2**63 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=8)
        | st.sampled_from(["", "1", "-1", "500m", "abc", "Always", GPU, VISIBLE, "In"])
    )
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=6), children, max_size=3)
        ),
        max_leaves=max_leaves,
    )


@functools.cache
def extras() -> Strategy[dict[str, Json]]:
    """Fields the engine does not know; they must come out of mutation untouched."""
    keys = st.sampled_from([f"{UNKNOWN_PREFIX}{n}" for n in ("a", "b", "c")])
    return st.dictionaries(keys, json_values(max_leaves=3), max_size=2)


def obj(
    required: dict[str, Strategy[Json]] | None = None,
    optional: dict[str, Strategy[Json]] | None = None,
) -> Strategy[dict[str, Json]]:
    """A mapping with required and optional known fields, plus unknown fields."""
    known = st.fixed_dictionaries(required or {}, optional=optional or {})
    return st.tuples(known, extras()).map(lambda pair: {**pair[1], **pair[0]})


label_values = st.sampled_from(["inference", "training", "A100", "V100", "H100", "x", ""])
ABSENT = "<absent>"
# Mostly the two classes of the default policy; also unknown, empty and absent.
workload_labels = st.sampled_from(
    ["inference", "training"] * 3 + ["batch", "Inference", "", ABSENT, ABSENT]
)
gpu_model_labels = st.sampled_from(["A100", "V100", "H100", ""])
job_names = st.sampled_from(["job-1", "job-2", ""])


def labels() -> Strategy[dict[str, str]]:
    optional: dict[str, Strategy[Json]] = {
        GPU_MODEL: gpu_model_labels,
        "app": st.sampled_from(["web", "trainer"]),
    }
    optional.update({key: job_names for key in JOB_LABELS})
    return st.fixed_dictionaries({WORKLOAD: workload_labels}, optional=optional).map(
        lambda found: {key: value for key, value in found.items() if value != ABSENT}
    )


odd_quantities = st.sampled_from(
    [
        "1",
        2,
        "500m",
        "abc",
        "-1",
        "1Ki",
        "0",
        0,
        "8",
        8,
        "9",
        "2000m",
        "1.5",
        1.5,
        "+1",
        "1e3",
        "1E",
        "1\n",
        "1e1000000",
        "9e999999",
    ]
)
resource_names = st.sampled_from(
    [
        GPU,
        GPU,
        GPU,
        f"{MIG}1g.5gb",
        f"{MIG}3g.20gb",
        f"{MIG}1g.10gb",
        f"{MIG}bogus",
        "cpu",
        "memory",
        "example.com/foo",
    ]
)


def quantity_maps() -> Strategy[dict[str, Json]]:
    return st.dictionaries(resource_names, odd_quantities, min_size=1, max_size=3)


def env_vars() -> Strategy[list[dict[str, Json]]]:
    entry = obj(
        {"name": st.sampled_from([VISIBLE, "PATH", "CUDA_VISIBLE_DEVICES", "FOO"])},
        {
            "value": st.sampled_from(["void", "none", "all", "0", "0,1", ""]),
            "valueFrom": st.just({"fieldRef": {"fieldPath": "metadata.name"}}),
        },
    )
    return st.lists(entry, max_size=2)


def containers(list_name: str) -> Strategy[dict[str, Json]]:
    optional: dict[str, Strategy[Json]] = {
        "image": st.just("registry.example/app:1"),
        "resources": obj({}, {"requests": quantity_maps(), "limits": quantity_maps()}),
        "env": env_vars(),
    }
    if list_name == "initContainers":
        optional["restartPolicy"] = st.sampled_from(["Always", "Never"])
    return obj({"name": st.sampled_from(["app", "side", "init", "c", ""])}, optional)


expression_keys = st.sampled_from([POOL_LABEL, MODEL_LABEL, "topology.kubernetes.io/zone", "x"])
operators = st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
expression_values = st.lists(
    st.sampled_from(["inference", "training", "A100", "V100", "1", "10", "x"]), max_size=3
)


def node_selector_terms() -> Strategy[dict[str, Json]]:
    expression = obj({"key": expression_keys, "operator": operators}, {"values": expression_values})
    field = obj(
        {"key": st.just("metadata.name"), "operator": st.sampled_from(["In", "NotIn"])},
        {"values": st.lists(st.sampled_from(["node-1", "node-2"]), max_size=2)},
    )
    return obj(
        {},
        {
            "matchExpressions": st.lists(expression, max_size=3),
            "matchFields": st.lists(field, max_size=1),
        },
    )


def affinities() -> Strategy[dict[str, Json]]:
    required = obj({}, {"nodeSelectorTerms": st.lists(node_selector_terms(), max_size=3)})
    preferred = st.lists(
        obj({"weight": st.integers(1, 100), "preference": node_selector_terms()}), max_size=2
    )
    node_affinity = obj(
        {},
        {
            "requiredDuringSchedulingIgnoredDuringExecution": required,
            "preferredDuringSchedulingIgnoredDuringExecution": preferred,
        },
    )
    pod_term = obj(
        {
            "labelSelector": st.fixed_dictionaries(
                {"matchLabels": st.dictionaries(st.sampled_from(JOB_LABELS), job_names, max_size=1)}
            ),
            "topologyKey": st.sampled_from(
                ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
            ),
        }
    )
    pod_affinity = obj(
        {},
        {
            "requiredDuringSchedulingIgnoredDuringExecution": st.lists(pod_term, max_size=1),
            "preferredDuringSchedulingIgnoredDuringExecution": st.lists(
                obj({"weight": st.integers(1, 100), "podAffinityTerm": pod_term}), max_size=2
            ),
        },
    )
    return obj({}, {"nodeAffinity": node_affinity, "podAffinity": pod_affinity})


def tolerations() -> Strategy[list[dict[str, Json]]]:
    toleration = obj(
        {},
        {
            "key": st.sampled_from([POOL_LABEL, "", "nvidia.com/gpu", "other"]),
            "operator": st.sampled_from(["Exists", "Equal"]),
            "value": st.sampled_from(["inference", "training", "", "x"]),
            "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule", ""]),
            "tolerationSeconds": st.integers(0, 60),
        },
    )
    return st.lists(toleration, max_size=3)


def some_or_none(items: Strategy[list[Json]]) -> Strategy[list[Json]]:
    """Mostly the non-empty lists of `items`, sometimes an empty list."""
    return st.tuples(st.integers(0, 7), items).map(lambda pair: pair[1] if pair[0] else [])


@functools.cache
def pods() -> Strategy[Pod]:
    """Well-formed pods (every part has the shape Kubernetes accepts), of every kind."""
    metadata = obj(
        {"labels": labels()},
        {
            "name": st.sampled_from(["p", "trainer-0", ""]),
            "generateName": st.just("gen-"),
            "namespace": st.just("ns"),
            "annotations": st.dictionaries(st.sampled_from(["a", "b"]), st.text(max_size=4)),
        },
    )
    spec = obj(
        {"containers": some_or_none(st.lists(containers("containers"), min_size=1, max_size=3))},
        {
            "initContainers": st.lists(containers("initContainers"), min_size=1, max_size=2),
            "ephemeralContainers": st.lists(containers("ephemeralContainers"), max_size=1),
            "nodeSelector": st.dictionaries(
                st.sampled_from([POOL_LABEL, MODEL_LABEL, "kubernetes.io/os", "x"]),
                label_values,
                max_size=2,
            ),
            "affinity": affinities(),
            "tolerations": tolerations(),
            "priorityClassName": st.sampled_from(
                ["inference-priority", "training-priority", "system-cluster-critical", ""]
            ),
            "priority": st.integers(0, 10**6),
            "restartPolicy": st.sampled_from(["Never", "OnFailure"]),
        },
    )
    return obj(
        {"metadata": metadata, "spec": spec},
        {"apiVersion": st.just("v1"), "kind": st.just("Pod")},
    )


def whole_count(count: int) -> Strategy[Json]:
    """One whole number of devices, written the ways Kubernetes accepts."""
    return st.sampled_from([str(count), count, f"{count * 1000}m", f"+{count}"])


@st.composite
def gpu_resources(draw: st.DrawFn, workload: str) -> dict[str, Json]:
    """Resources of one container: valid whole GPU or MIG quantities, requests == limits."""
    names = [GPU] if workload == "training" else [GPU, *(MIG + p for p in INFERENCE_MIG_PROFILES)]
    amounts = draw(st.dictionaries(st.sampled_from(names), st.integers(0, 3), max_size=2))
    result: dict[str, Json] = draw(extras())
    requests: dict[str, Json] = {"cpu": "1"} if draw(st.booleans()) else {}
    limits: dict[str, Json] = {"memory": "1Gi"} if draw(st.booleans()) else {}
    for name, count in amounts.items():
        written = draw(st.sampled_from(["requests", "limits", "both"]))
        if written in ("requests", "both"):
            requests[name] = draw(whole_count(count))
        if written in ("limits", "both"):
            limits[name] = draw(whole_count(count))
    if requests:
        result["requests"] = requests
    if limits:
        result["limits"] = limits
    return result


GPU_RESOURCES = {workload: gpu_resources(workload) for workload in CLASS_MODELS}


@st.composite
def plain_workload_pods(draw: st.DrawFn) -> Pod:
    """Workload pods with no placement, toleration or priority of their own, <= 8 GPUs."""
    workload = draw(st.sampled_from(["inference", "training"]))
    pod_labels = {WORKLOAD: workload}
    model = draw(st.sampled_from([None, "", *CLASS_MODELS[workload]]))
    if model is not None:
        pod_labels[GPU_MODEL] = model
    for key in draw(st.lists(st.sampled_from(JOB_LABELS), max_size=2, unique=True)):
        pod_labels[key] = draw(job_names)

    def container(name: str, sidecar: bool | None) -> dict[str, Json]:
        result: dict[str, Json] = {**draw(extras()), "name": name, "image": "img"}
        if draw(st.booleans()):
            result["resources"] = draw(GPU_RESOURCES[workload])
        if draw(st.booleans()):
            safe = st.sampled_from(["PATH", "FOO", VISIBLE])
            result["env"] = [
                {
                    "name": n,
                    "value": "void" if n == VISIBLE else draw(st.sampled_from(["none", "1"])),
                }
                for n in draw(st.lists(safe, max_size=2, unique=True))
            ]
        if sidecar is not None:
            result["restartPolicy"] = "Always" if sidecar else "Never"
        return result

    apps = [container(f"app-{i}", None) for i in range(draw(st.integers(1, 3)))]
    inits = [container(f"init-{i}", draw(st.booleans())) for i in range(draw(st.integers(0, 2)))]
    spec: dict[str, Json] = {**draw(extras()), "containers": apps}
    if inits:
        spec["initContainers"] = inits
    return {
        **draw(extras()),
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**draw(extras()), "name": "p", "labels": pod_labels},
        "spec": spec,
    }


def total_gpus(pod: Pod) -> dict[str, Decimal]:
    """Per GPU resource, the sum over every runnable container (>= what the scheduler wants)."""
    totals: dict[str, Decimal] = {}
    for list_name in ("initContainers", "containers"):
        for container in pod["spec"].get(list_name, []):
            res = container.get("resources", {})
            for name in {*res.get("requests", {}), *res.get("limits", {})}:
                if name == GPU or name.startswith(MIG):
                    raw = res.get("requests", {}).get(name, res.get("limits", {}).get(name))
                    value = parse_quantity(raw)
                    assert value is not None
                    totals[name] = totals.get(name, Decimal(0)) + value
    return totals


def pointers(value: Json, here: str = "") -> Iterator[tuple[str, Json]]:
    """Every (JSON pointer, value) inside a document, the root included."""
    yield here, value
    if isinstance(value, dict):
        for key, item in value.items():
            token = str(key).replace("~", "~0").replace("/", "~1")
            yield from pointers(item, f"{here}/{token}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from pointers(item, f"{here}/{index}")


def unknown_fields(pod: Pod) -> list[tuple[str, Json]]:
    return [
        (pointer, copy.deepcopy(value))
        for pointer, value in pointers(pod)
        if pointer.rsplit("/", 1)[-1].startswith(UNKNOWN_PREFIX)
    ]


def resolve(document: Json, pointer: str) -> Json:
    return jsonpatch.JsonPointer(pointer).resolve(document)


# Places in a pod where kube-apiserver would never put these values; each is
# (parent pointer, key). The parent is created as a mapping when missing.
PLACES: tuple[tuple[tuple[str, ...], str], ...] = (
    ((), "metadata"),
    ((), "spec"),
    (("metadata",), "labels"),
    (("metadata",), "name"),
    (("spec",), "containers"),
    (("spec",), "initContainers"),
    (("spec",), "ephemeralContainers"),
    (("spec",), "nodeSelector"),
    (("spec",), "affinity"),
    (("spec",), "tolerations"),
    (("spec",), "priorityClassName"),
    (("spec", "affinity"), "nodeAffinity"),
    (("spec", "affinity"), "podAffinity"),
    (("spec", "affinity", "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution"),
    (("spec", "affinity", "nodeAffinity"), "preferredDuringSchedulingIgnoredDuringExecution"),
    (("spec", "affinity", "podAffinity"), "preferredDuringSchedulingIgnoredDuringExecution"),
    (
        ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
        "nodeSelectorTerms",
    ),
)
CONTAINER_PLACES = ("name", "resources", "env", "restartPolicy")
RESOURCE_PLACES = ("requests", "limits")


def slots(value: Json) -> Iterator[tuple[dict[str, Json] | list[Json], str | int]]:
    """Every (container, key or index) inside a document."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield value, key
            yield from slots(item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield value, index
            yield from slots(item)


@st.composite
def corrupted_pods(draw: st.DrawFn) -> Json:
    """A generated pod with arbitrary JSON written over a few of its places.

    The drawn values are copied before they are written over: strategies may hand
    out shared objects (st.just, sampled_from), and changing those in place makes
    the next generation differ from its replay (FlakyStrategyDefinition)."""
    pod: Json = copy.deepcopy(draw(pods()))
    for _ in range(draw(st.integers(1, 3))):
        value = copy.deepcopy(draw(json_values()))
        kind = draw(st.sampled_from(["place", "container", "quantity", "anywhere"]))
        if kind == "anywhere":
            places = list(slots(pod))
            index = draw(st.integers(-1, len(places) - 1))
            if index < 0:
                pod = value
            else:
                parent, key = places[index]
                parent[key] = value  # type: ignore[index]
            continue
        if not isinstance(pod, dict):
            continue
        if kind == "place":
            parents, key = draw(st.sampled_from(PLACES))
            target = pod
            for step in parents:
                child = target.get(step)
                if not isinstance(child, dict):
                    child = target[step] = {}
                target = child
            target[key] = value
            continue
        spec = pod.get("spec")
        items = spec.get("containers") if isinstance(spec, dict) else None
        if not isinstance(items, list) or not items or not isinstance(items[0], dict):
            continue
        first = items[0]
        if kind == "container":
            first[draw(st.sampled_from(CONTAINER_PLACES))] = value
        else:
            res = first.setdefault("resources", {})
            if isinstance(res, dict):
                kind_map = res.setdefault(draw(st.sampled_from(RESOURCE_PLACES)), {})
                if isinstance(kind_map, dict):
                    kind_map[draw(resource_names)] = value
    return pod


# ---------------------------------------------------------------- properties


POLICIES = pytest.mark.parametrize(
    "engine", [ENGINE, OVERFLOW_ENGINE], ids=["default-policy", "overflow-policy"]
)


def mutate(pod: Json, engine: Engine = ENGINE) -> Decision:
    decision = engine.mutate(review(pod))
    assert isinstance(decision, Decision)
    return decision


def apply(pod: Pod, decision: Decision) -> Pod:
    patched: Pod = jsonpatch.apply_patch(pod, list(decision.patch))
    return patched


@POLICIES
@FAST
@given(pod=pods())
def test_mutation_is_idempotent(engine: Engine, pod: Pod) -> None:
    first = mutate(pod, engine)
    assert first.allowed, first.message
    again = mutate(apply(pod, first), engine)
    assert again.allowed, again.message
    assert again.patch == (), f"second mutation patched again: {again.patch}"


@FAST
@given(pods())
def test_patch_applies_to_its_pod_and_leaves_the_input_alone(pod: Pod) -> None:
    before = copy.deepcopy(pod)
    decision = mutate(pod)
    assert pod == before
    assert decision.allowed and decision.code == 200, decision.message
    for operation in decision.patch:
        assert operation["op"] in ("add", "replace")
        assert operation["path"].startswith(("/spec/", "/metadata/"))
    orjson.dumps(list(decision.patch))  # what the HTTP edge sends must serialise
    patched = jsonpatch.apply_patch(pod, list(decision.patch))
    assert pod == before
    assert (patched == pod) == (decision.patch == ())
    ENGINE.validate(review(pod))
    ENGINE.validate(review(patched))
    assert pod == before


@FAST
@given(pods())
def test_unknown_fields_survive_mutation(pod: Pod) -> None:
    unknown = unknown_fields(pod)
    patched = apply(pod, mutate(pod))
    for pointer, value in unknown:
        assert resolve(patched, pointer) == value, pointer


@FAST
@given(pods())
def test_well_formed_pods_are_never_called_malformed(pod: Pod) -> None:
    for decision in (ENGINE.mutate(review(pod)), ENGINE.validate(review(pod))):
        assert decision.code in (200, 403), decision.message
        assert decision.allowed == (decision.code == 200)


def assert_decided(decision: Any) -> None:
    assert isinstance(decision, Decision)
    if decision.allowed:
        assert decision.code == 200
    else:
        assert decision.code in (400, 403)
        assert (decision.code == 400) == decision.message.startswith("malformed object: ")


@POLICIES
@budget(70)
@given(pod=corrupted_pods())
def test_arbitrary_values_in_a_pod_never_raise(engine: Engine, pod: Json) -> None:
    before = copy.deepcopy(pod)
    assert_decided(engine.mutate(review(pod)))
    assert_decided(engine.validate(review(pod)))
    assert_decided(
        engine.validate(review(pod, subresource="ephemeralcontainers", operation="UPDATE"))
    )
    assert pod == before


@FAST
@given(json_values(max_leaves=12))
def test_arbitrary_objects_never_raise(value: Json) -> None:
    assert_decided(ENGINE.mutate(review(value)))
    assert_decided(ENGINE.validate(review(value)))


def _set(path: tuple[str | int, ...], value: Json) -> Callable[[Pod], None]:
    def corrupt(pod: Pod) -> None:
        target: Any = pod
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return corrupt


def _first_container(pod: Pod) -> dict[str, Json]:
    pod["spec"]["containers"] = [{"name": "app"}, *pod["spec"]["containers"]]
    first: dict[str, Json] = pod["spec"]["containers"][0]
    return first


def _quantity(value: Json, kind: str = "limits") -> Callable[[Pod], None]:
    def corrupt(pod: Pod) -> None:
        _first_container(pod)["resources"] = {kind: {GPU: value}}

    return corrupt


def _container_field(key: str, value: Json) -> Callable[[Pod], None]:
    def corrupt(pod: Pod) -> None:
        _first_container(pod)[key] = value

    return corrupt


def _required_terms(terms: Json) -> Callable[[Pod], None]:
    def corrupt(pod: Pod) -> None:
        required = {"nodeSelectorTerms": terms}
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }

    return corrupt


MALFORMED: dict[str, Callable[[Pod], None]] = {
    "spec is a list": _set(("spec",), [{"containers": []}]),
    "spec is missing": lambda pod: pod.pop("spec"),
    "metadata is a string": _set(("metadata",), "p"),
    "labels is a list": _set(("metadata", "labels"), [WORKLOAD]),
    "label value is a number": _set(("metadata", "labels"), {WORKLOAD: 1}),
    "name is a number": _set(("metadata", "name"), 7),
    "containers is null": _set(("spec", "containers"), None),
    "containers is a mapping": _set(("spec", "containers"), {"name": "app"}),
    "a container is a string": _set(("spec", "containers"), ["app"]),
    "initContainers is a string": _set(("spec", "initContainers"), "init"),
    "container name is a list": _container_field("name", ["app"]),
    "resources is a list": _container_field("resources", [GPU]),
    "limits is a list": _container_field("resources", {"limits": [GPU, "1"]}),
    "quantity is a list": _quantity(["1"]),
    "quantity is a mapping": _quantity({"value": "1"}, "requests"),
    "quantity is a bool": _quantity(True),
    "quantity is null": _quantity(None),
    "env is a mapping": _container_field("env", {VISIBLE: "all"}),
    "env entry is a string": _container_field("env", [f"{VISIBLE}=all"]),
    "nodeSelector is a list": _set(("spec", "nodeSelector"), [POOL_LABEL]),
    "nodeSelector value is a bool": _set(("spec", "nodeSelector"), {POOL_LABEL: True}),
    "affinity is a list": _set(("spec", "affinity"), []),
    "nodeAffinity is a string": _set(("spec", "affinity"), {"nodeAffinity": "x"}),
    "terms is a mapping": _required_terms({"matchExpressions": []}),
    "term is a list": _required_terms([[]]),
    "expression without operator": _required_terms([{"matchExpressions": [{"key": POOL_LABEL}]}]),
    "values is a string": _required_terms(
        [{"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": "inference"}]}]
    ),
    "values hold a number": _required_terms(
        [{"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": [1]}]}]
    ),
    "tolerations is a mapping": _set(("spec", "tolerations"), {"key": POOL_LABEL}),
    "toleration key is a list": _set(
        ("spec", "tolerations"), [{"key": [POOL_LABEL], "operator": "Exists"}]
    ),
    "toleration value is a mapping": _set(
        ("spec", "tolerations"), [{"key": POOL_LABEL, "value": {"a": 1}}]
    ),
    "tolerationSeconds is a string": _set(
        ("spec", "tolerations"),
        [{"key": POOL_LABEL, "operator": "Exists", "tolerationSeconds": "1"}],
    ),
    "priorityClassName is a number": _set(("spec", "priorityClassName"), 1000),
}


@budget(80)
@given(pods(), st.sampled_from(sorted(MALFORMED)))
def test_malformed_shapes_are_refused_with_400(pod: Pod, shape: str) -> None:
    MALFORMED[shape](pod)
    for decision in (ENGINE.mutate(review(pod)), ENGINE.validate(review(pod))):
        assert not decision.allowed, shape
        assert decision.code == 400, (shape, decision.message)
        assert decision.message.startswith("malformed object: ")


@budget(100)
@given(plain_workload_pods().filter(lambda pod: all(0 < v <= 8 for v in total_gpus(pod).values())))
def test_mutation_makes_plain_workload_pods_valid(pod: Pod) -> None:
    """Pods that ask for no GPU at all get the class's default; an explicit 0 is refused
    (tests/engine/test_bypasses.py)."""
    mutation = mutate(pod)
    assert mutation.allowed, mutation.message
    mutated = apply(pod, mutation)
    validation = ENGINE.validate(review(mutated))
    assert validation.allowed, validation.message


@budget(50)
@given(
    json_values(),
    st.sampled_from(
        [
            {"operation": "DELETE"},
            {"kind": "Deployment", "group": "apps", "resource": "deployments"},
            {"subresource": "status"},
            {"operation": "UPDATE", "subresource": "status"},
        ]
    ),
)
def test_requests_other_than_pod_create_and_update_pass_untouched(
    value: Json, fields: dict[str, str]
) -> None:
    for decision in (
        ENGINE.mutate(review(value, **fields)),
        ENGINE.validate(review(value, **fields)),
    ):
        assert decision == Decision(allowed=True)


# ---------------------------------------------------------------- bugs found here


def _gpu_pod(quantity: Json, workload: str = "inference") -> Pod:
    return {
        "metadata": {"name": "p", "labels": {WORKLOAD: workload}},
        "spec": {"containers": [{"name": "app", "resources": {"limits": {GPU: quantity}}}]},
    }


@pytest.mark.parametrize("quantity", ["1e1000000", "1E1000000", "9e999999", "1e-2000000"])
@pytest.mark.parametrize("labelled", [True, False], ids=["inference", "no-label"])
def test_huge_exponents_are_decided_not_raised(quantity: str, labelled: bool) -> None:
    """Was decimal.Overflow out of validate (resources._add summing Decimal('1e1000000'))."""
    pod = _gpu_pod(quantity)
    if not labelled:
        pod["metadata"]["labels"] = {}
    assert_decided(ENGINE.mutate(review(pod)))
    decision = ENGINE.validate(review(pod))
    assert_decided(decision)
    assert not decision.allowed


@pytest.mark.parametrize("quantity", KNOWN_BUG_QUANTITIES.values(), ids=KNOWN_BUG_QUANTITIES)
@pytest.mark.parametrize("labelled", [True, False], ids=["inference", "no-label"])
def test_a_million_digit_quantity_is_decided(quantity: str, labelled: bool) -> None:
    """Was decimal.Overflow out of both: the suffix multiplication ran before any bound."""
    pod = _gpu_pod(quantity)
    if not labelled:
        pod["metadata"]["labels"] = {}
    assert_decided(ENGINE.mutate(review(pod)))
    assert_decided(ENGINE.validate(review(pod)))


def test_exa_suffix_is_a_quantity() -> None:
    """Was 'not a quantity': parse_quantity read the exa suffix E as an exponent marker."""
    assert parse_quantity("1E") == Decimal(10**18)
    decision = ENGINE.validate(review(apply(_gpu_pod("1E"), mutate(_gpu_pod("1E")))))
    assert [v.rule for v in decision.violations] == ["gpu-count"], decision.message


def test_trailing_newline_is_not_a_quantity() -> None:
    """Was accepted as 1: the quantity pattern ended in $, which matches before a newline."""
    assert parse_quantity("1\n") is None


@pytest.mark.parametrize("values", [["a", 1], 5, [["x"]]])
def test_odd_preferred_term_values_are_decided(values: Json) -> None:
    """Was TypeError out of mutate: mutate._canonical sorted unchecked preferred-term values."""
    pod = _gpu_pod("1")
    preference = {"matchExpressions": [{"key": "zone", "operator": "In", "values": values}]}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": preference}
            ]
        }
    }
    assert_decided(OVERFLOW_ENGINE.mutate(review(pod)))


# ------------------------------------- claims: one view of GPU DeviceClasses

DRA_ENGINE = dra_engine()
CLUSTER_CLASSES = {
    "gpus.example.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "slices.example.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    "channel.example.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'channel'",
    "nic.example.com": "device.driver == 'nic.example.com'",
}  # fmt: skip
"""DeviceClasses a cluster may have beside the policy's: of the GPU driver's GPUs, MIG
devices and channels, and of another driver's NICs."""
CLASS_NAMES = ("gpu.nvidia.com", "mig.nvidia.com", *CLUSTER_CLASSES, "absent.example.com")


def device_requests() -> Strategy[list[Json]]:
    """A claim's requests: one DeviceClass each, or alternatives of several."""
    classes = st.sampled_from(CLASS_NAMES)
    exactly = classes.map(lambda c: {"exactly": {"deviceClassName": c}})
    alternatives = st.lists(classes, min_size=1, max_size=3).map(
        lambda cs: {
            "firstAvailable": [{"name": f"alt{i}", "deviceClassName": c} for i, c in enumerate(cs)]
        }
    )
    requests = st.lists(st.one_of(exactly, alternatives), min_size=1, max_size=3)
    return requests.map(lambda rs: [{"name": f"r{i}", **r} for i, r in enumerate(rs)])


@st.composite
def claiming_pods(draw: st.DrawFn) -> tuple[Pod, ClaimObjects, Inventory]:
    """A class pod whose containers use some of its claims (or one request of one), the
    templates they are made from, and the DeviceClasses the cluster has."""
    claims = draw(st.integers(min_value=1, max_value=2))
    templates = [
        claim_template(f"t{k}", {"devices": {"requests": draw(device_requests())}})
        for k in range(claims)
    ]
    references = st.tuples(
        st.integers(min_value=0, max_value=claims - 1),
        st.sampled_from([None, "r0", "r1"]),
    )
    containers = []
    for index in range(draw(st.integers(min_value=1, max_value=3))):
        used = draw(st.lists(references, max_size=2, unique_by=lambda r: r[0]))
        claims_used = [{"name": f"c{k}", **({"request": r} if r else {})} for k, r in used]
        containers.append({"name": f"c{index}", "image": "x", "resources": {"claims": claims_used}})
    pod = builder_pod(
        draw(st.sampled_from(["inference", "training"])),
        containers=containers,
        resourceClaims=[{"name": f"c{k}", "resourceClaimTemplateName": f"t{k}"} for k in range(claims)],
    )  # fmt: skip
    present = draw(st.sets(st.sampled_from(sorted(CLUSTER_CLASSES))))
    inventory = Inventory(
        device_classes={c: DeviceClassFacts(c, (CLUSTER_CLASSES[c],)) for c in present}
    )
    return pod, claim_objects(*templates), inventory


@FAST
@given(claiming_pods())
def test_mutation_and_validation_agree_on_which_containers_take_gpus_through_claims(
    case: tuple[Pod, ClaimObjects, Inventory],
) -> None:
    pod, objects, inventory = case
    decision = DRA_ENGINE.mutate(review(pod), inventory, objects)
    assert decision.allowed, decision.message
    result = apply(pod, decision)
    now = DRA_ENGINE.capacity(inventory)
    view = read_pod(pod, DRA_ENGINE.policy)
    validated = pod_claims(DRA_ENGINE.policy, view, objects, now.dra.classes_for(DRA_ENGINE.policy))
    given_gpu = [GPU in str(c.get("resources", {})) for c in result["spec"]["containers"]]
    hidden = [
        {"name": VISIBLE, "value": "void"} in c.get("env", []) for c in result["spec"]["containers"]
    ]
    for container, gpu, void in zip(view.containers, given_gpu, hidden, strict=True):
        takes = validated.may_give_gpus(container)
        assert takes == (not gpu and not void), (container.name, takes, gpu, void)
    training = pod["metadata"]["labels"][WORKLOAD] == "training"
    assert any(given_gpu) == (not validated.may_ask_gpus and training)
