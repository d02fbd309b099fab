"""GPUs claimed through Dynamic Resource Allocation, end to end through kubectl apply.

A mixed cluster: the session's fleet gives GPUs through the device plugin
(``nvidia.com/gpu``), and two nodes of the test's own publish theirs in ResourceSlices
(``dra.py``: NVIDIA's classes and attributes under a driver of the harness's own), one
for inference (four A100-40GB and seven 1g.5gb MIG devices) and one for training (eight
A100-80GB). The policy gives each class a pool of each kind. gpu-admission serves it
with its live inventory, reading the templates pods name from the cluster; the real
resource claim controller makes each pod's claims from its template and the real
kube-scheduler allocates them from the slices. No kubelet runs: a pod bound to a node,
its claims allocated there, is where it lands.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from webhook.engine.dra.claims import ClaimSource
from webhook.engine.serving import serving_engine
from webhook.kube.client import api_client
from webhook.offline.audit import Finding
from webhook.policy.load import default_policy_text
from webhook.service.audit import audit_cluster
from webhook.service.audit_claims import ClaimReads

from . import dra
from .admission_fixtures import OPT_IN
from .controlplane import ControlPlane
from .nodes import MODEL_LABEL, POOL_LABEL, NodeSpec, Taint, nodes_in_pool, register_node
from .waiting import wait_for
from .webhook_server import WebhookServer

INFERENCE_NODE = "dra-inf-0"
TRAINING_NODE = "dra-train-0"
A100_40 = ("NVIDIA A100-SXM4-40GB", "Ampere")
A100_80 = ("NVIDIA A100-SXM4-80GB", "Ampere")
WORKLOAD = "gpu-admission.io/workload"

POOLS = f"""
  inference-dra:
    gpusPerNode: 4
    models:
      A100: {{product: A100-SXM4-40GB}}
    mig: mixed
    gpusThrough: dra
  training-dra:
    gpusPerNode: 8
    models:
      A100: {{product: A100-SXM4-80GB}}
    mig: none
    gpusThrough: dra

dra:
  drivers: [{dra.DRIVER}]
"""


def mixed_policy_text() -> str:
    """The default policy with a DRA pool beside each device-plugin pool, each class
    running on both."""
    text = default_policy_text()
    text = text.replace("\nclasses:\n", f"{POOLS}\nclasses:\n", 1)
    text = text.replace("    pools: [inference]\n", "    pools: [inference, inference-dra]\n", 1)
    return text.replace("    pools: [training]\n", "    pools: [training, training-dra]\n", 1)


def dra_node(name: str, pool: str) -> NodeSpec:
    """A node whose GPUs come through DRA only: no nvidia.com/gpu capacity."""
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    labels = {POOL_LABEL: pool, MODEL_LABEL: "A100"}
    return NodeSpec(name, labels, capacity, taints=(Taint(POOL_LABEL, pool),))


@pytest.fixture(scope="module")
def mixed_cluster(
    controlplane: ControlPlane,
    admission: WebhookServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """The DRA nodes and their slices, served with the mixed policy; all gone afterwards."""
    policy = tmp_path_factory.mktemp("dra-placement") / "mixed.yaml"
    policy.write_text(mixed_policy_text(), "utf-8")
    register_node(controlplane, dra_node(INFERENCE_NODE, "inference-dra"))
    register_node(controlplane, dra_node(TRAINING_NODE, "training-dra"))
    inference_devices = [
        *dra.whole_gpus(4, *A100_40, "40Gi"),
        *dra.mig_devices(4, "1g.5gb", 7, *A100_40, "5Gi"),
    ]
    dra.publish(
        controlplane,
        [
            *dra.device_classes(),
            dra.resource_slice(INFERENCE_NODE, inference_devices),
            dra.resource_slice(TRAINING_NODE, dra.whole_gpus(8, *A100_80, "80Gi")),
        ],
    )
    try:
        with admission.serving(controlplane.kubeconfig, policy, kubeconfig=controlplane.kubeconfig):
            wait_until_the_slices_count(admission)
            yield
    finally:
        for node in (INFERENCE_NODE, TRAINING_NODE):
            dra.withdraw(controlplane, node)
        controlplane.delete("deviceclass", [dra.GPU_CLASS, dra.MIG_CLASS])
        controlplane.delete("node", [INFERENCE_NODE, TRAINING_NODE])


def wait_until_the_slices_count(admission: WebhookServer) -> None:
    """The service has listed the ResourceSlices and DeviceClasses (its readiness says so)."""

    def detail() -> str:
        return str(admission.readiness()["checks"]["inventory"]["detail"])

    wait_for(
        lambda: "resourceslices: " in detail() and "deviceclasses: 2 known" in detail(),
        30,
        "the service's inventory of ResourceSlices and DeviceClasses",
        interval=0.2,
        describe_last=detail,
    )


def template(name: str, device_class: str = dra.GPU_CLASS, count: int = 1, selector: str = "") -> dict[str, Any]:  # fmt: skip
    """A ResourceClaimTemplate asking for `count` devices of `device_class`."""
    request: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selector:
        request["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": dra.RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}}},
    }


def pod_spec(*templates: str, limits: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod spec whose one container uses a claim from each template."""
    resources: dict[str, Any] = {"claims": [{"name": f"c{i}"} for i in range(len(templates))]}
    if limits is not None:
        resources["limits"] = limits
    return {
        "restartPolicy": "Never",
        "resourceClaims": [
            {"name": f"c{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)
        ],
        "containers": [{"name": "main", "image": "registry.example/app:1", "resources": resources}],
    }


def pod(name: str, workload: str | None, *templates: str, **spec: Any) -> dict[str, Any]:
    labels = {WORKLOAD: workload} if workload else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": pod_spec(*templates, **spec),
    }


