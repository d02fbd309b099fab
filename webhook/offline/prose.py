"""`gpu-admission explain`: one pod's verdict, placement and mutation in sentences.

inference pod 'x' would be admitted. It would run on pool inference (A100),
priority 1000000 (inference-priority); it may not use pool training (V100, A100)
because it does not tolerate gpu-pool=training:NoSchedule.

A pod's claims of Dynamic Resource Allocation are said with what each asks for, and a
ResourceClaimTemplate or ResourceClaim explained with its pod (or alone) in a sentence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.offline.claims_shown import asks_text, pod_claim_text
from webhook.offline.evaluation import ClaimObjectEvaluation, PodEvaluation
from webhook.offline.landing import Landing
from webhook.policy.compiled import LISTED


def explain(evaluation: PodEvaluation) -> str:
    who = _who(evaluation)
    if not evaluation.rules:
        return f"{who} would be denied: {evaluation.message}\n"
    if evaluation.allowed:
        paragraphs = [f"{who} would be admitted. It {_placement(evaluation)}."]
    else:
        reasons = [
            f"  - {outcome.rule}: {message}"
            for outcome in evaluation.rules
            for message in outcome.messages
        ]
        paragraphs = [
            "\n".join([f"{who} would be denied:", *reasons]),
            f"Were it admitted, it {_placement(evaluation)}.",
        ]
    if evaluation.claims:
        paragraphs.append(_claims(evaluation))
    if evaluation.warnings:
        paragraphs.append(_warnings(evaluation.warnings))
    paragraphs.append(_mutation(evaluation))
    return "\n\n".join(paragraphs) + "\n"


def explain_claim_object(evaluation: ClaimObjectEvaluation) -> str:
    """`ResourceClaimTemplate 'one-gpu' would be admitted: it asks for 1 GPU of ...`."""
    who = evaluation.describe
    if not evaluation.allowed:
        text = f"{who} would be denied: {evaluation.message}"
    elif evaluation.asks is not None:
        text = f"{who} would be admitted: it asks for {asks_text(evaluation.asks)}."
    else:
        text = f"{who} would be admitted."
    if evaluation.warnings:
        text += "\n\n" + _warnings(evaluation.warnings)
    return text + "\n"


def _claims(evaluation: PodEvaluation) -> str:
    """Each claim of the pod, with what it asks for or why that is not known."""
    count = len(evaluation.claims)
    lines = [f"It has {count} claim{'' if count == 1 else 's'} of Dynamic Resource Allocation:"]
    return "\n".join([*lines, *(f"  - {pod_claim_text(claim)}" for claim in evaluation.claims)])


def _warnings(warnings: tuple[str, ...]) -> str:
    """What kubectl prints of our responses' warnings, admitted or denied."""
    count = f"{len(warnings)} warning{'' if len(warnings) == 1 else 's'}"
    return "\n".join([f"kubectl would print {count}:", *(f"  Warning: {w}" for w in warnings)])


def _who(evaluation: PodEvaluation) -> str:
    ref = evaluation.object
    workload = f"{evaluation.workload_class} pod" if evaluation.workload_class else "pod"
    if not evaluation.template:
        return f"{workload} {ref.name!r}" if ref.name else workload
    return f"{workload} of {ref.describe} (template {evaluation.template})"


def _placement(evaluation: PodEvaluation) -> str:
    sure = [landing for landing in evaluation.landings if landing.reachable == "yes"]
    maybe = [landing for landing in evaluation.landings if landing.reachable == "unknown"]
    never = [landing for landing in evaluation.landings if landing.reachable == "no"]
    text = f"would run on {_pools(sure)}" if sure else "would run on no GPU node"
    priority = _priority(evaluation.mutated)
    if priority:
        text += f", {priority}"
    if maybe:
        text += f"; it might run on {_pools_because(maybe)}"
    if never:
        text += f"; it may not use {_pools_because(never)}"
    return text


def _pools(landings: Iterable[Landing]) -> str:
    """Pools and their models: `pool training (V100, A100)`; a pool's nodes of a model it does
    not list, or of none, are named only when none of its models is among `landings`."""
    models: dict[str, list[Landing]] = {}
    for landing in landings:
        pool = f"pool {landing.pool}" if landing.pool else landing.pool_shown
        models.setdefault(pool, []).append(landing)
    shown = {
        pool: [m.model_shown for m in members if m.shape == LISTED]
        or [m.model_shown for m in members]
        for pool, members in models.items()
    }
    return " or ".join(f"{pool} ({', '.join(names)})" for pool, names in shown.items())


def _pools_because(landings: list[Landing]) -> str:
    """Pools (and models) grouped by their reasons: 'pool a (X, Y) because ..., nor pool b ...'."""
    groups: dict[tuple[str, ...], list[Landing]] = {}
    for landing in landings:
        groups.setdefault(landing.reasons, []).append(landing)
    return ", nor ".join(
        f"{_pools(members)} because {' and '.join(reasons)}" if reasons else _pools(members)
        for reasons, members in groups.items()
    )


def _priority(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec")
    if not isinstance(spec, dict) or spec.get("priority") is None:
        return ""
    name = spec.get("priorityClassName")
    return f"priority {spec['priority']}" + (f" ({name})" if name else "")


def _mutation(evaluation: PodEvaluation) -> str:
    if not evaluation.patch:
        return "gpu-admission would not change it."
    changes = [f"{op['op']} {op['path']}" for op in evaluation.patch]
    return (
        f"gpu-admission would change it with {len(changes)} JSONPatch operation"
        f"{'' if len(changes) == 1 else 's'}: {', '.join(changes)} "
        "(`gpu-admission check` shows the diff)."
    )
