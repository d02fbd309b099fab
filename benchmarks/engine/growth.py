"""How the engine's cost grows with pod and policy size: `python -m benchmarks.engine.growth`.

Also the last section of `python -m benchmarks.engine` (`--no-growth` leaves it out,
`--growth-only` prints only it).

Two axes, measured interleaved in one run on one core:

- **pod size**: a class pod (training, with a job label) of 1, 10 and 100 containers
  under the embedded default policy. Its 8 GPUs (a whole node) are spread over the
  containers as a real pod would have them: 8 in the one container, one each in 8 of
  the 10 or of the 100 (the others are sidecars asking only for CPU and memory);
- **policy size**: policies of 2, 20 and 200 pools and as many classes, generated here
  (each class with its own pool; each pool with its node label value, its taints, two
  GPU models, every other one with MIG) and loaded by the project's loader, as `serve`
  loads a policy. The pod is the 1-container class pod of the last class.

Each review is timed in two parts: `Engine.mutate` of the pod as created (the
/mutate call) and `Engine.validate` of the pod with that patch applied (the /validate
call). Each case is reported with its time as a multiple of the smallest case of its
axis, next to how many times larger the case is, so linear growth reads as the two
factors being close.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from benchmarks.common.report import this_cpu_model
from benchmarks.engine.run import (
    JOB_NAME,
    WORKLOAD,
    Pod,
    _apply,
    _container,
    _pod,
    _request,
    _review_body,
    percentile,
    pin_to_one_core,
)
from webhook.engine import AdmissionRequest, Engine
from webhook.policy import Policy, load_default_policy, load_policy_text

POD_SIZES = (1, 10, 100)
POLICY_SIZES = (2, 20, 200)
GPUS_PER_POD = 8
"""A whole node of the default policy's pools (8 GPUs per node)."""

POOL_LABEL = "gpu-admission.io/pool"
MODEL_LABEL = "nvidia.com/gpu.product"
SHARED_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
MIG_MODELS = {"A100": "A100-SXM4-80GB", "H100": "H100-SXM5-80GB"}
WHOLE_MODELS = {"L40S": "L40S", "V100": "V100-SXM2-32GB"}


# ------------------------------------------------------------------ the pods


