"""gpu-admission through kubectl apply, kube-apiserver and kube-scheduler.

Scenarios 1-4 and 7 of the end-to-end promise: workloads in an opted-in
namespace are mutated and bound to the right pool, pods that break a rule are
refused with our message, other namespaces are untouched, and a server-side
dry run behaves like a real apply without side effects.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from webhook.policy import load_default_policy

from . import audit_log
from .admission_fixtures import EXAMPLES, example
from .controlplane import ControlPlane
from .nodes import FLEET, nodes_in_pool

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
# Class pods are judged by validate.gpu-admission.io (their updates by validate-updates),
# pods without the label by validate-unclassed (webhook.install.configurations).
DENIED = re.compile(
    r'admission webhook "validate(-unclassed|-updates)?\.gpu-admission\.io" denied the request'
)

A100_TRAINING = [
    n.name for n in FLEET if n.pool == "training" and n.labels["nvidia-gpu-model"] == "A100"
]


def test_an_inference_deployment_is_mutated_and_bound_to_inference_nodes(
    controlplane: ControlPlane, opted_in: str
) -> None:
    controlplane.apply(example("inference-deployment.yaml"), namespace=opted_in)

    nodes = controlplane.wait_for_bindings(opted_in, "app=llm-server", 2)

    assert set(nodes) <= set(nodes_in_pool("inference")), nodes
    for pod in controlplane.list_json("pods", opted_in, "app=llm-server"):
        spec = pod["spec"]
        assert (spec["priorityClassName"], spec["priority"]) == ("inference-priority", 1000000)
        assert spec["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"] == [
            {"matchExpressions": [{"key": "gpu-pool", "operator": "In", "values": ["inference"]}]}
        ]
        assert {
            "key": "gpu-pool",
            "operator": "Equal",
            "value": "inference",
            "effect": "NoSchedule",
        } in spec["tolerations"]
        resources = spec["containers"][0]["resources"]
        assert (
            resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "1"
        )
        annotations = pod["metadata"]["annotations"]
        # Its GPU limit is the manifest's, kube-apiserver defaults the request from it.
        assert annotations["gpu-admission.io/injected"] == "affinity,tolerations,priority"
        assert annotations["gpu-admission.io/policy-revision"] == load_default_policy().revision


def test_kube_apiservers_audit_log_records_what_the_mutation_injected(
    controlplane: ControlPlane, opted_in: str
) -> None:
    controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in)
    pod = controlplane.get_json("pod", "embedder", opted_in)

    [event] = [
        event
        for event in audit_log.events(controlplane.work_dir / "audit")
        if event["objectRef"].get("namespace") == opted_in
        and event["objectRef"].get("resource") == "pods"
        and event["objectRef"].get("name") == "embedder"
        and event["verb"] == "create"
        and event.get("responseStatus", {}).get("code") == 201
    ]

    recorded = event["annotations"]
    stored = pod["metadata"]["annotations"]
    assert recorded["mutate.gpu-admission.io/injected"] == stored["gpu-admission.io/injected"]
    assert recorded["mutate.gpu-admission.io/injected"] == "affinity,tolerations,priority"
    assert (
        recorded["mutate.gpu-admission.io/policy-revision"]
        == stored["gpu-admission.io/policy-revision"]
        == load_default_policy().revision
    )


def test_a_training_job_of_eight_gpu_pods_lands_on_training_nodes_drawn_together(
    controlplane: ControlPlane, opted_in: str
) -> None:
    controlplane.apply(example("training-job.yaml"), namespace=opted_in)

    nodes = controlplane.wait_for_bindings(opted_in, "job-name=resnet-train", 2)

    assert set(nodes) <= set(nodes_in_pool("training")), nodes
    assert len(set(nodes)) == 2, "two 8-GPU pods cannot share an 8-GPU node"
    pod = controlplane.list_json("pods", opted_in, "job-name=resnet-train")[0]
    assert pod["spec"]["priority"] == 1000
    hint = pod["spec"]["affinity"]["podAffinity"][PREFERRED][0]["podAffinityTerm"]
    assert hint == {
        "labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": "resnet-train"}},
        "topologyKey": "topology.kubernetes.io/zone",
    }


def test_a_training_job_labelled_with_a_model_lands_only_on_that_model(
    controlplane: ControlPlane, opted_in: str
) -> None:
    controlplane.apply(example("training-job-a100.yaml"), namespace=opted_in)

    nodes = controlplane.wait_for_bindings(opted_in, "job-name=bert-train-a100", 1)

    assert set(nodes) <= set(A100_TRAINING), nodes


def test_a_mig_slice_lands_on_an_inference_node_that_offers_it(
    controlplane: ControlPlane, opted_in: str
) -> None:
    controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in)

    node = controlplane.wait_for_binding(opted_in, "embedder")

    assert "nvidia.com/mig-1g.5gb" in next(n for n in FLEET if n.name == node).capacity


DENIALS = {
    "wrong-pool.yaml": "inference pod can never be scheduled on its pool inference (nodes "
    "labelled gpu-pool=inference, nvidia-gpu-model=A100): spec.nodeSelector.gpu-pool: training "
    "does not match gpu-pool=inference",
    "no-class.yaml": "has no label gpu-admission.io/workload; set it to one of: inference, training",
    "too-many-gpus.yaml": "requests 9 nvidia.com/gpu; the largest node in pool training has 8",
    "invalid-mig-profile.yaml": "MIG profile 3g.40gb is not offered by A100-SXM4-40GB",
    "visible-devices.yaml": "container 'cuda' sets NVIDIA_VISIBLE_DEVICES=all",
    "borrowed-priority.yaml": "training pod uses priorityClassName 'inference-priority'",
    "cpu-pod-on-gpu-nodes.yaml": "pod requests no GPU but could be scheduled on GPU pool "
    "inference or training, or a GPU node of a pool the policy does not name "
    "(spec.tolerations[0] {operator: Exists} tolerates gpu-pool=inference:NoSchedule, "
    "gpu-pool=training:NoSchedule, gpu-pool=<a value of no pool of the policy>:NoSchedule",
}


@pytest.mark.parametrize("manifest", sorted(DENIALS))
def test_kubectl_apply_of_a_pod_breaking_a_rule_fails_with_our_message(
    controlplane: ControlPlane, opted_in: str, manifest: str
) -> None:
    result = controlplane.apply(example(f"denied/{manifest}"), namespace=opted_in, check=False)

    assert result.returncode != 0
    assert DENIED.search(result.stderr)
    assert DENIALS[manifest] in result.stderr
    assert not controlplane.list_json("pods", opted_in)


def test_every_denied_example_has_its_expected_message() -> None:
    assert sorted(p.name for p in (EXAMPLES / "denied").glob("*.yaml")) == sorted(DENIALS)


def test_a_deployment_of_rejected_pods_is_refused_at_apply(
    controlplane: ControlPlane, opted_in: str
) -> None:
    deployment = yaml.safe_load(example("inference-deployment.yaml"))
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {
        "nvidia.com/gpu": 9
    }
    result = controlplane.apply(json.dumps(deployment), namespace=opted_in, check=False)

    assert result.returncode != 0
    assert "requests 9 nvidia.com/gpu" in result.stderr
    assert not controlplane.list_json("replicasets", opted_in)


def test_a_namespace_without_the_opt_in_label_is_untouched(
    controlplane: ControlPlane, plain_namespace: str
) -> None:
    controlplane.apply(example("inference-deployment.yaml"), namespace=plain_namespace)
    for manifest in ("no-class.yaml", "visible-devices.yaml", "borrowed-priority.yaml"):
        controlplane.apply(example(f"denied/{manifest}"), namespace=plain_namespace)

    pods = controlplane.wait_for(
        lambda: (
            found
            if len(found := controlplane.list_json("pods", plain_namespace, "app=llm-server")) == 2
            else None
        ),
        what="the Deployment's two pods",
    )
    for pod in pods:
        assert "priorityClassName" not in pod["spec"]
        assert "affinity" not in pod["spec"]
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    borrowed = controlplane.get_json("pod", "borrowed-priority", plain_namespace)
    assert borrowed["spec"]["priorityClassName"] == "inference-priority"


def test_a_server_side_dry_run_shows_the_mutation_and_creates_nothing(
    controlplane: ControlPlane, opted_in: str
) -> None:
    result = controlplane.kubectl(
        "apply", "--dry-run=server", "--output=json", "--namespace", opted_in,
        "--filename", str(EXAMPLES / "mig-inference-pod.yaml"),
    )  # fmt: skip

    shown = json.loads(result.stdout)
    assert (shown["spec"]["priorityClassName"], shown["spec"]["priority"]) == (
        "inference-priority",
        1000000,
    )
    assert not controlplane.exists("pod", "embedder", opted_in)


def test_a_server_side_dry_run_of_a_broken_pod_is_denied_like_a_real_apply(
    controlplane: ControlPlane, opted_in: str
) -> None:
    result = controlplane.apply(
        example("denied/too-many-gpus.yaml"), namespace=opted_in, dry_run="server", check=False
    )

    assert result.returncode != 0
    assert DENIALS["too-many-gpus.yaml"] in result.stderr


def test_examples_are_plain_manifests_without_placement_fields() -> None:
    for path in Path(EXAMPLES).glob("*.yaml"):
        text = path.read_text("utf-8")
        for field in ("affinity", "tolerations", "priorityClassName", "nodeSelector"):
            assert field not in text, f"{path.name} sets {field}"
