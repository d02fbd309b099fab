"""The policy file is reloaded without a restart, and a broken edit changes nothing served.

Unit tests drive ``PolicyReloader.poll`` against a file laid out like a ConfigMap
volume (kubelet projects ConfigMaps and Secrets alike) and look at what the engine the
app would use decides. The last test runs the real server while a client validates
pods over HTTPS and the policy is broken, then fixed, under it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import container, pod
from tests.conftest import Pki, admission_review
from tests.secret_volume import SecretVolume
from tests.service.test_serve import Server, serving, trusting
from webhook.engine import AdmissionRequest, Engine
from webhook.http.metrics import Metrics
from webhook.http.review import parse_review, to_engine_request
from webhook.policy import load_policy_file
from webhook.policy.load import default_policy_text, load_policy_text
from webhook.service.policy_reload import LOGGED_PROBLEMS, PolicyReloader

RELOAD_SECONDS = 30.0  # generous for a busy 2-core machine

EIGHT_GPU_NODES = default_policy_text()
FOUR_GPU_NODES = EIGHT_GPU_NODES.replace(
    "gpusPerNode: 8\n    models:\n      V100", "gpusPerNode: 4\n    models:\n      V100"
)
BROKEN = EIGHT_GPU_NODES.replace("pools: [training]", "pools: [trainig]")
BROKEN_LINE = BROKEN.splitlines().index("    pools: [trainig]") + 1
assert EIGHT_GPU_NODES != FOUR_GPU_NODES != BROKEN


def engine_request(obj: dict[str, Any]) -> AdmissionRequest:
    return to_engine_request(parse_review(json.dumps(admission_review(obj)).encode()))


def training_pod(gpus: int) -> dict[str, Any]:
    """A training pod as the mutating webhook leaves it (the mutation is the same on
    both policies), ready for /validate."""
    sent = pod("training", containers=[container(gpus=gpus)])
    mutation = Engine(load_policy_text(EIGHT_GPU_NODES, "test")).mutate(engine_request(sent))
    patched: dict[str, Any] = jsonpatch.apply_patch(sent, list(mutation.patch))
    return patched


def allows_six_gpus(engine: Engine) -> bool:
    return engine.validate(engine_request(training_pod(6))).allowed


@pytest.fixture
def volume(tmp_path: Path) -> SecretVolume:
    return SecretVolume(tmp_path / "policy", {"policy.yaml": EIGHT_GPU_NODES.encode()})


def update(volume: SecretVolume, text: str) -> None:
    volume.update({"policy.yaml": text.encode()})


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def reloader(volume: SecretVolume, metrics: Metrics) -> PolicyReloader:
    path = volume.path("policy.yaml")
    return PolicyReloader(path, load_policy_file(path), metrics=metrics)


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def refusals(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("not reloading the policy")]


def test_an_unchanged_file_reloads_nothing(reloader: PolicyReloader) -> None:
    engine = reloader.engine

    assert reloader.poll() is False
    assert reloader.engine is engine


def test_a_changed_policy_swapped_in_by_symlink_serves_from_the_next_poll(
    volume: SecretVolume, reloader: PolicyReloader, metrics: Metrics
) -> None:
    before = reloader.engine
    update(volume, FOUR_GPU_NODES)

    assert reloader.poll() is True

    assert allows_six_gpus(before), "a review holding the old engine keeps its rules"
    assert not allows_six_gpus(reloader.engine)
    assert sample(metrics, "gpu_admission_policy_reloads_total", result="success") == 1
    assert sample(metrics, "gpu_admission_policy_valid") == 1
    # The revision serving now is the only one exported, the one pods are annotated with.
    new = reloader.engine.policy.revision
    assert new != before.policy.revision
    assert sample(metrics, "gpu_admission_policy_info", revision=new) == 1
    assert sample(metrics, "gpu_admission_policy_info", revision=before.policy.revision) is None


def test_a_broken_edit_keeps_the_last_good_policy_and_says_why_once(
    volume: SecretVolume,
    reloader: PolicyReloader,
    metrics: Metrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = reloader.engine
    path = volume.path("policy.yaml")
    update(volume, BROKEN)

    with caplog.at_level(logging.INFO, "gpu_admission.policy"):
        assert reloader.poll() is False
        assert reloader.poll() is False  # the same broken content is reported once

    assert reloader.engine is good
    [refusal] = refusals(caplog)
    assert refusal.levelno == logging.ERROR
    assert refusal.__dict__["policy_file"] == str(path)
    assert refusal.__dict__["line"] == BROKEN_LINE
    assert refusal.__dict__["path"] == "classes.training.pools[0]"
    assert refusal.__dict__["reason"] == "unknown pool 'trainig'; pools: inference, training"
    ok, detail = reloader.readiness()
    assert ok is True, "the last good policy serves, so the replica stays ready"
    assert detail.startswith("serving last good policy from 20")
    assert detail.endswith(
        f"; current file invalid: {path}:{BROKEN_LINE}: classes.training.pools[0]: "
        "unknown pool 'trainig'; pools: inference, training"
    )
    assert sample(metrics, "gpu_admission_policy_valid") == 0
    assert sample(metrics, "gpu_admission_policy_reloads_total", result="failure") == 1


def test_an_edit_naming_a_rule_the_engine_does_not_have_keeps_the_last_good_policy(
    volume: SecretVolume,
    reloader: PolicyReloader,
    metrics: Metrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = reloader.engine
    update(volume, EIGHT_GPU_NODES + "\nenforcement:\n  rules: {gpu-cout: warn}\n")

    with caplog.at_level(logging.INFO, "gpu_admission.policy"):
        assert reloader.poll() is False

    assert reloader.engine is good
    [refusal] = refusals(caplog)
    assert refusal.__dict__["path"] == "enforcement.rules.gpu-cout"
    assert refusal.__dict__["reason"].startswith("unknown rule 'gpu-cout'; rules: visible-devices")
    assert reloader.error is not None and reloader.error.path == "enforcement.rules.gpu-cout"
    assert sample(metrics, "gpu_admission_policy_valid") == 0


def test_every_problem_of_a_broken_edit_is_logged_with_its_line(
    volume: SecretVolume, reloader: PolicyReloader, caplog: pytest.LogCaptureFixture
) -> None:
    text = BROKEN.replace("  inference:\n    gpusPerNode: 8", "  inference:\n    gpusPerNod: 8", 1)
    text += "\nenforcement:\n  rules: {gpu-cout: warn}\n"
    update(volume, text)

    with caplog.at_level(logging.ERROR, "gpu_admission.policy"):
        assert reloader.poll() is False

    logged = [(r.__dict__["line"], r.__dict__["path"]) for r in refusals(caplog)]
    lines = text.splitlines()
    assert logged == [
        (lines.index("  inference:") + 1, "pools.inference.gpusPerNode"),
        (lines.index("    gpusPerNod: 8") + 1, "pools.inference.gpusPerNod"),
        (BROKEN_LINE, "classes.training.pools[0]"),
        (lines.index("  rules: {gpu-cout: warn}") + 1, "enforcement.rules.gpu-cout"),
    ]
    assert {r.__dict__["problems"] for r in refusals(caplog)} == {4}
    assert reloader.readiness()[1].endswith("(and 3 more problems; see the log)")


def test_a_broken_edit_with_thousands_of_problems_logs_the_first_few_and_a_count(
    volume: SecretVolume, reloader: PolicyReloader, caplog: pytest.LogCaptureFixture
) -> None:
    repeats = 2_000
    gpu, mig = ",".join(["a"] * repeats), ",".join(["b"] * repeats)
    update(
        volume, f"{EIGHT_GPU_NODES}\ndra:\n  deviceClasses:\n    gpu: [{gpu}]\n    mig: [{mig}]\n"
    )

    with caplog.at_level(logging.ERROR, "gpu_admission.policy"):
        assert reloader.poll() is False

    *each, more = refusals(caplog)
    assert len(each) == LOGGED_PROBLEMS
    total = 2 * (repeats - 1)
    assert {r.__dict__["problems"] for r in each} == {total}
    assert more.getMessage() == "not reloading the policy: more problems than logged"
    assert more.__dict__["not_logged"] == total - LOGGED_PROBLEMS
    assert reloader.readiness()[1].endswith(f"(and {total - 1} more problems; see the log)")


def test_fixing_the_file_recovers_with_the_fixed_rules(
    volume: SecretVolume, reloader: PolicyReloader, metrics: Metrics
) -> None:
    update(volume, BROKEN)
    reloader.poll()
    update(volume, FOUR_GPU_NODES)

    assert reloader.poll() is True

    assert not allows_six_gpus(reloader.engine)
    assert reloader.error is None
    ok, detail = reloader.readiness()
    assert (ok, detail.split(", loaded at ")[0]) == (True, str(volume.path("policy.yaml")))
    assert sample(metrics, "gpu_admission_policy_valid") == 1
    assert sample(metrics, "gpu_admission_policy_reloads_total", result="failure") == 1
    assert sample(metrics, "gpu_admission_policy_reloads_total", result="success") == 1


def test_a_second_distinct_broken_edit_is_reported_again(
    volume: SecretVolume, reloader: PolicyReloader, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, "gpu_admission.policy"):
        update(volume, BROKEN)
        reloader.poll()
        update(volume, "pools: [")
        reloader.poll()

    assert [r.__dict__["reason"].split(":")[0] for r in refusals(caplog)] == [
        "unknown pool 'trainig'; pools",
        "not valid YAML",
    ]


def test_a_file_that_disappears_is_reported_once_and_the_last_good_policy_serves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(EIGHT_GPU_NODES, "utf-8")
    reloader = PolicyReloader(path, load_policy_file(path))
    good = reloader.engine
    path.unlink()

    with caplog.at_level(logging.ERROR, "gpu_admission.policy"):
        assert reloader.poll() is False
        assert reloader.poll() is False

    assert reloader.engine is good
    [refusal] = refusals(caplog)
    assert refusal.__dict__["reason"].startswith("cannot read: No such file")
    assert "current file invalid" in reloader.readiness()[1]


def test_the_reload_interval_must_be_positive(volume: SecretVolume) -> None:
    path = volume.path("policy.yaml")

    with pytest.raises(ValueError, match="positive"):
        PolicyReloader(path, load_policy_file(path), interval=0)


def test_the_watcher_reloads_on_its_own_every_interval(volume: SecretVolume) -> None:
    path = volume.path("policy.yaml")
    reloader = PolicyReloader(path, load_policy_file(path), interval=0.05)

    async def edit_and_wait() -> bool:
        watcher = asyncio.create_task(reloader.watch())
        update(volume, FOUR_GPU_NODES)
        deadline = time.monotonic() + 10
        while allows_six_gpus(reloader.engine):
            assert time.monotonic() < deadline, "the watcher never reloaded"
            await asyncio.sleep(0.02)
        watcher.cancel()
        return True

    assert asyncio.run(edit_and_wait())


# --- the real server ------------------------------------------------------------------------


@dataclass
class ValidateLoop:
    """Posts the same 6-GPU training pod to /validate until stopped, noting each verdict."""

    url: str
    pki: Pki
    verdicts: list[bool] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        sent = admission_review(training_pod(6))
        with httpx.Client(verify=trusting(self.pki.ca_cert), timeout=10) as client:
            while not self.stop.is_set():
                try:
                    reply = client.post(f"{self.url}/validate?timeout=10s", json=sent)
                    assert reply.status_code == 200, reply.text
                    self.verdicts.append(reply.json()["response"]["allowed"])
                except (httpx.HTTPError, AssertionError, ValueError, KeyError) as error:
                    self.failures.append(repr(error))
                time.sleep(0.02)

    def wait_for(self, allowed: bool, timeout: float = RELOAD_SECONDS) -> float:
        """Seconds until the last verdicts are all ``allowed``."""
        started = time.monotonic()
        while self.verdicts[-3:] != [allowed] * 3:
            assert time.monotonic() - started < timeout, f"never answered allowed={allowed}"
            time.sleep(0.05)
        return time.monotonic() - started


@pytest.fixture
def server_on_volume(pki: Pki, volume: SecretVolume, tmp_path: Path) -> Iterator[Server]:
    args = [
        "--policy", str(volume.path("policy.yaml")),
        "--tls-cert", str(pki.cert),
        "--tls-key", str(pki.key),
        "--reload-interval", "0.5",
    ]  # fmt: skip
    with serving(args, tmp_path / "cache", tmp_path / "server.log", lambda: pki.ca_cert) as up:
        yield up


def readyz_policy(server: Server, pki: Pki) -> dict[str, Any]:
    reply = httpx.get(f"{server.url}/readyz", verify=trusting(pki.ca_cert), timeout=10)
    assert reply.status_code == 200, reply.text
    check: dict[str, Any] = reply.json()["checks"]["policy"]
    return check


def test_the_server_keeps_serving_through_a_broken_edit_and_applies_the_fix_within_seconds(
    server_on_volume: Server, pki: Pki, volume: SecretVolume
) -> None:
    client = ValidateLoop(server_on_volume.url, pki)
    thread = threading.Thread(target=client.run, daemon=True)
    thread.start()
    try:
        client.wait_for(allowed=True)
        update(volume, BROKEN.replace("gpusPerNode: 8", "gpusPerNode: 4"))
        refused = wait_for_log(server_on_volume, "not reloading the policy")
        answered_before = len(client.verdicts)
        time.sleep(2)  # several polls and many reviews on the broken file
        during_broken_edit = client.verdicts[answered_before:]
        readiness = readyz_policy(server_on_volume, pki)
        update(volume, FOUR_GPU_NODES)
        seconds_to_new_rules = client.wait_for(allowed=False)
    finally:
        client.stop.set()
        thread.join(timeout=30)

    assert client.failures == []
    assert refused["path"] == "classes.training.pools[0]"
    assert len(during_broken_edit) > 10
    assert set(during_broken_edit) == {True}, "the last good rules kept serving"
    assert readiness["ok"] is True
    assert "current file invalid" in readiness["detail"]
    assert seconds_to_new_rules < 10
    switch = client.verdicts.index(False)
    assert set(client.verdicts[switch:]) == {False}, "an old verdict after the switch"
    assert readyz_policy(server_on_volume, pki)["detail"].startswith(
        f"{volume.path('policy.yaml')}, loaded at "
    )
    metrics = scrape(server_on_volume, pki)
    assert metrics["gpu_admission_policy_reloads_total", (("result", "failure"),)] == 1
    assert metrics["gpu_admission_policy_reloads_total", (("result", "success"),)] == 1
    assert metrics["gpu_admission_policy_valid", ()] == 1
    served = x509.load_pem_x509_certificate(pki.cert.read_bytes())
    expiry = metrics["gpu_admission_certificate_expiry_timestamp_seconds", ()]
    assert expiry == served.not_valid_after_utc.timestamp() > time.time()
    validated = metrics["gpu_admission_review_duration_seconds_count", (("webhook", "validate"),)]
    assert validated == len(client.verdicts)


def scrape(server: Server, pki: Pki) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reply = httpx.get(f"{server.metrics_url}/metrics", timeout=10)
    assert reply.status_code == 200, reply.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }


def wait_for_log(server: Server, message: str, timeout: float = RELOAD_SECONDS) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in server.log_entries() if e["message"].startswith(message)]
        if found:
            return found[0]
        time.sleep(0.2)
    pytest.fail(f"no {message!r} in the server log:\n{server.log()}")
