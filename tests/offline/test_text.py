"""The text report of `gpu-admission check` (webhook/offline/text.py): its summary counts
what was judged, each kind under its own word."""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders
from tests.builders import claim_spec, claim_template, dra_engine
from webhook.engine import Engine
from webhook.offline.documents import Document, ManifestError
from webhook.offline.evaluation import Report, evaluate
from webhook.offline.text import report_lines, report_text, summary_line


def checked(engine: Engine, *objects: dict[str, Any]) -> Report:
    return evaluate(engine, [Document("app.yaml", 1, obj) for obj in objects])


def template_of(pod: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": pod["metadata"], "spec": pod["spec"]}


def job(name: str, pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"template": template_of(pod)},
    }


ONE_GPU = builders.pod("training", containers=[builders.container(gpus=1)])
NINE_GPUS = builders.pod("training", name="big", containers=[builders.container(gpus=9)])


def pytorch_job(*replicas: str) -> dict[str, Any]:
    """A PyTorchJob with a template per replica type, each of a training pod of one GPU."""
    specs = {kind: {"replicas": 1, "template": template_of(ONE_GPU)} for kind in replicas}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"pytorchReplicaSpecs": specs},
    }


def resource_claim(name: str) -> dict[str, Any]:
    return {**claim_template(name), "kind": "ResourceClaim", "spec": claim_spec()}


class TestSummary:
    def test_pods_and_pod_templates_are_counted_apart(self, engine: Engine) -> None:
        report = checked(engine, builders.pod(name="a"), NINE_GPUS, job("j", builders.pod()))

        assert summary_line(report) == "2 pods and 1 pod template: 2 allowed, 1 denied\n"

    def test_a_workload_with_several_templates_counts_each(self, engine: Engine) -> None:
        report = checked(engine, pytorch_job("Master", "Worker"), job("j", NINE_GPUS))

        assert summary_line(report) == "3 pod templates: 2 allowed, 1 denied\n"

    @pytest.mark.parametrize(
        ("objects", "summary"),
        [
            ([builders.pod()], "1 pod: 1 allowed, 0 denied"),
            ([builders.pod(), builders.pod()], "2 pods: 2 allowed, 0 denied"),
            ([job("j", builders.pod())], "1 pod template: 1 allowed, 0 denied"),
            (
                [builders.pod(), job("j", builders.pod())],
                "1 pod and 1 pod template: 2 allowed, 0 denied",
            ),
            ([], "0 pods: 0 allowed, 0 denied"),
        ],
        ids=["one-pod", "two-pods", "one-template", "one-of-each", "nothing"],
    )
    def test_each_noun_is_singular_or_plural_as_its_count_asks(
        self, engine: Engine, objects: list[dict[str, Any]], summary: str
    ) -> None:
        assert summary_line(checked(engine, *objects)) == f"{summary}\n"

    def test_a_workload_whose_template_cannot_be_read_is_a_pod_template(
        self, engine: Engine
    ) -> None:
        broken = {**job("j", builders.pod()), "spec": {"template": ["not", "a", "mapping"]}}

        assert summary_line(checked(engine, broken)) == "1 pod template: 0 allowed, 1 denied\n"

    def test_claim_objects_are_counted_by_their_kind(self) -> None:
        engine = dra_engine()
        report = checked(
            engine,
            builders.pod(),
            claim_template("one-gpu"),
            claim_template("nine", claim_spec(count=9)),
            resource_claim("shared"),
        )

        assert summary_line(report) == (
            "1 pod: 1 allowed, 0 denied; "
            "2 ResourceClaimTemplates and 1 ResourceClaim: 2 allowed, 1 denied\n"
        )

    def test_claim_objects_alone_are_all_the_summary_counts(self) -> None:
        report = checked(dra_engine(), resource_claim("shared"))

        assert summary_line(report) == "1 ResourceClaim: 1 allowed, 0 denied\n"

    def test_skipped_objects_and_unreadable_files_follow(self, engine: Engine) -> None:
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        report = checked(engine, job("j", builders.pod()), config_map)
        errors = [ManifestError("broken.yaml", 2, "not valid YAML: ...")]

        assert summary_line(report, errors) == (
            "1 pod template: 1 allowed, 0 denied; 1 object skipped; 1 file unreadable\n"
        )

    def test_both_text_reports_end_with_the_summary(self, engine: Engine) -> None:
        report = checked(engine, builders.pod(), job("j", NINE_GPUS))
        summary = "1 pod and 1 pod template: 1 allowed, 1 denied\n"

        assert report_lines(report).endswith(f"\n{summary}")
        assert report_lines(report, only_denied=True).endswith(f"\n{summary}")
        assert report_text(report).endswith(f"\n\n{summary}")
