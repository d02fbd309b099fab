"""The largest objects the service accepts, judged: `python -m benchmarks.engine.large_objects`.

kube-apiserver caps a request body at 3 MiB, but it sends us the object after
defaulting (every container gains its terminationMessagePath, imagePullPolicy and
so on), and an AdmissionReview of an UPDATE holds object and oldObject, so the
HTTP edge accepts bodies up to `MAX_BODY_BYTES` (7 MiB). Each row fills one
AdmissionReview body up to that size with containers as kube-apiserver sends
them, none asking for a GPU, so that our mutation changes every one of them (it
hides the node's GPUs from each): the most work per byte the engine does.

- Deployment CREATE: `validate` judges the template as the pod it becomes, which
  means building the pod as created (our patch applied) and reading it again.
- Deployment UPDATE: object and oldObject each half the body, templates unequal.
- Pod CREATE: `mutate`, then `validate` of the pod with the patch applied.
- Too deep: a pod template nested 1,000 levels down (what orjson still decodes),
  refused as malformed.

Each row times the engine alone and the whole reply (orjson decode, envelope
parsing, engine, encoding) with `time.perf_counter`, over `--rounds` rounds, and
prints the engine's median (what the code costs, whatever else the machine runs) and
the slowest reply (what a client waits for at worst; the webhooks' timeout is 3 s).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonpatch
import orjson

from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.request import MAX_VALUES
from webhook.http.review import complete, parse_review, to_engine_request
from webhook.policy.load import load_default_policy

MAX_BODY_BYTES = 7 * 1024 * 1024
"""The HTTP edge's body cap (webhook.http.app.MAX_BODY_BYTES), repeated so this runs alone."""
TIMEOUT_SECONDS = 3.0
ENGINE = Engine(load_default_policy())
WORKLOAD = "gpu-admission.io/workload"

Judge = Callable[[Engine, AdmissionRequest], Decision]


def container(index: int) -> dict[str, Any]:
    """A container as kube-apiserver sends it: its defaulted fields included."""
    return {
        "name": f"c{index}",
        "image": "registry.example/app:1",
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }


def template(containers: int, revision: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"labels": {WORKLOAD: "inference", "revision": revision}},
        "spec": {"containers": [container(n) for n in range(containers)]},
    }


def deployment(containers: int, revision: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "huge", "namespace": "ml"},
        "spec": {"replicas": 1, "template": template(containers, revision)},
    }


def pod(containers: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        **template(containers),
        "metadata": {"name": "huge", "namespace": "ml", "labels": {WORKLOAD: "inference"}},
    }


def review(
    obj: Any, kind: str, group: str, operation: str = "CREATE", old: Any = None
) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "large-object",
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": kind.lower() + "s"},
            "namespace": "ml",
            "name": "huge",
            "operation": operation,
            "object": obj,
            "oldObject": old,
        },
    }


