"""The Helm chart's values a platform team sets around the service: where the replicas run
(nodeSelector, tolerations, affinity, topologySpreadConstraints, hostNetwork), what their
pods carry (podAnnotations, podLabels, imagePullSecrets, probes, grace period), the image's
registry, how they roll and are drained (updateStrategy, revisionHistoryLimit,
podDisruptionBudget), the quota their priority class may need, labels on every object
(commonLabels), the Service's annotations, objects of the team's own (extraObjects), the
Prometheus Operator objects' labels, annotations, namespace and scrape settings, the
alerts' labels and runbook links, and a release in a namespace of its own choosing.

Rendered by the real helm (`helm template`, `helm lint --strict`), as tests/deploy/test_helm.py
does; the objects' equivalence with the kustomize tree is that file's.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from tests.deploy.test_helm import CHART_DIR, Objects, built, one, run, sets, template

RELEASE_NAMESPACE = "platform-admission"
SELECTOR = {"app.kubernetes.io/name": "gpu-admission", "app.kubernetes.io/component": "webhook"}

DIGEST = "sha256:" + "0123456789abcdef" * 4
IMAGE = f"registry.example.com/platform/gpu-admission@{DIGEST}"
EGRESS_POLICY = """\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: gpu-admission-egress
  namespace: {{ include "gpu-admission.namespace" . }}
  labels:
    {{- include "gpu-admission.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "gpu-admission.selectorLabels" . | nindent 6 }}
  policyTypes: [Egress]
  egress:
    # DNS, kube-apiserver and the corporate proxy (extraEnv's HTTPS_PROXY).
    - ports:
        - {port: 53, protocol: UDP}
        - {port: 53, protocol: TCP}
        - {port: 443, protocol: TCP}
        - {port: 6443, protocol: TCP}
        - {port: 3128, protocol: TCP}
"""
ONCALL_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "RoleBinding",
    "metadata": {"name": "gpu-admission-oncall", "namespace": "platform-admission"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
    "subjects": [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-platform-oncall"}
    ],
}
EVERY_VALUE: dict[str, Any] = {
    "global": {"imageRegistry": "registry.example"},  # an umbrella chart's: accepted
    # where the release's own namespace is not the objects' (the tests install into it too)
    "namespaceOverride": RELEASE_NAMESPACE,
    "image": {
        "registry": "registry.example.com",
        "repository": "platform/gpu-admission",
        "digest": DIGEST,
    },
    "commonLabels": {"team": "ml-platform"},
    "service": {"annotations": {"argocd.argoproj.io/sync-wave": "-1"}},
    "hostNetwork": True,
    # Where each replica holds its node's ports, a rollout frees a node before it fills one.
    "updateStrategy": {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    },
    "revisionHistoryLimit": 10,
    "readinessProbe": {"timeoutSeconds": 3},
    "livenessProbe": {"timeoutSeconds": 5, "failureThreshold": 5},
    "terminationGracePeriodSeconds": 45,
    "extraObjects": [EGRESS_POLICY, ONCALL_BINDING],
    "serviceAccount": {
        "create": True,
        "name": "admission-webhook",
        "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/webhook"},
    },
    "logLevel": "debug",
    "extraArgs": ["--new-connections-per-source", "100"],
    "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}],
    "extraVolumes": [{"name": "corporate-ca", "configMap": {"name": "corporate-ca"}}],
    "extraVolumeMounts": [
        {"name": "corporate-ca", "mountPath": "/etc/ssl/corporate", "readOnly": True}
    ],
    "podSecurityContext": {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    },
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    },
    "webhooks": {
        "annotations": {"argocd.argoproj.io/sync-options": "ServerSideApply=true"},
        "matchExpressions": {
            "warn-autoscalers": [{"key": "team.example.com/autoscaled", "operator": "Exists"}]
        },
    },
    "imagePullSecrets": [{"name": "registry-credentials"}],
    "priorityClassName": "platform-critical",
    "priorityClassQuota": {"enabled": True, "limitedClasses": ["platform-critical"]},
    "nodeSelector": {"node-role.example.com/system": "true"},
    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                        ]
                    }
                ]
            }
        }
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "minDomains": 2,
        }
    ],
    "podAnnotations": {"example.com/owner": "platform"},
    "podLabels": {"team": "platform", "example.com/cost-center": "ml-1234"},
    "podDisruptionBudget": {"enabled": True, "minAvailable": None, "maxUnavailable": 1},
    "monitoring": {
        "serviceMonitor": {
            "enabled": True,
            "labels": {"release": "kube-prometheus-stack"},
            "annotations": {"example.com/owner": "platform"},
            "namespace": "monitoring",
            "interval": "15s",
            "scrapeTimeout": "10s",
            "relabelings": [
                {"targetLabel": "cluster", "replacement": "gpu-prod-eu", "action": "replace"}
            ],
            "metricRelabelings": [
                {"sourceLabels": ["__name__"], "regex": "gpu_admission_.*", "action": "keep"}
            ],
        },
        "alerts": {
            "enabled": True,
            "labels": {"release": "kube-prometheus-stack"},
            "annotations": {"example.com/owner": "platform"},
            "namespace": "monitoring",
            "additionalRuleLabels": {"team": "ml-platform"},
        },
        "runbookBaseUrl": "https://github.com/example/gpu-admission/blob/main/docs/runbooks/",
    },
}
MONITORING_NAMESPACE = EVERY_VALUE["monitoring"]["serviceMonitor"]["namespace"]


@pytest.fixture(scope="module")
def helm() -> Path:
    return built("helm")


@pytest.fixture
def every_value(tmp_path: Path) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(EVERY_VALUE))
    return path


def refused(helm: Path, *args: str) -> str:
    """stderr of a `helm template` that must fail."""
    result = run([helm, "template", "gpu-admission", CHART_DIR, *args], check=False)
    assert result.returncode != 0, "the chart rendered"
    return result.stderr


def pod_spec(objects: Objects) -> dict[str, Any]:
    return dict(one(objects, "Deployment")["spec"]["template"]["spec"])


def rotation_pod(objects: Objects) -> dict[str, Any]:
    cron_job = one(objects, "CronJob", "gpu-admission-cert-rotation")
    return dict(cron_job["spec"]["jobTemplate"]["spec"]["template"])


# -- the chart as a chart ---------------------------------------------------------------


@pytest.mark.parametrize("namespace", ["gpu-admission", RELEASE_NAMESPACE])
def test_helm_lint_passes_strict_with_every_value_of_this_file_set(
    helm: Path, every_value: Path, namespace: str
) -> None:
    command: list[str | Path] = [helm, "lint", "--strict", CHART_DIR, "--namespace", namespace]

    result = run([*command, "--values", every_value])

    assert "0 chart(s) failed" in result.stdout


def test_every_value_of_this_file_is_in_values_yaml_and_its_schema() -> None:
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    schema = yaml.safe_load((CHART_DIR / "values.schema.json").read_text())

    for key in EVERY_VALUE:
        assert key in values or key == "global", key  # global: an umbrella chart's
        assert key in schema["properties"], key
    for key in ("image", "service", "podDisruptionBudget"):
        assert set(EVERY_VALUE[key]) <= set(values[key]), key
        assert set(EVERY_VALUE[key]) <= set(schema["properties"][key]["properties"]), key
    for monitor in ("serviceMonitor", "alerts"):
        assert values["monitoring"][monitor]["labels"] == {}
        given = EVERY_VALUE["monitoring"][monitor]
        assert set(given) <= set(values["monitoring"][monitor]), monitor
        schema_of = schema["properties"]["monitoring"]["properties"][monitor]
        assert set(given) <= set(schema_of["properties"]), monitor
    assert values["monitoring"]["runbookBaseUrl"] == ""


# -- where the replicas run -----------------------------------------------------------------


def test_by_default_the_replicas_spread_one_per_node_and_over_zones_where_they_can(
    helm: Path,
) -> None:
    constraints = pod_spec(template(helm))["topologySpreadConstraints"]

    assert [(c["topologyKey"], c["whenUnsatisfiable"]) for c in constraints] == [
        ("kubernetes.io/hostname", "DoNotSchedule"),
        ("topology.kubernetes.io/zone", "ScheduleAnyway"),
    ]
    for constraint in constraints:
        assert constraint["labelSelector"] == {"matchLabels": SELECTOR}
        assert constraint["matchLabelKeys"] == ["pod-template-hash"]
        assert constraint["nodeTaintsPolicy"] == "Honor"


def test_constraints_of_ones_own_replace_the_default_and_select_the_replicas(
    helm: Path, every_value: Path
) -> None:
    [constraint] = pod_spec(template(helm, "--values", str(every_value)))[
        "topologySpreadConstraints"
    ]

    assert constraint == {
        **EVERY_VALUE["topologySpreadConstraints"][0],
        "labelSelector": {"matchLabels": SELECTOR},
        "matchLabelKeys": ["pod-template-hash"],
    }


def test_a_constraints_own_selector_and_label_keys_are_kept(helm: Path) -> None:
    own = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "gpu-admission"}},
        "matchLabelKeys": [],
    }

    [constraint] = pod_spec(
        template(helm, "--set-json", f"topologySpreadConstraints={json.dumps([own])}")
    )["topologySpreadConstraints"]

    assert constraint == own


@pytest.mark.parametrize(
    "empty", ["topologySpreadConstraints=[]", "topologySpreadConstraints=null"]
)
def test_no_constraints_spread_nothing(helm: Path, empty: str) -> None:
    assert "topologySpreadConstraints" not in pod_spec(template(helm, "--set-json", empty))


def test_node_selector_and_tolerations_place_the_replicas_and_the_rotation_job(
    helm: Path, every_value: Path
) -> None:
    objects = template(helm, "--values", str(every_value))

    for spec in (pod_spec(objects), rotation_pod(objects)["spec"]):
        assert spec["nodeSelector"] == EVERY_VALUE["nodeSelector"]
        assert spec["tolerations"] == EVERY_VALUE["tolerations"]
        assert spec["imagePullSecrets"] == [{"name": "registry-credentials"}]


def test_affinity_is_the_replicas_and_not_the_rotation_jobs(helm: Path, every_value: Path) -> None:
    objects = template(helm, "--values", str(every_value))

    assert pod_spec(objects)["affinity"] == EVERY_VALUE["affinity"]
    assert "affinity" not in rotation_pod(objects)["spec"]


def test_by_default_no_placement_is_added(helm: Path) -> None:
    objects = template(helm)

    for spec in (pod_spec(objects), rotation_pod(objects)["spec"]):
        assert not {"nodeSelector", "tolerations", "affinity", "imagePullSecrets"} & set(spec)


# -- what the pods carry --------------------------------------------------------------------


def test_pod_annotations_and_labels_go_on_the_replicas_and_the_rotation_job(
    helm: Path, every_value: Path
) -> None:
    objects = template(helm, "--values", str(every_value))
    replicas = one(objects, "Deployment")["spec"]["template"]["metadata"]
    rotation = rotation_pod(objects)["metadata"]

    assert replicas["labels"] == {**SELECTOR, **EVERY_VALUE["podLabels"]}
    assert replicas["annotations"]["example.com/owner"] == "platform"
    assert "checksum/policy" in replicas["annotations"]
    assert rotation["labels"]["team"] == "platform"
    assert rotation["annotations"] == EVERY_VALUE["podAnnotations"]


def test_pod_labels_never_reach_a_selector(helm: Path, every_value: Path) -> None:
    objects = template(helm, "--values", str(every_value))

    assert one(objects, "Deployment")["spec"]["selector"] == {"matchLabels": SELECTOR}
    assert one(objects, "Service")["spec"]["selector"] == SELECTOR
    assert one(objects, "PodDisruptionBudget")["spec"]["selector"] == {"matchLabels": SELECTOR}
    assert one(objects, "NetworkPolicy")["spec"]["podSelector"] == {"matchLabels": SELECTOR}


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "podLabels.app\\.kubernetes\\.io/name=mine",
            "podLabels: app.kubernetes.io/name is a label the chart sets and selects the replicas by",
        ),
        (
            "podLabels.app\\.kubernetes\\.io/component=mine",
            "podLabels: app.kubernetes.io/component is a label the chart sets and selects",
        ),
        ("podLabels.pod-template-hash=abc", "podLabels: pod-template-hash is a label the chart"),
        (
            "podAnnotations.checksum/policy=abc",
            "podAnnotations: checksum/policy is the annotation that rolls the replicas",
        ),
        (
            "monitoring.serviceMonitor.labels.app\\.kubernetes\\.io/name=mine",
            "monitoring.serviceMonitor.labels: app.kubernetes.io/name is a label the chart sets",
        ),
        (
            "monitoring.alerts.labels.helm\\.sh/chart=mine",
            "monitoring.alerts.labels: helm.sh/chart is a label the chart sets",
        ),
    ],
)
def test_metadata_the_chart_sets_itself_is_refused_with_a_message_naming_it(
    helm: Path, setting: str, message: str
) -> None:
    enabled = sets("monitoring.serviceMonitor.enabled=true", "monitoring.alerts.enabled=true")

    assert message in refused(helm, *enabled, "--set", setting)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("tolerations[0].operator=Maybe", "/tolerations/0/operator"),
        ("tolerations[0].efect=NoSchedule", "additional properties 'efect' not allowed"),
        ("nodeSelector.disk=1", "/nodeSelector/disk"),
        ("affinity.nodeAfinity.x=y", "additional properties 'nodeAfinity' not allowed"),
        ("topologySpreadConstraints[0].whenUnsatisfiable=Never", "/topologySpreadConstraints/0"),
        ("topologySpreadConstraints[0].maxSkew=0", "/topologySpreadConstraints/0/maxSkew"),
        ("podLabels.tier=1", "/podLabels/tier"),
        ("podLabels.team=two words", "/podLabels/team"),
        ("podAnnotations.not\\ a\\ key=x", "invalid propertyName 'not a key'"),
        ("imagePullSecrets[0].secret=x", "/imagePullSecrets/0"),
        ("priorityClassQuota.enabled=maybe", "/priorityClassQuota/enabled"),
        ("monitoring.serviceMonitor.labels.release=a b", "/monitoring/serviceMonitor/labels"),
        (
            "monitoring.serviceMonitor.scrapeTimeout=10 seconds",
            "/monitoring/serviceMonitor/scrapeTimeout",
        ),
        ("monitoring.serviceMonitor.interval=1min", "/monitoring/serviceMonitor/interval"),
        ("monitoring.serviceMonitor.namespace=Monitoring", "/monitoring/serviceMonitor/namespace"),
        (
            "monitoring.serviceMonitor.relabelings[0].target_label=cluster",
            "additional properties 'target_label' not allowed",
        ),
        (
            "monitoring.serviceMonitor.metricRelabelings[0].action=delete",
            "/monitoring/serviceMonitor/metricRelabelings/0/action",
        ),
        ("monitoring.alerts.namespace=a_b", "/monitoring/alerts/namespace"),
        ("monitoring.alerts.additionalRuleLabels.my-team=ml", "invalid propertyName 'my-team'"),
        ("monitoring.runbookBaseUrl=docs/runbooks", "/monitoring/runbookBaseUrl"),
        ("image.registry=https://registry.example.com", "/image/registry"),
        ("commonLabels.team=two words", "/commonLabels/team"),
        ("service.annotations.not\\ a\\ key=x", "invalid propertyName 'not a key'"),
        ("service.labels.team=x", "additional properties 'labels' not allowed"),
        ("hostNetwork=yes", "/hostNetwork"),
        ("podDisruptionBudget.maxUnavailable=true", "/podDisruptionBudget/maxUnavailable"),
        ("updateStrategy.type=OnDelete", "/updateStrategy/type"),
        ("updateStrategy.rollingUpdate.maxSurge=one", "/updateStrategy/rollingUpdate/maxSurge"),
        ("revisionHistoryLimit=-1", "/revisionHistoryLimit"),
        ("readinessProbe.periodSecond=5", "additional properties 'periodSecond' not allowed"),
        ("livenessProbe.timeoutSeconds=0", "/livenessProbe/timeoutSeconds"),
        ("terminationGracePeriodSeconds=-1", "/terminationGracePeriodSeconds"),
        ("extraObjects[0]=1", "/extraObjects/0"),
    ],
)
def test_a_value_of_the_wrong_shape_is_refused_by_the_schema(
    helm: Path, setting: str, message: str
) -> None:
    assert message in refused(helm, "--set", setting)


# -- the priority class and its quota ------------------------------------------------------


def quotas(objects: Objects) -> Objects:
    return [o for o in objects if o["kind"] == "ResourceQuota"]


def test_a_system_priority_class_gets_a_quota_that_lets_it_be_used_in_the_namespace(
    helm: Path,
) -> None:
    [quota] = quotas(template(helm, "--namespace", RELEASE_NAMESPACE))

    assert quota["metadata"]["name"] == "gpu-admission-priority-class"
    assert quota["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert quota["spec"] == {
        "scopeSelector": {
            "matchExpressions": [
                {
                    "scopeName": "PriorityClass",
                    "operator": "In",
                    "values": ["system-cluster-critical"],
                }
            ]
        }
    }


def test_the_quota_follows_the_replicas_priority_class(helm: Path) -> None:
    [quota] = quotas(template(helm, *sets("priorityClassName=system-node-critical")))

    [expression] = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert expression["values"] == ["system-node-critical"]


def test_a_class_the_cluster_limits_too_gets_its_quota(helm: Path, every_value: Path) -> None:
    objects = template(helm, "--values", str(every_value))
    [quota] = quotas(objects)

    [expression] = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert expression["values"] == [pod_spec(objects)["priorityClassName"]] == ["platform-critical"]


@pytest.mark.parametrize(
    "settings",
    [
        ["priorityClassQuota.enabled=false"],
        ["priorityClassName=platform-critical"],
        ["priorityClassName="],
    ],
    ids=["turned off", "a class not limited", "no class"],
)
def test_no_quota_is_made(helm: Path, settings: list[str]) -> None:
    assert quotas(template(helm, *sets(*settings))) == []


def test_without_a_class_the_replicas_name_none(helm: Path) -> None:
    assert "priorityClassName" not in pod_spec(template(helm, *sets("priorityClassName=")))


# -- monitoring ------------------------------------------------------------------------------


def test_monitoring_labels_are_added_to_the_charts_own(helm: Path, every_value: Path) -> None:
    objects = template(helm, "--values", str(every_value))
    default = template(
        helm, *sets("monitoring.serviceMonitor.enabled=true", "monitoring.alerts.enabled=true")
    )

    for kind in ("ServiceMonitor", "PrometheusRule"):
        labels = one(objects, kind)["metadata"]["labels"]
        assert labels == {
            **one(default, kind)["metadata"]["labels"],
            **EVERY_VALUE["commonLabels"],
            "release": "kube-prometheus-stack",
        }


ALERTS_ON = sets("monitoring.alerts.enabled=true")
RULES_FILE = CHART_DIR / "files" / "prometheus-rules.yaml"


def alert_rules(rule: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rule of a PrometheusRule, in order."""
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def test_the_service_monitor_takes_its_scrape_settings_and_is_made_where_asked(
    helm: Path, every_value: Path
) -> None:
    objects = template(helm, "--namespace", RELEASE_NAMESPACE, "--values", str(every_value))
    given = EVERY_VALUE["monitoring"]["serviceMonitor"]

    monitor = one(objects, "ServiceMonitor")

    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["metadata"]["annotations"] == given["annotations"]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [RELEASE_NAMESPACE]}
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint == {
        "port": "metrics",
        "path": "/metrics",
        "scheme": "http",
        "interval": "15s",
        "scrapeTimeout": "10s",
        "relabelings": given["relabelings"],
        "metricRelabelings": given["metricRelabelings"],
    }


def test_an_empty_interval_leaves_it_to_prometheus(helm: Path) -> None:
    enabled = sets("monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.interval=")

    [endpoint] = one(template(helm, *enabled), "ServiceMonitor")["spec"]["endpoints"]

    assert "interval" not in endpoint and "scrapeTimeout" not in endpoint


def test_a_duration_that_reads_as_a_number_is_rendered_as_the_string_the_crd_wants(
    helm: Path,
) -> None:
    enabled = sets("monitoring.serviceMonitor.enabled=true")
    zero = ("--set-string", "monitoring.serviceMonitor.interval=0")
    timeout = ("--set-string", "monitoring.serviceMonitor.scrapeTimeout=0")

    [endpoint] = one(template(helm, *enabled, *zero, *timeout), "ServiceMonitor")["spec"][
        "endpoints"
    ]

    assert endpoint["interval"] == endpoint["scrapeTimeout"] == "0"


def test_the_prometheus_rule_takes_annotations_a_namespace_and_labels_on_every_alert(
    helm: Path, every_value: Path
) -> None:
    objects = template(helm, "--namespace", RELEASE_NAMESPACE, "--values", str(every_value))
    shipped = yaml.safe_load(RULES_FILE.read_text("utf-8"))

    rule = one(objects, "PrometheusRule")

    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["annotations"] == {"example.com/owner": "platform"}
    alerts = alert_rules(rule)
    assert [a["labels"] for a in alerts] == [
        {**a["labels"], "team": "ml-platform"} for a in alert_rules({"spec": shipped})
    ]
    for alert in alerts:  # and nothing else changed
        alert["labels"].pop("team")
        alert["annotations"]["runbook_url"] = f"docs/runbooks/{alert['alert']}.md"
    assert rule["spec"] == shipped


@pytest.mark.parametrize(
    "base",
    [
        "https://runbooks.example/gpu-admission",
        "https://runbooks.example/gpu-admission/",
        "https://runbooks.example/gpu-admission//",
    ],
)
def test_runbook_links_are_the_base_url_one_slash_and_the_alerts_page(
    helm: Path, base: str
) -> None:
    rule = one(
        template(helm, *ALERTS_ON, *sets(f"monitoring.runbookBaseUrl={base}")), "PrometheusRule"
    )

    links = {a["alert"]: a["annotations"]["runbook_url"] for a in alert_rules(rule)}

    assert len(links) == 8
    assert links == {name: f"https://runbooks.example/gpu-admission/{name}.md" for name in links}


def test_without_a_base_url_the_shipped_rules_are_rendered_as_written(helm: Path) -> None:
    rendered = run([helm, "template", "gpu-admission", CHART_DIR, *ALERTS_ON]).stdout

    lines = RULES_FILE.read_text("utf-8").splitlines(keepends=True)
    rules = "".join(f"  {line}" if line.strip() else line for line in lines)
    assert f"\nspec:\n{rules}" in rendered  # comments and all
    rule = one([o for o in yaml.safe_load_all(rendered) if o], "PrometheusRule")
    assert all(
        a["annotations"]["runbook_url"] == f"docs/runbooks/{a['alert']}.md"
        for a in alert_rules(rule)
    )


@pytest.mark.parametrize(
    ("label", "alert"),
    [
        ("severity", "GpuAdmissionPolicyInvalid"),  # its rule's label
        ("alertname", "GpuAdmissionPolicyInvalid"),
        ("namespace", "GpuAdmissionPolicyInvalid"),  # max by (namespace, pod)
        ("pod", "GpuAdmissionPolicyInvalid"),
        ("kind", "GpuAdmissionInventoryStale"),  # max by (namespace, pod, kind)
        ("webhook", "GpuAdmissionWebhookConfigurationMismatch"),
        ("name", "GpuAdmissionWebhookCallsFailing"),  # sum by (name)
    ],
)
def test_an_alert_label_the_alerts_set_or_group_by_is_refused(
    helm: Path, label: str, alert: str
) -> None:
    """A rule's label overrides its series': set on alerts of two pods, it would make
    them one label set, and Prometheus fails the rule's evaluation."""
    setting = sets(f"monitoring.alerts.additionalRuleLabels.{label}=ml-team")

    assert (
        f"monitoring.alerts.additionalRuleLabels: {label} is a label the alert "
        f"{alert} sets itself or groups its series by: it cannot be overridden"
    ) in refused(helm, *ALERTS_ON, *setting)


# -- a release in another namespace ------------------------------------------------------------


SERVICE_NAME = re.compile(r"\bgpu-admission(?:-metrics)?\.(?!io\b)([a-z0-9-]+)(?:\.svc\b|$)")


def namespaces_named(value: Any) -> Iterator[str]:
    """Every namespace an object names: its own, a reference's, a namespace selector's,
    a Service's DNS name's, an annotation's `namespace/name` and a `--namespace` argument."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "namespace" and isinstance(item, str):
                yield item
            elif key == "matchNames":
                yield from item
            elif key == "cert-manager.io/inject-ca-from":
                yield item.split("/")[0]
            elif key == "kubernetes.io/metadata.name" and isinstance(item, str):
                yield item
        if value.get("key") == "kubernetes.io/metadata.name":
            yield from value.get("values", [])
        for item in value.values():
            yield from namespaces_named(item)
    elif isinstance(value, list):
        for before, item in zip([None, *value], value, strict=False):
            if before == "--namespace":
                yield item
            yield from namespaces_named(item)
    elif isinstance(value, str):
        yield from SERVICE_NAME.findall(value)


def serving_certificate_names(objects: Objects) -> list[str]:
    pem = base64.b64decode(one(objects, "Secret", "gpu-admission-tls")["data"]["tls.crt"])
    names = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    return list(names.value.get_values_for_type(x509.DNSName))


@pytest.mark.parametrize("mode", ["selfSigned", "certManager"])
@pytest.mark.parametrize(
    "placed",
    [
        pytest.param(
            ["--namespace", RELEASE_NAMESPACE, "--set", "namespaceOverride="],
            id="release-namespace",
        ),
        pytest.param(
            ["--namespace", "umbrella", "--set", f"namespaceOverride={RELEASE_NAMESPACE}"],
            id="namespace-override",
        ),
    ],
)
def test_a_release_in_another_namespace_never_names_gpu_admission_as_a_namespace(
    helm: Path, every_value: Path, mode: str, placed: list[str]
) -> None:
    """Installed into another namespace, or told another by namespaceOverride (then the
    release's own namespace is named nowhere either)."""
    objects = template(
        helm,
        *placed,
        "--values",
        str(every_value),
        *sets(f"certificates.mode={mode}", "audit.policyReportCRD.create=true"),
    )

    named = [n for obj in objects for n in namespaces_named(obj)]
    assert "gpu-admission" not in named and "umbrella" not in named
    assert RELEASE_NAMESPACE in named
    assert set(named) <= {RELEASE_NAMESPACE, "kube-system", "kube-node-lease", "monitoring"}
    for obj in objects:
        if obj["kind"] in MADE_IN_THE_MONITORING_NAMESPACE:
            assert obj["metadata"]["namespace"] == MONITORING_NAMESPACE, obj["kind"]
        elif obj["kind"] not in CLUSTER_SCOPED:
            assert obj["metadata"]["namespace"] == RELEASE_NAMESPACE, obj["kind"]
    if mode == "selfSigned":
        names = serving_certificate_names(objects)
        assert f"gpu-admission.{RELEASE_NAMESPACE}.svc" in names
        assert not [n for n in names if ".gpu-admission" in n]


MADE_IN_THE_MONITORING_NAMESPACE = {"ServiceMonitor", "PrometheusRule"}
"""The kinds every value puts in Prometheus' namespace (monitoring.*.namespace)."""

CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "FlowSchema",
    "MutatingWebhookConfiguration",
    "PriorityClass",
    "PriorityLevelConfiguration",
    "ValidatingWebhookConfiguration",
}


def test_the_namespace_walk_finds_each_kind_of_reference() -> None:
    """The walk above, on references to `gpu-admission` of every shape it looks for."""
    obj = {
        "metadata": {
            "namespace": "a",
            "annotations": {"cert-manager.io/inject-ca-from": "b/gpu-admission"},
        },
        "subjects": [{"kind": "ServiceAccount", "namespace": "c"}],
        "namespaceSelector": {
            "matchNames": ["d"],
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "values": ["e"]}],
            "matchLabels": {"kubernetes.io/metadata.name": "f"},
        },
        "args": ["certs", "rotate", "--namespace", "g"],
        "dnsNames": ["gpu-admission.h.svc", "gpu-admission.i", "gpu-admission-metrics.j.svc"],
        "labels": {"gpu-admission.io/enabled": "true"},
    }

    assert sorted(namespaces_named(obj)) == list("abcdefghij")


