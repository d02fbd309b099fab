"""`make demo` (tests/e2e/demo.py) does what the README's first screen says: a control
plane of its own, gpu-admission serving the policy it is given into the namespace it is
given, each example mutated and bound or refused with our words, what to try next, and
everything stopped on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .admission_fixtures import EXAMPLES, REPO

READY = "Ctrl-C stops everything."
TEAM_POLICY = "policies/examples/acme.yaml"
STARTUP_SECONDS = 240


@pytest.fixture(scope="module")
def demo(controlplane_bin_dir: Path) -> Iterator[str]:
    """The demo's output up to its last line, with a team's own policy (other labels,
    classes, values and taints: policies/examples/acme.yaml) in namespace team-a; it is
    stopped as Ctrl-C or a service manager would stop it."""
    del controlplane_bin_dir  # built, so the demo's own build is only a check
    command = [sys.executable, "-m", "tests.e2e.demo"]
    options = ["--policy", TEAM_POLICY, "--namespace", "team-a"]
    process = subprocess.Popen(
        [*command, *options],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    ready = threading.Event()
    reader = threading.Thread(target=_read, args=(process, lines, ready), daemon=True)
    reader.start()
    try:
        ready.wait(STARTUP_SECONDS)
        said_ready = any(line.strip() == READY for line in lines)
        assert said_ready, f"demo exit {process.poll()}: {''.join(lines[-40:])}"
        yield "".join(lines)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        assert code == 0, "".join(lines[-40:])


def _read(process: subprocess.Popen[str], lines: list[str], ready: threading.Event) -> None:
    """Keep the demo's lines; `ready` once it says so, or once it ends without saying so
    (a demo that failed to start is reported at once, not after STARTUP_SECONDS)."""
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if line.strip() == READY:
            ready.set()
    ready.set()


def test_it_says_each_step_as_it_starts(demo: str) -> None:
    steps = [line for line in demo.splitlines() if line.startswith("[demo] ")]
    assert [step.split(" ")[1] for step in steps] == ["the", "etcd,", "9", "gpu-admission"]
    assert f"gpu-admission serving {TEAM_POLICY}" in demo


def test_every_example_is_applied_to_the_namespace_it_was_given(demo: str) -> None:
    assert "== workloads applied to namespace team-a (opted in)" in demo
    for example in sorted(EXAMPLES.glob("*.yaml")):
        assert f"$ kubectl apply -f examples/{example.name}\n" in demo


def test_the_pods_are_bound_to_the_policys_pools_at_its_priorities(demo: str) -> None:
    """The team's serving pool is untainted: its pods need no toleration, and a CPU pod
    may land there too; its batch pool is tainted, and its pods are drawn together."""
    table = demo.split("\nPOD ", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    rows = {row.split()[0]: row.split() for row in table}
    assert rows and all(row[1] != "(pending)" for row in rows.values())
    assert rows["embedder"][2:] == ["serving", "500000", "affinity,priority"]
    assert rows["etl"][3:] == ["0", "-"]
    trainers = [row for name, row in rows.items() if name.startswith("resnet-train-")]
    assert trainers and all(row[2:4] == ["batch", "200"] for row in trainers)
    assert all("co-location" in row[4] and "tolerations" in row[4] for row in trainers)
    [pinned] = [row for name, row in rows.items() if name.startswith("bert-train-a100-")]
    assert pinned[1].startswith("training-a100-80g-")


def test_every_denied_example_is_refused_in_the_policys_words(demo: str) -> None:
    answers = {
        example.stem: demo.split(f"$ kubectl apply -f examples/denied/{example.name}\n", 1)[1]
        for example in sorted((EXAMPLES / "denied").glob("*.yaml"))
    }
    for name, answer in answers.items():
        assert answer.startswith("Error from server (Forbidden)"), answer[:300]
        assert f"gpu-admission denied pod 'team-a/{name}'" in answer.split("\n", 1)[0]
    assert "acme.example.com/workload" in answers["no-class"].split("\n", 1)[0]


def test_it_ends_with_what_to_try_next(demo: str) -> None:
    next_steps = demo.split("== try next, in another shell\n", 1)[1]
    kubeconfig = next_steps.split("export KUBECONFIG=", 1)[1].split(" ", 1)[0]
    assert Path(kubeconfig).is_file()
    assert "kubectl -n team-a get pod embedder -o jsonpath='{.metadata.annotations}'" in (
        next_steps
    )
    assert f"gpu-admission check --policy {TEAM_POLICY} --admitted" in next_steps
    assert f"gpu-admission audit --policy {TEAM_POLICY}" in next_steps
    refused = next_steps.split("kubectl -n team-a apply -f ", 1)[1].split(" ", 1)[0]
    assert "acme.example.com/workload" in Path(refused).read_text("utf-8")


def test_the_readme_shows_the_demos_own_headings_and_table(demo: str) -> None:
    readme = (REPO / "README.md").read_text("utf-8")
    shown = readme.split("```text\n", 1)[1].split("```", 1)[0].replace("demo", "team-a")
    headings = [line for line in shown.splitlines() if line.startswith(("== ", "POD "))]

    assert len(headings) == 4
    for line in headings:
        assert line in demo.splitlines()
