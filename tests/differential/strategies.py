"""Clusters and pods for the differential tests, labelled as real clusters label them.

GPU nodes carry the pool label with a value of the policy's pools or one it does not
name, tainted `<pool label>=<value>:NoSchedule` as the convention goes (not always, and
sometimes with another taint beside it); a model label the policy lists, one it does not,
or none yet; GPU Feature Discovery's labels now and then; the hostname, zone and
instance-type labels every node has; and `nvidia.com/gpu` in `status.allocatable` once
the device plugin has registered. Other nodes have no pool label and no GPU, other
labels and sometimes taints of their own.

Pods are what users write: with or without the workload label, with or without GPUs,
with nodeSelector entries, required node affinity terms of every operator over the GPU
labels and others (values the policy names, values it does not, numbers) and
tolerations of the pool taint and of every taint. All of them pass kube-apiserver's
validation, which a pod meets before our validating webhook does.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from webhook.policy import Policy

Json = dict[str, Any]
Strategy = st.SearchStrategy

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPU_PRESENT = "nvidia.com/gpu.present"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU = "nvidia.com/gpu"

UNNAMED_POOLS = ("research", "h100")
"""Pool label values of real clusters that no pool of the shipped policies has."""
UNLISTED_MODELS = ("H100", "L4")
"""Models of real clusters that the shipped policies do not list."""
PRODUCTS = {
    "A100": ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB"),
    "V100": ("Tesla-V100-SXM2-32GB",),
    "H100": ("NVIDIA-H100-80GB-HBM3",),
    "L4": ("NVIDIA-L4",),
}
"""GPU Feature Discovery's product label for each model."""
GPU_NODE_NAMES = ("gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4")
CPU_NODE_NAMES = ("cpu-0", "cpu-1", "cpu-2")
"""The nodes a cluster may have, in order: a cluster has the first few of each."""
ZONES = ("zone-a", "zone-b")
GPU_INSTANCE_TYPES = ("p4d.24xlarge", "p3.16xlarge", "a2-highgpu-8g", "g6.xlarge")
CPU_INSTANCE_TYPES = ("m6i.large", "c6i.2xlarge", "e2-standard-8")
NUMBERS = ("0", "1", "4", "7", "8", "100")
"""Values for Gt and Lt, and odd values for every other operator."""
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
EFFECTS = ("", "NoSchedule", "NoExecute")
"""A toleration's effect; empty: every effect."""

EXTRA_GPU_TAINTS = (
    ("nvidia.com/gpu", "present", "NoSchedule"),
    ("dedicated", "ml", "NoExecute"),
    ("maintenance", "", "PreferNoSchedule"),
)
CPU_TAINTS = (
    ("dedicated", "infra", "NoSchedule"),
    ("node-role.kubernetes.io/control-plane", "", "NoSchedule"),
    ("spot", "true", "PreferNoSchedule"),
    ("dedicated", "ml", "NoExecute"),
)
OTHER_CPU_LABELS = {
    "workload-tier": ("web", "batch"),
    "cloud.google.com/gke-nodepool": ("default-pool", "system"),
    "kubernetes.io/os": ("linux",),
}


@dataclass(frozen=True)
class Vocabulary:
    """What the policy names, read from it: label keys, pool label values, models, classes."""

    pool_label: str
    model_label: str
    workload_label: str
    gpu_model_label: str
    pools: tuple[str, ...]
    models: tuple[str, ...]
    classes: tuple[str, ...]

    @classmethod
    def of(cls, policy: Policy) -> Vocabulary:
        models = (m for pool in policy.pools.values() for m in pool.models)
        return cls(
            pool_label=policy.pool_label,
            model_label=policy.model_label,
            workload_label=policy.workload_label,
            gpu_model_label=policy.gpu_model_label,
            pools=tuple(pool.label_value for pool in policy.pools.values()),
            models=tuple(dict.fromkeys(models)),
            classes=tuple(policy.classes),
        )


