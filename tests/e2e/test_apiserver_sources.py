"""kube-apiserver's addresses as the cluster lists them (webhook/kube/apiserver_endpoints.py),
read through a real kube-apiserver. This one serves on loopback, where it keeps no
endpoints (``--endpoint-reconciler-type=none``: validation refuses loopback addresses),
so the `kubernetes` EndpointSlice is written here as kube-apiserver's lease reconciler
writes it for an advertise address."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from webhook.kube.apiserver_endpoints import apiserver_addresses
from webhook.kube.client import api_client

from .controlplane import ControlPlane

ADVERTISED = ["10.0.0.10", "10.0.0.11"]


@pytest.fixture
def kubernetes_endpoints(controlplane: ControlPlane) -> Iterator[None]:
    endpoints = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "kubernetes"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address]} for address in ADVERTISED],
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
    }
    controlplane.apply(json.dumps(endpoints))
    try:
        yield
    finally:
        controlplane.kubectl("delete", "endpointslice", "kubernetes", "-n", "default")


def test_the_kubernetes_endpointslice_names_kube_apiservers_addresses(
    controlplane: ControlPlane, kubernetes_endpoints: None
) -> None:
    assert apiserver_addresses(api_client(controlplane.kubeconfig, None)) == ADVERTISED


def test_a_cluster_without_it_lists_none(controlplane: ControlPlane) -> None:
    assert apiserver_addresses(api_client(controlplane.kubeconfig, None)) == []
