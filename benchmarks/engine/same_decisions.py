"""The engine's decisions on thousands of drawn pods, against another commit's engine.

    python -m benchmarks.engine.same_decisions [--against REV] [--count 6000]

Pods are drawn once (hypothesis, derandomized: the same pods every run) from the
property tests' well-formed pods, the fuzz tests' workload pods and hostile reviews'
pods, and the benchmark's seven kinds; each is reviewed as kube-apiserver reviews it
(``mutate`` at CREATE, the patch applied, ``validate``) by the default policy and the
benchmark's (DRA and device plugin), without and with a live inventory of GPU nodes as
clusters label them. The same cases are replayed by ``REV``'s engine (a ``git archive``
of it) in a process of its own, and every decision compared whole: allowed, code,
message, patch, warnings, violations, audit annotations and rule outcomes. Exit 1 with
the first differences when any differs.
"""

from __future__ import annotations

import argparse
import copy
import pickle
import random
import subprocess
import sys
import tarfile
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from benchmarks.engine import run as bench
from tests.engine import test_properties as properties
from tests.fuzz import strategies as fuzz
from webhook.engine.inventory import Inventory, NodeFacts
from webhook.policy.compiled import Taint
from webhook.policy.load import default_policy_text

REPOSITORY = Path(__file__).resolve().parents[2]
REPLAY = Path(__file__).with_name("replay_decisions.py")


def drawn(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """`count` examples of `strategy`, the same ones every run."""
    found: list[Any] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(strategy)
    def collect(example: Any) -> None:
        found.append(example)

    collect()
    return found


def pods(count: int) -> list[Any]:
    """Well-formed pods of every kind, workload pods as the policy expects them, hostile
    pods of the fuzz catalogue, and the benchmark's seven kinds."""
    share = count // 3
    kinds = [
        bench.inference_pod(),
        bench.training_pod(),
        bench.mig_pod(),
        bench.dra_pod(),
        bench.denied_pod(),
        bench.cpu_pod(),
    ]
    chosen = [
        *drawn(properties.pods(), share),
        *drawn(properties.plain_workload_pods(), count - 2 * share - len(kinds)),
        *drawn(fuzz.workload_pods(), share),
        *kinds,
    ]
    chosen = [pod for pod in chosen if _picklable(pod)]
    return [*chosen, *crossed(chosen, count // 4), *with_vectors(chosen, count // 8)]


PLACEMENT_FIELDS = ("tolerations", "nodeSelector", "affinity")
SPEC_FIELDS = ("containers", "initContainers", "priorityClassName")
METADATA_FIELDS = ("labels", "annotations")


def crossed(pods: list[Any], count: int) -> list[Any]:
    """`count` pods that are one drawn pod with one of its placement fields, containers,
    priority class, labels or annotations taken from another: many pods alike but for
    one field, the cases an engine that keeps answers by its pods' fields must tell
    apart."""
    chooser = random.Random(25)
    shaped = [pod for pod in pods if _has_metadata_and_spec(pod)]
    made = []
    for _ in range(count):
        pod, other = copy.deepcopy(chooser.choice(shaped)), chooser.choice(shaped)
        field = chooser.choice((*PLACEMENT_FIELDS, *SPEC_FIELDS, *METADATA_FIELDS))
        where, source = (
            (pod["metadata"], other["metadata"])
            if field in METADATA_FIELDS
            else (pod["spec"], other["spec"])
        )
        if field in source:
            where[field] = copy.deepcopy(source[field])
        else:
            where.pop(field, None)
        made.append(pod)
    return made


def _cdi_annotation(pod: dict[str, Any]) -> None:
    pod["metadata"].setdefault("annotations", {})["cdi.k8s.io/gpus"] = "nvidia.com/gpu=all"


def _visible_devices(pod: dict[str, Any]) -> None:
    env = pod["spec"]["containers"][0].setdefault("env", [])
    env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})


def _privileged(pod: dict[str, Any]) -> None:
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}


def _renamed(pod: dict[str, Any]) -> None:
    pod["metadata"]["name"] = "another-replica"
    pod["metadata"]["uid"] = "6d1c4c3e-0000-4000-8000-000000000001"


VECTORS = (_cdi_annotation, _visible_devices, _privileged, _renamed)
"""What a pod may add to what its template's replicas have: each a way to the node's
GPUs the runtime honours, and another name."""


