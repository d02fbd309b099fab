"""The kustomize tree in deploy/, rendered by the real kubectl, and webhook/install/manifests.py.

`kubectl kustomize` is the kubectl the end-to-end harness builds; without it
these tests skip (they fail under GPU_ADMISSION_E2E=required). The end-to-end
test tests/e2e/test_deploy.py applies the same tree to a real kube-apiserver.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli.manifests import add_manifest_commands
from webhook.install.configurations import POLICY_WEBHOOK, Endpoint, render_webhook_configurations
from webhook.install.manifests import (
    SYNC_COMMAND,
    deploy_webhook_configurations,
    generated_files,
    policy_copy,
    scope_annotation_note,
)
from webhook.install.names import TLS_SECRET
from webhook.install.plan import render_install
from webhook.install.scope import SCOPE_ANNOTATION, scope_digest
from webhook.policy import Policy, load_default_policy, load_policy_file
from webhook.policy.load import default_policy_text, load_policy_text

REPOSITORY = Path(__file__).resolve().parents[2]
DEPLOY = REPOSITORY / "deploy"
VARIANTS = ["deploy", "overlays/default", "overlays/overflow", "overlays/cert-manager"]
POLICY_OF = {
    "deploy": "default.yaml",
    "overlays/default": "default.yaml",
    "overlays/overflow": "overflow.yaml",
    "overlays/cert-manager": "default.yaml",
}
NAMESPACE = "gpu-admission"
POD_LABELS = {"app.kubernetes.io/name": "gpu-admission", "app.kubernetes.io/component": "webhook"}

Objects = list[dict[str, Any]]
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "FlowSchema",
    "MutatingWebhookConfiguration",
    "Namespace",
    "PriorityClass",
    "PriorityLevelConfiguration",
    "ValidatingWebhookConfiguration",
}


def policy_named(name: str) -> Policy:
    return load_policy_file(REPOSITORY / "policies" / name)


@pytest.fixture(scope="module")
def rendered(kubectl: Path) -> dict[str, Objects]:
    """`kubectl kustomize` of deploy/ and of each overlay, as lists of objects."""
    result = {}
    for variant in VARIANTS:
        directory = DEPLOY if variant == "deploy" else DEPLOY / variant
        output = subprocess.run(
            [str(kubectl), "kustomize", str(directory)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        result[variant] = [o for o in yaml.safe_load_all(output) if o]
    return result


def one(objects: Objects, kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} among the rendered objects"
    return found[0]


def pod_spec(objects: Objects) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment", "gpu-admission")["spec"]["template"]["spec"]
    return spec


def container(objects: Objects) -> dict[str, Any]:
    [only] = pod_spec(objects)["containers"]
    return dict(only)


# -- generated files ---------------------------------------------------------------


@pytest.mark.parametrize("generated", generated_files(), ids=lambda g: str(g.path))
def test_each_generated_file_of_deploy_is_what_the_package_generates(generated: Any) -> None:
    path = DEPLOY / generated.path

    assert path.is_file(), f"{path} is missing: run `{SYNC_COMMAND}` in the repository root"
    assert path.read_text("utf-8") == generated.text, (
        f"{path} is stale: run `{SYNC_COMMAND}` in the repository root"
    )


def test_the_base_webhooks_are_what_webhook_config_renders_for_the_service_less_the_ca() -> None:
    expected = render_webhook_configurations(
        load_default_policy(),
        Endpoint(ca_bundle="", service_name="gpu-admission", service_namespace=NAMESPACE),
        own_namespace=NAMESPACE,
    )
    for configuration in expected:
        for hook in configuration["webhooks"]:
            assert hook["clientConfig"].pop("caBundle") == ""

    on_disk = list(yaml.safe_load_all((DEPLOY / "base" / "webhooks.yaml").read_text("utf-8")))

    assert on_disk == list(expected)


@pytest.mark.parametrize("name", ["default.yaml", "overflow.yaml"])
def test_the_policy_copies_are_the_policies_themselves(name: str) -> None:
    copy = DEPLOY / ("base" if name == "default.yaml" else "overlays/overflow") / "policy.yaml"
    original = (REPOSITORY / "policies" / name).read_text("utf-8")

    without_schema_line = "".join(
        line
        for line in original.splitlines(keepends=True)
        if not line.startswith("# yaml-language-server:")
    )
    assert copy.read_text("utf-8").endswith(without_schema_line)
    assert yaml.safe_load(copy.read_text("utf-8")) == yaml.safe_load(original)


def test_a_policy_copy_leaves_out_the_schema_line_whose_schema_stays_behind() -> None:
    assert (
        (REPOSITORY / "policies" / "default.yaml")
        .read_text("utf-8")
        .startswith("# yaml-language-server: $schema=")
    )
    assert "yaml-language-server" not in policy_copy("default.yaml")


class TestCommands:
    @staticmethod
    def run(argv: list[str]) -> int:
        parser = argparse.ArgumentParser(prog="gpu-admission")
        add_manifest_commands(parser.add_subparsers())
        args = parser.parse_args(argv)
        code: int = args.run(args)
        return code

    def test_helm_values_hold_the_policy_as_written_and_the_digest_of_that_text(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        policy = REPOSITORY / "policies" / "overflow.yaml"

        assert self.run(["manifests", "helm-values", "--policy", str(policy)]) == 0

        values = yaml.safe_load(capsys.readouterr().out)
        assert values["policy"] == policy.read_text("utf-8")
        scope = values["webhookScope"]
        assert scope["policySha256"] == hashlib.sha256(policy.read_bytes()).hexdigest()
        assert set(scope["webhooks"]["mutate.gpu-admission.io"]) == {"rules", "objectSelector"}

    def test_sync_refuses_a_list_of_rules_without_its_end_and_writes_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
        deploy = tmp_path / "deploy"
        deploy.mkdir()
        (deploy / "kustomization.yaml").write_text("resources: []\n")
        page = tmp_path / "page.md"
        page.write_text("<!-- rules: written from the engine by gpu-admission manifests sync -->\n")

        assert self.run(["manifests", "sync", "--deploy-dir", str(deploy)]) == 2
        assert "has no <!-- /rules -->; nothing written" in capsys.readouterr().err
        assert sorted(p.name for p in deploy.iterdir()) == ["kustomization.yaml"]

    def test_helm_values_of_a_policy_the_service_would_refuse_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        broken = tmp_path / "broken.yaml"
        broken.write_text("pools: [\n")

        assert self.run(["manifests", "helm-values", "--policy", str(broken)]) == 2
        assert capsys.readouterr().out == ""

    def test_sync_check_finds_the_repository_in_sync(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert self.run(["manifests", "sync", "--check", "--deploy-dir", str(DEPLOY)]) == 0
        assert capsys.readouterr().out == ""

    def test_sync_check_lists_a_stale_file_and_fails_without_writing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (tmp_path / "kustomization.yaml").write_text("resources: [base]\n")
        self.run(["manifests", "sync", "--deploy-dir", str(tmp_path)])
        stale = tmp_path / "base" / "webhooks.yaml"
        stale.write_text(stale.read_text().replace("timeoutSeconds: 3", "timeoutSeconds: 30"))
        capsys.readouterr()

        code = self.run(["manifests", "sync", "--check", "--deploy-dir", str(tmp_path)])

        assert code == 1
        assert capsys.readouterr().out == f"{stale}: stale, run `{SYNC_COMMAND}`\n"
        assert "timeoutSeconds: 30" in stale.read_text()

    def test_sync_rewrites_only_the_stale_files(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (tmp_path / "kustomization.yaml").write_text("resources: [base]\n")
        assert self.run(["manifests", "sync", "--deploy-dir", str(tmp_path)]) == 0
        (tmp_path / "overlays" / "overflow" / "policy.yaml").write_text("edited by hand\n")
        capsys.readouterr()

        assert self.run(["manifests", "sync", "--deploy-dir", str(tmp_path)]) == 0

        assert capsys.readouterr().out == f"{tmp_path}/overlays/overflow/policy.yaml: written\n"
        for generated in generated_files():
            assert (tmp_path / generated.path).read_text("utf-8") == generated.text

    def test_sync_refuses_a_directory_that_is_not_a_kustomization(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert self.run(["manifests", "sync", "--deploy-dir", str(tmp_path)]) == 2
        assert "no kustomization.yaml" in capsys.readouterr().err
        assert list(tmp_path.iterdir()) == []

    def test_sync_finds_the_repositorys_deploy_directory_from_a_folder_inside_it(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.chdir(REPOSITORY / "webhook" / "install")

        assert self.run(["manifests", "sync", "--check"]) == 0
        assert capsys.readouterr().out == ""

    def test_sync_outside_a_repository_asks_for_the_deploy_directory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.chdir(tmp_path)

        assert self.run(["manifests", "sync"]) == 2
        assert "pass --deploy-dir" in capsys.readouterr().err
        assert list(tmp_path.iterdir()) == []

    def test_webhooks_prints_the_configurations_of_the_policy_it_is_given(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = REPOSITORY / "policies" / "overflow.yaml"

        assert self.run(["manifests", "webhooks", "--policy", str(path)]) == 0

        out = capsys.readouterr().out
        assert out.startswith(f"# Rendered by `gpu-admission manifests webhooks` from {path}.")
        assert list(yaml.safe_load_all(out)) == list(
            deploy_webhook_configurations(policy_named("overflow.yaml"))
        )

    def test_webhooks_reports_a_broken_policy_with_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        broken = tmp_path / "broken.yaml"
        broken.write_text("pools: [\n")

        assert self.run(["manifests", "webhooks", "--policy", str(broken)]) == 2
        assert str(broken) in capsys.readouterr().err


# -- what kustomize renders ----------------------------------------------------------


def test_deploy_renders_the_same_objects_as_the_default_overlay(
    rendered: dict[str, Objects],
) -> None:
    assert rendered["deploy"] == rendered["overlays/default"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_has_every_object_of_a_deployment(
    rendered: dict[str, Objects], variant: str
) -> None:
    kinds = sorted(
        (o["kind"], o["metadata"]["name"]) for o in rendered[variant] if o["kind"] != "ConfigMap"
    )
    cert_manager = [
        ("Certificate", "gpu-admission"),
        ("Certificate", "gpu-admission-ca"),
        ("Issuer", "gpu-admission-ca"),
        ("Issuer", "gpu-admission-selfsigned"),
    ]
    rotation = [
        ("ClusterRole", "gpu-admission-cert-rotation"),
        ("ClusterRoleBinding", "gpu-admission-cert-rotation"),
        ("CronJob", "gpu-admission-cert-rotation"),
        ("Role", "gpu-admission-cert-rotation"),
        ("RoleBinding", "gpu-admission-cert-rotation"),
        ("ServiceAccount", "gpu-admission-cert-rotation"),
    ]
    # cert-manager renews the certificate: the base's rotation job is left out.
    extra = cert_manager if variant == "overlays/cert-manager" else rotation
    assert kinds == sorted(
        [
            ("ClusterRole", "gpu-admission"),
            ("ClusterRoleBinding", "gpu-admission"),
            ("Deployment", "gpu-admission"),
            ("FlowSchema", "gpu-admission-tenant-writes"),
            ("PriorityLevelConfiguration", "gpu-admission-tenant-writes"),
            ("MutatingWebhookConfiguration", "gpu-admission"),
            ("Namespace", "gpu-admission"),
            ("NetworkPolicy", "gpu-admission"),
            ("NetworkPolicy", "gpu-admission-default-deny-ingress"),
            ("PodDisruptionBudget", "gpu-admission"),
            ("PriorityClass", "inference-priority"),
            ("PriorityClass", "training-priority"),
            ("Service", "gpu-admission"),
            ("Service", "gpu-admission-metrics"),
            ("ServiceAccount", "gpu-admission"),
            ("ValidatingWebhookConfiguration", "gpu-admission"),
            *extra,
        ]
    )
    namespaced = [o for o in rendered[variant] if o["kind"] not in CLUSTER_SCOPED]
    assert {o["metadata"].get("namespace") for o in namespaced} == {NAMESPACE}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_carries_the_webhooks_its_own_policy_renders(
    rendered: dict[str, Objects], variant: str
) -> None:
    mutating, validating = deploy_webhook_configurations(policy_named(POLICY_OF[variant]))
    if variant == "overlays/cert-manager":
        for configuration in (mutating, validating):
            configuration["metadata"]["annotations"] = {
                "cert-manager.io/inject-ca-from": "gpu-admission/gpu-admission"
            }

    assert one(rendered[variant], "MutatingWebhookConfiguration") == mutating
    assert one(rendered[variant], "ValidatingWebhookConfiguration") == validating


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_serves_its_policy_from_the_mounted_config_map(
    rendered: dict[str, Objects], variant: str
) -> None:
    volume = next(v for v in pod_spec(rendered[variant])["volumes"] if v["name"] == "policy")
    config_map = one(rendered[variant], "ConfigMap", volume["configMap"]["name"])

    served = load_policy_text(config_map["data"]["policy.yaml"], "ConfigMap")

    expected = policy_named(POLICY_OF[variant])
    assert served.classes == expected.classes
    assert served.pools == expected.pools
    assert config_map["metadata"]["name"].startswith("gpu-admission-policy-")  # hash suffix


def test_the_overflow_variant_lets_inference_into_the_training_pool(
    rendered: dict[str, Objects],
) -> None:
    volume = next(
        v for v in pod_spec(rendered["overlays/overflow"])["volumes"] if v["name"] == "policy"
    )
    config_map = one(rendered["overlays/overflow"], "ConfigMap", volume["configMap"]["name"])

    served = load_policy_text(config_map["data"]["policy.yaml"], "ConfigMap")

    assert served.classes["inference"].pools == ("inference", "training")


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_priority_classes_are_the_policys_classes_and_never_the_default(
    rendered: dict[str, Objects], variant: str
) -> None:
    classes = {
        o["metadata"]["name"]: (o["value"], o["globalDefault"])
        for o in rendered[variant]
        if o["kind"] == "PriorityClass"
    }
    policy = policy_named(POLICY_OF[variant])

    assert classes == {
        c.priority_class.name: (c.priority_class.value, False) for c in policy.classes.values()
    }
    assert classes == {"inference-priority": (1000000, False), "training-priority": (1000, False)}


# -- the objects of the base -----------------------------------------------------------


@pytest.fixture(scope="module")
def base(rendered: dict[str, Objects]) -> Objects:
    return rendered["deploy"]


def webhooks(base: Objects) -> list[dict[str, Any]]:
    """Every webhook of both configurations (pods, and workloads' templates)."""
    return [
        hook
        for configuration in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in one(base, configuration)["webhooks"]
    ]


def test_the_namespace_is_not_opted_in_so_our_webhooks_never_see_it(base: Objects) -> None:
    labels = one(base, "Namespace", NAMESPACE)["metadata"]["labels"]
    key, value = load_default_policy().namespace_opt_in

    assert labels.get(key) != value
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for hook in webhooks(base):
        if hook["name"] == POLICY_WEBHOOK:  # its policy ConfigMap, in its namespace alone
            assert hook["namespaceSelector"]["matchExpressions"] == [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NAMESPACE]}
            ]
            continue
        assert {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "kube-node-lease", NAMESPACE],
        } in hook["namespaceSelector"]["matchExpressions"]


