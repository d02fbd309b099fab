"""The compiled policy: frozen, precomputed data the engine reads on every review.

Everything that can be worked out once per policy (which taints a class needs,
which node label values a pool has, how many MIG slices fit on a node) is
worked out here, at load time, so the hot path only looks things up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str
    other_than: frozenset[str] | None = None
    """None for a taint whose value is `value`; for the taint of a node of a pool the policy
    does not name, the values it certainly does not have (the policy's pools'): its value is
    that node's pool label value, which may be any other (`value` is then empty)."""

    def describe(self) -> str:
        if self.other_than is not None:
            return f"{self.key}=<a value of no pool of the policy>:{self.effect}"
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(frozen=True, slots=True)
class GpuModel:
    name: str
    """The value of the node model label, e.g. `A100`."""
    product: str | None
    """The GPU product in the MIG catalog, e.g. `A100-SXM4-40GB`, when known."""
    gpus_per_node: int
    mig_profiles: Mapping[str, int]
    """MIG profile (resource name suffix) -> most instances on one GPU; empty without MIG."""


DEVICE_PLUGIN = "devicePlugin"
DRA = "dra"
BOTH = "both"
"""How a pool's nodes give pods GPUs (`Pool.gpus_through`)."""

DRA_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
"""The extended resource name every DeviceClass answers to (Kubernetes 1.34+, DRAExtendedResource):
the prefix, then the class's name."""

GPU_DEVICE = "gpu"
MIG_DEVICE = "mig"
"""The values of the type attribute of a DRA device: a whole GPU, a MIG slice of one."""


@dataclass(frozen=True, slots=True)
class DraSettings:
    """How GPUs claimed through Dynamic Resource Allocation are recognised; the defaults
    are NVIDIA's DRA driver's."""

    drivers: frozenset[str] = frozenset({"gpu.nvidia.com"})
    """The drivers whose ResourceSlices publish GPUs; other drivers' devices are not GPUs."""
    gpu_classes: frozenset[str] = frozenset({"gpu.nvidia.com"})
    """DeviceClasses whose devices are whole GPUs."""
    mig_classes: frozenset[str] = frozenset({"mig.nvidia.com"})
    """DeviceClasses whose devices are MIG slices."""
    type_attribute: str = "type"
    """The attribute whose value is ``gpu`` (a whole GPU) or ``mig`` (a MIG device)."""
    product_attribute: str = "productName"
    """The attribute naming the GPU's product, e.g. ``NVIDIA A100-SXM4-40GB``."""
    profile_attribute: str = "profile"
    """The attribute naming a MIG device's profile, e.g. ``1g.5gb``."""

    def device_kind(self, device_class: str) -> str | None:
        """``gpu`` or ``mig`` for a DeviceClass of the policy's, None for any other."""
        if device_class in self.gpu_classes:
            return GPU_DEVICE
        if device_class in self.mig_classes:
            return MIG_DEVICE
        return None

    @property
    def device_classes(self) -> frozenset[str]:
        """Every DeviceClass whose devices are GPUs, whole or MIG."""
        return self.gpu_classes | self.mig_classes

    @property
    def attributes(self) -> frozenset[str]:
        """The device attributes the policy reads."""
        return frozenset((self.type_attribute, self.product_attribute, self.profile_attribute))


@dataclass(frozen=True, slots=True)
class Pool:
    name: str
    label_value: str
    gpus_per_node: int
    """The most GPUs any node of the pool holds (the largest of its models)."""
    taints: tuple[Taint, ...]
    models: Mapping[str, GpuModel]
    mig_strategy: str
    """`none`, `mixed` (nvidia.com/mig-<profile> resources, or MIG devices through DRA) or
    `single`."""
    gpus_through: str = DEVICE_PLUGIN
    """`devicePlugin`, `dra` or `both`: how the pool's nodes give pods GPUs."""
    sharing: str = "none"
    """How the pool's GPUs are shared besides whole ones: `none`, `kaiFractions` or
    `volcanoVgpu` (``webhook.engine.gpu_shares``)."""

    @property
    def takes_device_plugin_gpus(self) -> bool:
        """Whether nodes of the pool advertise GPUs as extended resources (nvidia.com/gpu)."""
        return self.gpus_through != DRA

    @property
    def takes_dra_gpus(self) -> bool:
        """Whether nodes of the pool publish GPUs in ResourceSlices, claimed through DRA."""
        return self.gpus_through != DEVICE_PLUGIN

    def models_for(self, model: str | None) -> list[GpuModel]:
        """The pool's `model` when it has it; all its models otherwise (`model` None too)."""
        if model is not None and model in self.models:
            return [self.models[model]]
        return list(self.models.values())

    def model_of_product(self, product: str) -> str | None:
        """The pool's model whose product `product` is or ends with, a space or hyphen
        before it (the GPU Feature Discovery label ``NVIDIA-A100-SXM4-40GB``, a DRA
        driver's attribute ``NVIDIA A100-SXM4-40GB``), or whose name it is."""
        published = product.replace(" ", "-")
        for model in self.models.values():
            known = model.product.replace(" ", "-") if model.product else None
            if known and (published == known or published.endswith("-" + known)):
                return model.name
        return product if product in self.models else None

    def gpus_per_node_of(self, model: str | None) -> int:
        """The most GPUs a node of the pool holds: of `model` when the pool has it."""
        if model is not None and model in self.models:
            return self.models[model].gpus_per_node
        return self.gpus_per_node

    def mig_slices_per_node(self, profile: str, model: str | None = None) -> int:
        """The most slices of a profile one node of this pool (of that model) can hold."""
        if self.mig_strategy != "mixed":
            return 0
        return max(
            (m.mig_profiles.get(profile, 0) * m.gpus_per_node for m in self.models_for(model)),
            default=0,
        )


