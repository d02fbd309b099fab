"""Engine throughput and latency on one core: `python -m benchmarks.engine`.

One review is what kube-apiserver asks of gpu-admission for one pod: `mutate`
on the pod as created, then `validate` on the pod with the patch applied. Both
calls are timed together with `time.perf_counter_ns`; the patched pod and the
AdmissionRequest objects are prepared beforehand (kube-apiserver applies the
patch, the HTTP edge builds the request). The pod kinds are interleaved.

Baselines measured in the same run: the orjson decode + encode of the two
AdmissionReview bodies of one review, and a no-op review (mutate + validate of
a ConfigMap, which the engine passes untouched). Per pod kind, the engine against the
orjson round trip of that kind's own two bodies (target: at most 2.5x), and the DRA
pod against the device-plugin inference pod (target: at most 1.5x). Then the full FastAPI app
in-process through httpx.ASGITransport (includes the httpx client; `--no-http`
skips it). `--profile` prints the cProfile hotspots of the engine loop, with answers
kept and with nothing kept.

Last, how the cost grows with the pod (1, 10, 100 containers) and with the policy
(2, 20, 200 pools and classes): `benchmarks.engine.growth`. `--no-growth` leaves that
section out, `--growth-only` prints only it.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import cProfile
import dataclasses
import gc
import math
import os
import platform
import pstats
import time
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import jsonpatch
import orjson

from benchmarks.common.report import markdown_table, this_cpu_model
from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.capacity.now import CapacityTracker, capacity_now
from webhook.engine.dra.api import TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.inventory import (
    UNKNOWN,
    DeviceFacts,
    Inventory,
    NodeFacts,
    PriorityClassFacts,
    ResourceSliceFacts,
)
from webhook.engine.kept import NothingKept
from webhook.engine.placement_answers import NoAnswers
from webhook.policy import Policy, load_policy_text
from webhook.policy.compiled import Taint
from webhook.policy.load import default_policy_text, load_default_policy

TARGET_REVIEWS_PER_SECOND = 20_000
TARGET_P99_US = 200.0
TARGET_PER_KIND_OVER_ORJSON = 2.5
"""Each pod kind's review at most this many times the orjson loads+dumps of its own two bodies."""
TARGET_DRA_OVER_INFERENCE = 1.5
"""The DRA pod's review at most this many times the device-plugin inference pod's."""
INFERENCE_KIND = "inference (label + GPU limit)"
DRA_KIND = "DRA inference (ResourceClaimTemplate)"

WORKLOAD = "gpu-admission.io/workload"
GPU_MODEL = "gpu-admission.io/gpu-model"
JOB_NAME = "batch.kubernetes.io/job-name"

Pod = dict[str, Any]


# ------------------------------------------------------------------ the pods


def _container(name: str, image: str, resources: dict[str, Any] | None = None) -> dict[str, Any]:
    """A container as kube-apiserver sends it to webhooks: with its defaulted fields."""
    return {
        "name": name,
        "image": image,
        "resources": resources or {},
        "volumeMounts": [
            {
                "name": "kube-api-access-x2x7q",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
    }


def _pod(name: str, labels: dict[str, str], spec: dict[str, Any]) -> Pod:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": "6b0a1d2e-9d57-4c4f-9a8e-2f6c1f0b7a11",
            "creationTimestamp": None,
            "labels": labels,
            "annotations": {"kubectl.kubernetes.io/default-container": "app"},
            "managedFields": [
                {
                    "manager": "kubectl-create",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2025-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:spec": {"f:containers": {}}},
                }
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-x2x7q",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            **spec,
        },
        "status": {},
    }


def inference_pod() -> Pod:
    """Only the class label and a GPU limit: mutation does the rest."""
    gpu = {"limits": {"nvidia.com/gpu": "1"}}
    return _pod(
        "llm-server-7d9f",
        {WORKLOAD: "inference", "app": "llm-server"},
        {"containers": [_container("app", "registry.example/llm-server:2.1", gpu)]},
    )


def training_pod() -> Pod:
    """A pod of a Job: 8 GPUs, a log-shipping sidecar, job labels for co-location."""
    gpus = {
        "limits": {"nvidia.com/gpu": "8", "memory": "512Gi"},
        "requests": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
    }
    sidecar = _container(
        "log-shipper", "registry.example/fluent-bit:3.0", {"requests": {"cpu": "100m"}}
    )
    sidecar["restartPolicy"] = "Always"
    trainer = _container("trainer", "registry.example/trainer:5.4", gpus)
    trainer["env"] = [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "WORLD_SIZE", "value": "4"}]
    return _pod(
        "llama-ft-0-x8k2p",
        {
            WORKLOAD: "training",
            JOB_NAME: "llama-ft",
            "batch.kubernetes.io/controller-uid": "0f3e",
            "job-name": "llama-ft",
        },
        {"initContainers": [sidecar], "containers": [trainer]},
    )