def test_three_replicas_spread_over_nodes_at_system_cluster_critical_priority(
    base: Objects,
) -> None:
    deployment = one(base, "Deployment", "gpu-admission")
    spec = pod_spec(base)

    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert spec["priorityClassName"] == "system-cluster-critical"
    by_node = next(
        c for c in spec["topologySpreadConstraints"] if c["topologyKey"] == "kubernetes.io/hostname"
    )
    assert (by_node["maxSkew"], by_node["whenUnsatisfiable"]) == (1, "DoNotSchedule")
    assert by_node["labelSelector"] == {"matchLabels": POD_LABELS}
    assert by_node["nodeTaintsPolicy"] == "Honor"  # tainted GPU nodes are not counted


def test_the_pods_run_non_root_read_only_without_capabilities_under_runtime_default_seccomp(
    base: Objects,
) -> None:
    pod = pod_spec(base)["securityContext"]
    own = container(base)["securityContext"]

    assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    assert own == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": pod["runAsUser"],
        "runAsGroup": pod["runAsGroup"],
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_the_container_requests_and_limits_cpu_and_memory(base: Objects) -> None:
    resources = container(base)["resources"]

    assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}


def test_liveness_and_readiness_probe_healthz_and_readyz_over_https(base: Objects) -> None:
    own = container(base)

    assert own["ports"] == [
        {"name": "https", "containerPort": 8443, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
    ]
    assert own["livenessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": "https",
        "scheme": "HTTPS",
    }
    assert own["readinessProbe"]["httpGet"] == {
        "path": "/readyz",
        "port": "https",
        "scheme": "HTTPS",
    }


def test_serve_reads_the_policy_and_certificate_from_the_mounted_volumes(base: Objects) -> None:
    own = container(base)
    volumes = {v["name"]: v for v in pod_spec(base)["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in own["volumeMounts"]}

    assert own["args"] == [
        "serve",
        "--host", "0.0.0.0",
        "--port", "8443",
        "--policy", "/etc/gpu-admission/policy/policy.yaml",
        "--tls-cert", "/etc/gpu-admission/tls/tls.crt",
        "--tls-key", "/etc/gpu-admission/tls/tls.key",
        "--audit-interval", "1h",
    ]  # fmt: skip
    assert mounts["/etc/gpu-admission/policy"]["configMap"]["name"].startswith(
        "gpu-admission-policy-"
    )
    assert mounts["/etc/gpu-admission/tls"]["secret"]["secretName"] == TLS_SECRET
    assert "emptyDir" in mounts["/tmp"]
    assert all(m["readOnly"] for m in own["volumeMounts"] if m["mountPath"] != "/tmp")


def test_the_disruption_budget_keeps_one_replica_of_the_deployment(base: Objects) -> None:
    budget = one(base, "PodDisruptionBudget", "gpu-admission")["spec"]

    assert budget["minAvailable"] == 1
    assert budget["selector"] == {"matchLabels": POD_LABELS}
    assert one(base, "Deployment")["spec"]["template"]["metadata"]["labels"] == POD_LABELS


def test_the_service_sends_the_webhooks_port_to_the_containers_https_port(
    base: Objects,
) -> None:
    service = one(base, "Service", "gpu-admission")["spec"]

    assert service["selector"] == POD_LABELS
    assert service["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    for hook in webhooks(base):
        target = hook["clientConfig"]["service"]
        assert (target["name"], target["namespace"], target["port"]) == (
            "gpu-admission",
            NAMESPACE,
            443,
        )
        assert "caBundle" not in hook["clientConfig"]


def test_metrics_have_a_service_of_their_own_on_the_containers_metrics_port(
    base: Objects,
) -> None:
    service = one(base, "Service", "gpu-admission-metrics")

    assert service["spec"]["selector"] == POD_LABELS
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert service["metadata"]["labels"]["app.kubernetes.io/component"] == "metrics"


# -- network policy -----------------------------------------------------------------------


def test_every_pod_of_the_namespace_is_closed_to_ingress_by_default(base: Objects) -> None:
    deny = one(base, "NetworkPolicy", "gpu-admission-default-deny-ingress")["spec"]

    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}


def test_the_replicas_admit_the_webhook_port_from_anywhere_and_metrics_from_monitoring(
    base: Objects,
) -> None:
    policy = one(base, "NetworkPolicy", "gpu-admission")["spec"]
    container_ports = {port["name"] for port in container(base)["ports"]}

    assert policy["podSelector"] == {"matchLabels": POD_LABELS}
    assert policy["policyTypes"] == ["Ingress"]  # egress stays open: kube-apiserver
    assert policy["ingress"] == [
        {"ports": [{"port": "https", "protocol": "TCP"}]},
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                    }
                }
            ],
            "ports": [{"port": "metrics", "protocol": "TCP"}],
        },
    ]
    assert {port["port"] for rule in policy["ingress"] for port in rule["ports"]} == container_ports


