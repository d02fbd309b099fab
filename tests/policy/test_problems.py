"""Every problem of a broken policy at once, each at its line (webhook/policy/load.py,
references.py, yaml_source.py)."""

from __future__ import annotations

import pytest

from tests.policy.edits import edited, line_of
from webhook.engine import RULES
from webhook.errors import PolicyError, PolicyProblem
from webhook.policy import load_policy_text
from webhook.policy.load import MAX_DEPTH, default_policy_text

SOURCE = "edited.yaml"


def problems_of(text: str, rule_names: tuple[str, ...] | None = None) -> list[PolicyProblem]:
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text, SOURCE, rule_names=rule_names)
    return list(raised.value.problems)


TWO_TYPOS = edited(
    ("    gpusPerNode: 8\n    # taints", "    gpusPerNod: 8\n    # taints"),
    ("pools: [training]", "pools: [trainig]"),
)


def test_a_misspelt_field_is_reported_as_unknown_and_the_field_as_missing_each_at_its_line() -> (
    None
):
    problems = problems_of(TWO_TYPOS)

    texts = [str(p) for p in problems]
    typo = line_of(TWO_TYPOS, "gpusPerNod: 8")
    assert (
        f"{SOURCE}:{typo}: pools.inference.gpusPerNod: "
        "unknown key 'gpusPerNod' in pools.inference; did you mean 'gpusPerNode'?"
    ) in texts
    assert any(
        t.startswith(f"{SOURCE}:")
        and "pools.inference.gpusPerNode: missing required key 'gpusPerNode'" in t
        for t in texts
    )


def test_a_missing_field_is_reported_at_the_mapping_that_lacks_it() -> None:
    [missing] = [
        p for p in problems_of(TWO_TYPOS) if p.reason == "missing required key 'gpusPerNode'"
    ]

    assert missing.path == "pools.inference.gpusPerNode"
    assert missing.line == line_of(TWO_TYPOS, "  inference:")


def test_field_errors_and_cross_reference_errors_are_reported_together_in_line_order() -> None:
    problems = problems_of(TWO_TYPOS)

    assert [p.path for p in problems] == [
        "pools.inference.gpusPerNode",
        "pools.inference.gpusPerNod",
        "classes.training.pools[0]",
    ]
    assert problems[2].line == line_of(TWO_TYPOS, "pools: [trainig]")
    assert "unknown pool 'trainig'" in problems[2].reason
    assert [p.line for p in problems] == sorted(p.line or 0 for p in problems)


def test_the_error_text_has_one_line_per_problem() -> None:
    with pytest.raises(PolicyError) as raised:
        load_policy_text(TWO_TYPOS, SOURCE)

    lines = str(raised.value).splitlines()
    assert len(lines) == 3
    assert all(line.startswith(f"{SOURCE}:") for line in lines)
    assert (raised.value.source, raised.value.path) == (SOURCE, "pools.inference.gpusPerNode")


def test_a_pool_given_twice_is_an_error_naming_both_lines() -> None:
    text = default_policy_text() + "\n".join(
        ["", "pools:", "  inference:", "    gpusPerNode: 4", "    models: {A100: {}}", ""]
    )

    problems = problems_of(text)

    lines = text.splitlines()
    first, again = [n for n, line in enumerate(lines, start=1) if line == "pools:"]
    assert [(p.path, p.line) for p in problems] == [
        ("classes.training.pools[0]", line_of(text, "pools: [training]")),
        ("pools", again),
    ]
    assert "unknown pool 'training'" in problems[0].reason
    assert problems[1].reason == (
        f"duplicate key 'pools': given at line {first} and again at line {again}; "
        "YAML would keep only the last"
    )


def test_duplicate_keys_are_found_at_any_depth_and_every_one_is_reported() -> None:
    text = edited(
        (
            "    gpusPerNode: 8\n    # taints",
            "    gpusPerNode: 8\n    gpusPerNode: 4\n    # taints",
        ),
        ("pools: [training]", "pools: [training]\n    pools: [training]"),
    )

    problems = problems_of(text)

    assert [(p.path, p.line) for p in problems] == [
        ("pools.inference.gpusPerNode", line_of(text, "gpusPerNode: 4")),
        ("classes.training.pools", line_of(text, "pools: [training]", 1)),
    ]
    assert all("duplicate key" in p.reason for p in problems)


def test_unknown_rule_names_are_reported_with_the_others_when_the_rules_are_given() -> None:
    text = TWO_TYPOS + "enforcement:\n  rules: {gpu-cout: warn, visible-devices: audit}\n"

    problems = problems_of(text, RULES.names)

    [rule] = [p for p in problems if p.path.startswith("enforcement")]
    assert rule.path == "enforcement.rules.gpu-cout"
    assert rule.line == line_of(text, "gpu-cout")
    assert rule.reason.startswith("unknown rule 'gpu-cout'; rules: visible-devices, ")
    assert len(problems) == 4


