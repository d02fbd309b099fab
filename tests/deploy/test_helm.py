"""The Helm chart in deploy/helm/gpu-admission, rendered by the real helm, against the
kustomize tree rendered by the real kubectl.

Both binaries are the ones the end-to-end harness builds (tests/e2e/build_controlplane.py);
without them these tests skip, and fail under GPU_ADMISSION_E2E=required. With default
values `helm template` renders the objects `kubectl kustomize deploy/` does, but for the
differences deploy/README.md lists (and `normalized` below undoes, one by one).
tests/e2e/test_helm.py installs, upgrades and uninstalls the chart on a real kube-apiserver.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from tests.e2e.build_controlplane import (
    GoToolchainMissing,
    bin_dir,
    ensure_binaries,
    pinned_kubernetes_version,
)
from webhook.engine.handlers import HANDLERS
from webhook.install.chart import CHART, short_name
from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.install.flow_control import tenant_write_rules
from webhook.install.manifests import SYNC_COMMAND, chart_files
from webhook.install.scope import SCOPE_ANNOTATION, scope_digest
from webhook.policy import load_default_policy
from webhook.policy.load import default_policy_text, load_policy_text
from webhook.tls.pki import certificates_from_pem
from webhook.tls.secret_layout import ca_from_secret

REPOSITORY = Path(__file__).resolve().parents[2]
DEPLOY = REPOSITORY / "deploy"
CHART_DIR = DEPLOY / CHART
NAMESPACE = "gpu-admission"
SERVICE_DNS = f"gpu-admission.{NAMESPACE}.svc"
HELM_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
}

Objects = list[dict[str, Any]]


def built(name: str) -> Path:
    """A binary the e2e harness builds; built here only when e2e is required."""
    binary = bin_dir() / name
    if binary.is_file():
        return binary
    if os.environ.get("GPU_ADMISSION_E2E", "").strip().lower() != "required":
        pytest.skip(f"no {name} at {binary}; `python -m tests.e2e.build_controlplane` builds it")
    try:
        return ensure_binaries() / name
    except GoToolchainMissing as error:
        pytest.fail(f"GPU_ADMISSION_E2E=required but {error}", pytrace=False)


@pytest.fixture(scope="module")
def helm() -> Path:
    return built("helm")


@pytest.fixture(scope="module")
def kubectl() -> Path:
    return built("kubectl")


def run(command: list[str | Path], check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command; `helm template` and `helm lint` render for the release the tests run
    on (without a cluster, Helm 3 assumes v1.20, which the chart's kubeVersion refuses)."""
    words = [str(c) for c in command]
    if len(words) > 1 and Path(words[0]).name == "helm" and words[1] in ("template", "lint"):
        words += ["--kube-version", pinned_kubernetes_version()]
    result = subprocess.run(words, capture_output=True, text=True, timeout=120, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, command))} failed:\n{result.stderr}")
    return result


def template(helm: Path, *args: str) -> Objects:
    output = run([helm, "template", "gpu-admission", CHART_DIR, "--namespace", NAMESPACE, *args])
    return [o for o in yaml.safe_load_all(output.stdout) if o]


def sets(*assignments: str) -> list[str]:
    """`--set` before each of `assignments`."""
    return [arg for assignment in assignments for arg in ("--set", assignment)]


def kustomize(kubectl: Path, directory: Path) -> Objects:
    output = run([kubectl, "kustomize", directory])
    return [o for o in yaml.safe_load_all(output.stdout) if o]


def by_key(objects: Objects) -> dict[tuple[str, str], dict[str, Any]]:
    keyed = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert len(keyed) == len(objects), "two objects share a kind and a name"
    return keyed


def one(objects: Objects, kind: str, name: str = "gpu-admission") -> dict[str, Any]:
    return by_key(objects)[(kind, name)]