# -- certificate rotation -------------------------------------------------------------------


def rotation_pod_spec(objects: Objects) -> dict[str, Any]:
    job = one(objects, "CronJob", "gpu-admission-cert-rotation")["spec"]["jobTemplate"]
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def test_the_rotation_job_renews_the_mounted_secret_for_the_service_when_due(
    base: Objects,
) -> None:
    [rotation] = rotation_pod_spec(base)["containers"]
    cron_job = one(base, "CronJob", "gpu-admission-cert-rotation")["spec"]

    assert rotation["args"] == [
        "certs", "rotate",
        "--namespace", NAMESPACE,
        "--secret", TLS_SECRET,
        "--service", "gpu-admission",
    ]  # fmt: skip
    assert "--force" not in rotation["args"] and "--rotate-ca" not in rotation["args"]
    assert cron_job["concurrencyPolicy"] == "Forbid"
    assert rotation["image"] == container(base)["image"]


def test_the_rotation_job_runs_as_hardened_as_the_service(base: Objects) -> None:
    spec = rotation_pod_spec(base)
    [rotation] = spec["containers"]

    assert spec["securityContext"] == {
        k: v for k, v in pod_spec(base)["securityContext"].items() if k != "fsGroup"
    }
    assert rotation["securityContext"] == container(base)["securityContext"]
    assert spec["restartPolicy"] == "Never"
    assert set(rotation["resources"]["requests"]) == set(rotation["resources"]["limits"])