@dataclass(frozen=True)
class Scenario:
    """A cluster's nodes and the pods created in an opted-in namespace of it."""

    nodes: tuple[Json, ...]
    pods: tuple[Json, ...]

    def __repr__(self) -> str:
        nodes = "\n".join(f"  {describe_node(node)}" for node in self.nodes)
        return f"Scenario of {len(self.pods)} pods on nodes:\n{nodes}"


def describe_node(node: Json) -> str:
    """One line: name, labels, taints and GPUs of a node."""
    labels = ", ".join(f"{k}={v}" for k, v in node["metadata"]["labels"].items())
    taints = ", ".join(
        f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in node["spec"].get("taints", ())
    )
    gpus = node["status"]["allocatable"].get(GPU, "none")
    return f"{node['metadata']['name']}: labels {labels}; taints [{taints}]; {GPU} {gpus}"


@functools.cache
def chance(tenths: int) -> Strategy[bool]:
    """True `tenths` times in ten."""
    return st.integers(0, 9).map(lambda n: n < tenths)


def taint(key: str, value: str, effect: str) -> Json:
    return (
        {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}
    )


def node(name: str, labels: Json, taints: Sequence[Json], allocatable: Json) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name, **labels}},
        "spec": {"taints": list(taints)} if taints else {},
        "status": {"allocatable": {"cpu": "94", "memory": "1100Gi", "pods": "110", **allocatable}},
    }


# Strategies are built once per vocabulary: building them anew for every example costs
# more than drawing from them.


@functools.cache
def gpu_nodes(vocabulary: Vocabulary, name: str) -> Strategy[Json]:
    v = vocabulary
    pools = st.sampled_from((*v.pools, *v.pools, *UNNAMED_POOLS, None))
    models = st.sampled_from((*v.models, *v.models, *UNLISTED_MODELS, None))
    counts = st.sampled_from(("1", "4", "8"))
    zones, instance_types = st.sampled_from(ZONES), st.sampled_from(GPU_INSTANCE_TYPES)
    all_products = tuple(p for ps in PRODUCTS.values() for p in ps)
    products = {model: st.sampled_from(PRODUCTS.get(model, all_products)) for model in PRODUCTS}
    products[None] = st.sampled_from(all_products)
    extra_taints = st.sampled_from(EXTRA_GPU_TAINTS)
    sometimes, mostly = chance(4), chance(9)

    @st.composite
    def draw_node(draw: st.DrawFn) -> Json:
        pool, model, count = draw(pools), draw(models), draw(counts)
        labels = {ZONE: draw(zones), INSTANCE_TYPE: draw(instance_types)}
        if pool is not None:
            labels[v.pool_label] = pool
        if model is not None:
            labels[v.model_label] = model
        if draw(sometimes):  # GPU Feature Discovery runs on the node
            labels |= {GPU_PRESENT: "true", GPU_PRODUCT: draw(products[model]), GPU_COUNT: count}
        taints = []
        if pool is not None and draw(mostly):
            taints.append(taint(v.pool_label, pool, "NoSchedule"))
        if draw(chance(2)):
            taints.append(taint(*draw(extra_taints)))
        registered = draw(mostly)  # the device plugin has registered the node's GPUs
        return node(name, labels, taints, {GPU: count} if registered else {})

    return draw_node()


@functools.cache
def cpu_nodes(name: str) -> Strategy[Json]:
    zones, instance_types = st.sampled_from(ZONES), st.sampled_from(CPU_INSTANCE_TYPES)
    others = st.fixed_dictionaries(
        {}, optional={key: st.sampled_from(values) for key, values in OTHER_CPU_LABELS.items()}
    )
    taints = st.lists(st.sampled_from(CPU_TAINTS), max_size=2, unique=True)

    @st.composite
    def draw_node(draw: st.DrawFn) -> Json:
        labels = {ZONE: draw(zones), INSTANCE_TYPE: draw(instance_types), **draw(others)}
        return node(name, labels, [taint(*t) for t in draw(taints)], {})

    return draw_node()


