"""What `gpu-admission explain` prints of one object and of several (webhook/offline/explained.py)."""

from __future__ import annotations

from typing import Any

from tests import builders
from tests.builders import claim_template, claiming_pod, dra_engine
from webhook.engine import Engine
from webhook.offline.documents import Document, ManifestError
from webhook.offline.evaluation import Report, evaluate
from webhook.offline.explained import explain_each, explain_one, subjects
from webhook.offline.prose import explain, explain_claim_object
from webhook.offline.text import report_lines

CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}
NINE_GPUS = builders.pod("training", name="big", containers=[builders.container(gpus=9)])


def documents(*objects: dict[str, Any]) -> list[Document]:
    """Each object at its own line of one file, as check would report it."""
    return [Document("app.yaml", 10 * index + 1, obj) for index, obj in enumerate(objects)]


def checked(engine: Engine, *objects: dict[str, Any]) -> Report:
    return evaluate(engine, documents(*objects))


def job(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"template": {"metadata": pod["metadata"], "spec": pod["spec"]}},
    }


class TestSubjects:
    def test_claim_objects_go_with_the_pods_that_name_them(self) -> None:
        read = documents(claiming_pod(), claim_template("one-gpu"))

        assert [d.object["kind"] for d in subjects(read)] == ["Pod"]

    def test_claim_objects_alone_are_the_subjects(self) -> None:
        read = documents(claim_template("one-gpu"), claim_template("two"))

        assert len(subjects(read)) == 2


class TestOneObject:
    def test_a_pod_is_its_prose_alone(self, engine: Engine) -> None:
        report = checked(engine, NINE_GPUS)

        assert explain_one(report) == explain(report.pods[0])

    def test_a_pod_is_followed_by_the_claim_objects_it_names(self) -> None:
        report = checked(dra_engine(), claiming_pod(), claim_template("one-gpu"))

        assert explain_one(report) == (
            f"{explain(report.pods[0])}\n{explain_claim_object(report.claim_objects[0])}"
        )

    def test_an_object_without_a_template_says_there_is_nothing_to_explain(
        self, engine: Engine
    ) -> None:
        assert explain_one(checked(engine, CONFIG_MAP)) == (
            "ConfigMap 'settings': nothing to explain, v1 ConfigMap has no pod template\n"
        )


class TestSeveralObjects:
    def test_each_is_headed_by_its_line_of_checks_report_in_checks_order(
        self, engine: Engine
    ) -> None:
        report = checked(engine, CONFIG_MAP, builders.pod(name="etl"), job(NINE_GPUS))
        error = ManifestError("broken.yaml", 3, "not valid YAML: ...")

        text = explain_each(report, [error])

        headers = [line for line in text.splitlines() if line and not line.startswith(" ")]
        assert headers == report_lines(report, [error]).splitlines()
        assert headers[:2] == [
            "allowed  Pod/ml/etl  app.yaml:11",
            "DENIED   Job/ml/train /spec/template  app.yaml:21  gpu-count: pod requests 9 "
            "nvidia.com/gpu; the largest node in pool training has 8; split the work into "
            "pods of at most 8",
        ]
        assert headers[-3:] == [
            "skipped  ConfigMap/settings  app.yaml:1  v1 ConfigMap has no pod template",
            "ERROR    broken.yaml:3  not valid YAML: ...",
            "1 pod and 1 pod template: 1 allowed, 1 denied; 1 object skipped; 1 file unreadable",
        ]

    def test_each_explanation_is_indented_under_its_line_and_a_blank_line_follows(
        self, engine: Engine
    ) -> None:
        report = checked(engine, builders.pod(name="etl"), NINE_GPUS)
        etl, big = report.pods

        text = explain_each(report)

        indented = "".join(f"    {line}\n" if line else "\n" for line in explain(big).splitlines())
        assert "\nDENIED   Pod/ml/big  app.yaml:11  gpu-count: " in text
        assert f"8\n{indented}\n2 pods: 1 allowed, 1 denied\n" in text
        assert text.startswith(
            f"allowed  Pod/ml/etl  app.yaml:1\n    {explain(etl).splitlines()[0]}"
        )
        assert not any(line.endswith(" ") for line in text.splitlines())

    def test_a_skipped_object_is_said_to_have_nothing_to_explain(self, engine: Engine) -> None:
        text = explain_each(checked(engine, builders.pod(), CONFIG_MAP))

        assert (
            "skipped  ConfigMap/settings  app.yaml:11  v1 ConfigMap has no pod template\n"
            "    ConfigMap 'settings': nothing to explain, v1 ConfigMap has no pod template\n\n"
        ) in text

    def test_claim_objects_follow_the_pods_each_under_its_line(self) -> None:
        report = checked(
            dra_engine(), claim_template("one-gpu"), claiming_pod(), builders.pod(name="etl")
        )

        text = explain_each(report)

        headers = [line for line in text.splitlines() if line and not line.startswith(" ")]
        assert [header.split("  ")[1] for header in headers[:-1]] == [
            "Pod/ml/p",
            "Pod/ml/etl",
            "ResourceClaimTemplate/ml/one-gpu",
        ]
        assert (
            "ResourceClaimTemplate/ml/one-gpu  app.yaml:1\n"
            "    ResourceClaimTemplate 'one-gpu' would be admitted: it asks for 1 GPU of "
            "DeviceClass gpu.nvidia.com.\n\n"
        ) in text