@pytest.mark.parametrize(
    ("replacements", "path", "reason"),
    [
        (
            [
                (
                    "  training:\n    gpusPerNode: 8",
                    "  training:\n    labelValue: inference\n    gpusPerNode: 8",
                )
            ],
            "pools.training.labelValue",
            "share the node label value 'inference'",
        ),
        (
            [("pools: [training]", "pools: [training, training]")],
            "classes.training.pools[1]",
            "listed twice",
        ),
        (
            [
                (
                    "pools: [training]",
                    "pools: [training]\n    preferredPools: [{pool: inference, weight: 5}]",
                )
            ],
            "classes.training.preferredPools[0].pool",
            "is not one of the class's pools",
        ),
    ],
    ids=["shared-label-value", "pool-twice", "preferred-pool-elsewhere"],
)
def test_each_cross_reference_problem_is_at_its_line(
    replacements: list[tuple[str, str]], path: str, reason: str
) -> None:
    [problem] = problems_of(edited(*replacements))

    assert problem.path == path
    assert reason in problem.reason
    assert problem.line is not None


def test_the_cross_references_are_checked_even_when_fields_are_refused() -> None:
    text = default_policy_text() + "\n".join(
        [
            "",
            "enforcement:",
            "  default: block",
            "  classes:",
            "    batch: {mutate: false}",
            "exemptions:",
            "  - reason: all of them",
            "workloadKinds:",
            "  - {group: apps, kind: Deployment, resource: deployments, templatePaths: [/spec/template]}",
            "",
        ]
    )

    problems = problems_of(text)

    assert [(p.path, p.line) for p in problems] == [
        ("enforcement.default", line_of(text, "default: block")),
        ("enforcement.classes.batch", line_of(text, "batch: {mutate")),
        ("exemptions[0]", line_of(text, "- reason: all of them")),
        ("workloadKinds[0].group", line_of(text, "- {group: apps")),
    ]


def test_a_syntax_error_is_the_only_problem_with_its_line_and_column() -> None:
    text = edited(("kind: Policy\n", "kind: Policy: yes\n"))

    [problem] = problems_of(text)

    assert (problem.path, problem.line) == ("", line_of(text, "kind: Policy: yes"))
    assert problem.reason == "not valid YAML: mapping values are not allowed here (column 13)"


def test_a_policy_nested_too_deep_is_refused_at_its_line_without_recursing() -> None:
    text = "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\npools: " + "[" * 50_000

    [problem] = problems_of(text)

    assert problem.line == 3
    assert f"nests deeper than {MAX_DEPTH} levels" in problem.reason


def test_aliases_that_expand_past_the_limit_are_refused_before_anything_walks_them() -> None:
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 9)]
    text = "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n" + "\n".join(laughs) + "\n"

    [problem] = problems_of(text)

    assert problem.reason.startswith("not valid YAML: holds 1")
    assert "values with its aliases expanded; at most 20,000" in problem.reason


def test_an_alias_inside_what_it_stands_for_is_refused() -> None:
    [problem] = problems_of("apiVersion: x\nkind: Policy\npools: &p {loop: *p}\n")

    assert "contains itself" in problem.reason


def test_a_very_long_key_is_cut_short_in_the_path_and_the_reason() -> None:
    key = "k" * 1000  # YAML's longest implicit key
    text = edited(("    mig: mixed", f"    mig: mixed\n    {key}: 1"))

    [problem] = problems_of(text)

    assert problem.path == f"pools.inference.{'k' * 64}..."
    assert len(str(problem)) < 2_000


def test_a_problem_without_a_line_reads_file_path_reason() -> None:
    assert str(PolicyProblem("p.yaml", "pools", "bad")) == "p.yaml: pools: bad"
    assert str(PolicyProblem("p.yaml", "pools", "bad", line=3)) == "p.yaml:3: pools: bad"
    assert str(PolicyProblem("p.yaml", "", "cannot read", line=None)) == "p.yaml: cannot read"


PYDANTIC_PHRASES = ("Input should", "Field required", "Extra inputs", "Value error", "should have")


@pytest.mark.parametrize(
    "replacements",
    [
        [("    gpusPerNode: 8\n    # taints", "    gpuPerNode: 8.0\n    # taints")],
        [("value: 1000}", 'value: "1000"}'), ("mig: none", "mig: off")],
        [
            (
                "kind: Policy\n",
                "kind: Policy\nenforcement: {default: strict, rules: {gpu-count: 1}}\n",
            )
        ],
        [("pools: [training]", "pools: []"), ("weight: 100", "weight: 0")],
        [
            ("      A100: {product: A100-SXM4-40GB}\n", "      {}\n"),
            ("otherGpus: [", "otherGpus: [gpu, "),
        ],
    ],
    ids=["typo-and-float", "text-and-boolean", "modes", "empty-and-range", "empty-and-validator"],
)
def test_no_problem_of_a_broken_policy_is_worded_by_pydantic(
    replacements: list[tuple[str, str]],
) -> None:
    problems = problems_of(edited(*replacements))

    assert problems
    assert not [str(p) for p in problems if any(phrase in p.reason for phrase in PYDANTIC_PHRASES)]
