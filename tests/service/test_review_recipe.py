"""docs/service.md's "Send a review to `make serve`": its commands, run as written against
a real `gpu-admission serve` on its development certificate, get the denial they describe."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
SECTION = (
    (REPOSITORY / "docs" / "service.md")
    .read_text("utf-8")
    .split("## Send a review to `make serve`", 1)[1]
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")
def test_the_documented_commands_send_a_review_and_print_the_denial(tmp_path: Path) -> None:
    [script] = re.findall(r"```sh\n(.*?)```", SECTION, re.S)
    port = free_port()
    script = script.replace(".venv/bin/python", sys.executable).replace(":8443", f":{port}")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    script = script.replace("~/.cache", str(tmp_path / "cache"))
    (tmp_path / "examples").symlink_to(REPOSITORY / "examples")
    served = subprocess.Popen(
        [sys.executable, "-m", "webhook.cli", "serve", "--port", str(port), "--metrics-port", "0"],
        cwd=REPOSITORY, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        answer = subprocess.CompletedProcess[str]([], 1, "", "")
        while time.monotonic() < deadline:
            answer = subprocess.run(
                ["bash", "-c", script], cwd=tmp_path, env=env,
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
            if answer.returncode == 0 and answer.stdout:
                break
            time.sleep(0.5)
    finally:
        served.terminate()
        served.wait(10)

    assert answer.returncode == 0, answer.stderr
    response = json.loads(answer.stdout)["response"]
    assert response["uid"] == "0f8e6c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b"
    assert response["allowed"] is False
    assert "gpu-admission denied pod 'demo/too-many-gpus'" in response["status"]["message"]
