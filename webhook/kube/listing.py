"""Reading what already runs: namespaces in scope, pods and workloads, nodes, the installed policy.

Everything is read as plain JSON, the way admission requests carry objects, so the
engine judges a listed pod exactly as it judges one under review. Lists are paged
(``limit`` and ``continue``), and each response is parsed as it arrives, one object
at a time (``ijson``, an incremental parser over the open response): neither a page
nor even two of its objects are ever held at once, raw or parsed, so what tenants
store cannot grow the reader, only make it take longer (40 ReplicaSets of 1.2 MB each
on one page cost a replica 200 MiB when pages were read whole). The ``continue``
token is read from the stream's own ``metadata``. Namespaces named are listed each by
its namespaced call, the others not at all. A list response's items carry no
``apiVersion`` and ``kind``; they are set here from the kind listed.

The audit's listings (``list_kind``, ``read_object``) also cap each object: one whose
JSON passes ``MAX_OBJECT_SIZE`` is not built but counted to its end and handed on as
``TooLarge`` (its name, namespace, uid and size), for the audit to report as too
large to be judged. Sizes are measured as the object is parsed, in characters of its
keys and values plus punctuation (about its JSON size, escapes counted once), so the
same object measures the same on every read.

Built-in workload kinds are listed at ``v1``; a custom kind (PyTorchJob, RayCluster,
...) at its group's preferred version (``preferred_versions``, one call for every
group). A group the cluster does not serve is no error: nothing of that kind runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import ijson  # type: ignore[import-untyped]
import orjson
from ijson.common import ObjectBuilder  # type: ignore[import-untyped]
from kubernetes import client

from webhook.engine.decision import shorten
from webhook.engine.dra.resource_slices import device_class_facts, resource_slice_facts
from webhook.engine.inventory import (
    DeviceClassFacts,
    Inventory,
    ResourceSliceFacts,
    node_facts,
    priority_class_facts,
)
from webhook.engine.templates import TemplateKind
from webhook.kube.api_errors import NOT_FOUND, ApiException

__all__ = [
    "AUDIT_PAGE_SIZE",
    "BUILT_IN_GROUPS",
    "MAX_OBJECT_SIZE",
    "PAGE_SIZE",
    "Listed",
    "TooLarge",
    "count_kind",
    "installed_policy",
    "list_kind",
    "list_objects",
    "namespaces_in_scope",
    "preferred_versions",
    "read_dra_inventory",
    "read_inventory",
    "read_object",
]

PAGE_SIZE = 500
"""Objects per page of the inventory's lists: kube-apiserver's own clients (kubectl,
informers) use 500."""

AUDIT_PAGE_SIZE = 100
"""Objects per page of the audit's lists. Our side holds one object whatever the page,
but kube-apiserver builds each page whole before it sends it: 100 tenant objects of
1.5 MiB are 150 MiB of the apiserver's memory, 500 would be 750 MiB."""

MAX_OBJECT_SIZE = 3 * 1024 * 1024
"""Largest object the audit parses, in characters of JSON (see the module's docstring).
etcd refuses requests over 1.5 MiB by default and kube-apiserver bodies over 3 MiB, so
an object a cluster stores is under this unless its etcd was given a larger limit; the
webhooks accept review bodies of up to 7 MiB, which hold an object twice. One object
parsed at this size costs the reader a few tens of MiB at most."""

REQUEST_TIMEOUT = (10.0, 60.0)
"""Connect and read timeouts of one page."""

READ_BUFFER = 64 * 1024
"""Bytes read from a response at a time."""

BUILT_IN_GROUPS = frozenset({"", "apps", "batch"})
"""Groups of the built-in kinds, all served at v1."""

POLICY_VOLUME = "policy"
POLICY_KEY = "policy.yaml"

IDENTITY_LIMIT = 253
"""Longest name, namespace or uid kept of an object too large to parse (names are at most
253 characters; a longer one is not what kube-apiserver stored)."""


