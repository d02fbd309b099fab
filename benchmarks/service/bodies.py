"""The AdmissionReview bodies of `benchmarks.service`, as kube-apiserver posts them.

The pod is an inference pod created by a Deployment's ReplicaSet, as it reaches the
webhooks: a generated name still empty, the owner reference, the controller's
managedFields, the defaulted fields of its container, the projected service-account
volume and the tolerations kube-apiserver's admission plugins added before ours. It
carries the class label and asks for one GPU, so gpu-admission mutates it.

- `/mutate` gets the pod as created (`mutate_body`);
- `/validate` gets the pod as mutated: kube-apiserver applies the JSONPatch of the
  mutating webhook's answer, then calls the validating webhook (`validate_body`, from
  our own `/mutate` reply, `patch_of`).

Both are wrapped by `tests.conftest.admission_review` with a fixed uid (the load
generator posts one body again and again and checks every reply echoes it).
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import jsonpatch
import orjson

from tests.conftest import admission_review

WORKLOAD = "gpu-admission.io/workload"
MUTATE_UID = "5f0c7a3e-1b2d-4c8e-9a61-3d2f8e7b6c01"
VALIDATE_UID = "5f0c7a3e-1b2d-4c8e-9a61-3d2f8e7b6c02"
SERVICE_ACCOUNT_VOLUME = "kube-api-access-8h5zq"
REPLICASET_CONTROLLER = {
    "username": "system:serviceaccount:kube-system:replicaset-controller",
    "uid": "8e2b3a51-6f0d-4f8e-b7c4-0d1e2f3a4b5c",
    "groups": [
        "system:serviceaccounts",
        "system:serviceaccounts:kube-system",
        "system:authenticated",
    ],
}


def _container() -> dict[str, Any]:
    probe = {
        "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    return {
        "name": "server",
        "image": "registry.example/llm-server:2.1",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [
            {"name": "MODEL_NAME", "value": "llama-3-8b"},
        ],
        "resources": {
            "limits": {"memory": "32Gi", "nvidia.com/gpu": "1"},
            "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
        },
        "volumeMounts": [
            {"name": "models", "readOnly": True, "mountPath": "/models"},
            {
                "name": SERVICE_ACCOUNT_VOLUME,
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            },
        ],
        "livenessProbe": probe,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
    }


def deployment_pod(workload_class: str = "inference") -> dict[str, Any]:
    """A pod of the `llm-server` Deployment, as kube-apiserver sends it on CREATE."""
    labels = {"app": "llm-server", "pod-template-hash": "7d9f8b6c5", WORKLOAD: workload_class}
    fields_v1 = {
        "f:metadata": {
            "f:generateName": {},
            "f:labels": {".": {}, "f:app": {}, f"f:{WORKLOAD}": {}, "f:pod-template-hash": {}},
            "f:ownerReferences": {".": {}, 'k:{"uid":"c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f"}': {}},
        },
        "f:spec": {
            "f:containers": {'k:{"name":"server"}': {".": {}, "f:image": {}, "f:name": {}}},
        },
    }
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "generateName": "llm-server-7d9f8b6c5-",
            "namespace": "ml",
            "creationTimestamp": None,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "llm-server-7d9f8b6c5",
                    "uid": "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-12-01T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1,
                }
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": "models",
                    "persistentVolumeClaim": {"claimName": "models", "readOnly": True},
                },
                {
                    "name": SERVICE_ACCOUNT_VOLUME,
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                },
            ],
            "containers": [_container()],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{taint}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for taint in ("not-ready", "unreachable")
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def review_body(pod: dict[str, Any], uid: str) -> bytes:
    """The AdmissionReview of a pod CREATE by the ReplicaSet controller."""
    review = admission_review(pod, uid=uid, namespace="ml")
    review["request"]["userInfo"] = REPLICASET_CONTROLLER
    return orjson.dumps(review)


def mutate_body(pod: dict[str, Any] | None = None) -> bytes:
    return review_body(pod if pod is not None else deployment_pod(), MUTATE_UID)


def patch_of(reply: bytes) -> list[dict[str, Any]]:
    """The JSONPatch of a mutating webhook's AdmissionReview reply ([] if none)."""
    response = orjson.loads(reply)["response"]
    if not response.get("allowed"):
        raise ValueError(f"the mutation was not allowed: {response.get('status')}")
    if "patch" not in response:
        return []
    if response.get("patchType") != "JSONPatch":
        raise ValueError(f"unexpected patchType {response.get('patchType')!r}")
    patch: list[dict[str, Any]] = orjson.loads(base64.b64decode(response["patch"]))
    return patch


def validate_body(patch: list[dict[str, Any]], pod: dict[str, Any] | None = None) -> bytes:
    """The AdmissionReview kube-apiserver sends to the validating webhook: the pod with
    the mutating webhook's patch applied."""
    created = pod if pod is not None else deployment_pod()
    mutated = jsonpatch.apply_patch(copy.deepcopy(created), patch)
    return review_body(mutated, VALIDATE_UID)


def expected_markers(uid: str, patched: bool = False) -> list[str]:
    """What every allowed reply for `uid` contains (orjson and Starlette write compact
    JSON); with `patched`, the reply also carries a JSONPatch."""
    markers = [orjson.dumps({"uid": uid}).decode()[1:-1], '"allowed":true']
    return [*markers, '"patchType":"JSONPatch"'] if patched else markers