@functools.cache
def clusters(vocabulary: Vocabulary) -> Strategy[tuple[Json, ...]]:
    gpus = st.integers(1, len(GPU_NODE_NAMES))
    cpus = st.integers(0, len(CPU_NODE_NAMES))

    @st.composite
    def draw_cluster(draw: st.DrawFn) -> tuple[Json, ...]:
        gpu = [draw(gpu_nodes(vocabulary, name)) for name in GPU_NODE_NAMES[: draw(gpus)]]
        cpu = [draw(cpu_nodes(name)) for name in CPU_NODE_NAMES[: draw(cpus)]]
        return (*gpu, *cpu)

    return draw_cluster()


def label_values(vocabulary: Vocabulary, key: str) -> tuple[str, ...]:
    """Values a pod may ask of a node label: those real nodes have, and a number or two."""
    v = vocabulary
    values = {
        v.pool_label: (*v.pools, *UNNAMED_POOLS),
        v.model_label: (*v.models, *UNLISTED_MODELS),
        GPU_PRESENT: ("true", "false"),
        GPU_PRODUCT: tuple(p for ps in PRODUCTS.values() for p in ps),
        GPU_COUNT: ("1", "4", "8"),
        HOSTNAME: GPU_NODE_NAMES + CPU_NODE_NAMES,
        ZONE: ZONES,
        INSTANCE_TYPE: GPU_INSTANCE_TYPES + CPU_INSTANCE_TYPES,
    }[key]
    return (*values, "1", "8")


def selector_keys(vocabulary: Vocabulary) -> tuple[str, ...]:
    """Node label keys pods select on; the pool and model labels most often."""
    pool, model = vocabulary.pool_label, vocabulary.model_label
    others = (GPU_PRESENT, GPU_PRODUCT, GPU_COUNT, HOSTNAME, ZONE, INSTANCE_TYPE)
    return (pool,) * 4 + (model,) * 4 + others


@functools.cache
def requirements(vocabulary: Vocabulary) -> Strategy[Json]:
    keys, operators = st.sampled_from(selector_keys(vocabulary)), st.sampled_from(OPERATORS)
    numbers = st.sampled_from(NUMBERS)
    values = {
        key: st.lists(
            st.sampled_from(label_values(vocabulary, key)), min_size=1, max_size=3, unique=True
        )
        for key in set(selector_keys(vocabulary))
    }

    @st.composite
    def draw_requirement(draw: st.DrawFn) -> Json:
        key, operator = draw(keys), draw(operators)
        if operator in ("Exists", "DoesNotExist"):
            return {"key": key, "operator": operator}
        if operator in ("Gt", "Lt"):
            return {"key": key, "operator": operator, "values": [draw(numbers)]}
        return {"key": key, "operator": operator, "values": draw(values[key])}

    return draw_requirement()


@functools.cache
def terms(vocabulary: Vocabulary) -> Strategy[Json]:
    expressions = st.lists(requirements(vocabulary), min_size=1, max_size=3)
    # As a DaemonSet's pods are pinned to their node, now and then.
    fields = st.fixed_dictionaries(
        {
            "key": st.just("metadata.name"),
            "operator": st.sampled_from(("In", "NotIn")),
            "values": st.sampled_from(GPU_NODE_NAMES + CPU_NODE_NAMES).map(lambda name: [name]),
        }
    )
    pinned = chance(1)

    @st.composite
    def draw_term(draw: st.DrawFn) -> Json:
        term: Json = {"matchExpressions": draw(expressions)}
        if draw(pinned):
            term["matchFields"] = [draw(fields)]
        return term

    return draw_term()


