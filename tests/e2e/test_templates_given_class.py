"""Hostile round 4, a template given its class after its CREATE: a tenant of an opted-in
namespace, with its own token, creates a workload with a template of no class and gives
it one by an update. A queue charges and places a workload by its templates, so such a
template is mutated at that update as at a CREATE (mutate-workloads), or, for a Job
whose template kube-apiserver no longer lets take resources or a priority, the update is
refused and nothing is stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .controlplane import ControlPlane
from .tenants import Tenant, make_tenant
from .test_hostile_tenant import WORKLOAD
from .webhook_server import WebhookServer


@pytest.fixture
def tenant(
    controlplane: ControlPlane, admission: WebhookServer, opted_in: str, tmp_path: Path
) -> Tenant:
    return make_tenant(controlplane, opted_in, tmp_path)


def cpu_template() -> dict[str, Any]:
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10", "command": ["/pause"]}
    return {
        "metadata": {"labels": {"app": "batch"}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def suspended_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"suspend": True, "template": cpu_template()},
    }


def cron_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "@yearly", "jobTemplate": {"spec": {"template": cpu_template()}}},
    }


def stored(tenant: Tenant, kind: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(tenant.kubectl("get", kind, name, "-o", "json").stdout)
    return found


def test_a_suspended_job_given_a_class_by_an_update_is_refused(tenant: Tenant) -> None:
    tenant.create(suspended_job("later-classed"))
    labels = json.dumps({"spec": {"template": {"metadata": {"labels": {WORKLOAD: "inference"}}}}})

    result = tenant.kubectl("patch", "job", "later-classed", "-p", labels, check=False)

    assert result.returncode != 0, result.stdout
    assert 'admission webhook "mutate-workloads.gpu-admission.io" denied' in result.stderr
    assert "create the workload again with the label" in result.stderr
    template = stored(tenant, "job", "later-classed")["spec"]["template"]
    assert WORKLOAD not in template["metadata"]["labels"]
    assert stored(tenant, "job", "later-classed")["spec"]["suspend"] is True


def test_a_cron_jobs_template_given_a_class_by_an_update_gets_what_its_pods_would(
    tenant: Tenant,
) -> None:
    tenant.create(cron_job("nightly"))
    labels = {"metadata": {"labels": {WORKLOAD: "training"}}}
    patch = json.dumps({"spec": {"jobTemplate": {"spec": {"template": labels}}}})

    tenant.kubectl("patch", "cronjob", "nightly", "-p", patch)

    spec = stored(tenant, "cronjob", "nightly")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "training-priority"
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert any(t.get("value") == "training" for t in spec["tolerations"])


def test_an_update_that_leaves_the_class_is_not_mutated_again(tenant: Tenant) -> None:
    job = suspended_job("classed")
    job["spec"]["template"]["metadata"]["labels"][WORKLOAD] = "training"
    tenant.create(job)
    before = stored(tenant, "job", "classed")["spec"]["template"]

    tenant.kubectl("label", "job", "classed", "team=vision")

    assert stored(tenant, "job", "classed")["spec"]["template"] == before