@dataclass(frozen=True, slots=True)
class TooLarge:
    """An object listed but not parsed, its JSON being over ``cap``: what identifies it."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    size: int
    """Its size as measured when it passed ``cap`` and counted on to its end."""
    cap: int


Listed = dict[str, Any] | TooLarge
"""One object as listed: parsed, with ``apiVersion`` and ``kind`` set, or too large."""

Progress = Callable[[TemplateKind, int], None]
"""Told the kind and how many of its objects have been listed so far, after each page."""


def namespaces_in_scope(api: Any, label: tuple[str, str] | None) -> list[str]:
    """The names of the namespaces carrying ``label`` (key, value); every namespace when None."""
    return sorted(namespace_labels(api, label))


def namespace_labels(api: Any, label: tuple[str, str] | None) -> dict[str, dict[str, Any]]:
    """The labels of each namespace carrying ``label`` (key, value), by name; of every
    namespace when None."""
    core: Any = client.CoreV1Api(api)
    selector = None if label is None else f"{label[0]}={label[1]}"
    found: dict[str, dict[str, Any]] = {}
    for item in _objects(core.list_namespace, label_selector=selector):
        name = _name(item)
        labels = (item.get("metadata") or {}).get("labels")
        if name:
            found[name] = labels if isinstance(labels, dict) else {}
    return found


def list_kind(
    api: Any,
    kind: TemplateKind,
    version: str,
    *,
    namespaces: Iterable[str] | None = None,
    page_size: int = AUDIT_PAGE_SIZE,
    progress: Progress | None = None,
    max_object_size: int = MAX_OBJECT_SIZE,
) -> Generator[Listed]:
    """Every object of ``kind`` in ``namespaces`` (every namespace when None), one at a time,
    pages of ``page_size`` asked for one after the other.

    Given namespaces are listed one after the other by the namespaced calls, so a cluster
    where few namespaces opted in costs what they hold, not what the cluster holds. A kind
    of the core group is listed through its typed calls (pods), any other through the
    generic ``/apis/{group}/{version}[/namespaces/{namespace}]/{plural}``. Each object is
    parsed as it arrives and handed on before the next is read; one over
    ``max_object_size`` comes as ``TooLarge``. A caller that stops taking objects (closes
    the iterator) closes the response and stops the listing. Raises ApiException as the
    calls do (403 when the credentials may not list the kind)."""
    api_version = f"{kind.group}/{version}" if kind.group else version
    listed = 0
    for listing in _listings(api, kind, version, namespaces):
        pages = _page_streams(listing, limit=page_size)
        try:
            for page in pages:
                for item in _stream_objects(page.response, page, max_object_size):
                    listed += 1
                    yield _as_kind(item, api_version, kind.kind)
                if progress is not None:
                    progress(kind, listed)
        finally:
            pages.close()  # closes the page's response when the caller stopped early


def count_kind(api: Any, kind: TemplateKind, version: str) -> int | None:
    """How many objects of ``kind`` the cluster holds, in every namespace, told by one
    request for a page of one: the object it brings (counted, never built) and
    ``metadata.remainingItemCount``, the number kube-apiserver says remain after it. None
    when it does not say: a list with more to come but no count. Raises ApiException as
    the list call does (403 when the credentials may not list the kind across the
    cluster)."""
    [listing] = _listings(api, kind, version, None)
    response = listing(limit=1, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    try:
        return _counted(response)
    finally:
        _close(response)


def _counted(response: Any) -> int | None:
    """The ``items`` of a list response, plus its ``remainingItemCount``; None when it has a
    ``continue`` token without a count."""
    items, depth = 0, 0
    remaining: int | None = None
    more = False
    root_key: str | None = None
    metadata_key: str | None = None
    for event, value in ijson.basic_parse(response, buf_size=READ_BUFFER, use_float=True):
        if event == "map_key":
            if depth == 1:
                root_key = value
            elif depth == 2 and root_key == "metadata":
                metadata_key = value
        elif event in _STARTS:
            if depth == 2 and root_key == "items" and event == "start_map":
                items += 1
            depth += 1
        elif event in _ENDS:
            depth -= 1
        elif depth == 2 and root_key == "metadata":
            if metadata_key == "continue" and event == "string" and value:
                more = True
            elif metadata_key == "remainingItemCount" and event == "number":
                remaining = max(int(value), 0)
    if not more:
        return items
    return None if remaining is None else items + remaining


def read_object(
    api: Any,
    kind: TemplateKind,
    version: str,
    namespace: str,
    name: str,
    *,
    max_object_size: int = MAX_OBJECT_SIZE,
) -> Listed | None:
    """The object of ``kind`` named ``name`` in ``namespace`` as it is now, parsed under
    the same cap as a listing (``TooLarge`` over it); None when there is none (404).
    Raises ApiException otherwise."""
    api_version = f"{kind.group}/{version}" if kind.group else version
    try:
        if kind.group == "":
            core: Any = client.CoreV1Api(api)
            response = core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        else:
            objects: Any = client.CustomObjectsApi(api)
            response = objects.get_namespaced_custom_object(
                kind.group,
                version,
                namespace,
                kind.resource,
                name,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
    except ApiException as error:
        if error.status == NOT_FOUND:
            return None
        raise
    try:
        found = _parse_one(response, max_object_size)
    finally:
        _close(response)
    return None if found is None else _as_kind(found, api_version, kind.kind)


def _as_kind(item: Listed, api_version: str, kind: str) -> Listed:
    if isinstance(item, TooLarge):
        return TooLarge(api_version, kind, item.namespace, item.name, item.uid, item.size, item.cap)
    item["apiVersion"] = api_version
    item["kind"] = kind
    return item


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


def list_cluster_objects(
    api: Any, group: str, version: str, resource: str
) -> Iterator[dict[str, Any]]:
    """Every object of a cluster-scoped ``resource`` of ``group``/``version``, uncapped: for
    objects that administrators write (Kueue's ResourceFlavors), not tenants. Raises
    ApiException as the call does."""
    objects: Any = client.CustomObjectsApi(api)
    listing = functools.partial(objects.list_cluster_custom_object, group, version, resource)
    return _objects(listing)


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
        for item in _objects(core.list_node)
        if (facts := node_facts(item, node_label_keys)) is not None
    ]
    classes = [
        found
        for item in _objects(scheduling.list_priority_class)
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
        for item in _objects(resource.list_resource_slice)
        if (facts := resource_slice_facts(item, drivers=drivers, attributes=attributes)) is not None
    )
    classes = {
        found.name: found
        for item in _objects(resource.list_device_class)
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


class _PageStream:
    """One page's open response, and the ``continue`` token once its stream told it."""

    __slots__ = ("response", "token")

    def __init__(self, response: Any) -> None:
        self.response = response
        self.token: str | None = None


def _page_streams(listing: Callable[..., Any], **options: Any) -> Generator[_PageStream]:
    """Each page of ``listing`` as an open response, following ``continue`` to the last.
    The caller reads each page's objects (``_stream_objects``) before it asks for the
    next; the response is closed whether or not it was read to its end."""
    options.setdefault("limit", PAGE_SIZE)
    token: str | None = None
    while True:
        page = _PageStream(
            listing(
                **options,
                _continue=token,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        )
        try:
            yield page
        finally:
            _close(page.response)
        token = page.token
        if not token:
            return


def list_objects(
    listing: Callable[..., Any], *, max_object_size: int | None = None, **options: Any
) -> Generator[Listed]:
    """Every object of the list call ``listing`` (a method of the kubernetes client called
    with ``options``), page after page, one at a time as it arrives; one over
    ``max_object_size`` as ``TooLarge`` (uncapped when None). Objects keep the
    ``apiVersion`` and ``kind`` they came with: none, in a list."""
    pages = _page_streams(listing, **options)
    try:
        for page in pages:
            yield from _stream_objects(page.response, page, max_object_size)
    finally:
        pages.close()


def _objects(listing: Callable[..., Any], **options: Any) -> Iterator[dict[str, Any]]:
    """Every object of ``listing``, uncapped: for the inventory's reads (Nodes,
    PriorityClasses, ResourceSlices, DeviceClasses, Namespaces), objects that
    administrators and drivers write, not tenants."""
    for item in list_objects(listing, **options):
        if isinstance(item, dict):
            yield item


_STARTS = frozenset({"start_map", "start_array"})
_ENDS = frozenset({"end_map", "end_array"})
_IDENTITY = frozenset({"name", "namespace", "uid"})


def _stream_objects(
    response: Any, page: _PageStream, cap: int | None
) -> Iterator[dict[str, Any] | TooLarge]:
    """The objects of a list response's ``items``, each parsed as it arrives; the response's
    ``metadata.continue`` is set on ``page`` when met (kube-apiserver writes it before the
    items, but anywhere will do)."""
    events = iter(ijson.basic_parse(response, buf_size=READ_BUFFER, use_float=True))
    depth = 0
    root_key: str | None = None
    metadata_key: str | None = None
    for event, value in events:
        if depth == 2 and root_key == "items" and event == "start_map":
            yield _read_object(events, cap)
            continue
        if event == "map_key":
            if depth == 1:
                root_key = value
            elif depth == 2 and root_key == "metadata":
                metadata_key = value
        elif (
            event == "string"
            and depth == 2
            and root_key == "metadata"
            and metadata_key == "continue"
        ):
            page.token = value
        elif event in _STARTS:
            depth += 1
        elif event in _ENDS:
            depth -= 1


def _parse_one(response: Any, cap: int | None) -> dict[str, Any] | TooLarge | None:
    """The one object of a read's response, under ``cap``; None if it is not an object."""
    events = iter(ijson.basic_parse(response, buf_size=READ_BUFFER, use_float=True))
    for event, _ in events:
        if event != "start_map":
            return None
        found = _read_object(events, cap)
        for _ in events:  # to the end of the body: the connection can then be reused
            pass
        return found
    return None


def _read_object(events: Iterator[tuple[str, Any]], cap: int | None) -> dict[str, Any] | TooLarge:
    """The object whose ``start_map`` was just taken from ``events``, built as its events
    come, up to its ``end_map``. Once its size passes ``cap`` what was built is let go and
    the rest only counted: the result is then ``TooLarge``, with the name, namespace and
    uid of its metadata as they went by."""
    builder: Any = ObjectBuilder()
    builder.event("start_map", None)
    size, depth = 1, 1
    top_key: str | None = None
    metadata_key: str | None = None
    identity: dict[str, str] = {}
    for event, value in events:
        if event == "map_key" or event == "string":
            size += len(value) + 3  # quotes, and a colon or comma
            if event == "map_key":
                if depth == 1:
                    top_key = value
                elif depth == 2 and top_key == "metadata":
                    metadata_key = value
            elif depth == 2 and top_key == "metadata" and metadata_key in _IDENTITY:
                identity[str(metadata_key)] = shorten(value, IDENTITY_LIMIT)
        elif event in _STARTS:
            depth += 1
            size += 2
        elif event in _ENDS:
            depth -= 1
        else:
            size += 8  # a number, true, false or null, and its comma
        if builder is not None:
            builder.event(event, value)
            if cap is not None and size > cap:
                builder = None  # let go of what was built: the rest is only counted
        if depth == 0:
            break
    if builder is None:
        return TooLarge(
            "",
            "",
            identity.get("namespace", ""),
            identity.get("name", ""),
            identity.get("uid", ""),
            size,
            cap or 0,
        )
    built = builder.value
    return built if isinstance(built, dict) else {}


def _close(response: Any) -> None:
    """Close ``response`` (a connection left mid-body cannot be reused) and release it."""
    try:
        if not response.isclosed():
            response.close()
    finally:
        response.release_conn()


def _json(response: Any) -> dict[str, Any]:
    try:
        body = orjson.loads(response.data)
    finally:
        response.release_conn()
    return body if isinstance(body, dict) else {}


def _name(item: dict[str, Any]) -> str:
    name = (item.get("metadata") or {}).get("name")
    return name if isinstance(name, str) else ""
