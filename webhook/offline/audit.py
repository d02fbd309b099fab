"""An audit of what already runs: each pod and workload judged as its CREATE would be today.

A running pod is judged as the webhooks would judge its CREATE now, not as it
stands: a pod created before gpu-admission was installed was never mutated, and
holding that against it would flag every one of them. So the pod is taken as its
creator sent it (``as_created``: without its status, and without the node the
scheduler bound it to), our mutation is applied, and the result is validated, with
every rule's outcome. A pod that was mutated at its CREATE comes out the same, our
mutation being idempotent. A pod's claims of Dynamic Resource Allocation are judged by
the ResourceClaimTemplates and ResourceClaims they name as ``claims_of`` reads them (the
cluster's as they are now); without it they are not judged, with a warning. A workload
is judged by each of its pod templates, as the pod its controller creates (requests
defaulted from limits, then our mutation), the way the workload webhook judges it at
apply time, and a denied template is worded as that webhook (and check) words it; a
workload whose controller is of a kind judged too (a Deployment's ReplicaSet, a
CronJob's Job) is left to its owner, but only when that owner was seen
(``left_to_owner``): an ownerReference is written by whoever writes the object, so a
CronJob naming a made-up Deployment, or a kind the cluster does not serve, as its
controller would otherwise hide from the audit, and garbage collection, which only
removes dependents of owners that existed, never removes it.

An object too large to be parsed (``webhook.kube.listing.MAX_OBJECT_SIZE``) is judged
``warned`` by the rule ``object-too-large`` (``too_large``): the webhooks would have
judged it at its CREATE, the audit cannot, and says so with its size and the cap.

Every string a finding takes from the object (namespace, name, uid, apiVersion, kind,
the template's field path, which holds a custom kind's map keys such as a Kubeflow
replica type) is cut to ``NAME_LIMIT`` or ``TEMPLATE_LIMIT`` characters, saying how
long it was: findings are held and published, and a tenant's 1 MiB key must not be
copied into each of them.

``AuditSummary`` adds findings up by verdict, by rule and by namespace, one finding
at a time, so an audit of a large cluster keeps only its findings.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonpatch

from webhook.engine import AdmissionRequest, Engine, RuleOutcome
from webhook.engine.decision import ENFORCE, EXEMPTION, denial, shorten, subject
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.inventory import UNKNOWN, Inventory
from webhook.engine.templates import POD, TemplateKind, pod_from_template, pod_templates
from webhook.engine.workloads import field_path
from webhook.errors import MalformedObject

Verdict = Literal["denied", "warned", "audited", "exempted", "passed"]
VERDICTS: tuple[Verdict, ...] = ("denied", "warned", "audited", "exempted", "passed")
"""What the webhooks would make of one pod: refuse it (an enforced rule fails, or the
object cannot be read), admit it with a warning, admit it and record an audited
violation, admit it unjudged (a policy exemption), or admit it."""

ClaimsOf = Callable[[str, tuple[ClaimSource, ...]], ClaimObjects]
"""The ResourceClaimTemplates and ResourceClaims of a namespace named by a pod, as read."""

OUTCOMES = ("pass", "fail", "warn", "audit", "skip")

TOO_LARGE = "object-too-large"
"""The rule of a finding about an object too large to be judged."""

NAME_LIMIT = 253
"""Longest namespace, name, uid, apiVersion or kind kept (kube-apiserver allows names of
253 characters at most); a longer one is cut, saying how long it was."""
TEMPLATE_LIMIT = 256
"""Longest template field path kept (``spec.pytorchReplicaSpecs.Worker.template``)."""

JUDGED_AS = (
    "each pod as the webhooks would judge its CREATE today (as its creator sent it, "
    "status and the scheduler's node set aside, our mutation applied, then validated), "
    "so pods created before gpu-admission was installed count as if created now; each "
    "workload by its pod templates, as the pods its controller creates"
)


@dataclass(frozen=True, slots=True)
class Subject:
    """What one finding is about: an object, and for a workload one pod template of it."""

    namespace: str
    api_version: str
    kind: str
    name: str
    uid: str = ""
    template: str = ""
    """The template's field path (`spec.template`); empty for a Pod."""

    @property
    def describe(self) -> str:
        """`Pod 'ml/x'`, `Deployment 'ml/llm' template (spec.template)`."""
        template = f" template ({self.template})" if self.template else ""
        return f"{self.kind} {f'{self.namespace}/{self.name}'!r}{template}"


@dataclass(frozen=True, slots=True)
class Finding:
    subject: Subject
    verdict: Verdict
    message: str = ""
    """Why it would be refused, as kube-apiserver would print it; empty when admitted."""
    rules: tuple[RuleOutcome, ...] = ()
    """Each rule's outcome; empty for an object that cannot be read."""
    exemption: str = ""
    """The reason of the policy exemption that skips it, if one does."""