def spread_gpus(total: int, containers: int) -> list[int]:
    """GPUs per container: `total` spread as evenly as whole GPUs go. With more containers
    than GPUs, one GPU each for `total` containers evenly spaced, none for the others."""
    if containers < 1:
        raise ValueError("a pod has at least one container")
    if containers <= total:
        base, extra = divmod(total, containers)
        return [base + (1 if index < extra else 0) for index in range(containers)]
    chosen = {index * containers // total for index in range(total)}
    return [1 if index in chosen else 0 for index in range(containers)]


def class_pod(containers: int, workload: str = "training", total_gpus: int = GPUS_PER_POD) -> Pod:
    """A pod of a job in class `workload`, as kube-apiserver sends it: `containers`
    containers with their defaulted fields, CPU and memory requests on each, and
    `total_gpus` spread over them (requests equal to limits, as defaulting leaves them)."""
    spec_containers = []
    for index, gpus in enumerate(spread_gpus(total_gpus, containers)):
        resources: dict[str, Any] = {
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "limits": {"memory": "1Gi"},
        }
        if gpus:
            resources["requests"]["nvidia.com/gpu"] = str(gpus)
            resources["limits"]["nvidia.com/gpu"] = str(gpus)
        image = "registry.example/trainer:5.4" if gpus else "registry.example/sidecar:1.0"
        spec_containers.append(_container(f"c{index}", image, resources))
    labels = {WORKLOAD: workload, JOB_NAME: "growth", "job-name": "growth"}
    return _pod(f"growth-{containers}-x8k2p", labels, {"containers": spec_containers})


# ------------------------------------------------------------------ the policies


def growth_policy_data(size: int) -> dict[str, Any]:
    """A policy of `size` pools and `size` classes, each class with its own pool: each pool
    with its node label value and taints and two GPU models (every other pool MIG-capable
    models with mixed MIG, the others whole GPUs only), each class with its priority class
    and co-location of a job's pods."""
    if size < 1:
        raise ValueError("a policy has at least one pool and one class")
    pools: dict[str, Any] = {}
    classes: dict[str, Any] = {}
    for index in range(size):
        name = f"pool-{index:03d}"
        label_value = f"gpu-pool-{index:03d}"
        mig = index % 2 == 0
        models = MIG_MODELS if mig else WHOLE_MODELS
        pools[name] = {
            "labelValue": label_value,
            "gpusPerNode": 8,
            "taints": [
                {"key": POOL_LABEL, "value": label_value, "effect": "NoSchedule"},
                dict(SHARED_TAINT),
            ],
            "models": {model: {"product": product} for model, product in models.items()},
            "mig": "mixed" if mig else "none",
        }
        classes[f"class-{index:03d}"] = {
            "pools": [name],
            "priorityClass": {"name": f"class-{index:03d}-priority", "value": 1000 + index},
            "defaultGpus": 1,
            "coLocation": {
                "topologyKey": "topology.kubernetes.io/zone",
                "weight": 100,
                "jobLabels": [JOB_NAME, "training.kubeflow.org/job-name"],
            },
        }
    return {
        "apiVersion": "gpu-admission.io/v1alpha1",
        "kind": "Policy",
        "namespaceOptIn": {"key": "gpu-admission.io/enabled", "value": "true"},
        "podLabels": {"workload": WORKLOAD, "gpuModel": "gpu-admission.io/gpu-model"},
        "nodeLabels": {"pool": POOL_LABEL, "model": MODEL_LABEL},
        "pools": pools,
        "classes": classes,
    }


def growth_policy_text(size: int) -> str:
    return yaml.safe_dump(growth_policy_data(size), sort_keys=False)


def growth_policy(size: int) -> Policy:
    """The generated policy of `size` pools and classes, loaded as `serve` loads a file."""
    return load_policy_text(growth_policy_text(size), f"generated policy of {size} pools")


def last_class(policy: Policy) -> str:
    return list(policy.classes)[-1]


# ------------------------------------------------------------------ measuring


@dataclass(frozen=True)
class GrowthCase:
    """One point of an axis: the engine, the pod as created and the pod as mutated."""

    axis: str
    """`containers` or `pools`."""
    size: int
    engine: Engine
    mutate: AdmissionRequest
    validate: AdmissionRequest
    body_bytes: int
    """The /mutate AdmissionReview body of the pod."""

    @property
    def name(self) -> str:
        return case_name(self.axis, self.size)


def case_name(axis: str, size: int) -> str:
    """`1 container`, `100 containers`, `20 pools`."""
    unit = axis.removesuffix("s") if size == 1 else axis
    return f"{size:,} {unit}"


def growth_case(axis: str, size: int, engine: Engine, pod: Pod) -> GrowthCase:
    """The case, checked: mutation patches the pod, validation admits the patched pod, and
    a second mutation has nothing to add."""
    mutate = _request(pod)
    mutation = engine.mutate(mutate)
    assert mutation.allowed and mutation.patch, (axis, size, mutation.message)
    validate = _request(_apply(copy.deepcopy(pod), mutation))
    validation = engine.validate(validate)
    assert validation.allowed, (axis, size, validation.message)
    assert engine.mutate(validate).patch == (), (axis, size, "mutation is not idempotent")
    return GrowthCase(axis, size, engine, mutate, validate, len(_review_body(mutate)))


def growth_cases(
    pod_sizes: Sequence[int] = POD_SIZES, policy_sizes: Sequence[int] = POLICY_SIZES
) -> list[GrowthCase]:
    default = Engine(load_default_policy())
    result = [growth_case("containers", n, default, class_pod(n)) for n in pod_sizes]
    for size in policy_sizes:
        engine = Engine(growth_policy(size))
        pod = class_pod(1, last_class(engine.policy))
        result.append(growth_case("pools", size, engine, pod))
    return result


@dataclass
class GrowthSamples:
    """Nanoseconds of each call, per case."""

    mutate: list[int]
    validate: list[int]


def measure_growth(cases: Sequence[GrowthCase], rounds: int) -> list[GrowthSamples]:
    """Each round reviews every case once, in turn; mutate and validate timed apart."""
    samples = [GrowthSamples([], []) for _ in cases]
    clock = time.perf_counter_ns
    plan = [
        (
            c.engine.mutate,
            c.engine.validate,
            c.mutate,
            c.validate,
            s.mutate.append,
            s.validate.append,
        )
        for c, s in zip(cases, samples, strict=True)
    ]
    for _ in range(rounds):
        for mutate, validate, first, second, record_mutate, record_validate in plan:
            start = clock()
            mutate(first)
            middle = clock()
            validate(second)
            end = clock()
            record_mutate(middle - start)
            record_validate(end - middle)
    return samples


@dataclass(frozen=True)
class Summary:
    count: int
    per_second: float
    p50: float
    p99: float
    mean: float
    """Microseconds, but for count and per_second."""

    @classmethod
    def of(cls, samples: Sequence[int]) -> Summary:
        ordered = sorted(samples)
        total = sum(ordered)
        return cls(
            count=len(ordered),
            per_second=len(ordered) / (total / 1e9),
            p50=percentile(ordered, 0.50),
            p99=percentile(ordered, 0.99),
            mean=total / len(ordered) / 1000,
        )


def ratio(value: float, smallest: float) -> float:
    """How many times the smallest case's time; 0 when that is 0 (nothing to compare)."""
    return value / smallest if smallest > 0 else 0.0


@dataclass(frozen=True)
class GrowthRow:
    axis: str
    size: int
    smallest: int
    """The size of the axis's smallest case, which the factors compare with."""
    call: str
    summary: Summary
    p50_factor: float
    mean_factor: float

    @property
    def case(self) -> str:
        return case_name(self.axis, self.size)

    @property
    def size_factor(self) -> float:
        return self.size / self.smallest


def growth_rows(cases: Sequence[GrowthCase], samples: Sequence[GrowthSamples]) -> list[GrowthRow]:
    """Per case and call, its figures and its time as a multiple of the smallest case of
    its axis (the first one of the axis given)."""
    smallest: dict[str, tuple[int, Summary, Summary]] = {}
    rows = []
    for case, measured in zip(cases, samples, strict=True):
        summaries = {
            "mutate": Summary.of(measured.mutate),
            "validate": Summary.of(measured.validate),
        }
        base = smallest.setdefault(
            case.axis, (case.size, summaries["mutate"], summaries["validate"])
        )
        for call, summary in summaries.items():
            reference = base[1] if call == "mutate" else base[2]
            rows.append(
                GrowthRow(
                    axis=case.axis,
                    size=case.size,
                    smallest=base[0],
                    call=call,
                    summary=summary,
                    p50_factor=ratio(summary.p50, reference.p50),
                    mean_factor=ratio(summary.mean, reference.mean),
                )
            )
    return rows


def growth_table(rows: Sequence[GrowthRow]) -> str:
    header = (
        "case",
        "call",
        "reviews",
        "reviews/s",
        "p50 µs",
        "p99 µs",
        "mean µs",
        "size x",
        "p50 x",
        "mean x",
    )
    lines = [
        (
            r.case,
            r.call,
            f"{r.summary.count:,}",
            f"{r.summary.per_second:,.0f}",
            f"{r.summary.p50:.1f}",
            f"{r.summary.p99:.1f}",
            f"{r.summary.mean:.1f}",
            f"{r.size_factor:g}",
            f"{r.p50_factor:.1f}",
            f"{r.mean_factor:.1f}",
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    out = []
    for index, line in enumerate([header, *lines]):
        cells = [line[0].ljust(widths[0]), line[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(line[2:], widths[2:], strict=True)]
        out.append("| " + " | ".join(cells) + " |")
        if index == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def growth_sentences(rows: Sequence[GrowthRow]) -> list[str]:
    """'100 containers: mutate 61.0x, validate 40.0x the time of 1 container (p50), for
    100x the size', for each case but the smallest of its axis."""
    by_case: dict[tuple[str, int], list[GrowthRow]] = {}
    for row in rows:
        by_case.setdefault((row.axis, row.size), []).append(row)
    sentences = []
    for (axis, size), case_rows in by_case.items():
        smallest = case_rows[0].smallest
        if size == smallest:
            continue
        calls = ", ".join(f"{r.call} {r.p50_factor:.1f}x" for r in case_rows)
        sentences.append(
            f"{case_name(axis, size)}: {calls} the time of {case_name(axis, smallest)} (p50), "
            f"for {size / smallest:g}x the size"
        )
    return sentences


def run_growth(rounds: int, warmup: int) -> tuple[list[GrowthCase], list[GrowthRow]]:
    cases = growth_cases()
    measure_growth(cases, warmup)
    gc.collect()
    return cases, growth_rows(cases, measure_growth(cases, rounds))


def print_growth(cases: Sequence[GrowthCase], rows: Sequence[GrowthRow], rounds: int) -> None:
    bodies = ", ".join(
        f"{c.name} {c.body_bytes / 1024:,.1f} KiB" for c in cases if c.axis == "containers"
    )
    print(
        f"Growth: {rounds:,} rounds x {len(cases)} cases, interleaved; the /mutate "
        f"AdmissionReview bodies: {bodies}"
    )
    print(
        "containers: class pod (training, 8 GPUs spread over its containers), default "
        "policy; pools: 1-container class pod of the last class, generated policy of as "
        "many pools and classes\n"
    )
    print(growth_table(rows))
    print()
    for sentence in growth_sentences(rows):
        print(sentence)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.engine.growth", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=2_000, help="rounds over all cases")
    parser.add_argument("--warmup", type=int, default=200, help="rounds before measuring")
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: last)")
    args = parser.parse_args(argv)
    pinned = pin_to_one_core(args.cpu)
    cases, rows = run_growth(args.rounds, args.warmup)
    load = ", ".join(f"{n:.2f}" for n in os.getloadavg())
    print(f"gpu-admission engine growth: {this_cpu_model()}, {pinned}, load average {load}")
    print(f"Python {platform.python_version()} ({platform.python_implementation()})")
    print_growth(cases, rows, args.rounds)


if __name__ == "__main__":
    main()