def normalized(chart: Objects, kustomized: Objects) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """Both renderings with the documented differences taken out."""
    chart = copy.deepcopy(chart)
    kustomized = copy.deepcopy(kustomized)
    # 1. The chart does not create its namespace (Helm installs into an existing one).
    kustomized = [o for o in kustomized if o["kind"] != "Namespace"]
    # 2. The chart makes the certificate Secrets `gpu-admission install` makes.
    chart = [o for o in chart if o["kind"] != "Secret"]
    for obj in chart:
        # 3. Helm's labels, on the objects' metadata only (never on a selector).
        labels = obj["metadata"].get("labels", {})
        for label in HELM_LABELS:
            labels.pop(label, None)
        # 4. The caBundle the chart fills in.
        for hook in obj.get("webhooks", []):
            hook["clientConfig"].pop("caBundle", None)
        # 5. The policy's checksum rolls the Deployment, where kustomize hashes the name.
        if obj["kind"] == "Deployment":
            del obj["spec"]["template"]["metadata"]["annotations"]["checksum/policy"]
            if not obj["spec"]["template"]["metadata"]["annotations"]:
                del obj["spec"]["template"]["metadata"]["annotations"]
    # 6. The chart's quota for its replicas' priority class (values: priorityClassQuota).
    chart = [o for o in chart if o["kind"] != "ResourceQuota"]
    # 7. The chart's `helm test` pod.
    chart = [o for o in chart if o["metadata"].get("annotations", {}).get("helm.sh/hook") != "test"]
    for obj in kustomized:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"].startswith(
            "gpu-admission-policy-"
        ):
            obj["metadata"]["name"] = "gpu-admission-policy"
        if obj["kind"] == "Deployment":
            for volume in obj["spec"]["template"]["spec"]["volumes"]:
                if "configMap" in volume:
                    volume["configMap"]["name"] = "gpu-admission-policy"
    return by_key(chart), by_key(kustomized)


# -- the chart as a chart ---------------------------------------------------------


def test_helm_lint_passes_strict(helm: Path) -> None:
    result = run([helm, "lint", "--strict", CHART_DIR, "--namespace", NAMESPACE])

    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("generated", chart_files(DEPLOY), ids=lambda g: str(g.path))
def test_each_generated_file_of_the_chart_is_what_the_package_generates(generated: Any) -> None:
    path = DEPLOY / generated.path

    assert path.is_file(), f"{path} is missing: run `{SYNC_COMMAND}` in the repository root"
    assert path.read_text("utf-8") == generated.text, f"{path} is stale: run `{SYNC_COMMAND}`"


def test_the_app_version_is_the_packages_version() -> None:
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]

    assert chart["appVersion"] == project["version"]


def test_artifact_hub_reads_the_license_category_and_the_image_of_the_app_version() -> None:
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    annotations = chart["annotations"]

    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    assert annotations["artifacthub.io/category"] in {
        "ai-machine-learning", "database", "integration-delivery", "monitoring-logging",
        "networking", "security", "storage", "streaming-messaging", "skip-prediction",
    }  # fmt: skip
    (image,) = yaml.safe_load(annotations["artifacthub.io/images"])
    assert image == {"name": "gpu-admission", "image": f"gpu-admission:{chart['appVersion']}"}
    assert (
        annotations["artifacthub.io/prerelease"] == str(chart["version"].startswith("0.")).lower()
    )


def test_the_default_scope_label_is_the_policys_and_the_default_scope_carries_it() -> None:
    """The opt-in label is the policy's: the values leave it unset, and the scope rendered
    from the default policy (files/webhook-scope.json) holds it."""
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    scope = json.loads((CHART_DIR / "files" / "webhook-scope.json").read_text())
    key, value = load_default_policy().namespace_opt_in

    assert values["scope"]["namespaceLabel"] == {}
    assert scope["namespaceOptIn"] == {"key": key, "value": value}


def test_the_values_comment_lists_every_webhook_the_chart_renders() -> None:
    """values.yaml names the per-webhook keys: the list must be the registry's."""
    text = (CHART_DIR / "values.yaml").read_text()
    start = text.index("# Per webhook, by the first label of its name")
    listed = text[start : text.index("# Unset:", start)]
    names = {
        word.strip(" ,.#\n")
        for line in listed.splitlines()[2:]
        for word in line.lstrip("# ").split(",")
        if word.strip(" ,.#\n")
    }

    assert names == {short_name(h.webhook_name) for h in HANDLERS.installed()}