def test_installs_policy_configmap_carries_the_digest_of_its_policys_webhook_scope() -> None:
    text = default_policy_text().replace(
        "workload: gpu-admission.io/workload", "workload: team.example/class"
    )
    policy = load_policy_text(text, "team.yaml")

    plan = render_install(policy, text, "")

    [config_map] = [o for o in plan.objects if o["kind"] == "ConfigMap"]
    assert config_map["metadata"]["annotations"] == {SCOPE_ANNOTATION: scope_digest(policy)}
    assert config_map["data"]["policy.yaml"] == text


def test_the_webhooks_printed_for_kustomize_say_the_annotation_of_their_policy() -> None:
    policy = load_policy_text(default_policy_text().replace("nvidia.com/gpu ", "amd.com/gpu "), "p")

    note = scope_annotation_note(policy)

    assert f"#       {SCOPE_ANNOTATION}: {scope_digest(policy)}\n" in note
    assert all(line.startswith("#") for line in note.splitlines())


def test_install_sets_its_image_on_the_service_and_the_rotation_job() -> None:
    plan = render_install(load_default_policy(), "policy", "", image="registry.example/ga:1")

    [deployment] = [o for o in plan.objects if o["kind"] == "Deployment"]
    [cron_job] = [o for o in plan.objects if o["kind"] == "CronJob"]
    rotation = cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]] == [
        "registry.example/ga:1"
    ]
    assert [c["image"] for c in rotation] == ["registry.example/ga:1"]