def mig_pod() -> Pod:
    """An inference pod on one MIG slice of a labelled model."""
    mig = {"limits": {"nvidia.com/mig-1g.5gb": "1"}}
    return _pod(
        "embedder-5c6b",
        {WORKLOAD: "inference", GPU_MODEL: "A100", "app": "embedder"},
        {"containers": [_container("app", "registry.example/embedder:1.0", mig)]},
    )


def denied_pod() -> Pod:
    """An inference pod pinned to the training pool and choosing GPUs by hand."""
    app = _container("app", "registry.example/llm-server:2.1", {"limits": {"nvidia.com/gpu": "2"}})
    app["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    return _pod(
        "rogue-4f2a",
        {WORKLOAD: "inference"},
        {"nodeSelector": {"gpu-pool": "training"}, "containers": [app]},
    )


def cpu_pod() -> Pod:
    """No labels, no GPU: passes mutation untouched, validation checks it stays off GPUs."""
    pod = _pod("nginx-6f4c", {}, {"containers": [_container("nginx", "nginx:1.27")]})
    del pod["metadata"]["labels"]
    return pod


DRA_TEMPLATE = "one-a100"
DRA_DRIVER = "gpu.nvidia.com"
A100_40GB = "NVIDIA A100-SXM4-40GB"


def dra_pod() -> Pod:
    """An inference pod claiming one A100 through a ResourceClaimTemplate (DRA)."""
    app = _container("app", "registry.example/llm-server:2.1", {"claims": [{"name": "gpu"}]})
    return _pod(
        "llm-dra-7d9f",
        {WORKLOAD: "inference", "app": "llm-dra"},
        {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": DRA_TEMPLATE}],
            "containers": [app],
        },
    )


def dra_template(namespace: str = "ml") -> dict[str, Any]:
    """The template the DRA pod names: one GPU of NVIDIA's class, of one product (a CEL
    selector the engine reads)."""
    selector = f"device.attributes['{DRA_DRIVER}'].productName == '{A100_40GB}'"
    request = {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression": selector}}],
        },
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": DRA_TEMPLATE, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def nvidia_gpu_class() -> dict[str, Any]:
    """NVIDIA's GPU DeviceClass, as its DRA driver installs it: whole GPUs of its driver."""
    expression = (
        f"device.driver == '{DRA_DRIVER}' && device.attributes['{DRA_DRIVER}'].type == 'gpu'"
    )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def dra_claims() -> ClaimObjects:
    """The template the DRA pod names, as the edge reads it from the cluster."""
    return ClaimObjects(found={ClaimSource(TEMPLATE, DRA_TEMPLATE): dra_template()})


def bench_policy_text() -> str:
    """The default policy with the inference pool moving to DRA (gpusThrough: both), so
    device-plugin and DRA pods are judged by one policy, as during a migration."""
    return default_policy_text().replace("gpusThrough: devicePlugin", "gpusThrough: both", 1)


def bench_policy() -> Policy:
    return load_policy_text(bench_policy_text(), "bench.yaml")


def already_mutated_pod(engine: Engine) -> Pod:
    """The training pod after mutation (reinvocation): mutation yields an empty patch."""
    pod = training_pod()
    return _apply(pod, engine.mutate(_request(pod)))