# -- equivalence with the kustomize tree -------------------------------------------


def test_default_values_render_what_kustomize_renders_but_the_documented_differences(
    helm: Path, kubectl: Path
) -> None:
    chart, kustomized = normalized(template(helm), kustomize(kubectl, DEPLOY))

    assert sorted(chart) == sorted(kustomized)
    for key, obj in kustomized.items():
        assert chart[key] == obj, key


def test_cert_manager_mode_renders_what_the_cert_manager_overlay_renders(
    helm: Path, kubectl: Path
) -> None:
    chart, kustomized = normalized(
        template(helm, "--set", "certificates.mode=certManager"),
        kustomize(kubectl, DEPLOY / "overlays" / "cert-manager"),
    )

    assert sorted(chart) == sorted(kustomized)
    for key, obj in kustomized.items():
        assert chart[key] == obj, key


def test_monitoring_renders_the_objects_of_deploy_monitoring(helm: Path) -> None:
    objects = template(
        helm, *sets("monitoring.serviceMonitor.enabled=true", "monitoring.alerts.enabled=true")
    )
    chart, _ = normalized(objects, [])

    for name, kind in (
        ("servicemonitor.yaml", "ServiceMonitor"),
        ("alerts.yaml", "PrometheusRule"),
    ):
        expected = yaml.safe_load((DEPLOY / "monitoring" / name).read_text())
        assert chart[(kind, "gpu-admission")] == expected


def test_monitoring_is_off_by_default(helm: Path) -> None:
    kinds = {o["kind"] for o in template(helm)}

    assert not kinds & {"ServiceMonitor", "PrometheusRule"}


# -- values -----------------------------------------------------------------------------


def webhooks(objects: Objects) -> dict[str, dict[str, Any]]:
    return {
        hook["name"]: hook
        for obj in objects
        if obj["kind"].endswith("WebhookConfiguration")
        for hook in obj["webhooks"]
    }


def test_failure_policy_and_timeout_are_set_per_webhook_by_the_first_label_of_its_name(
    helm: Path,
) -> None:
    hooks = webhooks(
        template(
            helm,
            *sets(
                "webhooks.failurePolicy.validate-workloads=Ignore",
                "webhooks.timeoutSeconds.mutate=7",
            ),
        )
    )
    defaults = webhooks(template(helm))

    for name, hook in hooks.items():
        changed_policy = short_name(name) == "validate-workloads"
        changed_timeout = short_name(name) == "mutate"
        assert hook["failurePolicy"] == (
            "Ignore" if changed_policy else defaults[name]["failurePolicy"]
        )
        assert hook["timeoutSeconds"] == (7 if changed_timeout else 3)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        # values.schema.json
        ("webhooks.failurePolicy.mutate=Open", "/webhooks/failurePolicy/mutate"),
        ("webhooks.timeoutSeconds.validate=31", "/webhooks/timeoutSeconds/validate"),
        ("certificates.mode=vault", "/certificates/mode"),
        ("replica=2", "additional properties 'replica' not allowed"),
        # the templates: the webhooks are known only to the generated template
        ("webhooks.failurePolicy.mutat=Ignore", "webhooks.failurePolicy.mutat: no such webhook"),
    ],
)
def test_a_wrong_value_is_refused_with_a_message_naming_it(
    helm: Path, setting: str, message: str
) -> None:
    result = run([helm, "template", "gpu-admission", CHART_DIR, "--set", setting], check=False)

    assert result.returncode != 0
    assert message in result.stderr


TEAM_POLICY = REPOSITORY / "policies" / "examples" / "acme.yaml"