def as_created(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as its creator sent it, as near as what is stored tells: without `status`,
    and without `spec.nodeName` unless someone set it by hand.

    The scheduler binds a pod through the `binding` subresource, which is not recorded in
    `metadata.managedFields`; a `spec.nodeName` written by the pod's creator (or a later
    writer) is. Without managedFields a node name is taken for the scheduler's."""
    created = {key: value for key, value in pod.items() if key != "status"}
    spec = pod.get("spec")
    if isinstance(spec, dict) and "nodeName" in spec and not _node_named_by_hand(pod):
        created["spec"] = {key: value for key, value in spec.items() if key != "nodeName"}
    return created


def _node_named_by_hand(pod: Mapping[str, Any]) -> bool:
    metadata = pod.get("metadata")
    entries = metadata.get("managedFields") if isinstance(metadata, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict) or entry.get("subresource"):
            continue
        fields = entry.get("fieldsV1")
        spec = fields.get("f:spec") if isinstance(fields, dict) else None
        if isinstance(spec, dict) and "f:nodeName" in spec:
            return True
    return False


def judge_object(
    engine: Engine,
    obj: dict[str, Any],
    kind: TemplateKind,
    inventory: Inventory = UNKNOWN,
    claims_of: ClaimsOf | None = None,
) -> list[Finding]:
    """The findings of one listed object of `kind`: one for a Pod, one per pod template of
    a workload (none for a workload with no template)."""
    subject = subject_of(obj)
    if kind is POD:
        return [judge_pod(engine, subject, as_created(obj), inventory, claims_of)]
    try:
        templates = pod_templates(obj, kind)
    except MalformedObject as error:
        return [Finding(subject, "denied", f"malformed object: {error}")]
    judged = [
        _judged(
            engine,
            dataclasses.replace(subject, template=template_path(pointer)),
            pod_from_template(template),
            inventory,
            claims_of,
        )
        for pointer, template in templates
    ]
    return _worded_together(subject, judged)


def judge_pod(
    engine: Engine,
    subject: Subject,
    pod: dict[str, Any],
    inventory: Inventory = UNKNOWN,
    claims_of: ClaimsOf | None = None,
) -> Finding:
    """Mutate `pod`, apply the patch as kube-apiserver does, validate the result. A pod
    template's denial (``subject.template`` set) is worded as the workload webhook words
    it (``denied CronJob 'ns/name' template (spec.jobTemplate.spec.template): ...``), the
    words of check, explain and policy test too."""
    return _judged(engine, subject, pod, inventory, claims_of)[0]


Enforced = tuple[str, ...]
"""The messages of a pod's enforced violations, in the order the engine found them."""


def _judged(
    engine: Engine,
    subject: Subject,
    pod: dict[str, Any],
    inventory: Inventory = UNKNOWN,
    claims_of: ClaimsOf | None = None,
) -> tuple[Finding, Enforced]:
    """`judge_pod`, with the messages of the pod's enforced violations."""
    request = AdmissionRequest.pod_create(
        f"audit:{subject.uid or subject.name}", subject.namespace, subject.name, pod
    )
    sources = engine.claim_sources(request)
    claims = claims_of(subject.namespace, sources) if sources and claims_of else NO_CLAIMS
    mutation = engine.mutate(request, inventory, claims)
    if not mutation.allowed:
        return Finding(subject, "denied", mutation.message), ()
    mutated: dict[str, Any] = jsonpatch.apply_patch(pod, list(mutation.patch))
    decision = engine.validate(
        dataclasses.replace(request, object=mutated), inventory, claims=claims
    )
    exemption = decision.audit_annotations.get(EXEMPTION, "")
    outcomes = {rule.outcome for rule in decision.rules}
    verdict: Verdict
    if not decision.allowed:
        verdict = "denied"
    elif exemption:
        verdict = "exempted"
    elif "warn" in outcomes:
        verdict = "warned"
    elif "audit" in outcomes:
        verdict = "audited"
    else:
        verdict = "passed"
    enforced = tuple(v.message for v in decision.violations if v.mode == ENFORCE)
    message = decision.message
    if subject.template and enforced:
        message = _denial(subject, [(subject.template, enforced)])
    return Finding(subject, verdict, message, decision.rules, exemption), enforced


def _denial(workload: Subject, templates: list[tuple[str, Enforced]]) -> str:
    """The denial of `workload` for `templates` (field paths and the messages of their
    enforced violations) as the workload webhook judging its CREATE words it."""
    named = subject(workload.kind, workload.namespace, workload.name)
    return denial(named, templates=[(path, list(messages)) for path, messages in templates])


def _worded_together(workload: Subject, judged: list[tuple[Finding, Enforced]]) -> list[Finding]:
    """The findings of one workload's templates, each denied one with the webhook's one
    denial of the workload, naming every template refused (as check words them)."""
    refused = [(f.subject.template, enforced) for f, enforced in judged if enforced]
    if len(refused) < 2:
        return [finding for finding, _ in judged]
    message = _denial(workload, refused)
    return [
        dataclasses.replace(finding, message=message) if enforced else finding
        for finding, enforced in judged
    ]


