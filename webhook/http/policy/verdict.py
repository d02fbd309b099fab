"""A policy as the service would serve it, and the verdict on a policy ConfigMap.

``webhook.engine.serving`` is how a policy text becomes what serves; the reloader,
`policy validate`, `install` and this webhook all go through it, so what the webhook
admits the service can load.

``judge_policy_configmap`` decides a CREATE or UPDATE of the policy ConfigMap: its
policy key must hold a policy that serves. The denial lists the problems as
`ConfigMap-name/key:line: path: reason`, the line counted within the key's text (what
the operator edits), at most ``PROBLEMS_LIMIT`` of them and within the engine's denial
length.

A policy that serves must also be one the webhook configurations send what it needs:
an in-place edit that renames the workload label, or adds a taint key or GPU resource the
CEL conditions name, would otherwise serve while the live configurations keep the old
scope. What the scope is compared with is the cluster's, known above this wing: the
route is given a ``ScopeJudge`` (``webhook.service.webhook_scope.ScopeCheck``), which
the question carries to where the policy is compiled. It admits a policy whose ConfigMap
says its configurations come in the same apply, or that the live configurations serve;
it refuses any other, saying what differs and what to do; and when it knows no live
configurations, the policy is admitted with its warning that nothing was compared.

It is two steps, as the route (``webhook.http.policy.route``) runs them apart:
``policy_question`` answers at once what needs no compiling (not a ConfigMap, an update
that leaves the policy as it was, no policy key, too large) and otherwise says what to
compile, a ``PolicyQuestion``; ``policy_verdict`` compiles it, off the event loop, into
the denial's message or None. A question's verdict depends on its text and names only,
so the route keeps verdicts by the question's ``digest``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, Protocol

from webhook.engine import AdmissionRequest, Decision
from webhook.engine.decision import DENIAL_LIMIT, allow, shorten
from webhook.engine.serving import serving_engine
from webhook.errors import PolicyError
from webhook.policy import Policy

POLICY_KEY = "policy.yaml"
"""The key of the policy ConfigMap that holds the policy (the file `serve --policy` reads)."""

MAX_POLICY_BYTES = 256 * 1024
"""The longest policy judged. The shipped policies are 1 to 4 KB; a policy of a hundred
pools is tens of KB. PyYAML reads about 1 MB a second, and this runs while pods wait."""

PROBLEMS_LIMIT = 20
"""Most problems a denial lists; the rest are counted."""

SCOPE_NOT_COMPARED = ""
"""A ``ScopeJudge``'s verdict on a policy whose scope it had nothing to compare with:
admitted, with the judge's ``warning``."""


class ScopeJudge(Protocol):
    """Judges the webhook scope a policy that serves needs; picklable, for the worker."""

    @property
    def annotation(self) -> str:
        """The key of the ConfigMap's annotation it is handed."""
        ...

    @property
    def key(self) -> str:
        """What its verdicts depend on besides the policy and the annotation (the live
        configurations it compares with), for the kept verdicts."""
        ...

    @property
    def warning(self) -> str:
        """What an admission says when the verdict was ``SCOPE_NOT_COMPARED``."""
        ...

    def verdict(self, name: str, policy: Policy, annotation: str | None) -> str | None:
        """None to admit `policy` (of ConfigMap `name`, with that annotation's value),
        ``SCOPE_NOT_COMPARED``, or a denial's message."""
        ...


@dataclass(frozen=True)
class PolicyQuestion:
    """A policy to compile: does ``text`` serve? Picklable, for the review worker."""

    name: str
    """The ConfigMap as a denial names it (``namespace/name``)."""
    source: str
    """The file name its problems are reported under (``name/policy.yaml``)."""
    text: str
    annotation: str | None = None
    """The value of the ConfigMap's annotation the scope judge reads, when it has one."""
    scope: ScopeJudge | None = None
    """The judge of the policy's webhook scope; None: not judged."""

    def digest(self) -> bytes:
        """What the verdict depends on, hashed: names, annotation, scope and text."""
        scope = "-" if self.scope is None else self.scope.key
        named = f"{self.name}\0{self.source}\0{self.annotation}\0{scope}\0".encode()
        return hashlib.sha256(named + self.text.encode("utf-8")).digest()


def judge_policy_configmap(request: AdmissionRequest, scope: ScopeJudge | None = None) -> Decision:
    """Admit a policy ConfigMap whose policy serves and whose webhook scope `scope` admits
    (not judged without it); deny one whose policy does not serve, with every problem (up
    to ``PROBLEMS_LIMIT``), or whose scope `scope` refuses. Not a CREATE or UPDATE of a
    ConfigMap, or an UPDATE leaving the policy as it was (a label, a finalizer, a broken
    policy's own deletion): admitted without a look."""
    question = policy_question(request, scope)
    if isinstance(question, Decision):
        return question
    return verdict_decision(policy_verdict(question), scope)


def policy_question(
    request: AdmissionRequest, scope: ScopeJudge | None = None
) -> Decision | PolicyQuestion:
    """The decision when it needs no compiling; otherwise the policy to compile, with the
    judge of its webhook scope."""
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
    annotation = None if scope is None else _annotation(configmap, scope.annotation)
    return PolicyQuestion(name, source, text, annotation, scope)


def policy_verdict(question: PolicyQuestion) -> str | None:
    """The denial's message when the policy does not serve or its scope judge refuses it;
    ``SCOPE_NOT_COMPARED`` when the judge had nothing to compare it with; None otherwise."""
    try:
        engine = serving_engine(question.text, question.source)
    except PolicyError as error:
        return policy_denial(question.name, error)
    if question.scope is None:
        return None
    return question.scope.verdict(question.name, engine.policy, question.annotation)


def verdict_decision(verdict: str | None, scope: ScopeJudge | None = None) -> Decision:
    """The decision of a verdict: admitted (with `scope`'s warning when it compared
    nothing), or denied with its message."""
    if verdict is None:
        return allow()
    if verdict == SCOPE_NOT_COMPARED:
        return allow() if scope is None else replace(allow(), warnings=(scope.warning,))
    return _denied(verdict)


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


def _annotation(configmap: dict[str, Any], key: str) -> str | None:
    metadata = configmap.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    found = annotations.get(key) if isinstance(annotations, dict) else None
    return found if isinstance(found, str) else None


def _policy_text(configmap: dict[str, Any]) -> object:
    data = configmap.get("data")
    return data.get(POLICY_KEY) if isinstance(data, dict) else None


def _denied(message: str) -> Decision:
    return Decision(allowed=False, code=403, message=message)
