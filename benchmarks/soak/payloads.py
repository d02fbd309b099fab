"""The reviews the soak sends, in the mix it sends them, with the reply each must get.

Bodies are AdmissionReview v1 requests as kube-apiserver sends them (the pods of
`benchmarks.engine`, with defaulted fields and managedFields). Each body that is a
review carries ``UID_PLACEHOLDER`` as its uid; the client puts a uid of its own in its
place for every request, and checks that the reply echoes it, as kube-apiserver does.
The expected decision of each review is the engine's, worked out here in-process with
the same embedded policy the server loads.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

from benchmarks.engine.growth import class_pod
from benchmarks.engine.run import (
    WORKLOAD,
    _apply,
    _pod,
    _request,
    _review_body,
    cpu_pod,
    denied_pod,
    inference_pod,
    mig_pod,
    training_pod,
)
from webhook.engine import AdmissionRequest, Engine
from webhook.policy import load_default_policy

UID_PLACEHOLDER = "00000000-0000-4000-8000-000000000000"
LARGE_CONTAINERS = 100
"""The large review: a class pod of 100 containers, a body of about 46 KiB, over the
32 KiB the server judges on its event loop, so it goes to the review worker."""


@dataclass(frozen=True)
class Payload:
    """One kind of request of the mix: what is posted and what must come back."""

    name: str
    path: str
    body: bytes
    status: int
    """The HTTP status of the reply."""
    allowed: bool | None
    """The reply's `response.allowed`; None when the reply is not an AdmissionReview."""
    weight: int
    """Requests of this kind in every `sum(weights)` of the mix."""

    @property
    def is_review(self) -> bool:
        return self.allowed is not None


def with_uid(body: bytes, uid: str) -> bytes:
    """The body with the placeholder uid replaced (bodies without one are left as they are)."""
    return body.replace(UID_PLACEHOLDER.encode(), uid.encode(), 1)


def request_uid(client: int, number: int) -> str:
    """A uid unique to one request of one client, shaped like kube-apiserver's UUIDs."""
    return f"{client:08x}-0000-4000-8000-{number:012x}"


def _placeholder(request: AdmissionRequest) -> AdmissionRequest:
    return dataclasses.replace(request, uid=UID_PLACEHOLDER)


def _review(
    name: str, path: str, request: AdmissionRequest, engine: Engine, weight: int
) -> Payload:
    decision = engine.mutate(request) if path == "/mutate" else engine.validate(request)
    body = _review_body(_placeholder(request))
    return Payload(name, f"{path}?timeout=10s", body, 200, decision.allowed, weight)


def _mutated(engine: Engine, pod: dict[str, Any]) -> AdmissionRequest:
    return _request(_apply(copy.deepcopy(pod), engine.mutate(_request(pod))))


def malformed_pod() -> dict[str, Any]:
    """A class pod whose containers are not a list: answered allowed false, code 400."""
    pod = _pod("broken-9x2c", {WORKLOAD: "inference"}, {"containers": "app"})
    return pod


def payloads(engine: Engine | None = None) -> list[Payload]:
    """The mix: class pods through /mutate and, mutated, through /validate; pods without a
    class; denials; malformed bodies; and one large review in a hundred."""
    engine = engine or Engine(load_default_policy())
    inference, training, mig = inference_pod(), training_pod(), mig_pod()
    large = class_pod(LARGE_CONTAINERS)
    result = [
        _review("mutate: inference pod", "/mutate", _request(inference), engine, 17),
        _review(
            "validate: inference pod, mutated", "/validate", _mutated(engine, inference), engine, 16
        ),
        _review("mutate: training pod", "/mutate", _request(training), engine, 10),
        _review(
            "validate: training pod, mutated", "/validate", _mutated(engine, training), engine, 10
        ),
        _review("mutate: MIG pod", "/mutate", _request(mig), engine, 5),
        _review("validate: MIG pod, mutated", "/validate", _mutated(engine, mig), engine, 5),
        _review("mutate: pod without class", "/mutate", _request(cpu_pod()), engine, 8),
        _review("validate: pod without class", "/validate", _request(cpu_pod()), engine, 8),
        _review("validate: denied pod", "/validate", _mutated(engine, denied_pod()), engine, 8),
        _review(
            "mutate: mutated pod (reinvocation)", "/mutate", _mutated(engine, training), engine, 3
        ),
        _review("mutate: malformed pod", "/mutate", _request(malformed_pod()), engine, 3),
        Payload(
            "mutate: body not JSON",
            "/mutate?timeout=10s",
            _review_body(_placeholder(_request(inference)))[:700],
            400,
            None,
            2,
        ),
        Payload(
            "validate: not an AdmissionReview",
            "/validate?timeout=10s",
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}',
            400,
            None,
            3,
        ),
        _review(
            f"mutate: large pod ({LARGE_CONTAINERS} containers)",
            "/mutate",
            _request(large),
            engine,
            1,
        ),
        _review(
            f"validate: large pod ({LARGE_CONTAINERS} containers), mutated",
            "/validate",
            _mutated(engine, large),
            engine,
            1,
        ),
    ]
    return result


def schedule(weights: list[int]) -> list[int]:
    """An order of payload indexes, each index as often as its weight, spread out
    (smooth weighted round robin, as nginx balances upstreams)."""
    total = sum(weights)
    current = [0] * len(weights)
    order = []
    for _ in range(total):
        current = [c + w for c, w in zip(current, weights, strict=True)]
        chosen = max(range(len(weights)), key=lambda i: current[i])
        current[chosen] -= total
        order.append(chosen)
    return order