def template_path(pointer: str) -> str:
    """The field path of a template's JSON pointer, cut to ``TEMPLATE_LIMIT``."""
    return shorten(field_path(pointer), TEMPLATE_LIMIT)


def too_large(subject: Subject, size: int, cap: int) -> Finding:
    """The finding of an object too large to be judged: ``size`` characters of JSON over
    the audit's ``cap``."""
    message = (
        f"{subject.describe} is too large to be judged by the audit: {size:,} characters "
        f"of JSON, over its cap of {cap:,}"
    )
    return Finding(subject, "warned", message, (RuleOutcome(TOO_LARGE, "warn", (message,)),))


@dataclass(frozen=True, slots=True)
class Owner:
    """An object as an owner: what a controller ownerReference must name for its dependent
    to be left to it (the same namespace, since ownerReferences never cross one)."""

    namespace: str
    group: str
    kind: str
    uid: str


def as_owner(obj: Mapping[str, Any], kind: TemplateKind) -> Owner:
    """``obj``, listed as ``kind``, as the owner its dependents name."""
    subject = subject_of(obj)
    return Owner(subject.namespace, kind.group, kind.kind, subject.uid)


def judged_owner(obj: Mapping[str, Any], kinds: tuple[TemplateKind, ...]) -> Owner | None:
    """The owner ``obj``'s controller ownerReference names, when it is of one of ``kinds``
    (a Pod never counts as one); None without one, or with one of a kind not judged."""
    metadata = obj.get("metadata")
    owners = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    namespace = subject_of(obj).namespace
    for owner in owners if isinstance(owners, list) else ():
        if not isinstance(owner, dict) or owner.get("controller") is not True:
            continue
        api_version = owner.get("apiVersion")
        group = api_version.split("/", 1)[0] if isinstance(api_version, str) else ""
        group = group if isinstance(api_version, str) and "/" in api_version else ""
        for kind in kinds:
            if kind is not POD and kind.group == group and kind.kind == owner.get("kind"):
                return Owner(namespace, kind.group, kind.kind, _text(owner.get("uid")))
    return None


def left_to_owner(
    obj: Mapping[str, Any], kinds: tuple[TemplateKind, ...], seen: Container[Owner]
) -> bool:
    """Whether a workload's controller is of one of ``kinds`` and was ``seen`` (listed, of
    that kind, in the same namespace, with the uid named), which is judged instead: a
    Deployment's ReplicaSets, a CronJob's Jobs, a JobSet's Jobs. An owner never seen
    is no reason to skip anything."""
    owner = judged_owner(obj, kinds)
    return owner is not None and bool(owner.uid) and owner in seen


def subject_of(obj: Mapping[str, Any]) -> Subject:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    return Subject(
        namespace=_text(metadata.get("namespace")),
        api_version=_text(obj.get("apiVersion")),
        kind=_text(obj.get("kind")),
        name=_text(metadata.get("name")),
        uid=_text(metadata.get("uid")),
    )


def subject_named(namespace: str, api_version: str, kind: str, name: str, uid: str = "") -> Subject:
    """The subject of an object known by name only (one too large to be parsed)."""
    return Subject(*(_text(v) for v in (namespace, api_version, kind, name, uid)))


@dataclass
class AuditSummary:
    """Findings added up: by verdict, by rule and outcome, by namespace and verdict."""

    judged: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    by_rule: dict[str, Counter[str]] = field(default_factory=dict)
    """Rule -> outcome -> how many judged pods had it, rules in the order first met
    (the engine's: every finding lists every rule)."""
    by_namespace: dict[str, Counter[str]] = field(default_factory=dict)
    objects: Counter[str] = field(default_factory=Counter)
    """Kind -> how many objects of it were judged. The findings of one object (one per pod
    template) come one after the other, so an object is counted when its first comes:
    no set of every object judged grows with the cluster."""
    _last_object: tuple[str, str, str] | None = field(default=None, repr=False)

    def add(self, finding: Finding) -> None:
        self.judged += 1
        self.verdicts[finding.verdict] += 1
        subject = finding.subject
        judged = (subject.kind, subject.namespace, subject.name)
        if judged != self._last_object:
            self._last_object = judged
            self.objects[subject.kind] += 1
        for outcome in finding.rules:
            self.by_rule.setdefault(outcome.rule, Counter())[outcome.outcome] += 1
        self.by_namespace.setdefault(subject.namespace, Counter())[finding.verdict] += 1

    def include_namespace(self, namespace: str) -> None:
        """Show `namespace` even when nothing in it was judged."""
        self.by_namespace.setdefault(namespace, Counter())

    @property
    def denied(self) -> int:
        return self.verdicts["denied"]

    def object_counts(self) -> dict[str, int]:
        """How many objects of each kind were judged, kinds by name."""
        return dict(sorted(self.objects.items()))


def _text(value: Any) -> str:
    return shorten(value, NAME_LIMIT) if isinstance(value, str) else ""
