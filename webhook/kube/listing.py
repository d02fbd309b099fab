"""Reading what already runs: namespaces in scope, pods and workloads, nodes, the installed policy.

Everything is read as plain JSON, the way admission requests carry objects, so the
engine judges a listed pod exactly as it judges one under review. Lists are paged
(``limit`` and ``continue``), and each page is handed on before the next is asked
for: a cluster of 50,000 pods is never held in memory at once. Namespaces named are
listed each by its namespaced call, the others not at all. A list response's items
carry no ``apiVersion`` and ``kind``; they are set here from the kind listed.

Built-in workload kinds are listed at ``v1``; a custom kind (PyTorchJob, RayCluster,
...) at its group's preferred version (``preferred_versions``, one call for every
group). A group the cluster does not serve is no error: nothing of that kind runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from kubernetes import client

from webhook.engine.inventory import (
    DeviceClassFacts,
    Inventory,
    ResourceSliceFacts,
    node_facts,
    priority_class_facts,
)
from webhook.engine.resource_slices import device_class_facts, resource_slice_facts
from webhook.engine.templates import TemplateKind

__all__ = [
    "BUILT_IN_GROUPS",
    "PAGE_SIZE",
    "Page",
    "installed_policy",
    "list_kind",
    "namespaces_in_scope",
    "preferred_versions",
    "read_dra_inventory",
    "read_inventory",
]

PAGE_SIZE = 500
"""Objects per page: kube-apiserver's own clients (kubectl, informers) use 500."""

REQUEST_TIMEOUT = (10.0, 60.0)
"""Connect and read timeouts of one page."""

BUILT_IN_GROUPS = frozenset({"", "apps", "batch"})
"""Groups of the built-in kinds, all served at v1."""