def _request(obj: Any, kind: str = "Pod", resource: str = "pods") -> AdmissionRequest:
    return AdmissionRequest(
        uid="705ab4f5-6393-11e8-b7cc-42010a800002",
        operation="CREATE",
        group="",
        version="v1",
        kind=kind,
        resource=resource,
        subresource="",
        namespace="ml",
        name=obj.get("metadata", {}).get("name", "") if isinstance(obj, dict) else "",
        object=obj,
    )


def _apply(pod: Pod, decision: Decision) -> Pod:
    patched: Pod = jsonpatch.apply_patch(pod, list(decision.patch))
    return patched


def _review_body(request: AdmissionRequest) -> bytes:
    """The AdmissionReview v1 body kube-apiserver posts for this request."""
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": request.uid,
                "kind": {"group": request.group, "version": request.version, "kind": request.kind},
                "resource": {
                    "group": request.group,
                    "version": request.version,
                    "resource": request.resource,
                },
                "requestKind": {
                    "group": request.group,
                    "version": request.version,
                    "kind": request.kind,
                },
                "requestResource": {
                    "group": request.group,
                    "version": request.version,
                    "resource": request.resource,
                },
                "name": request.name,
                "namespace": request.namespace,
                "operation": request.operation,
                "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
                "object": request.object,
                "oldObject": None,
                "dryRun": False,
                "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
            },
        }
    )


@dataclass(frozen=True)
class Case:
    """One pod kind: the two requests of its review and the two bodies kube-apiserver sends."""

    name: str
    mutate: AdmissionRequest
    validate: AdmissionRequest
    mutate_body: bytes
    validate_body: bytes
    expect_allowed: bool
    expect_patch: bool
    claims: ClaimObjects = NO_CLAIMS
    """The templates and claims its pod names, as the edge hands them over."""


def cases(engine: Engine) -> list[Case]:
    pods = {
        INFERENCE_KIND: (inference_pod(), True, True, NO_CLAIMS),
        "training job (8 GPUs + sidecar)": (training_pod(), True, True, NO_CLAIMS),
        "MIG inference": (mig_pod(), True, True, NO_CLAIMS),
        DRA_KIND: (dra_pod(), True, True, dra_claims()),
        "denied": (denied_pod(), False, True, NO_CLAIMS),
        "CPU pod, no labels": (cpu_pod(), True, False, NO_CLAIMS),
        "already mutated": (already_mutated_pod(engine), True, False, NO_CLAIMS),
    }
    result = []
    for name, (pod, allowed, patched, claims) in pods.items():
        mutate = _request(pod)
        validate = _request(_apply(copy.deepcopy(pod), engine.mutate(mutate, UNKNOWN, claims)))
        result.append(
            Case(
                name,
                mutate,
                validate,
                _review_body(mutate),
                _review_body(validate),
                allowed,
                patched,
                claims,
            )
        )
    return result


def check(engine: Engine, case: Case, inventory: Inventory = UNKNOWN) -> None:
    """The benchmark measures what it says: each pod gets the decision its kind implies."""
    mutation = engine.mutate(case.mutate, inventory, case.claims)
    validation = engine.validate(case.validate, inventory, claims=case.claims)
    assert mutation.allowed, (case.name, mutation.message)
    assert bool(mutation.patch) == case.expect_patch, (case.name, mutation.patch)
    assert validation.allowed == case.expect_allowed, (case.name, validation.message)
    assert validation.warnings == () or not case.expect_allowed, (case.name, validation.warnings)
    again = engine.mutate(case.validate, UNKNOWN, case.claims)
    assert again.patch == (), (case.name, "mutation is not idempotent")


# ------------------------------------------------------------------ measuring


def measure_engine(
    engine: Engine, all_cases: list[Case], rounds: int, inventory: Inventory = UNKNOWN
) -> dict[str, list[int]]:
    """Per case, the nanoseconds of each review (mutate + validate), cases interleaved;
    every review is handed `inventory`, as the service hands it the live one."""
    samples: dict[str, list[int]] = {c.name: [] for c in all_cases}
    mutate, validate, clock = engine.mutate, engine.validate, time.perf_counter_ns
    plan = [(samples[c.name].append, c.mutate, c.validate, c.claims) for c in all_cases]
    for _ in range(rounds):
        for record, first, second, claims in plan:
            start = clock()
            mutate(first, inventory, claims)
            validate(second, inventory, claims=claims)
            record(clock() - start)
    return samples


