"""The chart's names of its objects (nameOverride, fullnameOverride), rendered by the real
helm as tests/deploy/test_helm.py does: every object named from them, every reference
following, and the replicas, the rotation job and the policy ConfigMap's webhook told.
tests/e2e/test_chart_on_node.py installs a release so named on a real node.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from tests.deploy.test_helm import (
    CHART_DIR,
    NAMESPACE,
    Objects,
    built,
    one,
    run,
    sets,
    template,
    webhooks,
)
from webhook.install.configurations import POLICY_WEBHOOK
from webhook.install.names import handlers_of_install
from webhook.install.scope import scope_differences
from webhook.policy import load_default_policy
from webhook.tls.pki import certificates_from_pem

APP_NAME = "acme"
FULLNAME = "acme-gpu"
RENAMED = sets(f"nameOverride={APP_NAME}", f"fullnameOverride={FULLNAME}")
EVERYTHING_ON = sets(
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.alerts.enabled=true",
    "monitoring.dashboard.enabled=true",
    "audit.policyReportCRD.create=true",
)
NAMED_ELSEWHERE = {"PriorityClass", "CustomResourceDefinition"}
"""Kinds the chart names by what they are, not by the install: the policy's classes, and
the PolicyReport CRD."""


@pytest.fixture(scope="module")
def helm() -> Path:
    return built("helm")


def renamed(helm: Path, *more: str) -> Objects:
    return template(helm, *RENAMED, *more)


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "CronJob":
        spec: dict[str, Any] = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        return spec
    if obj["kind"] == "Pod":
        pod: dict[str, Any] = obj["spec"]
        return pod
    template_spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return template_spec


def container_args(obj: dict[str, Any]) -> list[str]:
    [container] = pod_spec(obj)["containers"]
    return list(container["args"])


@pytest.mark.parametrize("mode", ["selfSigned", "certManager"])
def test_every_object_of_the_install_is_named_by_fullname_override(helm: Path, mode: str) -> None:
    objects = renamed(helm, *EVERYTHING_ON, *sets(f"certificates.mode={mode}"))

    names = {
        (o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] not in NAMED_ELSEWHERE
    }
    strays = {
        (kind, name)
        for kind, name in names
        if name != FULLNAME and not name.startswith(f"{FULLNAME}-")
    }
    assert strays == set()
    assert {("Deployment", FULLNAME), ("Service", FULLNAME)} <= names
    assert (("Secret", f"{FULLNAME}-tls") in names) == (mode == "selfSigned")


def test_every_object_carries_the_name_override_and_every_selector_selects_by_it(
    helm: Path,
) -> None:
    objects = renamed(helm, *EVERYTHING_ON)

    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == APP_NAME, obj["kind"]
    selector = {"app.kubernetes.io/name": APP_NAME, "app.kubernetes.io/component": "webhook"}
    assert one(objects, "Deployment", FULLNAME)["spec"]["selector"]["matchLabels"] == selector
    assert one(objects, "Service", FULLNAME)["spec"]["selector"] == selector
    monitor = one(objects, "ServiceMonitor", FULLNAME)["spec"]["selector"]["matchLabels"]
    assert monitor["app.kubernetes.io/name"] == APP_NAME


def test_every_reference_names_an_object_the_chart_renders(helm: Path) -> None:
    objects = renamed(helm)
    rendered = {(o["kind"], o["metadata"]["name"]) for o in objects}

    for binding in (o for o in objects if o["kind"].endswith("RoleBinding")):
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in rendered
        for subject in binding["subjects"]:
            assert ("ServiceAccount", subject["name"]) in rendered
    for workload in (o for o in objects if o["kind"] in ("Deployment", "CronJob")):
        spec = pod_spec(workload)
        assert ("ServiceAccount", spec["serviceAccountName"]) in rendered
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                assert ("Secret", volume["secret"]["secretName"]) in rendered
            if "configMap" in volume:
                assert ("ConfigMap", volume["configMap"]["name"]) in rendered
    for hook in webhooks(objects).values():
        assert ("Service", hook["clientConfig"]["service"]["name"]) in rendered


def test_the_rbac_names_the_objects_of_the_install_it_may_touch(helm: Path) -> None:
    objects = renamed(helm)
    rules = [
        rule
        for o in objects
        if o["kind"] in ("ClusterRole", "Role")
        for rule in o["rules"]
        if "resourceNames" in rule
    ]
    named = {resource: rule["resourceNames"] for rule in rules for resource in rule["resources"]}

    assert named["mutatingwebhookconfigurations"] == [FULLNAME]
    assert named["validatingwebhookconfigurations"] == [FULLNAME]
    assert sorted(named["secrets"]) == [f"{FULLNAME}-tls", f"{FULLNAME}-tls-ca"]
    # The audit's report in each namespace keeps the name the audit gives it.
    assert named["policyreports"] == ["gpu-admission"]


def test_the_replicas_the_rotation_job_and_the_test_pod_are_told_the_names(helm: Path) -> None:
    objects = renamed(helm)
    serve = container_args(one(objects, "Deployment", FULLNAME))
    rotate = container_args(one(objects, "CronJob", f"{FULLNAME}-cert-rotation"))
    [test_pod] = [o for o in objects if o["kind"] == "Pod"]
    env = {e["name"]: e["value"] for e in pod_spec(test_pod)["containers"][0]["env"]}

    assert serve[serve.index("--install-name") + 1] == FULLNAME
    assert rotate[rotate.index("--secret") + 1] == f"{FULLNAME}-tls"
    assert rotate[rotate.index("--service") + 1] == FULLNAME
    assert rotate[rotate.index("--webhook-configuration") + 1] == FULLNAME
    assert env["WEBHOOKS"] == f"https://{FULLNAME}.{NAMESPACE}.svc:443"
    # kubelet's variable of the Service's link, where a cluster without DNS finds it
    assert env["SERVICE_LINK"] == "ACME_GPU_SERVICE_HOST"


def test_without_the_overrides_no_install_name_is_passed_as_kustomize_passes_none(
    helm: Path,
) -> None:
    objects = template(helm)

    assert "--install-name" not in container_args(one(objects, "Deployment"))
    rotate = container_args(one(objects, "CronJob", "gpu-admission-cert-rotation"))
    assert "--webhook-configuration" not in rotate


def test_the_webhooks_are_what_a_replica_told_the_name_expects_and_not_what_another_does(
    helm: Path,
) -> None:
    """The policy ConfigMap's webhook selects FULLNAME-policy: a replica given
    --install-name finds nothing different, one that is not finds that webhook."""
    objects = renamed(helm)
    mutating = one(objects, "MutatingWebhookConfiguration", FULLNAME)
    validating = one(objects, "ValidatingWebhookConfiguration", FULLNAME)
    policy = load_default_policy()

    told = scope_differences(policy, mutating, validating, handlers_of_install(FULLNAME))
    untold = scope_differences(policy, mutating, validating)

    assert told == []
    assert [d.webhook for d in untold] == [POLICY_WEBHOOK]


def test_the_serving_certificate_holds_the_services_name_and_the_ca_bundle_verifies_it(
    helm: Path,
) -> None:
    objects = renamed(helm)
    serving = one(objects, "Secret", f"{FULLNAME}-tls")["data"]
    leaf = x509.load_pem_x509_certificate(base64.b64decode(serving["tls.crt"]))
    dns_name = x509.DNSName(f"{FULLNAME}.{NAMESPACE}.svc")

    for hook in webhooks(objects).values():
        trusted = certificates_from_pem(base64.b64decode(hook["clientConfig"]["caBundle"]))
        PolicyBuilder().store(Store(trusted)).build_server_verifier(dns_name).verify(leaf, [])


def test_cert_manager_injects_the_ca_of_the_certificate_of_that_name(helm: Path) -> None:
    objects = renamed(helm, *sets("certificates.mode=certManager"))
    certificate = one(objects, "Certificate", FULLNAME)
    annotations = one(objects, "MutatingWebhookConfiguration", FULLNAME)["metadata"]["annotations"]

    assert certificate["spec"]["secretName"] == f"{FULLNAME}-tls"
    assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{FULLNAME}"


@pytest.mark.parametrize(
    "value", ["Acme", "acme_gpu", "acme.gpu", "-acme", "acme-", "9acme", "a" * 39]
)
@pytest.mark.parametrize("key", ["nameOverride", "fullnameOverride"])
def test_a_name_that_cannot_name_every_object_is_refused_by_the_schema(
    helm: Path, key: str, value: str
) -> None:
    result = run([helm, "template", "r", CHART_DIR, "--set", f"{key}={value}"], check=False)

    assert result.returncode != 0
    assert key in result.stderr


@pytest.mark.parametrize(
    "absent",
    ["nameOverride", "fullnameOverride", "serviceAccount.name", "webhooks.matchExpressions"],
)
def test_a_release_upgraded_with_reused_values_of_a_version_without_them_renders(
    helm: Path, absent: str
) -> None:
    """`helm upgrade --reuse-values` keeps the values of the release as installed, so the
    keys a newer chart adds are absent, not their defaults."""
    objects = template(helm, *sets(f"{absent}=null"))

    assert one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == (
        "gpu-admission"
    )
    assert len(webhooks(objects)) == 12