def with_vectors(pods: list[Any], count: int) -> list[Any]:
    """For `count` drawn pods with containers: the pod, then the pod with each of
    ``VECTORS``, each right after the pod itself: the replicas an engine keeping answers
    per pod template must not answer as the pod before them."""
    chooser = random.Random(31)
    shaped = [
        pod
        for pod in pods
        if _has_metadata_and_spec(pod)
        and isinstance(pod["spec"].get("containers"), list)
        and pod["spec"]["containers"]
        and all(isinstance(c, dict) for c in pod["spec"]["containers"])
        and isinstance(pod["metadata"].get("annotations", {}), dict)
        and isinstance(pod["spec"]["containers"][0].get("env", []), list)
    ]
    made: list[Any] = []
    for pod in chooser.sample(shaped, min(count, len(shaped))):
        for vector in VECTORS:
            variant = copy.deepcopy(pod)
            vector(variant)
            made += [copy.deepcopy(pod), variant]
    return made


def _has_metadata_and_spec(pod: Any) -> bool:
    return (
        isinstance(pod, dict)
        and isinstance(pod.get("metadata"), dict)
        and isinstance(pod.get("spec"), dict)
    )


def _picklable(pod: Any) -> bool:
    try:
        pickle.dumps(pod)
    except RecursionError:
        return False
    return True


def inventory() -> Inventory:
    """The benchmark's live inventory, with GPU nodes no pool of the policy covers: one
    untainted, one of a pool the policy does not name."""
    live = bench.live_inventory(600)
    nodes = live.nodes or ()
    strays = (
        NodeFacts(
            "stray-untainted",
            {"gpu-pool": "training", "nvidia-gpu-model": "A100"},
            True,
            {"nvidia.com/gpu": Decimal(8)},
        ),
        NodeFacts(
            "stray-pool",
            {"gpu-pool": "research", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            True,
            {"nvidia.com/gpu": Decimal(8)},
            (Taint("gpu-pool", "research", "NoSchedule"),),
        ),
    )
    return Inventory(
        nodes=(*nodes, *strays),
        priority_classes=live.priority_classes,
        resource_slices=live.resource_slices,
    )


def cases(count: int) -> dict[str, Any]:
    """Each pod under each policy, without and with the live inventory (and the DRA
    pod's template where a pod names a claim); the pods one after another under each, as
    a replica judges them between two inventory changes."""
    policies = {"default": default_policy_text(), "bench": bench.bench_policy_text()}
    chosen = pods(count)
    return {
        "policies": policies,
        "inventories": {"live": inventory()},
        "claims": {"dra": bench.dra_claims()},
        "cases": [
            {"policy": policy, "inventory": live, "claims": "dra", "pod": pod}
            for live in (None, "live")
            for policy in policies
            for pod in chosen
        ],
    }


def replayed(tree: Path, cases_file: Path, out_file: Path) -> list[bytes]:
    """The decisions of `tree`'s engine on the cases, from a process of its own."""
    completed = subprocess.run(
        [sys.executable, str(REPLAY), str(cases_file), str(out_file)],
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"the engine of {tree} failed to replay:\n{completed.stderr[-4000:]}")
    print(f"  {tree}: {completed.stdout.strip()}")
    return out_file.read_bytes().splitlines()


def archived(revision: str, into: Path) -> Path:
    """The tree of `revision`, from git archive."""
    archive = into / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(REPOSITORY), "archive", revision], stdout=out, check=True)
    tree = into / "tree"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.engine.same_decisions", description=__doc__
    )
    parser.add_argument(
        "--against", default="HEAD", help="the commit to compare with (default: %(default)s)"
    )
    parser.add_argument("--count", type=int, default=6000, help="pods drawn (default: %(default)s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="same-decisions-") as work:
        folder = Path(work)
        drawn_cases = cases(args.count)
        cases_file = folder / "cases.pickle"
        cases_file.write_bytes(pickle.dumps(drawn_cases))
        pods_count = len(drawn_cases["cases"]) // 4
        nodes = len(drawn_cases["inventories"]["live"].nodes)
        print(
            f"{pods_count:,} pods x 2 policies x (no inventory, {nodes:,} nodes): "
            f"{len(drawn_cases['cases']):,} reviews (mutate, patch, validate)"
        )
        before = replayed(archived(args.against, folder), cases_file, folder / "before.jsonl")
        after = replayed(REPOSITORY, cases_file, folder / "after.jsonl")
    differing = [
        (index, old, new)
        for index, (old, new) in enumerate(zip(before, after, strict=False))
        if old != new
    ]
    if len(before) != len(after):
        print(f"DIFFERENT: {len(before):,} decisions against {len(after):,}")
        return 1
    if differing:
        print(f"DIFFERENT: {len(differing):,} of {len(after):,} decisions")
        for index, old, new in differing[:5]:
            print(f"  decision {index}:\n    {args.against}: {old[:600]!r}\n    now: {new[:600]!r}")
        return 1
    print(f"same: all {len(after):,} decisions identical to {args.against}'s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
