"""CEL that follows template paths into workload objects (webhook/engine/handlers/template_conditions.py).

kube-apiserver compiles and evaluates these in tests/e2e/test_workloads.py
(a map wildcard for PyTorchJob, a list wildcard for JobSet); here the shape.
"""

from __future__ import annotations

from webhook.engine.handlers.template_conditions import path_condition, workload_condition
from webhook.policy.compiled import TemplateKind


def marked(template: str) -> str:
    return f"M({template})"


def test_every_step_of_a_fixed_path_is_guarded_by_has() -> None:
    assert path_condition("/spec/template", marked) == (
        "has(object.spec) && has(object.spec.template) && (M(object.spec.template))"
    )


def test_a_wildcard_takes_the_value_of_a_map_key_or_the_item_of_a_list() -> None:
    assert path_condition("/spec/groups/*/template", marked) == (
        "has(object.spec) && has(object.spec.groups) && object.spec.groups.exists(k0, "
        "[type(k0) == string ? object.spec.groups[k0] : k0].exists(i0, "
        "has(i0.template) && (M(i0.template))))"
    )


def test_kinds_with_the_same_paths_share_one_check_and_are_told_apart_by_group() -> None:
    kinds = (
        TemplateKind("apps", "Deployment", ("/spec/template",)),
        TemplateKind("batch", "Job", ("/spec/template",)),
        TemplateKind("ray.io", "RayCluster", ("/spec/head", "/spec/workers/*")),
    )

    expression = workload_condition(kinds, marked)

    assert expression == (
        "(((object.kind == 'Deployment' && object.apiVersion.startsWith('apps/')) || "
        "(object.kind == 'Job' && object.apiVersion.startsWith('batch/'))) && "
        "((has(object.spec) && has(object.spec.template) && (M(object.spec.template))))) || "
        "(((object.kind == 'RayCluster' && object.apiVersion.startsWith('ray.io/'))) && "
        "((has(object.spec) && has(object.spec.head) && (M(object.spec.head))) || "
        "(has(object.spec) && has(object.spec.workers) && object.spec.workers.exists(k0, "
        "[type(k0) == string ? object.spec.workers[k0] : k0].exists(i0, (M(i0)))))))"
    )