# -- guards (deploy/guards: optional, outside the kustomize tree) ----------------------------

GUARDS = DEPLOY / "guards"


def guard(name: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all((GUARDS / name).read_text("utf-8")) if o]


def gpu_priority_classes() -> list[str]:
    return [c.priority_class.name for c in load_default_policy().classes.values()]


def test_kube_apiserver_limits_exactly_the_policys_priority_classes_to_granted_namespaces() -> None:
    [configuration] = guard("admission-configuration.yaml")
    [plugin] = configuration["plugins"]

    assert (configuration["apiVersion"], configuration["kind"]) == (
        "apiserver.config.k8s.io/v1",
        "AdmissionConfiguration",
    )
    assert plugin["name"] == "ResourceQuota"
    assert plugin["configuration"]["limitedResources"] == [
        {
            "resource": "pods",
            "matchScopes": [
                {"scopeName": "PriorityClass", "operator": "In", "values": gpu_priority_classes()}
            ],
        }
    ]


def test_the_namespace_quota_grants_the_same_classes_without_limiting_them() -> None:
    [quota] = guard("gpu-priority-quota.yaml")

    assert quota["kind"] == "ResourceQuota"
    assert "namespace" not in quota["metadata"]  # applied to each opted-in namespace
    assert "hard" not in quota["spec"]
    assert quota["spec"]["scopeSelector"]["matchExpressions"] == [
        {"scopeName": "PriorityClass", "operator": "In", "values": gpu_priority_classes()}
    ]