POLICY_VOLUME = "policy"
POLICY_KEY = "policy.yaml"


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list: its objects, each with ``apiVersion`` and ``kind`` set."""

    kind: TemplateKind
    items: list[dict[str, Any]]


Progress = Callable[[TemplateKind, int], None]
"""Told the kind and how many of its objects have been listed so far, after each page."""


def namespaces_in_scope(api: Any, label: tuple[str, str] | None) -> list[str]:
    """The names of the namespaces carrying ``label`` (key, value); every namespace when None."""
    core: Any = client.CoreV1Api(api)
    selector = None if label is None else f"{label[0]}={label[1]}"
    names = []
    for items in _pages(core.list_namespace, label_selector=selector):
        names += [_name(item) for item in items]
    return sorted(name for name in names if name)


def list_kind(
    api: Any,
    kind: TemplateKind,
    version: str,
    *,
    namespaces: Iterable[str] | None = None,
    page_size: int = PAGE_SIZE,
    progress: Progress | None = None,
) -> Iterator[Page]:
    """Every object of ``kind`` in ``namespaces`` (every namespace when None), page by page.

    Given namespaces are listed one after the other by the namespaced calls, so a cluster
    where few namespaces opted in costs what they hold, not what the cluster holds. A kind
    of the core group is listed through its typed calls (pods), any other through the
    generic ``/apis/{group}/{version}[/namespaces/{namespace}]/{plural}``. The next page
    is asked for only when the last one has been taken: a caller that stops taking pages
    stops the listing. Raises ApiException as the calls do (403 when the credentials may
    not list the kind)."""
    api_version = f"{kind.group}/{version}" if kind.group else version
    listed = 0
    for listing in _listings(api, kind, version, namespaces):
        for items in _pages(listing, limit=page_size):
            for item in items:
                item["apiVersion"] = api_version
                item["kind"] = kind.kind
            listed += len(items)
            if progress is not None:
                progress(kind, listed)
            yield Page(kind, items)


def _listings(
    api: Any, kind: TemplateKind, version: str, namespaces: Iterable[str] | None
) -> Iterator[Callable[..., Any]]:
    """The list call of ``kind`` for all namespaces, or one for each of ``namespaces``."""
    if kind.group == "":
        core: Any = client.CoreV1Api(api)
        if namespaces is None:
            yield core.list_pod_for_all_namespaces
        else:
            for namespace in namespaces:
                yield functools.partial(core.list_namespaced_pod, namespace)
        return
    objects: Any = client.CustomObjectsApi(api)
    if namespaces is None:
        yield functools.partial(
            objects.list_cluster_custom_object, kind.group, version, kind.resource
        )
        return
    for namespace in namespaces:
        yield functools.partial(
            objects.list_namespaced_custom_object, kind.group, version, namespace, kind.resource
        )


def preferred_versions(api: Any) -> dict[str, str]:
    """Each API group the cluster serves -> its preferred version (one call: ``GET /apis``),
    with the built-in groups at ``v1``."""
    apis: Any = client.ApisApi(api)
    body = _json(apis.get_api_versions(_preload_content=False, _request_timeout=REQUEST_TIMEOUT))
    versions = dict.fromkeys(BUILT_IN_GROUPS, "v1")
    for group in body.get("groups") or ():
        if not isinstance(group, dict):
            continue
        name, preferred = group.get("name"), (group.get("preferredVersion") or {}).get("version")
        if isinstance(name, str) and isinstance(preferred, str) and name not in versions:
            versions[name] = preferred
    return versions


def read_inventory(api: Any, node_label_keys: Collection[str] | None = None) -> Inventory:
    """Nodes and PriorityClasses as they are now, listed once (no watch)."""
    core: Any = client.CoreV1Api(api)
    scheduling: Any = client.SchedulingV1Api(api)
    nodes = [
        facts
        for items in _pages(core.list_node)
        for item in items
        if (facts := node_facts(item, node_label_keys)) is not None
    ]
    classes = [
        found
        for items in _pages(scheduling.list_priority_class)
        for item in items
        if (found := priority_class_facts(item)) is not None
    ]
    return Inventory(tuple(sorted(nodes, key=lambda node: node.name)), {c.name: c for c in classes})


def read_dra_inventory(
    api: Any, drivers: Collection[str], attributes: Collection[str]
) -> tuple[tuple[ResourceSliceFacts, ...], dict[str, DeviceClassFacts]]:
    """The ResourceSlices of ``drivers`` (only the device ``attributes`` kept, as the live
    inventory keeps them) and every DeviceClass, as they are now, listed once (no watch).
    Raises ApiException as the calls do (404 when the cluster does not serve
    ``resource.k8s.io/v1``, 403 when the credentials may not list them)."""
    resource: Any = client.ResourceV1Api(api)
    slices = tuple(
        facts
        for items in _pages(resource.list_resource_slice)
        for item in items
        if (facts := resource_slice_facts(item, drivers=drivers, attributes=attributes)) is not None
    )
    classes = {
        found.name: found
        for items in _pages(resource.list_device_class)
        for item in items
        if (found := device_class_facts(item)) is not None
    }
    return slices, classes


def installed_policy(api: Any, namespace: str, deployment: str) -> tuple[str, str]:
    """(where, text) of the policy the installed service serves: the ConfigMap its
    Deployment mounts as the ``policy`` volume (kustomize names it with a hash).

    Raises kubernetes' ApiException (404 when there is no such Deployment or ConfigMap) and
    LookupError when the Deployment mounts no policy ConfigMap or it holds no policy."""
    apps: Any = client.AppsV1Api(api)
    core: Any = client.CoreV1Api(api)
    found = _json(apps.read_namespaced_deployment(deployment, namespace, _preload_content=False))
    volumes = (((found.get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes")
    name = next(
        (
            (volume.get("configMap") or {}).get("name")
            for volume in volumes or ()
            if volume.get("name") == POLICY_VOLUME
        ),
        None,
    )
    if not name:
        raise LookupError(
            f"Deployment {namespace}/{deployment} mounts no ConfigMap as its "
            f"{POLICY_VOLUME!r} volume"
        )
    configmap = _json(core.read_namespaced_config_map(name, namespace, _preload_content=False))
    text = (configmap.get("data") or {}).get(POLICY_KEY)
    if not isinstance(text, str):
        raise LookupError(f"ConfigMap {namespace}/{name} holds no {POLICY_KEY}")
    return f"ConfigMap {namespace}/{name}", text


def _pages(listing: Callable[..., Any], **options: Any) -> Iterator[list[dict[str, Any]]]:
    """The items of each page of ``listing``, following ``continue`` to the last."""
    options.setdefault("limit", PAGE_SIZE)
    token: str | None = None
    while True:
        body = _json(
            listing(
                **options,
                _continue=token,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        )
        items = body.get("items") or []
        yield [item for item in items if isinstance(item, dict)]
        token = (body.get("metadata") or {}).get("continue") or None
        if token is None:
            return


def _json(response: Any) -> dict[str, Any]:
    try:
        body = orjson.loads(response.data)
    finally:
        response.release_conn()
    return body if isinstance(body, dict) else {}


def _name(item: dict[str, Any]) -> str:
    name = (item.get("metadata") or {}).get("name")
    return name if isinstance(name, str) else ""
