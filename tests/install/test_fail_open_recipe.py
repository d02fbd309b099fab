"""docs/upgrade.md's recipe for failing open names every webhook that fails closed, at
the place the installed configurations hold it: a recipe one webhook short leaves GPU
pods refused while the operator believes the cluster open."""

from __future__ import annotations

import json
import re
from pathlib import Path

from webhook.engine.handlers import HANDLERS
from webhook.install.chart import short_name

UPGRADE = Path(__file__).resolve().parents[2] / "docs" / "upgrade.md"
SECTION = UPGRADE.read_text("utf-8").split("**2. Fail open.**", 1)[1].split("**3. ", 1)[0]


def closed() -> list[str]:
    return [h.webhook_name for h in HANDLERS.installed() if h.failure_policy == "Fail"]


def test_the_helm_command_sets_every_webhook_that_fails_closed_to_ignore() -> None:
    named = re.findall(r"--set webhooks\.failurePolicy\.([a-z-]+)=Ignore", SECTION)

    assert named == [short_name(name) for name in closed()]


def test_the_json_patches_name_each_closed_webhook_at_its_index_and_nothing_else() -> None:
    patches = re.findall(
        r"kubectl patch (\w+) gpu-admission --type=json -p '(\[.*?\])'", SECTION, re.S
    )
    tested = {
        kind: {op["path"]: op["value"] for op in json.loads(body) if op["op"] == "test"}
        for kind, body in patches
    }

    expected = {
        "mutatingwebhookconfiguration": HANDLERS.mutating(),
        "validatingwebhookconfiguration": HANDLERS.validating(),
    }
    for kind, side in expected.items():
        assert tested[kind] == {
            f"/webhooks/{index}/name": h.webhook_name
            for index, h in enumerate(side)
            if h.failure_policy == "Fail"
        }
