"""A policy as the service would serve it, and the verdict on a policy ConfigMap.

``webhook.engine.serving`` is how a policy text becomes what serves; the reloader,
`policy validate`, `install` and this webhook all go through it, so what the webhook
admits the service can load.

``judge_policy_configmap`` decides a CREATE or UPDATE of the policy ConfigMap: its
policy key must hold a policy that serves. The denial lists the problems as
`ConfigMap-name/key:line: path: reason`, the line counted within the key's text (what
the operator edits), at most ``PROBLEMS_LIMIT`` of them and within the engine's denial
length.

It is two steps, as the route (``webhook.http.policy_route``) runs them apart:
``policy_question`` answers at once what needs no compiling (not a ConfigMap, an update
that leaves the policy as it was, no policy key, too large) and otherwise says what to
compile, a ``PolicyQuestion``; ``policy_verdict`` compiles it, off the event loop, into
the denial's message or None. A question's verdict depends on its text and names only,
so the route keeps verdicts by the question's ``digest``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from webhook.engine import AdmissionRequest, Decision
from webhook.engine.decision import DENIAL_LIMIT, allow, shorten
from webhook.engine.serving import serving_engine
from webhook.errors import PolicyError

POLICY_KEY = "policy.yaml"
"""The key of the policy ConfigMap that holds the policy (the file `serve --policy` reads)."""

MAX_POLICY_BYTES = 256 * 1024
"""The longest policy judged. The shipped policies are 1 to 4 KB; a policy of a hundred
pools is tens of KB. PyYAML reads about 1 MB a second, and this runs while pods wait."""

PROBLEMS_LIMIT = 20
"""Most problems a denial lists; the rest are counted."""


@dataclass(frozen=True)
class PolicyQuestion:
    """A policy to compile: does ``text`` serve? Picklable, for the review worker."""

    name: str
    """The ConfigMap as a denial names it (``namespace/name``)."""
    source: str
    """The file name its problems are reported under (``name/policy.yaml``)."""
    text: str

    def digest(self) -> bytes:
        """What the verdict depends on, hashed: names and text."""
        named = f"{self.name}\0{self.source}\0".encode()
        return hashlib.sha256(named + self.text.encode("utf-8")).digest()


def judge_policy_configmap(request: AdmissionRequest) -> Decision:
    """Admit a policy ConfigMap whose policy serves; deny one whose policy does not, with
    every problem (up to ``PROBLEMS_LIMIT``). Not a CREATE or UPDATE of a ConfigMap, or an
    UPDATE leaving the policy as it was (a label, a finalizer, a broken policy's own
    deletion): admitted without a look."""
    question = policy_question(request)
    if isinstance(question, Decision):
        return question
    return verdict_decision(policy_verdict(question))


def policy_question(request: AdmissionRequest) -> Decision | PolicyQuestion:
    """The decision when it needs no compiling; otherwise the policy to compile."""
    if request.kind != "ConfigMap" or request.operation not in ("CREATE", "UPDATE"):
        return allow()
    configmap = request.object if isinstance(request.object, dict) else {}
    text = _policy_text(configmap)
    old = request.old_object if request.operation == "UPDATE" else None
    if isinstance(old, dict) and text == _policy_text(old):
        return allow()
    name = f"{request.namespace}/{request.name}" if request.namespace else request.name
    source = f"{request.name}/{POLICY_KEY}"
    if not isinstance(text, str):
        return _denied(
            f"ConfigMap {name} holds no policy: gpu-admission reads its policy from the key "
            f"{POLICY_KEY!r} of data"
        )
    if len(text.encode("utf-8")) > MAX_POLICY_BYTES:
        return _denied(
            f"the policy in ConfigMap {name} is {len(text.encode('utf-8')):,} bytes; "
            f"gpu-admission judges policies of at most {MAX_POLICY_BYTES:,}"
        )
    return PolicyQuestion(name, source, text)


def policy_verdict(question: PolicyQuestion) -> str | None:
    """The denial's message when the policy does not serve; None when it does."""
    try:
        serving_engine(question.text, question.source)
    except PolicyError as error:
        return policy_denial(question.name, error)
    return None


def verdict_decision(denial: str | None) -> Decision:
    """The decision of a verdict: admitted, or denied with its message."""
    return allow() if denial is None else _denied(denial)


def policy_denial(name: str, error: PolicyError) -> str:
    """What a denial says of a broken policy: a line of introduction, then one line per
    problem (`file:line: path: reason`), the first ``PROBLEMS_LIMIT`` and a count of
    the others."""
    problems = error.problems
    count = f"{error.count:,} problem{'s' if error.count != 1 else ''}"
    lines = [f"the policy in ConfigMap {name} does not load ({count}):"]
    lines += [str(problem) for problem in problems[:PROBLEMS_LIMIT]]
    if error.count > PROBLEMS_LIMIT:
        lines.append(f"and {error.count - PROBLEMS_LIMIT:,} more")
    return shorten("\n".join(lines), DENIAL_LIMIT)


def _policy_text(configmap: dict[str, Any]) -> object:
    data = configmap.get("data")
    return data.get(POLICY_KEY) if isinstance(data, dict) else None


def _denied(message: str) -> Decision:
    return Decision(allowed=False, code=403, message=message)