POOL_TAINTS = {pool: Taint("gpu-pool", pool, "NoSchedule") for pool in ("inference", "training")}
"""Each GPU node carries its pool's taint, as clusters following the practice taint them."""


def live_inventory(nodes: int) -> Inventory:
    """A cluster of `nodes` GPU nodes, a third inference (MIG mixed) and the rest training,
    as the informer hands it over; every node at least as large as the policy says. Every
    other inference node gives its GPUs through DRA: eight A100s in a ResourceSlice."""
    facts = []
    slices = []
    a100 = {"type": "gpu", "productName": A100_40GB}
    devices = tuple(DeviceFacts(f"gpu-{i}", a100) for i in range(8))
    for index in range(nodes):
        if index % 6 == 0:
            name = f"gpu-node-{index:05d}"
            labels = {"gpu-pool": "inference", "nvidia-gpu-model": "A100"}
            facts.append(NodeFacts(name, labels, True, {}, (POOL_TAINTS["inference"],)))
            slices.append(ResourceSliceFacts(name, DRA_DRIVER, name, 1, 1, name, devices))
            continue
        if index % 3 == 0:
            labels = {"gpu-pool": "inference", "nvidia-gpu-model": "A100"}
            allocatable = {"nvidia.com/gpu": Decimal(8), "nvidia.com/mig-1g.5gb": Decimal(56)}
        else:
            model = "V100" if index % 2 else "A100"
            labels = {"gpu-pool": "training", "nvidia-gpu-model": model}
            allocatable = {"nvidia.com/gpu": Decimal(8)}
        taints = (POOL_TAINTS[labels["gpu-pool"]],)
        facts.append(NodeFacts(f"gpu-node-{index:05d}", labels, True, allocatable, taints))
    classes = {
        c.priority_class.name: PriorityClassFacts(
            c.priority_class.name, c.priority_class.value, c.priority_class.preemption_policy
        )
        for c in load_default_policy().classes.values()
    }
    return Inventory(nodes=tuple(facts), priority_classes=classes, resource_slices=tuple(slices))


def measure_capacity_followed(engine: Engine, inventory: Inventory, rounds: int) -> list[int]:
    """What each change of the live inventory costs: one node's allocatable GPUs changed,
    the pools' capacity followed from the last inventory (``CapacityTracker``)."""
    assert inventory.nodes is not None
    tracker = CapacityTracker(engine.policy)
    tracker.now(inventory)
    samples: list[int] = []
    clock = time.perf_counter_ns
    nodes = list(inventory.nodes)
    for step in range(rounds):
        index = (step * 97) % len(nodes)
        gpus = Decimal(8 - step % 3)
        nodes[index] = dataclasses.replace(nodes[index], allocatable={"nvidia.com/gpu": gpus})
        changed = dataclasses.replace(inventory, nodes=tuple(nodes))
        start = clock()
        tracker.now(changed)
        samples.append(clock() - start)
    return samples