@functools.cache
def tolerations(vocabulary: Vocabulary) -> Strategy[Json]:
    pool = vocabulary.pool_label
    values = (*vocabulary.pools, *UNNAMED_POOLS)
    of_the_pools = (
        st.just({"key": pool, "operator": "Exists"})
        | st.sampled_from(values).map(lambda v: {"key": pool, "operator": "Equal", "value": v})
        | st.sampled_from(values).map(lambda v: {"key": pool, "value": v})  # Equal by default
        | st.just({"operator": "Exists"})  # every taint
    )
    others = st.sampled_from(
        (
            {"key": "dedicated", "operator": "Equal", "value": "ml"},
            {"key": "nvidia.com/gpu", "operator": "Exists"},
        )
    )
    effects = st.sampled_from(EFFECTS)

    @st.composite
    def draw_toleration(draw: st.DrawFn) -> Json:
        toleration = draw(of_the_pools if draw(chance(8)) else others)
        effect = draw(effects)
        return {**toleration, "effect": effect} if effect else toleration

    return draw_toleration()


@functools.cache
def containers() -> Strategy[Json]:
    gpus = st.sampled_from((None, None, "1", "2"))
    plain = {"name": "app", "image": "registry.example/app:1"}

    @st.composite
    def draw_container(draw: st.DrawFn) -> Json:
        count = draw(gpus)
        if count is not None:
            return {**plain, "resources": {"limits": {GPU: count}, "requests": {GPU: count}}}
        if draw(st.booleans()):
            return {**plain, "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
        return plain

    return draw_container()


@functools.cache
def pods(vocabulary: Vocabulary, name: str, aimed: str | None = None) -> Strategy[Json]:
    """Pods; one `aimed` at a pool (by its pool label value) is written by hand for that
    pool, as the team using the pool writes it: a toleration of the pool's taint and, mostly,
    a nodeSelector of its label."""
    v = vocabulary
    workloads = st.sampled_from((None, None, *v.classes))
    gpu_models = st.sampled_from((*v.models, *UNLISTED_MODELS))
    selectors = st.dictionaries(
        st.sampled_from(selector_keys(v)), st.just(""), min_size=1, max_size=2
    )
    selector_values = {key: st.sampled_from(label_values(v, key)) for key in selector_keys(v)}
    node_terms = st.lists(terms(v), min_size=1, max_size=3)
    pod_tolerations = st.lists(tolerations(v), max_size=3 if aimed is None else 1)

    @st.composite
    def draw_pod(draw: st.DrawFn) -> Json:
        labels = {"app": name}
        workload = draw(workloads)
        if workload is not None:
            labels[v.workload_label] = workload
            if draw(chance(1)):
                labels[v.gpu_model_label] = draw(gpu_models)
        spec: Json = {"containers": [draw(containers())]}
        selector = (
            {key: draw(selector_values[key]) for key in draw(selectors)} if draw(chance(4)) else {}
        )
        found = draw(pod_tolerations)
        if aimed is not None:
            found.append({"key": v.pool_label, "operator": "Equal", "value": aimed})
            if draw(chance(6)):
                selector[v.pool_label] = aimed
        if selector:
            spec["nodeSelector"] = selector
        if draw(chance(5)):
            required = {"nodeSelectorTerms": draw(node_terms)}
            spec["affinity"] = {"nodeAffinity": {REQUIRED: required}}
        if found:
            spec["tolerations"] = found
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "labels": labels},
            "spec": spec,
        }

    return draw_pod()


def scenarios(policy: Policy) -> Strategy[Scenario]:
    """A cluster, and a few pods created in it."""
    return scenarios_of(Vocabulary.of(policy))


@functools.cache
def scenarios_of(vocabulary: Vocabulary) -> Strategy[Scenario]:
    counts = st.integers(1, 4)

    @st.composite
    def draw_scenario(draw: st.DrawFn) -> Scenario:
        nodes = draw(clusters(vocabulary))
        # Pods written for a pool are written for one the cluster has.
        present = sorted({n["metadata"]["labels"].get(vocabulary.pool_label, "") for n in nodes})
        aims = st.sampled_from((None, None, *(value for value in present if value)))
        created = tuple(draw(pods(vocabulary, f"pod-{i}", draw(aims))) for i in range(draw(counts)))
        return Scenario(nodes, created)

    return draw_scenario()
