"""Templates read in the last second are handed to the reviews of their namespace that
name them (webhook.http.recent_templates)."""

from __future__ import annotations

from tests.clock import ManualClock
from webhook.http.recent_templates import RecentTemplates


def test_a_template_is_kept_for_its_seconds_and_then_read_again() -> None:
    clock = ManualClock(100.0)
    recent = RecentTemplates(seconds=1.0, clock=clock)
    template = {"metadata": {"name": "one-gpu"}}

    recent.keep("ml", "one-gpu", template)
    clock.now += 0.99
    assert recent.get("ml", "one-gpu") is template
    clock.now += 0.01
    assert recent.get("ml", "one-gpu") is None
    assert len(recent) == 0


def test_a_template_is_only_handed_to_its_own_namespace() -> None:
    recent = RecentTemplates(clock=ManualClock(100.0))
    recent.keep("team-a", "one-gpu", {"spec": "a"})

    assert recent.get("team-b", "one-gpu") is None


def test_the_oldest_template_goes_first_past_the_most_kept() -> None:
    recent = RecentTemplates(most=2, clock=ManualClock(100.0))
    for name in ("a", "b", "c"):
        recent.keep("ml", name, {"name": name})

    assert recent.get("ml", "a") is None
    assert recent.get("ml", "b") == {"name": "b"} and recent.get("ml", "c") == {"name": "c"}
    assert len(recent) == 2