def test_the_label_guard_watches_the_policys_opt_in_label_on_namespace_writes() -> None:
    policy, binding = guard("opt-in-label-policy.yaml")
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    key, _ = load_default_policy().namespace_opt_in

    assert variables["key"] == repr(key)
    assert variables["allowedGroups"] == "['system:masters', 'gpu-admission:namespace-admins']"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["namespaces"],
        }
    ]
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_variant_installs_a_guard(rendered: dict[str, Objects], variant: str) -> None:
    kinds = {o["kind"] for o in rendered[variant]}

    assert not kinds & {"ResourceQuota", "ValidatingAdmissionPolicy", "AdmissionConfiguration"}


# -- cert-manager -------------------------------------------------------------------------


def test_cert_manager_issues_the_secret_the_deployment_mounts_for_the_service_name(
    rendered: dict[str, Objects],
) -> None:
    objects = rendered["overlays/cert-manager"]
    certificate = one(objects, "Certificate", "gpu-admission")["spec"]
    tls = next(v for v in pod_spec(objects)["volumes"] if v["name"] == "tls")

    assert certificate["secretName"] == tls["secret"]["secretName"] == TLS_SECRET
    assert "gpu-admission.gpu-admission.svc" in certificate["dnsNames"]
    assert "server auth" in certificate["usages"]
    assert certificate["issuerRef"] == {"kind": "Issuer", "name": "gpu-admission-ca"}