LISTED = "listed"
UNLISTED_MODEL = "unlisted-model"
NO_MODEL = "no-model"
UNKNOWN_POOL = "unknown-pool"
SEEN = "seen"
"""What a kind of node is (`NodeKind.shape`): a pool and a model of the policy's; a node of a
pool of the policy with a model label the pool does not list, or without the model label (GPU
Feature Discovery has not labelled it yet, or labels another key); a node whose pool label
names no pool of the policy; a GPU node the live inventory holds that none of those covers."""


@dataclass(frozen=True, slots=True)
class NodeKind:
    """One kind of GPU node a cluster can hold, as far as the policy's node labels tell: the
    policy's pools and models, and what a GPU node can be besides (see the shapes above)."""

    pool: str
    """The pool of the policy; empty for a node in none."""
    model: str
    """The GPU model of the policy; empty when the node's model label names none or is absent."""
    labels: Mapping[str, str]
    """The node labels (of the policy's node label keys) with the values they certainly have;
    a key in neither this nor `open_labels` is certainly absent."""
    taints: tuple[Taint, ...]
    shape: str = LISTED
    open_labels: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Label key -> the values it certainly does not have: the node has the label with some
    value besides these (a model the pool does not list, a pool the policy does not name)."""
    node: str = ""
    """For a kind the live inventory saw (`SEEN`): one node of it by name."""
    nodes: int = 0
    """For a kind the live inventory saw: how many nodes are of it."""

    @property
    def listed(self) -> bool:
        """A pool of the policy with a model it lists."""
        return self.shape == LISTED


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    preemption_policy: str | None


@dataclass(frozen=True, slots=True)
class CoLocation:
    topology_key: str
    weight: int
    job_labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HostAccess:
    """What of the node a pod may use (hostAccess): hostPath folders, each with whether
    it may be written, and the node's namespaces."""

    paths: Mapping[str, bool] = field(default_factory=dict)
    """Folder -> whether a container may mount it (or inside it) writable."""
    host_network: bool = False
    host_pid: bool = False
    host_ipc: bool = False

    def __or__(self, more: HostAccess) -> HostAccess:
        """This and `more`: a folder writable in either is writable."""
        paths = dict(self.paths)
        for path, writable in more.paths.items():
            paths[path] = paths.get(path, False) or writable
        return HostAccess(
            paths,
            self.host_network or more.host_network,
            self.host_pid or more.host_pid,
            self.host_ipc or more.host_ipc,
        )

    def folder_of(self, path: str) -> tuple[str, bool] | None:
        """(folder, writable) of the allowed folder holding the clean `path` (the
        deepest, when nested ones are allowed), None for none."""
        held = [f for f in self.paths if path == f or path.startswith(f + "/")]
        if not held:
            return None
        folder = max(held, key=len)
        return folder, self.paths[folder]


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    name: str
    pools: tuple[str, ...]
    pool_label_values: tuple[str, ...]
    preferred_pools: tuple[tuple[str, int], ...]
    """(pool label value, weight) pairs for preferred node affinity."""
    priority_class: PriorityClass
    default_gpus: int
    co_location: CoLocation | None
    taints: tuple[Taint, ...]
    """The taints of all the class's pools, once each."""
    models: tuple[str, ...]
    """The GPU models the class's pools have, in policy order."""
    rule_modes: Mapping[str, str] = field(default_factory=dict)
    """Rule name -> `enforce`, `warn` or `audit` for the class's pods, over the policy's."""
    mutate: bool = True
    """False: the class's pods are not mutated (and are judged as written)."""
    host_access: HostAccess = field(default_factory=HostAccess)
    """What of the node the class's pods may use: the policy's hostAccess and its own."""

    def pinned_model(self, label: str | None) -> str | None:
        """The GPU model a pod whose model label is `label` is pinned to: `label` when the
        class's pools have that model, else None (the gpu-model rule refuses the label)."""
        return label if label in self.models else None


@dataclass(frozen=True, slots=True)
class TemplateKind:
    """A kind of object holding pod templates, and where it holds them."""

    group: str
    """The API group; empty for the core group."""
    kind: str
    paths: tuple[str, ...]
    """JSON-pointer patterns of its pod templates; `*` matches every key or item."""
    resource: str = ""
    """The plural resource name webhook rules match, e.g. `pytorchjobs`."""


