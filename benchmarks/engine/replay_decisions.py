"""Replays the cases of ``benchmarks.engine.same_decisions`` through one tree's engine.

    python replay_decisions.py CASES OUT

Run by path with the tree under test first on PYTHONPATH, so it imports only the
engine's public parts both trees have (``Engine``, ``AdmissionRequest``, the policy
loader and the inventory's plain data). Writes one JSON line per review: the decision
of ``mutate`` at CREATE, then of ``validate`` on the pod with the patch applied.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pickle
import sys
import time
from typing import Any

import jsonpatch
import orjson

from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.inventory import UNKNOWN
from webhook.policy import load_policy_text

MOVED = {
    "webhook.engine.dra.claims": "webhook.engine.claims",
    "webhook.engine.dra.claim_objects": "webhook.engine.claim_objects",
    "webhook.engine.dra.pod_claims": "webhook.engine.pod_claims",
    "webhook.engine.dra.resource_slices": "webhook.engine.resource_slices",
    "webhook.engine.dra.capacity": "webhook.engine.dra_capacity",
    "webhook.engine.capacity.now": "webhook.engine.capacity_now",
}
"""Where a module of today's engine was in a tree from before the engine's DRA and
capacity packages: the cases are pickled by today's tree and read by either."""


def module_here(name: str) -> str:
    """`name`, or where the tree under test keeps it."""
    try:
        importlib.import_module(name)
    except ImportError:
        return MOVED.get(name, name)
    return name


class CasesUnpickler(pickle.Unpickler):
    """Reads the cases' classes from wherever the tree under test keeps them."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(module_here(module), name)


NO_CLAIMS = importlib.import_module(module_here("webhook.engine.dra.pod_claims")).NO_CLAIMS


def decision_json(decision: Decision) -> bytes:
    """The whole decision as JSON with sorted keys (the standard library's where a value is
    beyond orjson: an integer past 64 bits a pod carried into a patch)."""
    fields = dataclasses.asdict(decision)
    try:
        return orjson.dumps(fields, default=str, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(fields, default=str, sort_keys=True).encode()


def replay(cases: dict[str, Any]) -> tuple[list[bytes], float]:
    engines = {
        name: Engine(load_policy_text(text, f"{name}.yaml"))
        for name, text in cases["policies"].items()
    }
    inventories = {None: UNKNOWN, **cases["inventories"]}
    claims = {None: NO_CLAIMS, **cases["claims"]}
    lines: list[bytes] = []
    spent = 0
    for case in cases["cases"]:
        engine = engines[case["policy"]]
        inventory, objects = inventories[case["inventory"]], claims[case["claims"]]
        pod = case["pod"]
        start = time.perf_counter_ns()
        mutated = engine.mutate(
            AdmissionRequest.pod_create("uid", "ml", "", pod), inventory, objects
        )
        spent += time.perf_counter_ns() - start
        lines.append(decision_json(mutated))
        patched = pod
        if mutated.patch:
            try:
                patched = jsonpatch.apply_patch(pod, list(mutated.patch))
            except jsonpatch.JsonPatchException as error:
                lines.append(f"patch does not apply: {error}".encode())
                continue
        start = time.perf_counter_ns()
        validated = engine.validate(
            AdmissionRequest.pod_create("uid", "ml", "", patched), inventory, claims=objects
        )
        spent += time.perf_counter_ns() - start
        lines.append(decision_json(validated))
    return lines, spent / 1e9


def main() -> None:
    cases_file, out_file = sys.argv[1], sys.argv[2]
    with open(cases_file, "rb") as source:
        cases = CasesUnpickler(source).load()
    lines, seconds = replay(cases)
    with open(out_file, "wb") as out:
        out.write(b"\n".join(lines) + b"\n")
    print(f"{len(lines)} decisions, engine {seconds:.2f} s")


if __name__ == "__main__":
    main()