# -- the replicas' identity, arguments, environment, volumes and security contexts ------


def the_container(objects: Objects) -> dict[str, Any]:
    (container,) = pod_spec(objects)["containers"]
    return dict(container)


def test_the_image_is_pulled_by_digest_when_one_is_given(helm: Path, every_value: Path) -> None:
    container = the_container(template(helm, "--values", str(every_value)))

    assert container["image"] == IMAGE


def test_a_digest_that_is_not_sha256_is_refused(helm: Path) -> None:
    assert "digest" in refused(helm, *sets("image.digest=latest"))


def test_the_service_account_is_named_annotated_and_bound(helm: Path, every_value: Path) -> None:
    objects = template(helm, "--values", str(every_value))

    account = one(objects, "ServiceAccount", "admission-webhook")
    binding = one(objects, "ClusterRoleBinding", "gpu-admission")
    assert account["metadata"]["annotations"] == EVERY_VALUE["serviceAccount"]["annotations"]
    assert pod_spec(objects)["serviceAccountName"] == "admission-webhook"
    assert binding["subjects"][0]["name"] == "admission-webhook"


def test_an_existing_service_account_is_bound_and_not_made(helm: Path) -> None:
    objects = template(helm, *sets("serviceAccount.create=false", "serviceAccount.name=platform"))

    names = [o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"]
    assert names == ["gpu-admission-cert-rotation"]
    assert pod_spec(objects)["serviceAccountName"] == "platform"
    assert one(objects, "ClusterRoleBinding", "gpu-admission")["subjects"][0]["name"] == "platform"


def test_log_level_and_extra_arguments_follow_the_charts_own(helm: Path, every_value: Path) -> None:
    args = the_container(template(helm, "--values", str(every_value)))["args"]

    assert args[0] == "serve"
    assert args[-4:] == ["--log-level", "debug", "--new-connections-per-source", "100"]


def test_extra_env_volumes_and_mounts_are_added_to_the_charts_own(
    helm: Path, every_value: Path
) -> None:
    objects = template(helm, "--values", str(every_value))
    container = the_container(objects)

    assert container["env"][0]["name"] == "POD_NAMESPACE"
    assert container["env"][1:] == EVERY_VALUE["extraEnv"]
    assert container["volumeMounts"][-1] == EVERY_VALUE["extraVolumeMounts"][0]
    assert pod_spec(objects)["volumes"][-1] == EVERY_VALUE["extraVolumes"][0]
    assert [m["name"] for m in container["volumeMounts"][:3]] == ["policy", "tls", "tmp"]


def test_the_security_contexts_are_values(helm: Path, every_value: Path) -> None:
    objects = template(helm, "--values", str(every_value))

    assert pod_spec(objects)["securityContext"] == EVERY_VALUE["podSecurityContext"]
    assert the_container(objects)["securityContext"] == EVERY_VALUE["securityContext"]


def test_webhook_annotations_go_on_both_configurations_beside_cert_managers(
    helm: Path, every_value: Path
) -> None:
    selfsigned = template(helm, "--values", str(every_value))
    cert_manager = template(
        helm, "--values", str(every_value), *sets("certificates.mode=certManager")
    )

    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert (
            one(selfsigned, kind)["metadata"]["annotations"]
            == EVERY_VALUE["webhooks"]["annotations"]
        )
        annotations = one(cert_manager, kind)["metadata"]["annotations"]
        assert annotations["argocd.argoproj.io/sync-options"] == "ServerSideApply=true"
        assert annotations["cert-manager.io/inject-ca-from"] == f"{RELEASE_NAMESPACE}/gpu-admission"


def test_a_webhook_annotation_the_chart_sets_itself_is_refused(helm: Path) -> None:
    stderr = refused(helm, *sets("webhooks.annotations.cert-manager\\.io/inject-ca-from=x/y"))

    assert "webhooks.annotations: cert-manager.io/inject-ca-from" in stderr


# -- the image's registry, labels on every object, the Service's annotations --------------


def images(value: Any) -> Iterator[str]:
    """The image of every container an object runs, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("containers", "initContainers"):
                yield from (container["image"] for container in item)
            else:
                yield from images(item)
    elif isinstance(value, list):
        for item in value:
            yield from images(item)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ([], IMAGE),
        (["image.digest=", "image.tag=1.2.3"], "registry.example.com/platform/gpu-admission:1.2.3"),
        (
            ["image.registry=registry.example.com:5000/"],
            f"registry.example.com:5000/platform/gpu-admission@{DIGEST}",
        ),
    ],
    ids=["digest", "tag", "port and slash"],
)
def test_image_registry_prefixes_the_repository_everywhere_the_image_is_used(
    helm: Path, every_value: Path, settings: list[str], expected: str
) -> None:
    objects = template(helm, "--values", str(every_value), *sets(*settings))

    used = {(o["kind"], o["metadata"]["name"]): list(images(o)) for o in objects}
    assert {key: found for key, found in used.items() if found} == {
        ("Deployment", "gpu-admission"): [expected],
        ("CronJob", "gpu-admission-cert-rotation"): [expected],
        ("Pod", "gpu-admission-test-webhooks"): [expected],
    }


EVERY_OBJECT = sets(
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.alerts.enabled=true",
    "monitoring.dashboard.enabled=true",
    "audit.policyReportCRD.create=true",
)
"""Every object the chart renders: the optional ones on."""


def without_certificates(obj: dict[str, Any]) -> dict[str, Any]:
    """An object without what each render makes anew (the certificates, the caBundles)."""
    obj = copy.deepcopy(obj)
    if obj["kind"] == "Secret":
        obj.pop("data")
    for hook in obj.get("webhooks", []):
        hook["clientConfig"].pop("caBundle", None)
    return obj


@pytest.mark.parametrize("mode", ["selfSigned", "certManager"])
def test_common_labels_are_added_to_every_objects_metadata_labels_and_nowhere_else(
    helm: Path, mode: str
) -> None:
    chart = [*EVERY_OBJECT, *sets(f"certificates.mode={mode}")]
    common = {"team": "ml-platform", "example.com/cost-center": "ml-1234"}
    before = template(helm, *chart)

    objects = template(
        helm,
        *chart,
        "--set-json",
        f"commonLabels={json.dumps(common)}",
    )

    for obj, default in zip(objects, before, strict=True):
        labels = obj["metadata"].pop("labels")
        assert labels == {**default["metadata"].pop("labels"), **common}, obj["kind"]
        assert without_certificates(obj) == without_certificates(default)


@pytest.mark.parametrize(
    "label",
    [
        "app.kubernetes.io/name",
        "app.kubernetes.io/component",
        "helm.sh/chart",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/version",
    ],
)
def test_a_common_label_the_chart_sets_itself_is_refused_naming_it(helm: Path, label: str) -> None:
    setting = ("--set-json", f"commonLabels={json.dumps({label: 'mine'})}")

    assert f"commonLabels: {label} is a label the chart sets itself" in refused(helm, *setting)


def test_a_monitoring_label_wins_over_a_common_label_of_the_same_key(helm: Path) -> None:
    settings = sets(
        "commonLabels.release=platform",
        "monitoring.serviceMonitor.enabled=true",
        "monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
    )
    rendered = run([helm, "template", "gpu-admission", CHART_DIR, *settings]).stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o]

    (monitor,) = [d for d in rendered.split("\n---\n") if "\nkind: ServiceMonitor\n" in d]
    assert monitor.count("release:") == 1  # once: YAML readers keep the last of two
    assert one(objects, "ServiceMonitor")["metadata"]["labels"]["release"] == (
        "kube-prometheus-stack"
    )
    assert one(objects, "Deployment")["metadata"]["labels"]["release"] == "platform"


def test_service_annotations_go_on_the_webhook_service_not_the_metrics_one(
    helm: Path, every_value: Path
) -> None:
    objects = template(helm, "--values", str(every_value))

    webhook = one(objects, "Service")["metadata"]
    assert webhook["annotations"] == EVERY_VALUE["service"]["annotations"]
    assert "annotations" not in one(objects, "Service", "gpu-admission-metrics")["metadata"]


# -- the replicas' network, rollout, disruptions, probes and grace period -------------------


def test_host_network_puts_the_replicas_on_their_nodes_network_with_the_clusters_dns(
    helm: Path, every_value: Path
) -> None:
    objects = template(helm, "--values", str(every_value))

    spec = pod_spec(objects)
    assert (spec["hostNetwork"], spec["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
    assert not {"hostNetwork", "dnsPolicy"} & set(rotation_pod(objects)["spec"])


def test_an_update_strategy_replaces_the_deployments_whole(helm: Path, every_value: Path) -> None:
    given = one(template(helm, "--values", str(every_value)), "Deployment")["spec"]
    recreate = one(template(helm, *sets("updateStrategy.type=Recreate")), "Deployment")["spec"]

    assert given["strategy"] == EVERY_VALUE["updateStrategy"]
    assert recreate["strategy"] == {"type": "Recreate"}


def test_the_revision_history_limit_is_a_value(helm: Path, every_value: Path) -> None:
    deployment = one(template(helm, "--values", str(every_value)), "Deployment")

    assert deployment["spec"]["revisionHistoryLimit"] == 10


@pytest.mark.parametrize(("given", "expected"), [("1", 1), ("34%", "34%")])
def test_max_unavailable_replaces_min_available_in_the_budget(
    helm: Path, given: str, expected: int | str
) -> None:
    settings = sets("podDisruptionBudget.minAvailable=null")
    budget = ("--set-string", f"podDisruptionBudget.maxUnavailable={given}")
    if isinstance(expected, int):
        budget = ("--set", f"podDisruptionBudget.maxUnavailable={given}")

    spec = one(template(helm, *settings, *budget), "PodDisruptionBudget")["spec"]

    assert spec["maxUnavailable"] == expected
    assert "minAvailable" not in spec


def test_a_budget_of_both_min_available_and_max_unavailable_is_refused(helm: Path) -> None:
    stderr = refused(helm, *sets("podDisruptionBudget.maxUnavailable=1"))

    assert (
        "podDisruptionBudget: minAvailable (1) and maxUnavailable (1) are both set, and a "
        "PodDisruptionBudget allows only one: set minAvailable to null to use maxUnavailable"
    ) in stderr


def test_a_budget_of_neither_min_available_nor_max_unavailable_is_refused(helm: Path) -> None:
    stderr = refused(helm, *sets("podDisruptionBudget.minAvailable=null"))

    assert "podDisruptionBudget: neither minAvailable nor maxUnavailable is set" in stderr


READINESS = {
    "httpGet": {"path": "/readyz", "port": "https", "scheme": "HTTPS"},
    "periodSeconds": 5,
    "timeoutSeconds": 2,
    "failureThreshold": 2,
}
LIVENESS = {
    "httpGet": {"path": "/healthz", "port": "https", "scheme": "HTTPS"},
    "initialDelaySeconds": 5,
    "periodSeconds": 10,
    "timeoutSeconds": 2,
    "failureThreshold": 3,
}
"""The chart's probes, the base's."""


def test_by_default_the_probes_are_the_charts(helm: Path) -> None:
    container = the_container(template(helm))

    assert (container["readinessProbe"], container["livenessProbe"]) == (READINESS, LIVENESS)


def test_probe_values_are_merged_key_by_key_over_the_charts_probes(
    helm: Path, every_value: Path
) -> None:
    container = the_container(template(helm, "--values", str(every_value)))

    assert container["readinessProbe"] == {**READINESS, **EVERY_VALUE["readinessProbe"]}
    assert container["livenessProbe"] == {**LIVENESS, **EVERY_VALUE["livenessProbe"]}


def test_a_probe_key_set_to_null_is_dropped(helm: Path, tmp_path: Path) -> None:
    values = tmp_path / "probes.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "readinessProbe": {"httpGet": None, "tcpSocket": {"port": "https"}},
                "livenessProbe": {"initialDelaySeconds": None, "httpGet": {"scheme": None}},
            }
        )
    )

    container = the_container(template(helm, "--values", str(values)))

    readiness = {k: v for k, v in READINESS.items() if k != "httpGet"}
    assert container["readinessProbe"] == {**readiness, "tcpSocket": {"port": "https"}}
    assert container["livenessProbe"] == {
        **{k: v for k, v in LIVENESS.items() if k != "initialDelaySeconds"},
        "httpGet": {"path": "/healthz", "port": "https"},
    }


def test_the_termination_grace_period_is_a_value(helm: Path, every_value: Path) -> None:
    spec = pod_spec(template(helm, "--values", str(every_value)))

    assert spec["terminationGracePeriodSeconds"] == 45


@pytest.mark.parametrize("seconds", [5, 1])
def test_a_grace_period_not_longer_than_the_pre_stop_sleep_is_refused_saying_why(
    helm: Path, seconds: int
) -> None:
    sleep = the_container(template(helm))["lifecycle"]["preStop"]["sleep"]["seconds"]

    stderr = refused(helm, *sets(f"terminationGracePeriodSeconds={seconds}"))

    assert (
        f"terminationGracePeriodSeconds must be more than the {sleep} seconds of the preStop "
        f"sleep, not {seconds}: a stopping replica keeps serving that long while its "
        "endpoint's removal reaches kube-apiserver"
    ) in stderr


# -- objects of the team's own ---------------------------------------------------------------


def test_extra_objects_are_rendered_with_the_release_a_string_through_tpl(
    helm: Path, every_value: Path
) -> None:
    objects = template(helm, "--namespace", RELEASE_NAMESPACE, "--values", str(every_value))

    egress = one(objects, "NetworkPolicy", "gpu-admission-egress")
    assert egress["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert egress["metadata"]["labels"] == one(objects, "NetworkPolicy")["metadata"]["labels"]
    assert egress["spec"]["podSelector"] == {"matchLabels": SELECTOR}
    assert one(objects, "RoleBinding", "gpu-admission-oncall") == ONCALL_BINDING