def hours(duration: str) -> int:
    assert duration.endswith("h"), duration
    return int(duration.removesuffix("h"))


def test_cert_manager_signs_with_a_ca_that_keeps_its_key_and_outlives_a_serving_renewal(
    rendered: dict[str, Objects],
) -> None:
    objects = rendered["overlays/cert-manager"]
    ca = one(objects, "Certificate", "gpu-admission-ca")["spec"]
    issuer = one(objects, "Issuer", "gpu-admission-ca")["spec"]

    serving = one(objects, "Certificate", "gpu-admission")["spec"]
    serving_renewed_every = hours(serving["duration"]) - hours(serving["renewBefore"])

    assert ca["isCA"] is True
    assert ca["privateKey"]["rotationPolicy"] == "Never"
    # The injected bundle is the serving Secret's ca.crt: it must move to a renewed
    # CA (at the next serving renewal) before the old CA certificate expires.
    assert hours(ca["renewBefore"]) > serving_renewed_every
    assert ca["issuerRef"] == {"kind": "Issuer", "name": "gpu-admission-selfsigned"}
    assert issuer == {"ca": {"secretName": ca["secretName"]}}
    assert one(objects, "Issuer", "gpu-admission-selfsigned")["spec"] == {"selfSigned": {}}


def test_cert_manager_injects_the_ca_of_the_serving_certificate_into_both_webhooks(
    rendered: dict[str, Objects],
) -> None:
    objects = rendered["overlays/cert-manager"]
    certificate = one(objects, "Certificate", "gpu-admission")["metadata"]
    source = f"{certificate['namespace']}/{certificate['name']}"

    for configuration in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one(objects, configuration)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": source}
