"""The policy file as operators write it, checked field by field by pydantic.

Field names follow Kubernetes' camelCase so a policy reads like the manifests
next to it. Unknown fields are errors: a typo must not silently switch a rule
off.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from webhook.policy import kube_names

LABEL_KEY_PATTERN = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
KIND_PATTERN = r"^[A-Z][A-Za-z0-9]*$"
_DOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
DEVICE_ATTRIBUTE_PATTERN = rf"^({_DOMAIN}/)?[A-Za-z_][A-Za-z0-9_]{{0,31}}$"
"""A device attribute's name as a ResourceSlice gives it: a C identifier of at most 32
characters (in the domain of the device's driver), or `<domain>/<identifier>`."""
TEMPLATE_PATH_PATTERN = r"^(/([A-Za-z_][A-Za-z0-9_]*|\*))+$"
"""Field names CEL can select (`object.spec.template`) and `*` wildcards."""

LabelKey = Annotated[str, AfterValidator(kube_names.qualified_name)]
"""A label or taint key, or an extended resource name: its characters checked by
``LABEL_KEY_PATTERN``, its lengths by Kubernetes' limits."""
LabelValue = Annotated[str, AfterValidator(kube_names.label_value)]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
GpusThrough = Literal["devicePlugin", "dra", "both"]
"""How a pool's nodes give pods GPUs: the device plugin's extended resources
(`nvidia.com/gpu`, `nvidia.com/mig-<profile>`), Dynamic Resource Allocation
(ResourceClaims of the policy's GPU DeviceClasses), or both side by side."""
Mode = Literal["enforce", "warn", "audit"]
"""`enforce` denies; `warn` admits with an AdmissionResponse warning; `audit` admits and
records the violation in the response's auditAnnotations."""


def _rule_modes() -> Any:
    """Rule name -> mode. Which rules exist is the engine's to say: the schema lists its
    names (see webhook.policy.schema), and an engine refuses a policy naming another."""
    return Field(default_factory=dict, description="rule name -> mode: enforce, warn or audit")


class StrictModel(BaseModel):
    """Unknown keys are refused, and so is every coercion: `"2"` or `8.0` where a whole
    number is meant, `"false"` where a boolean is (pydantic's strict mode)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)


class LabelSelectorSpec(StrictModel):
    """A label that turns something on: key and the value it must have."""

    key: LabelKey = Field(pattern=LABEL_KEY_PATTERN)
    value: LabelValue = Field(pattern=LABEL_VALUE_PATTERN)


class PodLabels(StrictModel):
    workload: LabelKey = Field(default="gpu-admission.io/workload", pattern=LABEL_KEY_PATTERN)
    gpu_model: LabelKey = Field(
        default="gpu-admission.io/gpu-model", alias="gpuModel", pattern=LABEL_KEY_PATTERN
    )


class NodeLabels(StrictModel):
    pool: LabelKey = Field(default="gpu-pool", pattern=LABEL_KEY_PATTERN)
    model: LabelKey = Field(default="nvidia-gpu-model", pattern=LABEL_KEY_PATTERN)


TOOLKIT_DEVICE_ENV = (
    "NVIDIA_IMEX_CHANNELS",
    "NVIDIA_MIG_CONFIG_DEVICES",
    "NVIDIA_MIG_MONITOR_DEVICES",
    "NVIDIA_GDS",
    "NVIDIA_MOFED",
    "NVIDIA_NVSWITCH",
    "NVIDIA_GDRCOPY",
    "NVIDIA_REQUIRE_JETPACK",
)
"""What the NVIDIA Container Toolkit reads from a container's environment as a request
for devices, besides NVIDIA_VISIBLE_DEVICES (internal/config/image/envvars.go and
internal/modifier/cdi.go of NVIDIA/nvidia-container-toolkit; docs/security.md)."""


class Resources(StrictModel):
    gpu: LabelKey = Field(default="nvidia.com/gpu", pattern=LABEL_KEY_PATTERN)
    other_gpus: list[str] = Field(
        default_factory=lambda: ["nvidia.com/gpu.shared"], alias="otherGpus"
    )
    """More resource names that give a container GPUs: the shared replicas the device
    plugin advertises under a new name (time-slicing or MPS with renameByDefault),
    another vendor's devices. Each counts as a GPU; the count of one node is only known
    from the live inventory."""
    mig_prefix: str = Field(default="nvidia.com/mig-", alias="migPrefix", min_length=1)
    visible_devices_env: str = Field(
        default="NVIDIA_VISIBLE_DEVICES", alias="visibleDevicesEnv", min_length=1
    )
    device_env: list[str] = Field(
        default_factory=lambda: list(TOOLKIT_DEVICE_ENV), alias="deviceEnv"
    )
    """More variables the container runtime reads as requests for devices (besides
    visibleDevicesEnv), which nobody may set by hand: by default those the NVIDIA
    Container Toolkit reads (IMEX channels, MIG configuration and monitoring, the GDS,
    MOFED, NVSwitch and GDRCopy devices, Jetson's CSV mounts)."""

    @field_validator("other_gpus")
    @classmethod
    def _other_gpus_are_resource_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if "/" not in name or not re.fullmatch(LABEL_KEY_PATTERN, name):
                raise ValueError(
                    f"{name!r} is not an extended resource name such as nvidia.com/gpu.shared"
                )
            kube_names.qualified_name(name)
        return names


class Taint(StrictModel):
    key: LabelKey = Field(pattern=LABEL_KEY_PATTERN)
    value: LabelValue = Field(default="", pattern=LABEL_VALUE_PATTERN)
    effect: TaintEffect = "NoSchedule"


class GpuModel(StrictModel):
    """A GPU model a pool has; `product` names its entry in the MIG catalog."""

    product: str | None = None
    gpus_per_node: int | None = Field(default=None, alias="gpusPerNode", ge=1, le=1024)


class Pool(StrictModel):
    label_value: (
        Annotated[str, Field(pattern=LABEL_VALUE_PATTERN), AfterValidator(kube_names.label_value)]
        | None
    ) = Field(default=None, alias="labelValue")
    gpus_per_node: int = Field(alias="gpusPerNode", ge=1, le=1024)
    taints: list[Taint] | None = None
    models: dict[str, GpuModel] = Field(min_length=1)
    mig: Literal["none", "mixed", "single"] = "none"
    gpus_through: GpusThrough = Field(
        default="devicePlugin",
        alias="gpusThrough",
        description=(
            "how the pool's nodes give pods GPUs: devicePlugin (nvidia.com/gpu and "
            "nvidia.com/mig-<profile> resources, the default), dra (ResourceClaims of the "
            "DeviceClasses in `dra.deviceClasses`, devices published in ResourceSlices) "
            "or both (nodes of either kind, or nodes with both)"
        ),
    )

    sharing: Literal["none", "kaiFractions", "volcanoVgpu"] = Field(
        default="none",
        description=(
            "how the pool's GPUs are shared besides whole GPUs: none (the default), "
            "kaiFractions (the KAI Scheduler's gpu-fraction and gpu-memory annotations) or "
            "volcanoVgpu (Volcano's volcano.sh/vgpu-* resources); a class pod asking for a "
            "share its pools do not offer is refused (rule gpu-sharing)"
        ),
    )

    @field_validator("models")
    @classmethod
    def _model_names_are_label_values(cls, models: dict[str, GpuModel]) -> dict[str, GpuModel]:
        for name in models:
            if not re.fullmatch(LABEL_VALUE_PATTERN, name) or not name:
                raise ValueError(f"model name {name!r} is not a valid label value")
            kube_names.label_value(name)
        return models


class DeviceClasses(StrictModel):
    """The DeviceClasses whose devices are GPUs: a claim of one asks for GPUs."""

    gpu: list[str] = Field(
        default_factory=lambda: ["gpu.nvidia.com"],
        min_length=1,
        description="DeviceClasses whose devices are whole GPUs",
    )
    mig: list[str] = Field(
        default_factory=lambda: ["mig.nvidia.com"],
        description="DeviceClasses whose devices are MIG slices of a GPU",
    )

    @field_validator("gpu", "mig")
    @classmethod
    def _class_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if len(name) > 253 or not re.fullmatch(DNS_SUBDOMAIN_PATTERN, name):
                raise ValueError(f"{name!r} is not a DeviceClass name such as gpu.nvidia.com")
        return names


class DeviceAttributes(StrictModel):
    """The device attributes read of a driver's ResourceSlices, by what they mean."""

    type: str = Field(
        default="type",
        pattern=DEVICE_ATTRIBUTE_PATTERN,
        description="whose value is gpu for a whole GPU and mig for a MIG device",
    )
    product_name: str = Field(
        default="productName",
        alias="productName",
        pattern=DEVICE_ATTRIBUTE_PATTERN,
        description=(
            "the GPU's product, e.g. NVIDIA A100-SXM4-40GB: it names the pool's model whose "
            "product it ends with"
        ),
    )
    mig_profile: str = Field(
        default="profile",
        alias="migProfile",
        pattern=DEVICE_ATTRIBUTE_PATTERN,
        description="a MIG device's profile, e.g. 1g.5gb",
    )


class Dra(StrictModel):
    """GPUs claimed through Dynamic Resource Allocation, for pools whose `gpusThrough` is
    dra or both. The defaults are those of NVIDIA's DRA driver."""

    drivers: list[str] = Field(
        default_factory=lambda: ["gpu.nvidia.com"],
        min_length=1,
        description="the DRA drivers whose ResourceSlices publish the GPUs",
    )
    device_classes: DeviceClasses = Field(default_factory=DeviceClasses, alias="deviceClasses")
    attributes: DeviceAttributes = Field(default_factory=DeviceAttributes)

    @field_validator("drivers")
    @classmethod
    def _driver_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if len(name) > 63 or not re.fullmatch(DNS_SUBDOMAIN_PATTERN, name):
                raise ValueError(f"{name!r} is not a DRA driver name such as gpu.nvidia.com")
        return names


class PriorityClassRef(StrictModel):
    name: str = Field(pattern=NAME_PATTERN, max_length=253)
    value: int = Field(ge=-2147483648, le=1000000000)
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = Field(
        default=None, alias="preemptionPolicy"
    )


class PreferredPool(StrictModel):
    pool: str
    weight: int = Field(ge=1, le=100)


class CoLocation(StrictModel):
    """Draw the pods of one job together: preferred pod affinity in a topology."""

    topology_key: LabelKey = Field(alias="topologyKey", pattern=LABEL_KEY_PATTERN)
    weight: int = Field(default=100, ge=1, le=100)
    job_labels: list[str] = Field(alias="jobLabels", min_length=1)

    @field_validator("job_labels")
    @classmethod
    def _job_labels_are_keys(cls, keys: list[str]) -> list[str]:
        for key in keys:
            if not re.fullmatch(LABEL_KEY_PATTERN, key):
                raise ValueError(f"job label {key!r} is not a valid label key")
            kube_names.qualified_name(key)
        return keys


class HostPath(StrictModel):
    """A folder of the node a pod may mount as a hostPath volume, itself or inside it."""

    path: str = Field(
        max_length=4096,
        description="an absolute, clean path of the node, not / (every path is inside it)",
    )
    read_only: bool = Field(
        default=True,
        alias="readOnly",
        description="true: every container mounts it readOnly; false: it may write there",
    )

    @field_validator("path")
    @classmethod
    def _clean(cls, path: str) -> str:
        if not path.startswith("/") or "\x00" in path:
            raise ValueError(f"{path!r} is not an absolute path of the node")
        if path == "/":
            raise ValueError("'/' is every folder of the node: allow those the pods need")
        clean = posixpath.normpath(path)
        if clean != path or path.startswith("//"):
            raise ValueError(f"{path!r} is not a clean absolute path; write {clean!r}")
        return path


class HostAccess(StrictModel):
    """What of the node a pod that can reach a GPU node may use: nothing by default."""

    paths: list[HostPath] = Field(
        default_factory=list,
        description="folders a hostPath volume may mount (the folder or inside it)",
    )
    host_network: bool = Field(
        default=False, alias="hostNetwork", description="the node's network namespace"
    )
    host_pid: bool = Field(
        default=False, alias="hostPID", description="the node's processes (every tenant's)"
    )
    host_ipc: bool = Field(
        default=False,
        alias="hostIPC",
        description="the node's IPC namespace and /dev/shm (MPS clients need it)",
    )


class WorkloadClass(StrictModel):
    pools: list[str] = Field(min_length=1)
    preferred_pools: list[PreferredPool] = Field(default_factory=list, alias="preferredPools")
    priority_class: PriorityClassRef = Field(alias="priorityClass")
    default_gpus: int = Field(default=1, alias="defaultGpus", ge=0, le=1024)
    co_location: CoLocation | None = Field(default=None, alias="coLocation")
    host_access: HostAccess = Field(
        default_factory=HostAccess,
        alias="hostAccess",
        description="what of the node the class's pods may use besides the policy's hostAccess",
    )


class WorkloadKind(StrictModel):
    """A custom kind holding pod templates, judged like a Deployment's."""

    group: str = Field(pattern=DNS_SUBDOMAIN_PATTERN)
    kind: str = Field(pattern=KIND_PATTERN)
    resource: str = Field(
        pattern=NAME_PATTERN, description="plural resource name, e.g. pytorchjobs"
    )
    template_paths: list[str] = Field(
        alias="templatePaths",
        min_length=1,
        description="JSON pointers of its pod templates; `*` matches every key or item",
    )

    @field_validator("template_paths")
    @classmethod
    def _paths_are_pointers(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not re.fullmatch(TEMPLATE_PATH_PATTERN, path):
                raise ValueError(
                    f"template path {path!r} must be a JSON pointer of field names and `*`, "
                    "e.g. /spec/workerGroupSpecs/*/template"
                )
        return paths


def _kubeflow(kind: str, replica_specs: str) -> WorkloadKind:
    return WorkloadKind(
        group="kubeflow.org",
        kind=kind,
        resource=f"{kind.lower()}s",
        templatePaths=[f"/spec/{replica_specs}/*/template"],
    )


BUILT_IN_TEMPLATE_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")
"""The built-in controllers whose pod templates are known without a policy."""
LONG_RUNNING_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")
"""Controllers whose templates are not mutated unless ``mutateTemplates`` names them: their
pods are mutated at their CREATE as every pod is, a queue that admits them (Kueue's pod
groups) reads those pods, and a GitOps tool comparing the template with its source would
show our fields as drift for the workload's whole life."""


def default_workload_kinds() -> list[WorkloadKind]:
    """The pod templates of common ML workload kinds; a cluster without a kind never sends it."""
    return [
        _kubeflow("PyTorchJob", "pytorchReplicaSpecs"),
        _kubeflow("TFJob", "tfReplicaSpecs"),
        _kubeflow("MPIJob", "mpiReplicaSpecs"),
        WorkloadKind(
            group="ray.io",
            kind="RayCluster",
            resource="rayclusters",
            templatePaths=["/spec/headGroupSpec/template", "/spec/workerGroupSpecs/*/template"],
        ),
        WorkloadKind(
            group="ray.io",
            kind="RayJob",
            resource="rayjobs",
            templatePaths=[
                "/spec/rayClusterSpec/headGroupSpec/template",
                "/spec/rayClusterSpec/workerGroupSpecs/*/template",
            ],
        ),
        WorkloadKind(
            group="jobset.x-k8s.io",
            kind="JobSet",
            resource="jobsets",
            templatePaths=["/spec/replicatedJobs/*/template/spec/template"],
        ),
        WorkloadKind(
            group="leaderworkerset.x-k8s.io",
            kind="LeaderWorkerSet",
            resource="leaderworkersets",
            templatePaths=[
                "/spec/leaderWorkerTemplate/leaderTemplate",
                "/spec/leaderWorkerTemplate/workerTemplate",
            ],
        ),
    ]


class ClassEnforcement(StrictModel):
    rules: dict[str, Mode] = _rule_modes()
    mutate: bool = Field(default=True, description="false: the class's pods are not mutated")


class Enforcement(StrictModel):
    """What a violated rule does: `default`, then `rules`, then a class's own `rules`."""

    default: Mode = "enforce"
    rules: dict[str, Mode] = _rule_modes()
    classes: dict[str, ClassEnforcement] = Field(default_factory=dict)


class Exemption(StrictModel):
    """Pods in one of `namespaces` and carrying every label of `podLabels` skip validation
    (not mutation); either may be left out, not both."""

    namespaces: list[str] = Field(default_factory=list)
    pod_labels: dict[str, str] = Field(default_factory=dict, alias="podLabels")
    reason: str = Field(min_length=1, max_length=256)

    @field_validator("namespaces")
    @classmethod
    def _namespaces_are_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.fullmatch(NAME_PATTERN, name) or len(name) > 63:
                raise ValueError(f"namespace {name!r} is not a valid namespace name")
        return names

    @field_validator("pod_labels")
    @classmethod
    def _labels_are_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            if not re.fullmatch(LABEL_KEY_PATTERN, key):
                raise ValueError(f"label key {key!r} is not a valid label key")
            if not re.fullmatch(LABEL_VALUE_PATTERN, value):
                raise ValueError(f"label value {value!r} is not a valid label value")
            kube_names.qualified_name(key)
            kube_names.label_value(value)
        return labels


class PolicySpec(StrictModel):
    api_version: Literal["gpu-admission.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Policy"]
    pod_labels: PodLabels = Field(default_factory=PodLabels, alias="podLabels")
    node_labels: NodeLabels = Field(default_factory=NodeLabels, alias="nodeLabels")
    resources: Resources = Field(default_factory=Resources)
    namespace_opt_in: LabelSelectorSpec = Field(
        default_factory=lambda: LabelSelectorSpec(key="gpu-admission.io/enabled", value="true"),
        alias="namespaceOptIn",
    )
    pools: dict[str, Pool] = Field(min_length=1)
    classes: dict[str, WorkloadClass] = Field(min_length=1)
    workload_kinds: list[WorkloadKind] = Field(
        default_factory=default_workload_kinds,
        alias="workloadKinds",
        description=(
            "custom kinds whose pod templates are validated, besides Deployment, StatefulSet, "
            "DaemonSet, ReplicaSet, Job and CronJob; defaults to Kubeflow, Ray, JobSet and "
            "LeaderWorkerSet kinds, and replaces them when set"
        ),
    )
    mutate_templates: list[str] | None = Field(
        default=None,
        alias="mutateTemplates",
        description=(
            "the kinds (Job, CronJob, a kind of workloadKinds) whose pod templates get, at "
            "the workload's CREATE, what their pods would get at theirs, so that a queue "
            "that charges and places the workload by its template (Kueue) sees the pods "
            "that will run; defaults to every kind but Deployment, StatefulSet, DaemonSet "
            "and ReplicaSet"
        ),
    )
    dra: Dra = Field(
        default_factory=Dra,
        description=(
            "how GPUs claimed through Dynamic Resource Allocation are recognised: the "
            "drivers publishing them, the DeviceClasses meaning whole GPUs and MIG slices, "
            "and the device attributes naming product, type and MIG profile"
        ),
    )
    host_access: HostAccess = Field(
        default_factory=HostAccess,
        alias="hostAccess",
        description=(
            "what of the node every pod that can reach a GPU node may use: hostPath "
            "folders, the node's network, processes and IPC; nothing by default, a "
            "class's hostAccess adds to it for the class's pods"
        ),
    )
    enforcement: Enforcement = Field(default_factory=Enforcement)
    exemptions: list[Exemption] = Field(
        default_factory=list,
        description=(
            "pods that skip validation, with the reason recorded in auditAnnotations; "
            "there is no built-in exemption label"
        ),
    )