def test_scope_sets_every_webhooks_namespace_selector_and_always_excludes_its_own(
    helm: Path, tmp_path: Path
) -> None:
    """The policy's opt-in label, then the team's own expressions, then the exclusions."""
    scope = sets(
        "scope.matchExpressions[0].key=team.example.com/tier",
        "scope.matchExpressions[0].operator=In",
        "scope.matchExpressions[0].values={prod}",
        "scope.excludedNamespaces={batch-legacy}",
    )
    values = helm_values(TEAM_POLICY, tmp_path)
    hooks = webhooks(template(helm, "--namespace", "platform", "-f", str(values), *scope))

    policy = hooks.pop("validate-policy.gpu-admission.io")  # the release's own namespace only
    assert policy["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["platform"]}
        ]
    }
    for hook in hooks.values():
        assert hook["namespaceSelector"] == {
            "matchExpressions": [
                {"key": "team.example.com/gpu-enabled", "operator": "In", "values": ["yes"]},
                {"key": "team.example.com/tier", "operator": "In", "values": ["prod"]},
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", "kube-node-lease", "batch-legacy", "platform"],
                },
            ]
        }
        assert hook["clientConfig"]["service"]["namespace"] == "platform"


def test_one_webhooks_own_expressions_narrow_its_selector_alone(helm: Path) -> None:
    """webhooks.matchExpressions.<first label>: after the scope's, before the exclusions."""
    own = {"key": "team.example.com/autoscaled", "operator": "Exists"}
    hooks = webhooks(
        template(
            helm,
            "--set-json",
            f"webhooks.matchExpressions={json.dumps({'warn-autoscalers': [own]})}",
        )
    )

    narrowed = hooks.pop("warn-autoscalers.gpu-admission.io")["namespaceSelector"]
    others = {e["key"] for h in hooks.values() for e in h["namespaceSelector"]["matchExpressions"]}
    assert narrowed["matchExpressions"][1] == own
    assert narrowed["matchExpressions"][2]["key"] == "kubernetes.io/metadata.name"
    assert own["key"] not in others


@pytest.mark.parametrize(
    ("webhook", "reason"),
    [
        ("validate-policy", "that webhook selects the release's namespace only"),
        ("validate-bindings", "no such webhook"),
    ],
)
def test_own_expressions_for_a_webhook_of_no_opted_in_namespace_are_refused(
    helm: Path, webhook: str, reason: str
) -> None:
    expressions = {webhook: [{"key": "a", "operator": "Exists"}]}
    refused = run(
        [
            helm, "template", "gpu-admission", CHART_DIR,
            "--set-json", f"webhooks.matchExpressions={json.dumps(expressions)}",
        ],
        check=False,
    )  # fmt: skip

    assert refused.returncode != 0
    assert f"webhooks.matchExpressions.{webhook}: {reason}" in refused.stderr


def test_a_scope_label_other_than_the_policys_is_refused_naming_both(helm: Path) -> None:
    refused = run(
        [
            helm,
            "template",
            "gpu-admission",
            CHART_DIR,
            *sets("scope.namespaceLabel.key=example.com/gpu", "scope.namespaceLabel.value=on"),
        ],
        check=False,
    )
    same = template(
        helm,
        "--set-string",
        "scope.namespaceLabel.key=gpu-admission.io/enabled,scope.namespaceLabel.value=true",
    )

    assert refused.returncode != 0
    assert (
        "scope.namespaceLabel example.com/gpu=on is not the policy's namespaceOptIn "
        "gpu-admission.io/enabled=true" in refused.stderr
    )
    assert (
        webhooks(same)["validate.gpu-admission.io"]["namespaceSelector"]["matchExpressions"][0][
            "key"
        ]
        == "gpu-admission.io/enabled"
    )


def test_the_priority_classes_are_the_policys_with_its_values_and_preemption(
    helm: Path, tmp_path: Path
) -> None:
    objects = template(helm, "-f", str(helm_values(TEAM_POLICY, tmp_path)))

    classes = {
        o["metadata"]["name"]: (o["value"], o["preemptionPolicy"], o["globalDefault"])
        for o in objects
        if o["kind"] == "PriorityClass"
    }
    assert classes == {
        "acme-inference": (500000, "PreemptLowerPriority", False),
        "acme-training": (200, "Never", False),
    }


