"""Autoscalers that can scale a GPU workload beyond its pools (webhook/engine/autoscalers.py).

A replica is the pod the target's template becomes (limits defaulted into
requests, our mutation applied); its GPUs times the autoscaler's maximum are
compared with what the class's pools have now, per GPU resource.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from tests.builders import container
from webhook.engine.autoscalers import (
    HORIZONTAL_POD_AUTOSCALER,
    KEDA_DEFAULT_MAX_REPLICAS,
    AutoscalerKind,
    ScaleTarget,
    autoscaler_warnings,
    scale_target,
    target_kind,
)
from webhook.engine.capacity.now import CapacityNow, capacity_now
from webhook.engine.inventory import Inventory, NodeFacts
from webhook.engine.request import AdmissionRequest
from webhook.engine.templates import BUILT_IN_KINDS, template_kinds
from webhook.policy import load_default_policy
from webhook.policy.compiled import Policy

POLICY = load_default_policy()
KINDS = template_kinds(POLICY)
GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.5gb"

WARNING = (
    "gpu-admission: HorizontalPodAutoscaler web-hpa can scale Deployment web to 40 replicas "
    "of 2 nvidia.com/gpu (80); pool inference has 24 allocatable now, so replicas beyond 12 "
    "could never schedule; lower maxReplicas to 12 or add nodes"
)


# -- builders -------------------------------------------------------------------------


def node(
    name: str,
    pool: str,
    gpus: int = 8,
    *,
    schedulable: bool = True,
    migs: int = 0,
    model: str = "A100",
) -> NodeFacts:
    allocatable = {GPU: Decimal(gpus)} if gpus else {}
    if migs:
        allocatable[MIG] = Decimal(migs)
    labels = {"gpu-pool": pool, "nvidia-gpu-model": model}
    return NodeFacts(name, labels, schedulable, allocatable)


def capacity(*nodes: NodeFacts, policy: Policy = POLICY) -> CapacityNow:
    return capacity_now(policy, Inventory(nodes=nodes))


INFERENCE_24 = capacity(node("i1", "inference"), node("i2", "inference"), node("i3", "inference"))


def template(
    workload: str | None = "inference", *containers: dict[str, Any], **spec: Any
) -> dict[str, Any]:
    labels = {"app": "web", **({"gpu-admission.io/workload": workload} if workload else {})}
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": list(containers) or [container(gpus=2)], **spec},
    }


def deployment(tmpl: dict[str, Any] | None = None, kind: str = "Deployment") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "web", "namespace": "ml"},
        "spec": {"replicas": 1, "template": tmpl if tmpl is not None else template()},
    }


def hpa(
    max_replicas: Any = 40,
    ref: dict[str, Any] | None = None,
    *,
    version: str = "v2",
    **overrides: Any,
) -> AdmissionRequest:
    obj = {
        "apiVersion": f"autoscaling/{version}",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web-hpa", "namespace": "ml"},
        "spec": {
            "scaleTargetRef": ref
            if ref is not None
            else {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": max_replicas,
        },
    }
    fields: dict[str, Any] = {
        "uid": "uid-1",
        "operation": "CREATE",
        "group": "autoscaling",
        "version": version,
        "kind": "HorizontalPodAutoscaler",
        "resource": "horizontalpodautoscalers",
        "subresource": "",
        "namespace": "ml",
        "name": "web-hpa",
        "object": obj,
    }
    fields.update(overrides)
    return AdmissionRequest(**fields)


def scaled_object(spec: dict[str, Any] | None = None, **overrides: Any) -> AdmissionRequest:
    obj = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "web-scaler", "namespace": "ml"},
        "spec": spec if spec is not None else {"scaleTargetRef": {"name": "web"}},
    }
    fields: dict[str, Any] = {
        "group": "keda.sh",
        "version": "v1alpha1",
        "kind": "ScaledObject",
        "resource": "scaledobjects",
        "name": "web-scaler",
        "object": obj,
    }
    fields.update(overrides)
    return hpa(**fields)


def target_of(request: AdmissionRequest) -> ScaleTarget:
    found = scale_target(request)
    assert found is not None
    return found


def warnings(
    request: AdmissionRequest,
    workload: dict[str, Any] | None,
    now: CapacityNow = INFERENCE_24,
    policy: Policy = POLICY,
) -> list[str]:
    return autoscaler_warnings(policy, target_of(request), workload, now, template_kinds(policy))


def with_class(**changes: Any) -> Policy:
    classes = dict(POLICY.classes)
    classes["inference"] = dataclasses.replace(classes["inference"], **changes)
    return dataclasses.replace(POLICY, classes=classes)


# -- the warning ----------------------------------------------------------------------


def test_an_hpa_whose_max_replicas_exceed_the_pool_gets_a_warning() -> None:
    assert warnings(hpa(40), deployment()) == [WARNING]


def test_an_hpa_whose_max_replicas_fill_the_pool_exactly_gets_none() -> None:
    assert warnings(hpa(12), deployment()) == []


def test_one_replica_too_many_is_enough_for_a_warning() -> None:
    [warning] = warnings(hpa(13), deployment())
    assert "to 13 replicas of 2 nvidia.com/gpu (26)" in warning
    assert warning.endswith("lower maxReplicas to 12 or add nodes")


def test_a_target_larger_than_any_real_workload_is_not_judged() -> None:
    """Its review came in a small body, judged on the event loop: a 100,000-value
    Deployment would hold every review behind it for half a second."""
    padding = {"name": "PAD", "value": "x"}
    big = template("inference", container(gpus=2, env=[padding] * 10_000))

    assert warnings(hpa(40), deployment(big)) == []
    assert warnings(hpa(40), deployment(template("inference", container(gpus=2)))) == [WARNING]


def test_an_autoscaling_v1_hpa_is_read_like_a_v2_one() -> None:
    assert warnings(hpa(40, version="v1"), deployment()) == [WARNING]


def test_a_stateful_set_target_is_read_like_a_deployment() -> None:
    ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"}
    [warning] = warnings(hpa(40, ref), deployment(kind="StatefulSet"))
    assert "can scale StatefulSet web to 40 replicas" in warning


def test_an_hpa_target_without_its_optional_api_version_is_read_as_apps_v1() -> None:
    ref = {"kind": "Deployment", "name": "web"}
    assert warnings(hpa(40, ref), deployment()) == [WARNING]


def test_a_scaled_object_gets_the_warning_naming_max_replica_count() -> None:
    spec = {"scaleTargetRef": {"name": "web"}, "maxReplicaCount": 20}
    assert warnings(scaled_object(spec), deployment()) == [
        "gpu-admission: ScaledObject web-scaler can scale Deployment web to 20 replicas of "
        "2 nvidia.com/gpu (40); pool inference has 24 allocatable now, so replicas beyond 12 "
        "could never schedule; lower maxReplicaCount to 12 or add nodes"
    ]


def test_a_scaled_object_without_a_maximum_can_scale_to_keda_s_default_of_100() -> None:
    [warning] = warnings(scaled_object(), deployment(template("inference", container(gpus=1))))
    assert "to 100 replicas of 1 nvidia.com/gpu (100)" in warning


# -- GPUs per replica: the pod as it will be created ------------------------------------


def test_gpu_limits_alone_count_because_kube_apiserver_copies_them_into_requests() -> None:
    tmpl = template("inference", container(limits={GPU: "2"}))
    assert warnings(hpa(40), deployment(tmpl)) == [WARNING]


def test_a_template_without_gpus_counts_the_class_default_our_mutation_injects() -> None:
    tmpl = template("inference", container())
    [warning] = warnings(hpa(30), deployment(tmpl))
    assert "to 30 replicas of 1 nvidia.com/gpu (30); pool inference has 24" in warning
    assert warning.endswith(
        "replicas beyond 24 could never schedule; lower maxReplicas to 24 or add nodes"
    )


def test_a_class_left_unmutated_counts_the_template_as_written() -> None:
    tmpl = template("inference", container())
    assert warnings(hpa(30), deployment(tmpl), policy=with_class(mutate=False)) == []


def test_init_and_sidecar_containers_count_as_the_scheduler_counts_them() -> None:
    tmpl = template(
        "inference",
        container(gpus=1),
        initContainers=[
            container("prep", gpus=4),
            container("side", gpus=1, restartPolicy="Always"),
        ],
    )
    [warning] = warnings(hpa(10), deployment(tmpl))
    assert "to 10 replicas of 4 nvidia.com/gpu (40)" in warning
    assert "replicas beyond 6 could never schedule" in warning


def test_mig_slices_are_compared_with_the_pools_slices_on_their_own() -> None:
    now = capacity(node("i1", "inference", gpus=4, migs=14), node("i2", "inference"))
    tmpl = template("inference", container(limits={GPU: "1", MIG: "2"}))
    found = warnings(hpa(10), deployment(tmpl), now)
    assert found == [
        "gpu-admission: HorizontalPodAutoscaler web-hpa can scale Deployment web to 10 replicas "
        "of 2 nvidia.com/mig-1g.5gb (20); pool inference has 14 allocatable now, so replicas "
        "beyond 7 could never schedule; lower maxReplicas to 7 or add nodes"
    ]


def test_a_resource_the_pool_does_not_offer_at_all_says_no_replica_could_schedule() -> None:
    tmpl = template("inference", container(limits={MIG: "1"}))
    [warning] = warnings(hpa(3), deployment(tmpl))
    assert warning.endswith(
        "pool inference has 0 allocatable now, so no replica could ever schedule; "
        "add nodes with nvidia.com/mig-1g.5gb"
    )


def test_a_workload_without_gpus_gets_no_warning() -> None:
    tmpl = template(None, container(limits={"cpu": "2"}))
    assert warnings(hpa(1000), deployment(tmpl)) == []


@pytest.mark.parametrize("label", [None, "batch"])
def test_a_workload_without_a_known_class_gets_no_warning(label: str | None) -> None:
    assert warnings(hpa(1000), deployment(template(label))) == []


# -- what the pools have now ---------------------------------------------------------------


def test_cordoned_nodes_and_other_pools_do_not_count() -> None:
    now = capacity(
        node("i1", "inference"),
        node("i2", "inference", schedulable=False),
        node("t1", "training"),
    )
    [warning] = warnings(hpa(5), deployment(), now)
    assert "pool inference has 8 allocatable now, so replicas beyond 4" in warning


def test_a_class_of_several_pools_counts_them_all() -> None:
    policy = with_class(pools=("inference", "training"))
    now = capacity(
        node("i1", "inference"),
        node("t1", "training", gpus=2),
        node("t2", "training", gpus=2, model="V100"),
        policy=policy,
    )
    [warning] = warnings(hpa(10), deployment(), now, policy)
    assert "pools inference, training have 12 allocatable now, so replicas beyond 6" in warning


def test_a_replica_pinned_to_a_model_counts_only_that_models_gpus() -> None:
    policy = with_class(pools=("training",), models=("V100", "A100"))
    now = capacity(
        node("t1", "training", gpus=8),
        node("t2", "training", gpus=2, model="V100"),
        policy=policy,
    )
    pinned = template("inference", container(gpus=2))
    pinned["metadata"]["labels"]["gpu-admission.io/gpu-model"] = "V100"
    [warning] = warnings(hpa(2), deployment(pinned), now, policy)
    assert "pool training has 2 allocatable now, so replicas beyond 1" in warning
    assert warnings(hpa(5), deployment(), now, policy) == []


def test_a_pinned_replica_counts_only_the_pools_that_have_its_model() -> None:
    policy = with_class(pools=("inference", "training"), models=("A100", "V100"))
    now = capacity(
        node("i1", "inference"),
        node("t1", "training", gpus=8),
        node("t2", "training", gpus=4, model="V100"),
        policy=policy,
    )
    pinned = template("inference", container(gpus=2))
    pinned["metadata"]["labels"]["gpu-admission.io/gpu-model"] = "V100"
    [warning] = warnings(hpa(3), deployment(pinned), now, policy)
    assert "pool training has 4 allocatable now, so replicas beyond 2" in warning


def test_a_leader_worker_set_replica_is_a_group_of_size_pods() -> None:
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "web", "namespace": "ml"},
        "spec": {"leaderWorkerTemplate": {"size": 4, "workerTemplate": template()}},
    }
    ref = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "web"}
    [warning] = warnings(hpa(4, ref), lws)
    assert "to 4 replicas of 8 nvidia.com/gpu (32); pool inference has 24" in warning
    assert "replicas beyond 3 could never schedule" in warning


def test_nothing_is_warned_while_a_model_a_replica_may_use_has_no_node() -> None:
    policy = with_class(pools=("training",))
    now = capacity(node("t1", "training", gpus=2, model="V100"), policy=policy)
    assert warnings(hpa(100), deployment(), now, policy) == []


def test_nothing_is_warned_while_a_pool_of_the_class_is_unknown() -> None:
    policy = with_class(pools=("inference", "training"))
    now = capacity(node("i1", "inference"), policy=policy)
    assert warnings(hpa(100), deployment(), now, policy) == []


@pytest.mark.parametrize(
    "now",
    [
        capacity_now(POLICY, Inventory()),
        capacity(),
        capacity(node("i1", "inference", schedulable=False)),
        capacity(node("i1", "inference", gpus=0)),
    ],
    ids=["never-synced", "no-nodes", "only-cordoned", "no-gpus-advertised"],
)
def test_nothing_is_warned_while_the_pool_is_unknown(now: CapacityNow) -> None:
    assert warnings(hpa(100), deployment(), now) == []


# -- targets the warning cannot speak of ------------------------------------------------------


def test_a_target_not_found_gets_no_warning() -> None:
    assert warnings(hpa(100), None) == []


def test_a_fetched_object_of_another_kind_than_the_target_gets_no_warning() -> None:
    assert warnings(hpa(100), deployment(kind="StatefulSet")) == []


def test_a_target_with_several_pod_templates_gets_no_warning() -> None:
    ref = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "web"}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "web"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"template": template()},
                "Worker": {"template": template()},
            }
        },
    }
    assert warnings(hpa(100, ref), job) == []


def test_a_target_with_a_single_pod_template_of_a_policy_kind_is_counted() -> None:
    ref = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "web"}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "web"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"template": template()}}},
    }
    [warning] = warnings(hpa(40, ref), job)
    assert "can scale PyTorchJob web to 40 replicas of 2 nvidia.com/gpu (80)" in warning


@pytest.mark.parametrize(
    "workload",
    [
        {"apiVersion": "apps/v1", "kind": "Deployment"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": "no"}},
        deployment({"metadata": {"labels": {"gpu-admission.io/workload": "inference"}}}),
        deployment(template("inference", container(limits="lots"))),
        deployment(template("inference", container(limits={GPU: "lots"}))),
        deployment(template("inference", affinity={"nodeAffinity": "x"})),
        deployment({"metadata": {"labels": ["x"]}, "spec": {"containers": []}}),
    ],
    ids=[
        "no-spec",
        "template-not-a-mapping",
        "no-containers",
        "limits-not-a-mapping",
        "unreadable-gpu-count",
        "affinity-of-the-wrong-shape",
        "labels-not-a-mapping",
    ],
)
def test_an_odd_target_gets_no_warning_and_no_error(workload: dict[str, Any]) -> None:
    assert warnings(hpa(100), workload) == []


def test_a_very_long_warning_is_cut_short_in_its_name_keeping_the_advice() -> None:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w" * 200}
    [warning] = warnings(hpa(40, ref), deployment())
    assert len(warning) == 256
    assert "w" * 200 not in warning and "ww..." in warning
    assert warning.endswith("; lower maxReplicas to 12 or add nodes")


# -- reading the autoscaler -------------------------------------------------------------------


def test_an_hpa_names_its_target_and_maximum() -> None:
    assert scale_target(hpa(40)) == ScaleTarget(
        autoscaler_kind="HorizontalPodAutoscaler",
        autoscaler_name="web-hpa",
        namespace="ml",
        api_version="apps/v1",
        kind="Deployment",
        name="web",
        max_replicas=40,
    )


def test_a_scaled_object_defaults_to_a_deployment_of_apps_v1_and_100_replicas() -> None:
    target = target_of(scaled_object())
    assert (target.api_version, target.kind, target.name, target.max_replicas) == (
        "apps/v1",
        "Deployment",
        "web",
        KEDA_DEFAULT_MAX_REPLICAS,
    )
    assert (target.group, target.version, target.max_replicas_field) == (
        "apps",
        "v1",
        "maxReplicaCount",
    )


def test_a_scaled_object_defaults_its_kind_and_api_version_each_on_its_own() -> None:
    spec = {"scaleTargetRef": {"name": "web", "kind": "StatefulSet"}, "maxReplicaCount": 3}
    target = target_of(scaled_object(spec))
    assert (target.api_version, target.kind, target.max_replicas) == ("apps/v1", "StatefulSet", 3)


def test_the_name_and_namespace_come_from_the_object_when_the_request_leaves_them_out() -> None:
    request = hpa(40, namespace="", name="")
    target = target_of(request)
    assert (target.namespace, target.autoscaler_name) == ("ml", "web-hpa")


def test_an_hpa_names_max_replicas_as_the_field_of_its_maximum() -> None:
    assert target_of(hpa(40)).max_replicas_field == "maxReplicas"


GROUP_SCALER = AutoscalerKind(
    group="example.com",
    kind="GroupScaler",
    max_replicas="maxGroups",
    default_max_replicas=4,
    default_target_kind="LeaderWorkerSet",
    default_target_api_version="leaderworkerset.x-k8s.io/v1",
    target_ref="target",
)


def group_scaler(spec: dict[str, Any]) -> AdmissionRequest:
    obj = {"apiVersion": "example.com/v1", "kind": "GroupScaler", "spec": spec}
    return hpa(group="example.com", version="v1", kind="GroupScaler", name="groups", object=obj)


def test_a_third_kind_of_autoscaler_is_read_from_its_declaration_alone() -> None:
    target = scale_target(group_scaler({"target": {"name": "web"}}), [GROUP_SCALER])

    assert target == ScaleTarget(
        autoscaler_kind="GroupScaler",
        autoscaler_name="groups",
        namespace="ml",
        api_version="leaderworkerset.x-k8s.io/v1",
        kind="LeaderWorkerSet",
        name="web",
        max_replicas=4,
        max_replicas_field="maxGroups",
    )


def test_the_warning_of_a_third_kind_names_its_own_field() -> None:
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "web", "namespace": "ml"},
        "spec": {"leaderWorkerTemplate": {"size": 4, "workerTemplate": template()}},
    }
    request = group_scaler({"target": {"name": "web"}, "maxGroups": 5})
    target = scale_target(request, [GROUP_SCALER])
    assert target is not None

    [warning] = autoscaler_warnings(POLICY, target, lws, INFERENCE_24, KINDS)

    assert warning.startswith("gpu-admission: GroupScaler groups can scale LeaderWorkerSet web")
    assert warning.endswith("lower maxGroups to 3 or add nodes")


def test_a_kind_of_autoscaler_not_declared_is_not_read() -> None:
    request = group_scaler({"target": {"name": "web"}})

    assert scale_target(request) is None
    assert scale_target(scaled_object(), [HORIZONTAL_POD_AUTOSCALER]) is None


def test_an_update_is_read_like_a_create() -> None:
    assert scale_target(hpa(40, operation="UPDATE")) == scale_target(hpa(40))


@pytest.mark.parametrize(
    "request_",
    [
        hpa(40, operation="DELETE"),
        hpa(40, operation="UPDATE", subresource="status"),
        hpa(40, group="apps", kind="Deployment", resource="deployments"),
        hpa(40, kind="Scale"),
        hpa(40, object=None),
        hpa(40, object="x"),
    ],
    ids=["delete", "status", "deployment", "other-kind", "no-object", "odd-object"],
)
def test_other_requests_have_no_scale_target(request_: AdmissionRequest) -> None:
    assert scale_target(request_) is None


@pytest.mark.parametrize(
    "request_",
    [
        hpa("40"),
        hpa(True),
        hpa(0),
        hpa(None),
        hpa(40.5),
        hpa(40, {"apiVersion": "apps/v1", "kind": "Deployment"}),
        hpa(40, {"apiVersion": "apps/v1", "name": "web"}),
        hpa(40, {"apiVersion": 1, "kind": "Deployment", "name": "web"}),
        hpa(40, {"apiVersion": "apps/v1", "kind": "Deployment", "name": ["web"]}),
        hpa(40, "web"),  # type: ignore[arg-type]
        scaled_object({"scaleTargetRef": {"name": "web"}, "maxReplicaCount": "10"}),
        scaled_object({"maxReplicaCount": 10}),
        scaled_object({"scaleTargetRef": {"name": "web", "kind": 3}}),
        scaled_object(name="", object={"spec": {"scaleTargetRef": {"name": "web"}}}),
        scaled_object(namespace="", object={"spec": {"scaleTargetRef": {"name": "web"}}}),
    ],
)
def test_an_odd_autoscaler_has_no_scale_target(request_: AdmissionRequest) -> None:
    assert scale_target(request_) is None


@pytest.mark.parametrize(
    ("api_version", "kind", "found"),
    [
        ("apps/v1", "Deployment", "Deployment"),
        ("kubeflow.org/v1", "PyTorchJob", "PyTorchJob"),
        ("v1", "Pod", None),
        ("", "Deployment", None),
        ("example.com/v1", "Deployment", None),
    ],
)
def test_only_targets_of_kinds_with_templates_are_worth_fetching(
    api_version: str, kind: str, found: str | None
) -> None:
    target = ScaleTarget("HorizontalPodAutoscaler", "h", "ml", api_version, kind, "web", 2)
    matched = target_kind(target, KINDS)
    assert (matched.kind if matched else None) == found
    assert target_kind(target, BUILT_IN_KINDS) == (matched if found != "PyTorchJob" else None)