def documents(*objects: dict[str, Any]) -> str:
    return "\n---\n".join(json.dumps(o) for o in objects)


def allocated_nodes(controlplane: ControlPlane, namespace: str) -> dict[str, set[str]]:
    """Claim name -> the pools (nodes) its devices were allocated from."""
    return {
        claim["metadata"]["name"]: {
            result["pool"] for result in claim["status"]["allocation"]["devices"]["results"]
        }
        for claim in controlplane.list_json("resourceclaims", namespace)
        if claim.get("status", {}).get("allocation")
    }


def gpu_resources(pod: dict[str, Any]) -> list[str]:
    return [
        name
        for container in pod["spec"]["containers"]
        for kind in ("limits", "requests")
        for name in container.get("resources", {}).get(kind, {})
        if name.startswith("nvidia.com/")
    ]


def refusal(controlplane: ControlPlane, namespace: str, *objects: dict[str, Any]) -> str:
    applied = controlplane.apply(documents(*objects), namespace=namespace, check=False)
    assert applied.returncode != 0, applied.stdout
    return applied.stderr


@pytest.mark.usefixtures("mixed_cluster")
class TestPlacement:
    def test_an_inference_deployment_claiming_a_gpu_gets_no_device_plugin_gpu_and_lands_on_inference(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "serve"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "serve"}},
                "template": {
                    "metadata": {"labels": {"app": "serve", WORKLOAD: "inference"}},
                    "spec": {**pod_spec("one-gpu"), "restartPolicy": "Always"},
                },
            },
        }
        controlplane.apply(documents(template("one-gpu"), deployment), namespace=opted_in)

        nodes = controlplane.wait_for_bindings(opted_in, "app=serve", 2, timeout=90)

        assert set(nodes) == {INFERENCE_NODE}
        pods = controlplane.list_json("pods", opted_in, "app=serve")
        assert [gpu_resources(p) for p in pods] == [[], []]
        assert {p["spec"]["priorityClassName"] for p in pods} == {"inference-priority"}
        allocated = allocated_nodes(controlplane, opted_in)
        assert len(allocated) == 2 and set().union(*allocated.values()) == {INFERENCE_NODE}

    def test_a_training_job_claiming_eight_gpus_lands_on_the_training_node(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train"},
            "spec": {
                "template": {
                    "metadata": {"labels": {WORKLOAD: "training"}},
                    "spec": pod_spec("eight-gpus"),
                }
            },
        }
        controlplane.apply(documents(template("eight-gpus", count=8), job), namespace=opted_in)

        [node] = controlplane.wait_for_bindings(opted_in, "job-name=train", 1, timeout=90)

        assert node == TRAINING_NODE
        [devices] = allocated_nodes(controlplane, opted_in).values()
        assert devices == {TRAINING_NODE}

    def test_device_plugin_pods_of_the_same_class_stay_on_device_plugin_nodes(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        plugin = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "plugin", "labels": {WORKLOAD: "inference"}},
            "spec": {"containers": [{"name": "main", "image": "registry.example/app:1"}]},
        }
        claiming = pod("claiming", "inference", "one-gpu")
        controlplane.apply(documents(template("one-gpu"), plugin, claiming), namespace=opted_in)

        assert controlplane.wait_for_binding(opted_in, "plugin") in nodes_in_pool("inference")
        assert controlplane.wait_for_binding(opted_in, "claiming") == INFERENCE_NODE
        assert gpu_resources(controlplane.get_json("pod", "plugin", opted_in)) == [
            "nvidia.com/gpu",
            "nvidia.com/gpu",
        ]


