"""Publishing PolicyReports (webhook.kube.policy_reports) against a stand-in for the
custom objects API; tests/e2e/test_audit.py publishes to a real kube-apiserver."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from webhook.kube import policy_reports as publishing
from webhook.kube.api_errors import ApiException
from webhook.kube.policy_reports import MANAGED_BY, REPORT_NAME, publish_policy_reports

LABELS = {"app.kubernetes.io/managed-by": "gpu-admission"}


def report(namespace: str, name: str = REPORT_NAME, passed: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS)},
        "summary": {"pass": passed},
        "results": [],
    }


class CustomObjects:
    """Stores reports by (namespace, name); lists by the selectors kube-apiserver supports
    for custom resources, a page of `limit` at a time."""

    def __init__(self, *stored: dict[str, Any]) -> None:
        self.stored = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in stored}
        self.lists: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str]] = []
        self.written: list[tuple[str, str]] = []

    def list_cluster_custom_object(self, *_: Any, **options: Any) -> dict[str, Any]:
        self.lists.append(options)
        field, _, name = options["field_selector"].partition("=")
        assert field == "metadata.name"
        label_key, _, label_value = options["label_selector"].partition("=")
        matching = [
            item
            for (_, stored_name), item in sorted(self.stored.items())
            if stored_name == name and item["metadata"]["labels"].get(label_key) == label_value
        ]
        start = int(options.get("_continue") or 0)
        end = start + options["limit"]
        more = {"continue": str(end)} if end < len(matching) else {}
        return {"items": matching[start:end], "metadata": more}

    def get_namespaced_custom_object(self, _g: str, _v: str, namespace: str, _p: str, name: str, **_: Any) -> dict[str, Any]:  # fmt: skip
        if (namespace, name) not in self.stored:
            raise ApiException(status=404, reason="Not Found")
        return {"metadata": {"resourceVersion": "1"}}

    def create_namespaced_custom_object(self, _g: str, _v: str, namespace: str, _p: str, body: dict[str, Any], **_: Any) -> None:  # fmt: skip
        self.written.append((namespace, body["metadata"]["name"]))
        self.stored[(namespace, body["metadata"]["name"])] = body

    def replace_namespaced_custom_object(self, _g: str, _v: str, namespace: str, _p: str, name: str, body: dict[str, Any], **_: Any) -> None:  # fmt: skip
        self.written.append((namespace, name))
        self.stored[(namespace, name)] = body

    def delete_namespaced_custom_object(self, _g: str, _v: str, namespace: str, _p: str, name: str, **_: Any) -> None:  # fmt: skip
        if name != REPORT_NAME:  # as the service account's RBAC refuses
            raise ApiException(status=403, reason="Forbidden")
        self.deleted.append((namespace, name))
        del self.stored[(namespace, name)]


@pytest.fixture
def objects(monkeypatch: pytest.MonkeyPatch) -> CustomObjects:
    found = CustomObjects()
    monkeypatch.setattr(client, "CustomObjectsApi", lambda api: found)
    monkeypatch.setattr(publishing, "PAGE_SIZE", 2)
    return found


def test_only_reports_named_as_ours_are_listed_and_foreign_labelled_ones_are_never_touched(
    objects: CustomObjects,
) -> None:
    foreign = [report("tenant", f"spoof-{i}") for i in range(5)]
    objects.stored.update({("tenant", r["metadata"]["name"]): r for r in foreign})
    objects.stored[("gone", REPORT_NAME)] = report("gone")

    result = publish_policy_reports(None, {"ml": report("ml")})

    assert result is not None
    assert (result.written, result.deleted, result.failed) == (["ml"], ["gone"], {})
    assert objects.deleted == [("gone", REPORT_NAME)]
    assert all(("tenant", r["metadata"]["name"]) in objects.stored for r in foreign)
    assert {(o["field_selector"], o["label_selector"]) for o in objects.lists} == {
        (f"metadata.name={REPORT_NAME}", MANAGED_BY)
    }


def test_our_reports_are_listed_a_page_at_a_time_to_the_last(objects: CustomObjects) -> None:
    stored = [report(f"ns-{i}") for i in range(5)]
    objects.stored.update({(r["metadata"]["namespace"], REPORT_NAME): r for r in stored})

    result = publish_policy_reports(None, {r["metadata"]["namespace"]: report(r["metadata"]["namespace"]) for r in stored[:4]})  # fmt: skip

    assert result is not None
    assert [o["limit"] for o in objects.lists] == [2, 2, 2]
    assert [o.get("_continue") for o in objects.lists] == [None, "2", "4"]
    assert (sorted(result.unchanged), result.written, result.deleted) == (
        ["ns-0", "ns-1", "ns-2", "ns-3"],
        [],
        ["ns-4"],
    )


def test_a_changed_report_is_written_and_an_unchanged_one_left_as_stored(
    objects: CustomObjects,
) -> None:
    objects.stored[("a", REPORT_NAME)] = report("a", passed=1)
    objects.stored[("b", REPORT_NAME)] = report("b", passed=1)

    result = publish_policy_reports(None, {"a": report("a", passed=1), "b": report("b", passed=2)})

    assert result is not None
    assert (result.unchanged, result.written) == (["a"], ["b"])
    assert objects.written == [("b", REPORT_NAME)]


def test_without_the_crd_nothing_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoCrd(CustomObjects):
        def list_cluster_custom_object(self, *_: Any, **options: Any) -> dict[str, Any]:
            raise ApiException(status=404, reason="Not Found")

    monkeypatch.setattr(client, "CustomObjectsApi", lambda api: NoCrd())
    assert publish_policy_reports(None, {"ml": report("ml")}) is None


def test_the_digest_compares_what_same_report_compares() -> None:
    stored = report("ml", passed=1)
    stored["metadata"] |= {"resourceVersion": "7", "uid": "u"}
    stored["results"] = [{"rule": "r", "timestamp": {"seconds": 1}}]
    wanted = report("ml", passed=1)
    wanted["results"] = [{"rule": "r", "timestamp": {"seconds": 2}}]

    assert publishing.same_report(stored, wanted)
    assert publishing.report_digest(stored) == publishing.report_digest(wanted)
    wanted["summary"] = {"pass": 2}
    assert publishing.report_digest(stored) != publishing.report_digest(wanted)