def test_a_scope_printed_by_an_older_chart_version_is_refused_with_the_command(
    helm: Path, tmp_path: Path
) -> None:
    """A webhookScope without the opt-in label and classes (as printed before they were
    part of it) would render webhooks acting nowhere: it is printed again instead."""
    values = yaml.safe_load(helm_values(TEAM_POLICY, tmp_path).read_text())
    del values["webhookScope"]["namespaceOptIn"]
    old = tmp_path / "old-values.yaml"
    old.write_text(yaml.safe_dump(values), "utf-8")

    refused = run([helm, "template", "gpu-admission", CHART_DIR, "-f", old], check=False)

    assert refused.returncode != 0
    assert "webhookScope holds no namespaceOptIn" in refused.stderr


def test_a_url_replaces_the_service_in_every_webhook(helm: Path) -> None:
    hooks = webhooks(template(helm, "--set", "webhooks.url=https://10.1.2.3:9443/"))

    assert len(hooks) == len(HANDLERS.installed())
    for name, hook in hooks.items():
        assert "service" not in hook["clientConfig"]
        path = HANDLERS.named(name.split(".")[0]).path
        assert hook["clientConfig"]["url"] == f"https://10.1.2.3:9443{path}"


def test_image_replicas_resources_and_priority_class_are_values(helm: Path) -> None:
    objects = template(
        helm,
        *sets(
            "image.repository=registry.example/gpu-admission",
            "image.tag=1.2.3",
            "image.pullPolicy=Always",
            "replicas=5",
            "resources.limits.memory=512Mi",
            "priorityClassName=platform-critical",
        ),
    )
    deployment = one(objects, "Deployment")
    [serve] = deployment["spec"]["template"]["spec"]["containers"]
    rotation = one(objects, "CronJob", "gpu-admission-cert-rotation")
    [rotate] = rotation["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]

    assert deployment["spec"]["replicas"] == 5
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "platform-critical"
    assert serve["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    for container in (serve, rotate):
        assert container["image"] == "registry.example/gpu-admission:1.2.3"
        assert container["imagePullPolicy"] == "Always"


def test_the_pdb_priority_classes_and_network_policy_can_be_left_out(helm: Path) -> None:
    objects = template(
        helm,
        *sets(
            "podDisruptionBudget.enabled=false",
            "priorityClasses.create=false",
            "networkPolicy.enabled=false",
        ),
    )

    kinds = {o["kind"] for o in objects}
    assert not kinds & {"PodDisruptionBudget", "PriorityClass", "NetworkPolicy"}


def test_the_tenants_flow_control_can_be_tuned_or_left_out(helm: Path) -> None:
    tuned = template(
        helm,
        *sets(
            "flowControl.nominalConcurrencyShares=40",
            "flowControl.queues=128",
            "flowControl.handSize=8",
            "flowControl.queueLengthLimit=100",
            "flowControl.matchingPrecedence=1200",
        ),
    )
    left_out = template(helm, *sets("flowControl.enabled=false"))

    [level] = [o for o in tuned if o["kind"] == "PriorityLevelConfiguration"]
    [schema] = [o for o in tuned if o["kind"] == "FlowSchema"]
    assert level["spec"]["limited"]["nominalConcurrencyShares"] == 40
    assert level["spec"]["limited"]["limitResponse"]["queuing"] == {
        "queues": 128,
        "handSize": 8,
        "queueLengthLimit": 100,
    }
    assert schema["spec"]["matchingPrecedence"] == 1200
    assert schema["spec"]["distinguisherMethod"] == {"type": "ByNamespace"}
    assert "namespace" not in level["metadata"] and "namespace" not in schema["metadata"]
    assert not {o["kind"] for o in left_out} & {"FlowSchema", "PriorityLevelConfiguration"}


def test_the_flow_control_shapes_every_write_the_policys_webhooks_are_sent(helm: Path) -> None:
    [schema] = [o for o in template(helm) if o["kind"] == "FlowSchema"]

    rules = schema["spec"]["rules"][0]["resourceRules"]
    assert rules == tenant_write_rules(load_default_policy())


def helm_values(policy: Path, tmp_path: Path) -> Path:
    """What `gpu-admission manifests helm-values --policy POLICY` prints, as a file."""
    values = tmp_path / f"{policy.stem}-values.yaml"
    printed = run(
        [sys.executable, "-m", "webhook.cli", "manifests", "helm-values", "--policy", policy]
    )
    values.write_text(printed.stdout, "utf-8")
    return values


def test_a_policy_file_replaces_the_default_and_rolls_the_replicas(
    helm: Path, tmp_path: Path
) -> None:
    policy = REPOSITORY / "policies" / "overflow.yaml"
    default = template(helm)
    objects = template(helm, "-f", str(helm_values(policy, tmp_path)))

    config_map = one(objects, "ConfigMap", "gpu-admission-policy")
    assert config_map["data"]["policy.yaml"].strip() == policy.read_text().strip()

    def checksum(rendered: Objects) -> str:
        annotations = one(rendered, "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/policy"])

    assert checksum(objects) != checksum(default)


def test_the_webhooks_select_the_pods_of_the_policy_given_not_the_default_ones(
    helm: Path, tmp_path: Path
) -> None:
    """A platform team's policy of its own labels: the webhooks follow them."""
    text = default_policy_text().replace(
        "workload: gpu-admission.io/workload", "workload: team.example/class", 1
    )
    policy = tmp_path / "team.yaml"
    policy.write_text(text, "utf-8")

    objects = template(helm, "-f", str(helm_values(policy, tmp_path)))

    expected = render_webhook_configurations(
        load_policy_text(text, "team.yaml"), Endpoint(ca_bundle="", url="https://x")
    )
    for kind, configuration in zip(
        ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"), expected, strict=True
    ):
        rendered = {h["name"]: h for h in one(objects, kind)["webhooks"]}
        for hook in configuration["webhooks"]:
            for field in ("rules", "objectSelector", "matchConditions"):
                assert rendered[hook["name"]].get(field) == hook.get(field), (hook["name"], field)
    selectors = json.dumps(
        [one(objects, "MutatingWebhookConfiguration")["webhooks"][0]["objectSelector"]]
    )
    assert "team.example/class" in selectors and "gpu-admission.io/workload" not in selectors


def test_the_policy_configmap_carries_the_digest_of_the_default_policys_webhook_scope(
    helm: Path,
) -> None:
    config_map = one(template(helm), "ConfigMap", "gpu-admission-policy")

    annotation = config_map["metadata"]["annotations"][SCOPE_ANNOTATION]
    assert annotation == scope_digest(load_default_policy())


def test_the_policy_configmap_carries_the_digest_of_its_own_policys_webhook_scope(
    helm: Path, tmp_path: Path
) -> None:
    """Computed by the chart from the webhookScope value as `gpu-admission` computes it,
    CEL's `&&` and `>` included."""
    text = (
        default_policy_text()
        .replace("workload: gpu-admission.io/workload", "workload: team.example/class", 1)
        .replace("gpu: nvidia.com/gpu ", "gpu: amd.com/gpu ", 1)
    )
    policy = tmp_path / "team.yaml"
    policy.write_text(text, "utf-8")

    objects = template(helm, "-f", str(helm_values(policy, tmp_path)))

    annotation = one(objects, "ConfigMap", "gpu-admission-policy")["metadata"]["annotations"]
    expected = scope_digest(load_policy_text(text, "team.yaml"))
    assert annotation[SCOPE_ANNOTATION] == expected
    assert expected != scope_digest(load_default_policy())


def test_a_policy_given_without_the_scope_of_its_webhooks_is_refused_with_the_command(
    helm: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "team.yaml"
    policy.write_text(
        default_policy_text().replace("gpu-admission.io/workload", "team.example/class")
    )

    refused = run(
        [helm, "template", "gpu-admission", CHART_DIR, "--set-file", f"policy={policy}"],
        check=False,
    )

    assert refused.returncode != 0
    assert "gpu-admission manifests helm-values --policy FILE" in refused.stderr


def test_a_scope_of_another_policy_is_refused(helm: Path, tmp_path: Path) -> None:
    """The overflow policy's scope does not go with another policy's text."""
    values = helm_values(REPOSITORY / "policies" / "overflow.yaml", tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text(
        default_policy_text().replace("gpu-admission.io/workload", "team.example/class")
    )

    refused = run(
        [
            helm,
            "template",
            "gpu-admission",
            CHART_DIR,
            "-f",
            values,
            "--set-file",
            f"policy={other}",
        ],
        check=False,
    )

    assert refused.returncode != 0
    assert "needs webhook configurations rendered from it" in refused.stderr


# -- self-generated certificates ---------------------------------------------------------


def secret(objects: Objects, name: str) -> dict[str, bytes]:
    data = one(objects, "Secret", name)["data"]
    return {key: base64.b64decode(value) for key, value in data.items()}


def test_the_ca_bundle_verifies_the_generated_serving_certificate_for_the_service(
    helm: Path,
) -> None:
    objects = template(helm)
    serving = secret(objects, "gpu-admission-tls")
    leaf = x509.load_pem_x509_certificate(serving["tls.crt"])

    for hook in webhooks(objects).values():
        trusted = certificates_from_pem(base64.b64decode(hook["clientConfig"]["caBundle"]))
        verifier = (
            PolicyBuilder().store(Store(trusted)).build_server_verifier(x509.DNSName(SERVICE_DNS))
        )
        verifier.verify(leaf, [])


def test_the_generated_ca_is_one_certs_rotate_can_issue_the_next_leaf_with(helm: Path) -> None:
    objects = template(helm)

    ca = ca_from_secret(secret(objects, "gpu-admission-tls-ca"))

    assert secret(objects, "gpu-admission-tls")["ca.crt"] == ca.cert_pem()
    assert one(objects, "Secret", "gpu-admission-tls")["type"] == "kubernetes.io/tls"


def test_extra_names_and_addresses_go_into_the_serving_certificate(helm: Path) -> None:
    objects = template(
        helm,
        *sets(
            "certificates.selfSigned.extraIPAddresses={127.0.0.1}",
            "certificates.selfSigned.extraDNSNames={webhook.example}",
        ),
    )
    leaf = x509.load_pem_x509_certificate(secret(objects, "gpu-admission-tls")["tls.crt"])
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value

    assert "webhook.example" in names.get_values_for_type(x509.DNSName)
    assert SERVICE_DNS in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_cert_manager_mode_makes_no_secret_and_no_ca_bundle(helm: Path) -> None:
    objects = template(helm, "--set", "certificates.mode=certManager")

    assert "Secret" not in {o["kind"] for o in objects}
    for hook in webhooks(objects).values():
        assert "caBundle" not in hook["clientConfig"]


# -- audit -------------------------------------------------------------------------------


def serve_args(objects: Objects) -> list[str]:
    [serve] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return list(serve["args"])


@pytest.mark.parametrize(("value", "expected"), [("10m", "10m"), ("0", "0")])
def test_the_audit_interval_is_passed_to_serve_and_zero_turns_it_off(
    helm: Path, value: str, expected: str
) -> None:
    args = serve_args(template(helm, *sets(f"audit.interval={value}")))

    assert args[args.index("--audit-interval") + 1] == expected


def test_serve_is_told_the_namespace_it_runs_in_from_the_downward_api(helm: Path) -> None:
    """The namespace the webhooks never cover, which the audit skips too; the default
    values render what kustomize renders, so the base sets it alike."""
    deployment = one(template(helm, "--namespace", "platform"), "Deployment")
    [serve] = deployment["spec"]["template"]["spec"]["containers"]

    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in serve["env"]  # fmt: skip


def test_the_policy_report_crd_is_the_one_of_deploy_audit_when_asked_for(
    helm: Path, kubectl: Path
) -> None:
    default = template(helm)
    objects = template(helm, *sets("audit.policyReportCRD.create=true"))
    chart, _ = normalized(objects, [])
    [expected] = kustomize(kubectl, DEPLOY / "audit")

    assert "CustomResourceDefinition" not in {o["kind"] for o in default}
    assert chart[("CustomResourceDefinition", expected["metadata"]["name"])] == expected


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("webhooks.failurePolicy.mutate=Open", "must be Fail or Ignore"),
        ("webhooks.timeoutSeconds.validate=31", "must be 1 to 30"),
        ("certificates.mode=vault", "certificates.mode must be selfSigned or certManager"),
    ],
)
def test_without_the_schema_the_templates_refuse_the_same_values(
    helm: Path, setting: str, message: str
) -> None:
    command: list[str | Path] = [
        helm,
        "template",
        "gpu-admission",
        CHART_DIR,
        "--skip-schema-validation",
    ]

    result = run([*command, "--set", setting], check=False)

    assert result.returncode != 0
    assert message in result.stderr


TEST_POD_LABELS = {"app.kubernetes.io/name": "gpu-admission", "app.kubernetes.io/component": "test"}


def webhook_port_rule(objects: Objects) -> dict[str, Any]:
    """The ingress rule of the replicas' NetworkPolicy that opens the webhook port."""
    rules = one(objects, "NetworkPolicy")["spec"]["ingress"]
    (rule,) = [r for r in rules if r["ports"] == [{"port": "https", "protocol": "TCP"}]]
    return dict(rule)


def test_by_default_the_webhook_port_admits_every_source(helm: Path) -> None:
    assert "from" not in webhook_port_rule(template(helm))


def test_webhook_sources_admit_the_webhook_port_from_those_addresses_only(helm: Path) -> None:
    objects = template(helm, *sets("networkPolicy.webhookSources={10.0.0.10/32,fd00::10/128}"))

    assert webhook_port_rule(objects)["from"] == [
        {"ipBlock": {"cidr": "10.0.0.10/32"}},
        {"ipBlock": {"cidr": "fd00::10/128"}},
        # `helm test`'s pod, of the release's namespace alone (no namespaceSelector).
        {"podSelector": {"matchLabels": TEST_POD_LABELS}},
    ]
    metrics_rule = one(objects, "NetworkPolicy")["spec"]["ingress"][1]
    assert metrics_rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]