@dataclass(frozen=True, slots=True)
class Exemption:
    """Pods in one of `namespaces` (any, when empty) with all of `pod_labels` skip validation."""

    namespaces: frozenset[str]
    pod_labels: Mapping[str, str]
    reason: str

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces and namespace not in self.namespaces:
            return False
        return all(labels.get(key) == value for key, value in self.pod_labels.items())


@dataclass(frozen=True, slots=True)
class Policy:
    source: str
    workload_label: str
    gpu_model_label: str
    pool_label: str
    model_label: str
    gpu_resource: str
    """The GPU resource injected by default, whose count per node the pools give."""
    mig_prefix: str
    visible_devices_env: str
    namespace_opt_in: tuple[str, str]
    pools: Mapping[str, Pool]
    classes: Mapping[str, WorkloadClass]
    node_kinds: tuple[NodeKind, ...]
    gpu_taints: tuple[Taint, ...] = field(default=())
    """The taints of every GPU pool, once each."""
    node_label_keys: frozenset[str] = field(default=frozenset())
    """The node labels the policy knows (pool, model); any other label is unknown."""
    workload_kinds: tuple[TemplateKind, ...] = field(default=())
    """Custom workload kinds (PyTorchJob, RayCluster, ...) whose pod templates are judged."""
    mutated_template_kinds: frozenset[str] = field(default=frozenset())
    """The kinds whose pod templates are mutated at the workload's CREATE."""

    other_gpu_resources: frozenset[str] = field(default=frozenset())
    """More resource names that count as GPUs (shared replicas, other vendors)."""
    governed_priority_classes: frozenset[str] = field(default=frozenset())
    """The PriorityClasses of the policy's classes: only their pods may use them."""

    default_mode: str = "enforce"
    rule_modes: Mapping[str, str] = field(default_factory=dict)
    """Rule name -> `enforce`, `warn` or `audit`; rules not named take `default_mode`."""
    exemptions: tuple[Exemption, ...] = field(default=())
    named_rules: tuple[tuple[str, str], ...] = field(default=())
    """(field path, rule name) of each rule `enforcement` gives a mode, in the order it names
    them. Which names exist is the engine's to say: it refuses a policy naming another."""
    dra: DraSettings = field(default_factory=DraSettings)
    """How GPUs claimed through Dynamic Resource Allocation are recognised."""
    device_env: frozenset[str] = field(default=frozenset())
    """More variables the runtime reads as device requests (`resources.deviceEnv`)."""
    dra_extended_resources: Mapping[str, str] = field(default_factory=dict)
    """Extended resource name -> ``gpu`` or ``mig``: the names under which a pod asks for
    devices of the policy's DeviceClasses without a claim
    (``deviceclass.resource.kubernetes.io/<class>``); the scheduler makes the claim."""
    host_access: HostAccess = field(default_factory=HostAccess)
    """What of the node every pod that can reach a GPU node may use (a class's pods: its
    ``host_access``, which holds this)."""
    revision: str = ""
    """The first 12 hex digits of the SHA-256 of the policy's text (those of the chart's
    `checksum/policy` and install's `gpu-admission.io/policy-sha256`), which mutated pods
    are annotated with; empty for a policy not read from text."""

    def mode_of(self, rule: str, workload_class: str | None) -> str:
        """The mode of `rule` for a pod of `workload_class` (None: no known class)."""
        workload = self.classes.get(workload_class) if workload_class is not None else None
        if workload is not None and rule in workload.rule_modes:
            return workload.rule_modes[rule]
        return self.rule_modes.get(rule, self.default_mode)

    def is_gpu_resource(self, resource: str) -> bool:
        """Whether a resource name gives a container GPUs (whole, shared or MIG slices)."""
        return (
            resource == self.gpu_resource
            or resource.startswith(self.mig_prefix)
            or resource in self.other_gpu_resources
            or resource in self.dra_extended_resources
        )

    @property
    def requested_device_env(self) -> frozenset[str]:
        """Every variable the runtime reads as a device request: the visible-devices one and
        `device_env`."""
        return self.device_env | {self.visible_devices_env}

    @property
    def fixed_label_keys(self) -> tuple[str, ...]:
        """The labels a pod is judged by, which an update may not change: its workload
        class, its GPU model and those an exemption matches."""
        keys = [self.workload_label, self.gpu_model_label]
        keys += sorted({key for e in self.exemptions for key in e.pod_labels})
        return tuple(dict.fromkeys(keys))

    def exemption_for(self, namespace: str, labels: Mapping[str, str]) -> Exemption | None:
        """The first exemption matching a pod in `namespace` with `labels`."""
        for exemption in self.exemptions:
            if exemption.matches(namespace, labels):
                return exemption
        return None

    def pools_of(self, workload_class: WorkloadClass) -> list[Pool]:
        return [self.pools[name] for name in workload_class.pools]

    def pools_for(self, workload_class: WorkloadClass, model: str | None) -> list[Pool]:
        """The pools a pod of `workload_class` pinned to GPU `model` can use: those of the
        class's pools that have the model, or all of them when `model` is None."""
        return [p for p in self.pools_of(workload_class) if model is None or model in p.models]