def values_in(value: Any) -> int:
    """How many JSON values `value` holds, itself included (as the engine counts them)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def under_body_cap(review: dict[str, Any]) -> bool:
    return len(orjson.dumps(review)) <= MAX_BODY_BYTES


def under_value_cap(review: dict[str, Any]) -> bool:
    request = review["request"]
    return max(values_in(request["object"]), values_in(request["oldObject"])) <= MAX_VALUES


def fill(build: Callable[[int], dict[str, Any]], fits: Callable[[dict[str, Any]], bool]) -> bytes:
    """The body of the review `build(n)` makes with the largest `n` that `fits`."""
    low, high = 1, 1
    while fits(build(high)):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if fits(build(middle)):
            low = middle
        else:
            high = middle
    return orjson.dumps(build(low))


def nested(pairs: int) -> bytes:
    """JSON of `pairs` mappings each holding a list, one in the other (written out: orjson
    encodes no more than 255 levels)."""
    return b'{"a":[' * pairs + b'"x"' + b"]}" * pairs


@dataclass(frozen=True)
class Case:
    name: str
    body: bytes
    judge: Judge
    values: int
    """JSON values in the object (or the old object, if more)."""


def mutate(engine: Engine, request: AdmissionRequest) -> Decision:
    return engine.mutate(request)


def validate(engine: Engine, request: AdmissionRequest) -> Decision:
    return engine.validate(request)


def cases() -> list[Case]:
    def deployment_review(n: int) -> dict[str, Any]:
        return review(deployment(n), "Deployment", "apps")

    def update_review(n: int) -> dict[str, Any]:
        return review(deployment(n, "2"), "Deployment", "apps", "UPDATE", deployment(n, "1"))

    def pod_review(n: int) -> dict[str, Any]:
        return review(pod(n), "Pod", "")

    def mutated_pod_review(n: int) -> dict[str, Any]:
        """The pod with our mutation applied, as kube-apiserver sends it to `validate`."""
        sent = pod_review(n)
        patch = ENGINE.mutate(to_engine_request(parse_review(orjson.dumps(sent)))).patch
        sent["request"]["object"] = jsonpatch.apply_patch(sent["request"]["object"], list(patch))
        return sent

    def mig_review(n: int) -> dict[str, Any]:
        """One container asking for `n` MIG resources: the slowest shape per value found."""
        obj = pod(1)
        limits = {f"nvidia.com/mig-{m}g.5gb": "1" for m in range(n)}
        obj["spec"]["containers"][0]["resources"] = {"limits": limits, "requests": limits}
        return review(obj, "Pod", "")

    deep = deployment(1)
    deep["spec"]["template"]["spec"]["containers"][0]["args"] = "deep"
    deep_body = orjson.dumps(review(deep, "Deployment", "apps")).replace(b'"deep"', nested(499))
    judged, refused = under_value_cap, under_body_cap
    built = [
        ("Deployment CREATE, validate", fill(deployment_review, judged), validate),
        ("Deployment UPDATE, validate", fill(update_review, judged), validate),
        ("Pod CREATE, mutate", fill(pod_review, judged), mutate),
        ("Pod CREATE, validate", fill(mutated_pod_review, judged), validate),
        ("Pod of MIG resources, validate", fill(mig_review, judged), validate),
        ("Deployment CREATE, validate", fill(deployment_review, refused), validate),
        ("Deployment UPDATE, validate", fill(update_review, refused), validate),
        ("Pod CREATE, mutate", fill(pod_review, refused), mutate),
        ("Deployment 1,000 levels deep", deep_body, validate),
    ]
    return [Case(name, body, judge, _values(body)) for name, body, judge in built]


def _values(body: bytes) -> int:
    request = orjson.loads(body)["request"]
    return max(values_in(request["object"]), values_in(request["oldObject"]))


def reply(engine: Engine, case: Case) -> tuple[float, float, str]:
    """Seconds for the engine alone and for the whole reply, and what became of the review
    (an exception the engine raised is what the HTTP edge turns into a code 500)."""
    started = time.perf_counter()
    parsed = parse_review(case.body)
    request = to_engine_request(parsed)
    judged = time.perf_counter()
    try:
        decision = case.judge(engine, request)
    except Exception as error:
        seconds = time.perf_counter() - judged
        return seconds, time.perf_counter() - started, f"raised {type(error).__name__}"
    engine_seconds = time.perf_counter() - judged
    orjson.dumps(complete(parsed.request.uid, decision))
    outcome = (
        f"allowed, {len(decision.patch):,} operations"
        if decision.allowed
        else f"denied {decision.code}: {decision.message[:60]}"
    )
    return engine_seconds, time.perf_counter() - started, outcome


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.engine.large_objects", description=__doc__
    )
    parser.add_argument("--rounds", type=int, default=5, help="replies timed per row")
    args = parser.parse_args(argv)

    engine = ENGINE
    load = ", ".join(f"{n:.2f}" for n in os.getloadavg())
    print(
        f"gpu-admission large objects: Python {platform.python_version()}, "
        f"load average {load}, {args.rounds} rounds per row: the engine's median and the "
        f"slowest reply\n"
    )
    print(f"{'case':<32} {'body':>9} {'values':>10} {'engine':>9} {'reply':>9}  decision")
    print(f"{'':<32} {'':>9} {'':>10} {'median':>9} {'slowest':>9}")
    slowest_reply = 0.0
    for case in cases():
        timings = []
        for _ in range(args.rounds):
            gc.collect()
            timings.append(reply(engine, case))
        engine_seconds = statistics.median(t[0] for t in timings)
        reply_seconds = max(t[1] for t in timings)
        slowest_reply = max(slowest_reply, reply_seconds)
        outcome = timings[-1][2]
        print(
            f"{case.name:<32} {len(case.body) / 2**20:>7.2f}Mi {case.values:>10,} "
            f"{engine_seconds * 1000:>7.0f}ms {reply_seconds * 1000:>7.0f}ms  {outcome}"
        )
    verdict = "inside" if slowest_reply < TIMEOUT_SECONDS else "OVER"
    print(f"\nslowest reply {slowest_reply:.2f} s: {verdict} the {TIMEOUT_SECONDS:.0f} s timeout")


if __name__ == "__main__":
    main()