def test_a_webhook_source_that_is_not_a_cidr_is_refused(helm: Path) -> None:
    result = run(
        [
            helm,
            "template",
            "gpu-admission",
            CHART_DIR,
            "--set",
            "networkPolicy.webhookSources={kube-apiserver}",
        ],
        check=False,
    )

    assert result.returncode != 0
    assert "webhookSources" in result.stderr


def test_helm_test_asks_each_webhook_through_the_service_trusting_the_ca(helm: Path) -> None:
    objects = template(helm)
    (pod,) = [
        o for o in objects if o["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"
    ]
    (container,) = pod["spec"]["containers"]

    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "test"
    assert container["env"] == [
        {"name": "WEBHOOKS", "value": f"https://gpu-admission.{NAMESPACE}.svc:443"},
        {"name": "SERVICE_LINK", "value": "GPU_ADMISSION_SERVICE_HOST"},
    ]
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == "gpu-admission-tls"
    assert (
        container["image"]
        == one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    )
    script = container["args"][0]
    compile(script, "helm-test", "exec")  # the script is Python the image can run
    assert '("/mutate", "/validate-unclassed")' in script


def test_kube_apiservers_addresses_are_the_ones_the_service_never_paces(helm: Path) -> None:
    objects = template(helm, *sets("networkPolicy.webhookSources={10.0.0.10/32,10.0.0.11/32}"))

    args = serve_args(objects)
    assert args.count("--apiserver-source") == 2
    assert args[args.index("--apiserver-source") + 1] == "10.0.0.10/32"
    assert "--apiserver-source" not in serve_args(template(helm))