@pytest.mark.usefixtures("mixed_cluster")
class TestRefusals:
    def test_a_template_for_nine_gpus_is_refused_with_what_a_node_holds(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        stderr = refusal(controlplane, opted_in, template("nine-gpus", count=9))

        assert 'admission webhook "validate-claims.gpu-admission.io" denied the request' in stderr
        assert f"ResourceClaimTemplate '{opted_in}/nine-gpus'" in stderr
        assert "pod claims 9 GPUs" in stderr
        assert "the largest node in pool training-dra has 8 now" in stderr
        assert "claim at most 8 per pod" in stderr

    def test_claims_adding_up_to_nine_gpus_refuse_the_pod_naming_them(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        controlplane.apply(
            documents(template("five", count=5), template("four", count=4)), namespace=opted_in
        )

        stderr = refusal(controlplane, opted_in, pod("nine", "training", "five", "four"))

        assert 'admission webhook "validate.gpu-admission.io" denied the request' in stderr
        assert "claim 'c0' (ResourceClaimTemplate 'five')" in stderr
        assert "claim 'c1' (ResourceClaimTemplate 'four')" in stderr
        assert "claim at most 8 per pod" in stderr

    def test_a_mig_profile_no_pool_offers_is_refused_with_those_offered(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        profile = f"device.attributes['{dra.DRIVER}'].profile == '7g.80gb'"

        stderr = refusal(controlplane, opted_in, template("big-slice", dra.MIG_CLASS, 1, profile))

        assert "ResourceClaimTemplate 'big-slice'" in stderr
        assert "asks for MIG profile 7g.80gb" in stderr
        assert "offered: 1g.5gb" in stderr

    def test_a_gpu_claim_without_a_workload_class_is_refused(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        controlplane.apply(documents(template("one-gpu")), namespace=opted_in)

        stderr = refusal(controlplane, opted_in, pod("classless", None, "one-gpu"))

        assert 'admission webhook "validate-unclassed.gpu-admission.io" denied' in stderr
        assert "claim 'c0' (ResourceClaimTemplate 'one-gpu')" in stderr
        assert f"has no label {WORKLOAD}; set it to one of: inference, training" in stderr

    def test_a_container_taking_gpus_both_ways_is_refused(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        controlplane.apply(documents(template("one-gpu")), namespace=opted_in)
        both = pod("both", "inference", "one-gpu", limits={"nvidia.com/gpu": "1"})

        stderr = refusal(controlplane, opted_in, both)

        assert "container 'main' requests nvidia.com/gpu from the device plugin" in stderr
        assert "uses GPU claim 'c0' (ResourceClaimTemplate 'one-gpu')" in stderr
        assert "a container takes GPUs one way" in stderr

    def test_a_pod_naming_a_template_that_does_not_exist_is_refused(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        stderr = refusal(controlplane, opted_in, pod("early", "inference", "not-yet"))

        assert "claim 'c0' (ResourceClaimTemplate 'not-yet') does not exist" in stderr
        assert "create the ResourceClaimTemplate in the pod's namespace before the pod" in stderr

    def test_a_pod_naming_a_template_too_large_to_read_is_refused_with_why(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        big = template("big", "nic.example.com")
        selectors = [
            {"cel": {"expression": f'device.driver == "{letter * 9000}"'}}
            for letter in "abcdefghijklmnopq"
        ]
        big["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = selectors
        controlplane.apply(documents(big), namespace=opted_in)

        stderr = refusal(controlplane, opted_in, pod("naming-big", "inference", "big"))
        api = api_client(controlplane.kubeconfig)
        try:
            audited = ClaimReads(api, {})(opted_in, (ClaimSource("ResourceClaimTemplate", "big"),))
        finally:
            api.close()

        assert "claim 'c0' (ResourceClaimTemplate 'big') could not be read" in stderr
        assert "resourceclaimtemplates 'big' is over 128 KiB" in stderr
        assert list(audited.unreadable.values()) == ["resourceclaimtemplates 'big' is over 128 KiB"]


def audited_pods(controlplane: ControlPlane, namespace: str) -> dict[str, Finding]:
    """The audit's findings on the pods of `namespace`, by pod name."""
    api = api_client(controlplane.kubeconfig)
    try:
        run = audit_cluster(api, serving_engine(mixed_policy_text(), "mixed.yaml"))
    finally:
        api.close()
    assert run.unlisted == {}
    return {
        f.subject.name: f
        for f in run.findings
        if f.subject.namespace == namespace and f.subject.kind == "Pod"
    }


@pytest.mark.usefixtures("mixed_cluster")
class TestAudit:
    def test_a_running_pod_is_judged_by_the_template_its_claim_names_as_the_cluster_has_it(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        controlplane.apply(
            documents(template("one-gpu"), pod("claiming", "inference", "one-gpu")),
            namespace=opted_in,
        )

        before = audited_pods(controlplane, opted_in)["claiming"]
        controlplane.delete("resourceclaimtemplate", ["one-gpu"], namespace=opted_in)
        wait_for(
            lambda: not controlplane.list_json("resourceclaimtemplates", opted_in),
            30,
            "the template deleted",
        )
        after = audited_pods(controlplane, opted_in)["claiming"]

        assert before.verdict == "passed", before.message
        assert {r.rule: r.outcome for r in before.rules}["claims-not-judged"] == "pass"
        assert after.verdict == "denied"
        assert "claim 'c0' (ResourceClaimTemplate 'one-gpu') does not exist" in after.message

    def test_a_running_pod_is_judged_by_the_mig_devices_the_slices_offer_now(
        self, controlplane: ControlPlane, plain_namespace: str
    ) -> None:
        profile = f"device.attributes['{dra.DRIVER}'].profile == '2g.10gb'"
        controlplane.apply(
            documents(
                template("slice", dra.MIG_CLASS, 1, profile), pod("sliced", "inference", "slice")
            ),
            namespace=plain_namespace,
        )
        [(key, value)] = OPT_IN.items()
        controlplane.kubectl("label", "namespace", plain_namespace, f"{key}={value}")

        finding = audited_pods(controlplane, plain_namespace)["sliced"]

        assert finding.verdict == "denied"
        assert "asks for MIG profile 2g.10gb" in finding.message
        assert "offered: 1g.5gb" in finding.message

    def test_templates_the_credentials_may_not_read_are_reported_once_and_not_judged(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        controlplane.apply(documents(template("one-gpu")), namespace=opted_in)
        api = api_client(controlplane.kubeconfig)
        api.set_default_header("Impersonate-User", "e2e-dra-audit-nobody")
        not_read: dict[str, str] = {}
        reads = ClaimReads(api, not_read)
        sources = (ClaimSource("ResourceClaimTemplate", "one-gpu"),)
        try:
            first = reads(opted_in, sources)
            again = reads(opted_in, (ClaimSource("ResourceClaimTemplate", "other"),))
        finally:
            api.close()

        assert (first.found, first.looked_up, again.looked_up) == ({}, False, False)
        assert reads.reads == 1
        assert not_read["ResourceClaimTemplate"].startswith(
            "could not be read (forbidden (403): user e2e-dra-audit-nobody may not get "
            f"resourceclaimtemplates.resource.k8s.io in namespace {opted_in}"
        )
        assert "the claims naming one are not judged" in not_read["ResourceClaimTemplate"]

    def test_each_template_is_read_once_for_every_pod_naming_it(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        controlplane.apply(documents(template("one-gpu")), namespace=opted_in)
        api = api_client(controlplane.kubeconfig)
        reads = ClaimReads(api, {})
        one_gpu, absent = (ClaimSource("ResourceClaimTemplate", n) for n in ("one-gpu", "absent"))
        try:
            answers = [reads(opted_in, (one_gpu, absent)) for _ in range(3)]
        finally:
            api.close()

        assert reads.reads == 2
        assert all(set(a.found) == {one_gpu} and a.missing == {absent} for a in answers)
        assert answers[0].found[one_gpu]["metadata"]["name"] == "one-gpu"

    def test_templates_past_the_cache_s_bounds_are_read_again_never_kept(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        controlplane.apply(documents(template("a"), template("b")), namespace=opted_in)
        a, b = (ClaimSource("ResourceClaimTemplate", n) for n in ("a", "b"))
        api = api_client(controlplane.kubeconfig)
        too_small = ClaimReads(api, {}, max_cached_bytes=100)
        one_kept = ClaimReads(api, {}, max_cached=1)
        try:
            too_small_found = [too_small(opted_in, (a,)).found for _ in range(3)]
            for source in (a, b, a, a):
                one_kept(opted_in, (source,))
        finally:
            api.close()

        assert too_small.reads == 3 and all(set(f) == {a} for f in too_small_found)
        assert one_kept.reads == 3  # a, b, a again (b pushed it out), then a kept


def test_the_policy_of_this_module_is_valid() -> None:
    engine = serving_engine(mixed_policy_text(), "mixed.yaml")

    assert engine.policy.pools["inference-dra"].takes_dra_gpus
    assert not engine.policy.pools["inference"].takes_dra_gpus