def measure_unkept(all_cases: list[Case], rounds: int) -> dict[str, list[int]]:
    """The reviews of ``measure_engine`` by an engine that keeps no answer: what the first
    pod of each template and placement costs (the other rows' pods repeat, as the
    replicas of a workload do, and find their answers kept)."""
    engine = unkept_engine()
    measure_engine(engine, all_cases, max(1, rounds // 10))
    return measure_engine(engine, all_cases, rounds)


def unkept_engine() -> Engine:
    """An engine of the benchmark's policy that keeps no answer."""
    engine = Engine(bench_policy())
    engine.answers = NoAnswers()
    engine.kept_findings = NothingKept()
    engine.kept_patches = NothingKept()
    return engine


def measure_capacity_now(engine: Engine, inventory: Inventory, rounds: int) -> list[int]:
    """What every pool has now, worked out from nothing: what the first sync costs."""
    samples: list[int] = []
    clock = time.perf_counter_ns
    for _ in range(rounds):
        start = clock()
        capacity_now(engine.policy, inventory)
        samples.append(clock() - start)
    return samples


def measure_orjson(all_cases: list[Case], rounds: int) -> list[int]:
    """Decode and re-encode the two AdmissionReview bodies of one review."""
    samples: list[int] = []
    loads, dumps, clock = orjson.loads, orjson.dumps, time.perf_counter_ns
    bodies = [(c.mutate_body, c.validate_body) for c in all_cases]
    for _ in range(rounds):
        for first, second in bodies:
            start = clock()
            dumps(loads(first))
            dumps(loads(second))
            samples.append(clock() - start)
    return samples


def measure_noop(engine: Engine, rounds: int) -> list[int]:
    """mutate + validate of a request that is not a pod: the engine's call overhead."""
    request = _request({"metadata": {"name": "cm"}, "data": {}}, "ConfigMap", "configmaps")
    samples: list[int] = []
    mutate, validate, clock = engine.mutate, engine.validate, time.perf_counter_ns
    for _ in range(rounds):
        start = clock()
        mutate(request)
        validate(request)
        samples.append(clock() - start)
    return samples


def measure_http(engine: Engine, all_cases: list[Case], rounds: int) -> list[int]:
    """POST /mutate then POST /validate through the FastAPI app, in-process."""
    import httpx

    from webhook.http.app import create_app

    app = create_app(lambda: engine)
    headers = {"content-type": "application/json"}

    async def run() -> list[int]:
        samples: list[int] = []
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            for index in range(rounds + rounds // 10):
                for case in all_cases:
                    start = time.perf_counter_ns()
                    first = await client.post("/mutate", content=case.mutate_body, headers=headers)
                    second = await client.post(
                        "/validate", content=case.validate_body, headers=headers
                    )
                    elapsed = time.perf_counter_ns() - start
                    assert first.status_code == 200 and second.status_code == 200
                    if index >= rounds // 10:  # the first tenth warms up
                        samples.append(elapsed)
        return samples

    return asyncio.run(run())


def percentile(sorted_samples: list[int], fraction: float) -> float:
    """Nearest-rank percentile, in microseconds."""
    rank = max(1, math.ceil(fraction * len(sorted_samples)))
    return sorted_samples[rank - 1] / 1000


@dataclass(frozen=True)
class Row:
    name: str
    count: int
    per_second: float
    p50: float
    p99: float
    p999: float
    mean: float

    @classmethod
    def of(cls, name: str, samples: list[int], wall_ns: int | None = None) -> Row:
        ordered = sorted(samples)
        total = wall_ns if wall_ns is not None else sum(ordered)
        return cls(
            name=name,
            count=len(ordered),
            per_second=len(ordered) / (total / 1e9),
            p50=percentile(ordered, 0.50),
            p99=percentile(ordered, 0.99),
            p999=percentile(ordered, 0.999),
            mean=sum(ordered) / len(ordered) / 1000,
        )


def table(rows: Iterable[Row]) -> str:
    header = ("", "reviews", "reviews/s", "p50 µs", "p99 µs", "p99.9 µs", "mean µs")
    lines = [
        (
            r.name,
            f"{r.count:,}",
            f"{r.per_second:,.0f}",
            f"{r.p50:.1f}",
            f"{r.p99:.1f}",
            f"{r.p999:.1f}",
            f"{r.mean:.1f}",
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in [header, *lines]) for i in range(len(header))]
    out = []
    for index, line in enumerate([header, *lines]):
        cells = [line[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)
        ]
        out.append("| " + " | ".join(cells) + " |")
        if index == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def per_kind_orjson(names: list[str], baseline_json: list[int]) -> dict[str, list[int]]:
    """The orjson samples of each kind's own two bodies: `measure_orjson` takes the kinds
    in turn, round after round, so sample i is of kind i mod the number of kinds."""
    return {name: baseline_json[index :: len(names)] for index, name in enumerate(names)}


def kind_ratios(samples: dict[str, list[int]], baseline_json: list[int]) -> str:
    """Per pod kind, the engine's mean against the orjson round trip of that kind's own two
    bodies, and the DRA pod against the device-plugin inference pod, each to its target."""
    orjson_of = per_kind_orjson(list(samples), baseline_json)
    engine_mean = {name: Row.of(name, s).mean for name, s in samples.items()}
    orjson_mean = {name: Row.of(name, s).mean for name, s in orjson_of.items()}
    ratio = {name: engine_mean[name] / orjson_mean[name] for name in samples}
    over = [name for name in samples if ratio[name] > TARGET_PER_KIND_OVER_ORJSON]
    rows = [
        (
            name,
            f"{engine_mean[name]:.1f}",
            f"{orjson_mean[name]:.1f}",
            f"{ratio[name]:.2f}x",
            "MISSED" if name in over else "met",
        )
        for name in samples
    ]
    headers = ("pod kind", "engine mean µs", "orjson mean µs", "engine / orjson", "target")
    lines = [
        "per pod kind, the engine against the orjson loads+dumps of that kind's own two bodies:",
        markdown_table(headers, rows),
        f"target each kind <= {TARGET_PER_KIND_OVER_ORJSON:g}x its own orjson round trip: "
        + ("met" if not over else f"MISSED ({len(over)} of {len(samples)} kinds over it)"),
    ]
    if DRA_KIND in engine_mean and INFERENCE_KIND in engine_mean:
        dra, inference = engine_mean[DRA_KIND], engine_mean[INFERENCE_KIND]
        met = dra / inference <= TARGET_DRA_OVER_INFERENCE
        lines.append(
            f"DRA pod / device-plugin inference pod: {dra / inference:.2f}x the mean time "
            f"({dra:.1f} µs vs {inference:.1f} µs per review); "
            f"target <= {TARGET_DRA_OVER_INFERENCE:g}x: {'met' if met else 'MISSED'}"
        )
    return "\n".join(lines)


def pin_to_one_core(core: int | None) -> str:
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity)"
    chosen = core if core is not None else max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {chosen})
    return f"pinned to CPU {chosen} of {os.cpu_count()}"


def profile(engine: Engine, all_cases: list[Case], rounds: int, top: int) -> None:
    """cProfile hotspots of the reviews with answers kept, then with nothing kept."""
    for label, judged in (("answers kept", engine), ("nothing kept", unkept_engine())):
        measure_engine(judged, all_cases, max(1, rounds // 10))
        profiler = cProfile.Profile()
        profiler.enable()
        measure_engine(judged, all_cases, rounds)
        profiler.disable()
        stats = pstats.Stats(profiler)
        for key in ("tottime", "cumulative"):
            print(f"\ncProfile of {rounds:,} rounds, {label}, top {top} by {key}:")
            stats.sort_stats(key).print_stats(top)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10_000, help="rounds over all pod kinds")
    parser.add_argument("--warmup", type=int, default=2_000, help="rounds before measuring")
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP app (in-process)")
    parser.add_argument("--http-rounds", type=int, default=300)
    parser.add_argument("--profile", action="store_true", help="print cProfile hotspots")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: last)")
    parser.add_argument(
        "--nodes", type=int, default=3_000, help="GPU nodes in the live-inventory rows"
    )
    parser.add_argument(
        "--no-growth", action="store_true", help="skip the growth with pod and policy size"
    )
    parser.add_argument(
        "--growth-only", action="store_true", help="only the growth with pod and policy size"
    )
    parser.add_argument("--growth-rounds", type=int, default=2_000, help="rounds over all cases")
    parser.add_argument("--growth-warmup", type=int, default=200)
    args = parser.parse_args(argv)

    pinned = pin_to_one_core(args.cpu)
    if args.growth_only:
        load = ", ".join(f"{n:.2f}" for n in os.getloadavg())
        print(f"gpu-admission engine benchmark: {this_cpu_model()}, {pinned}, load average {load}")
        print(f"Python {platform.python_version()} ({platform.python_implementation()})\n")
        growth(args.growth_rounds, args.growth_warmup)
        return
    engine = Engine(bench_policy())
    all_cases = cases(engine)
    for case in all_cases:
        check(engine, case)
    inventory = live_inventory(args.nodes)
    for case in all_cases:
        check(engine, case, inventory)

    measure_engine(engine, all_cases, args.warmup)
    measure_orjson(all_cases, args.warmup)
    measure_noop(engine, args.warmup)
    gc.collect()

    start = time.perf_counter_ns()
    samples = measure_engine(engine, all_cases, args.rounds)
    wall = time.perf_counter_ns() - start
    baseline_json = measure_orjson(all_cases, args.rounds)
    baseline_noop = measure_noop(engine, args.rounds * len(all_cases))
    measure_engine(engine, all_cases, args.warmup, inventory)
    start = time.perf_counter_ns()
    live = measure_engine(engine, all_cases, args.rounds, inventory)
    live_wall = time.perf_counter_ns() - start
    cold = measure_capacity_now(engine, inventory, max(10, args.rounds // 100))
    changes = measure_capacity_followed(engine, inventory, max(10, args.rounds // 10))
    unkept = measure_unkept(all_cases, args.rounds)

    every = [s for per_case in samples.values() for s in per_case]
    overall = Row.of("all kinds (wall clock)", every, wall)
    json_row = Row.of("baseline: orjson loads+dumps of both bodies", baseline_json)
    noop_row = Row.of("baseline: no-op review (ConfigMap)", baseline_noop)
    live_every = [s for per_case in live.values() for s in per_case]
    live_row = Row.of(f"all kinds, live inventory of {args.nodes:,} nodes", live_every, live_wall)
    cold_row = Row.of(f"capacity of {args.nodes:,} nodes from nothing (first sync)", cold)
    change_row = Row.of(f"inventory change: capacity of {args.nodes:,} nodes followed", changes)
    unkept_every = [s for per_case in unkept.values() for s in per_case]
    unkept_row = Row.of("all kinds, nothing kept (each pod a first replica)", unkept_every)
    rows = [Row.of(name, s) for name, s in samples.items()] + [overall, unkept_row]
    rows += [live_row, cold_row, change_row]
    rows += [json_row, noop_row]
    if not args.no_http:
        rows.append(
            Row.of("HTTP app in-process (httpx)", measure_http(engine, all_cases, args.http_rounds))
        )

    sizes = [len(b) for c in all_cases for b in (c.mutate_body, c.validate_body)]
    load = ", ".join(f"{n:.2f}" for n in os.getloadavg())
    print(f"gpu-admission engine benchmark: {this_cpu_model()}, {pinned}, load average {load}")
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{args.rounds:,} rounds x {len(all_cases)} pod kinds, {args.warmup:,} warm-up rounds, "
        f"AdmissionReview bodies of {min(sizes):,}-{max(sizes):,} bytes"
    )
    print("one review = engine.mutate(pod) + engine.validate(mutated pod)\n")
    print(table(rows))
    print(
        f"\nengine / orjson baseline: {overall.mean / json_row.mean:.1f}x the mean time "
        f"({overall.mean:.1f} µs vs {json_row.mean:.1f} µs per review)"
    )
    met = overall.per_second >= TARGET_REVIEWS_PER_SECOND and overall.p99 < TARGET_P99_US
    print(
        f"target >= {TARGET_REVIEWS_PER_SECOND:,} reviews/s and p99 < {TARGET_P99_US:.0f} µs: "
        f"{'met' if met else 'MISSED'} ({overall.per_second:,.0f} reviews/s, "
        f"p99 {overall.p99:.1f} µs)"
    )
    print()
    print(kind_ratios(samples, baseline_json))
    print("\nthe same with nothing kept, each pod the first of its template and placement:")
    print(kind_ratios(unkept, baseline_json))
    if not args.no_growth:
        print()
        growth(args.growth_rounds, args.growth_warmup)
    if args.profile:
        profile(engine, all_cases, max(1, args.rounds // 10), args.top)


def growth(rounds: int, warmup: int) -> None:
    """The growth section; imported here, as it builds on this module's pods."""
    from benchmarks.engine.growth import print_growth, run_growth

    cases, rows = run_growth(rounds, warmup)
    print_growth(cases, rows, rounds)


if __name__ == "__main__":
    main()
