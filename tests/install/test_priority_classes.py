"""webhook/install/priority_classes.py: the PriorityClasses every install creates are the
policy's, whatever it names them."""

from __future__ import annotations

from pathlib import Path

from webhook.install.plan import render_install
from webhook.install.priority_classes import priority_class_objects, priority_class_specs
from webhook.policy import load_default_policy, load_policy_file
from webhook.policy.load import default_policy_text, load_policy_text

REPOSITORY = Path(__file__).resolve().parents[2]
TEAM_POLICY = REPOSITORY / "policies" / "examples" / "acme.yaml"


def test_the_default_policys_classes_are_inference_and_training_priority() -> None:
    specs = priority_class_specs(load_default_policy())

    assert [(s["name"], s["value"], s["preemptionPolicy"]) for s in specs] == [
        ("inference-priority", 1000000, "PreemptLowerPriority"),
        ("training-priority", 1000, "PreemptLowerPriority"),
    ]


def test_a_teams_classes_come_with_their_own_names_values_and_preemption_policy() -> None:
    objects = priority_class_objects(load_policy_file(TEAM_POLICY))

    assert [
        (o["metadata"]["name"], o["value"], o["preemptionPolicy"], o["globalDefault"])
        for o in objects
    ] == [
        ("acme-inference", 500000, "PreemptLowerPriority", False),
        ("acme-training", 200, "Never", False),
    ]
    assert all(
        o["metadata"]["labels"] == {"app.kubernetes.io/name": "gpu-admission"} for o in objects
    )


def test_two_classes_sharing_a_priority_class_make_it_once_and_the_description_names_both() -> None:
    text = default_policy_text().replace(
        "priorityClass: {name: training-priority, value: 1000}",
        "priorityClass: {name: inference-priority, value: 1000000}",
    )

    [spec] = priority_class_specs(load_policy_text(text, "shared.yaml"))

    assert spec["name"] == "inference-priority"
    assert "classes inference, training" in spec["description"]


def test_install_creates_the_policys_classes_and_not_the_bases() -> None:
    policy = load_policy_file(TEAM_POLICY)

    plan = render_install(policy, TEAM_POLICY.read_text("utf-8"), "")

    names = [o["metadata"]["name"] for o in plan.objects if o["kind"] == "PriorityClass"]
    assert names == ["acme-inference", "acme-training"]
