"""Offline evaluation: each pod or pod template of some objects, judged as the cluster would.

For each pod (or the pod a controller makes of a template, see
webhook.engine.templates) the engine mutates it, the patch is applied as
kube-apiserver applies it, and the mutated pod is validated: the same
sequence as CREATE in a cluster whose namespace has opted in. Each rule's
outcome is the one the engine reported with its decision.

Each field of an object that Kubernetes does not know (webhook.offline.manifest_fields) is
a warning of that object (of the pod template it lies in, or of the object's first): the
webhook never sees such a field, kube-apiserver refuses or drops it before, so it is no
rule of the engine, but a `resource:` asking 4 GPUs is judged as asking none.

The ResourceClaimTemplates and ResourceClaims among the documents are judged as at
their CREATE too, and are what the pods' claims of Dynamic Resource Allocation ask
for (webhook.offline.claim_documents): a claim naming one not among them is not judged.
They are read through the engine's one view of GPU DeviceClasses (``DraNow.classes_for``),
as the mutation and validation of the same run read them: the policy's, and those of the
DeviceClasses among the documents that pick its GPU drivers' devices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch

from webhook.engine import AdmissionRequest, Engine, RuleOutcome
from webhook.engine.decision import ENFORCE, Decision, denial, subject
from webhook.engine.dra.api import GROUP
from webhook.engine.dra.claims import ClaimAsks, ClaimSource, GpuClasses, claim_asks
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects, PodClaim, pod_claims
from webhook.engine.inventory import UNKNOWN, Inventory
from webhook.engine.pod import read_pod
from webhook.engine.templates import (
    TemplateKind,
    pod_from_template,
    pod_templates,
    template_kind,
)
from webhook.engine.workloads import field_path
from webhook.errors import MalformedObject
from webhook.offline.claim_documents import (
    RESOURCES,
    ClaimDocuments,
    as_v1,
    is_claim_object,
    is_device_class,
    unread_version,
)
from webhook.offline.documents import Document
from webhook.offline.landing import Landing, landings
from webhook.offline.manifest_fields import UnknownField, unknown_fields

KUBECTL_NAMESPACE = "default"
"""The namespace an object of a manifest that names none is judged in: kubectl's, when its
context names none (`kubectl apply -f` sends it there). The webhook never sees an object
without a namespace, so a denial names this one as the webhook would (`'default/x'`)."""


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Which object of which manifest."""

    source: str
    line: int
    api_version: str
    kind: str
    namespace: str
    name: str

    @property
    def describe(self) -> str:
        return f"{self.kind} {self.name!r}" if self.name else self.kind


@dataclass(frozen=True, slots=True)
class PodEvaluation:
    """The verdict on one pod or pod template, and everything that led to it."""

    object: ObjectRef
    template: str
    """The JSON pointer of the pod template in the object; empty for a Pod."""
    workload_class: str | None
    """The value of the workload class label, if any."""
    allowed: bool
    message: str
    """The denial as kube-apiserver would print it, in the webhook's words: for a template,
    `gpu-admission denied <Kind> '<namespace>/<name>' template (<path>): ...`; empty when
    allowed."""
    rules: tuple[RuleOutcome, ...] = ()
    """Each validation rule's outcome, as the engine reported it in validating the pod."""
    patch: tuple[dict[str, Any], ...] = ()
    """The JSONPatch of our mutation, against `received`."""
    received: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The pod as our mutating webhook receives it (requests defaulted from limits)."""
    mutated: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    landings: tuple[Landing, ...] = ()
    """Each kind of node of the policy, and whether the mutated pod can be scheduled there."""
    warnings: tuple[str, ...] = ()
    """First one per field of the pod (or template) Kubernetes does not know
    (``UnknownField.warning``), then the warnings of our webhooks' responses, each printed
    by kubectl as `Warning: ...` (allowed or denied): rules the policy puts in `warn` mode."""
    claims: tuple[PodClaim, ...] = ()
    """The pod's claims of Dynamic Resource Allocation, resolved from the documents."""

    @property
    def describe(self) -> str:
        """`Deployment 'llm-server' /spec/template`, or `Pod 'x'`."""
        template = f" {self.template}" if self.template else ""
        return f"{self.object.describe}{template}"

    @property
    def failed_rules(self) -> list[str]:
        return [r.rule for r in self.rules if r.outcome == "fail"]

    @property
    def is_template(self) -> bool:
        """Whether this is a workload's pod template (or a workload whose templates could not
        be read), not a Pod: `check`'s summary counts the two apart."""
        return bool(self.template) or self.object.kind != "Pod"


@dataclass(frozen=True, slots=True)
class ClaimObjectEvaluation:
    """The verdict on a ResourceClaimTemplate or ResourceClaim (a claim object), judged as
    at its CREATE: refused when no node of the policy's pools could ever satisfy it."""

    object: ObjectRef
    allowed: bool
    message: str
    """The denial as kube-apiserver would print it; empty when allowed."""
    asks: ClaimAsks | None
    """What it asks for; None when it cannot be read (`message` says why)."""
    warnings: tuple[str, ...] = ()
    failed_rules: tuple[str, ...] = ()
    """The rules whose enforced violations refuse it."""

    @property
    def describe(self) -> str:
        return self.object.describe


@dataclass(frozen=True, slots=True)
class SkippedObject:
    object: ObjectRef
    reason: str


@dataclass(frozen=True, slots=True)
class Report:
    policy: str
    """Where the policy came from."""
    pods: tuple[PodEvaluation, ...]
    skipped: tuple[SkippedObject, ...]
    claim_objects: tuple[ClaimObjectEvaluation, ...] = ()

    @property
    def allowed(self) -> bool:
        return all(p.allowed for p in self.pods) and all(c.allowed for c in self.claim_objects)

    @property
    def denied(self) -> int:
        """How many pods are denied."""
        return sum(1 for p in self.pods if not p.allowed)

    @property
    def claim_objects_denied(self) -> int:
        return sum(1 for c in self.claim_objects if not c.allowed)

    @property
    def warnings(self) -> int:
        """How many warnings kubectl would print for all the pods and claim objects."""
        return sum(len(p.warnings) for p in self.pods) + sum(
            len(c.warnings) for c in self.claim_objects
        )


def evaluate(
    engine: Engine,
    documents: Iterable[Document],
    kinds: tuple[TemplateKind, ...] | None = None,
    claims: ClaimDocuments | None = None,
) -> Report:
    """Judge every pod, pod template and claim object; `kinds` defaults to the built-ins
    and the policy's, `claims` (what the pods' claims may name) to the claim objects
    among `documents`."""
    kinds = engine.kinds if kinds is None else kinds
    documents = list(documents)
    if claims is None:
        claims = ClaimDocuments.of(document.object for document in documents)
    pods: list[PodEvaluation] = []
    skipped: list[SkippedObject] = []
    claim_objects: list[ClaimObjectEvaluation] = []
    for document in documents:
        ref = object_ref(document)
        unknown = unknown_fields(document.object, kinds)
        if is_claim_object(document.object):
            unread = unread_version(document.object)
            if unread is not None:
                skipped.append(SkippedObject(ref, unread))
            else:
                judged_claim = evaluate_claim_object(engine, ref, document.object, claims.inventory)
                warnings = (*(f.warning() for f in unknown), *judged_claim.warnings)
                claim_objects.append(
                    dataclasses.replace(judged_claim, warnings=tuple(dict.fromkeys(warnings)))
                )
            continue
        if is_device_class(document.object):
            reason = "a DeviceClass: read for which claims ask for GPUs, not judged itself"
            skipped.append(SkippedObject(ref, reason))
            continue
        kind = template_kind(document.object, kinds)
        if kind is None:
            skipped.append(SkippedObject(ref, f"{ref.api_version} {ref.kind} has no pod template"))
            continue
        try:
            templates = pod_templates(document.object, kind)
        except MalformedObject as error:
            pods += _with_unknown_fields(
                [_malformed(ref, "", f"malformed object: {error}")], unknown
            )
            continue
        seen = claims.seen_from(ref.namespace)
        judged = [
            _evaluated(engine, ref, pointer, pod_from_template(template), seen, claims.inventory)
            for pointer, template in templates
        ]
        pods += _with_unknown_fields(_worded_together(ref, judged), unknown)
    return Report(engine.policy.source, tuple(pods), tuple(skipped), tuple(claim_objects))


def evaluate_pod(
    engine: Engine,
    ref: ObjectRef,
    template: str,
    pod: dict[str, Any],
    claims: ClaimObjects = NO_CLAIMS,
    inventory: Inventory = UNKNOWN,
) -> PodEvaluation:
    """Mutate, apply the patch, validate the result: CREATE of one pod, whose claims name
    `claims`, in a cluster of which `inventory` is known."""
    return _evaluated(engine, ref, template, pod, claims, inventory)[0]


ALLOW = Decision(allowed=True)
"""What a pod no webhook is sent is given: admitted as written."""

Enforced = tuple[str, ...]
"""The messages of a pod's enforced violations, in the order the engine found them."""


def _evaluated(
    engine: Engine,
    ref: ObjectRef,
    template: str,
    pod: dict[str, Any],
    claims: ClaimObjects = NO_CLAIMS,
    inventory: Inventory = UNKNOWN,
) -> tuple[PodEvaluation, Enforced]:
    """`evaluate_pod`, with the messages of the pod's enforced violations."""
    request = AdmissionRequest.pod_create(
        f"offline:{ref.source}:{ref.line}{template}", namespace_of(ref), ref.name, pod
    )
    # Judged as the cluster judges it: by the webhooks kube-apiserver sends it to (their
    # rules, object selectors and matchConditions), and admitted as written by none.
    sent = engine.routes.sent
    mutation = engine.mutate(request, inventory, claims) if sent(request, mutating=True) else ALLOW
    if not mutation.allowed:
        return _malformed(ref, template, mutation.message), ()
    mutated: dict[str, Any] = jsonpatch.apply_patch(pod, list(mutation.patch))
    validated = dataclasses.replace(request, object=mutated)
    decision = (
        engine.validate(validated, inventory, claims=claims)
        if sent(validated, mutating=False)
        else Decision(allowed=True, rules=engine.rules.skipped)
    )
    if decision.code == 400:
        return _malformed(ref, template, decision.message), ()
    policy = engine.policy
    view = read_pod(mutated, policy)
    enforced = tuple(v.message for v in decision.violations if v.mode == ENFORCE)
    evaluation = PodEvaluation(
        object=ref,
        template=template,
        workload_class=view.labels.get(policy.workload_label),
        allowed=decision.allowed,
        message=_denial(ref, [(template, enforced)]) if template and enforced else decision.message,
        rules=decision.rules,
        patch=mutation.patch,
        received=pod,
        mutated=mutated,
        landings=landings(policy, view),
        warnings=tuple(dict.fromkeys(mutation.warnings + decision.warnings)),
        claims=pod_claims(policy, view, claims, _classes(engine, inventory)).claims,
    )
    return evaluation, enforced


def evaluate_claim_object(
    engine: Engine, ref: ObjectRef, obj: dict[str, Any], inventory: Inventory = UNKNOWN
) -> ClaimObjectEvaluation:
    """Validate the CREATE of a ResourceClaimTemplate or ResourceClaim, sent as v1."""
    sent = as_v1(obj)
    kind = sent["kind"]
    request = AdmissionRequest(
        f"offline:{ref.source}:{ref.line}", "CREATE", GROUP, "v1", kind, RESOURCES[kind], "",
        namespace_of(ref), "", sent,
    )  # fmt: skip
    decision = engine.validate(request, inventory)
    try:
        source = ClaimSource(kind, ref.name)
        asks: ClaimAsks | None = claim_asks(_classes(engine, inventory), source, sent)
    except MalformedObject:
        asks = None
    failed = tuple(dict.fromkeys(v.rule for v in decision.violations if v.mode == ENFORCE))
    return ClaimObjectEvaluation(
        ref, decision.allowed, decision.message, asks, decision.warnings, failed
    )


def namespace_of(ref: ObjectRef) -> str:
    """The namespace the webhook would see the object in (see `KUBECTL_NAMESPACE`)."""
    return ref.namespace or KUBECTL_NAMESPACE


def _denial(ref: ObjectRef, templates: list[tuple[str, Enforced]]) -> str:
    """The denial of the workload `ref` for `templates` (JSON pointers and the messages of
    their enforced violations) as the webhook judging its CREATE words it
    (webhook.engine.decision.denial); empty when none has any."""
    found = [(field_path(pointer), list(messages)) for pointer, messages in templates if messages]
    return denial(subject(ref.kind, namespace_of(ref), ref.name), templates=found) if found else ""


def _worded_together(
    ref: ObjectRef, judged: list[tuple[PodEvaluation, Enforced]]
) -> list[PodEvaluation]:
    """The templates of one workload, each denied one with the webhook's one denial of the
    workload: it names every template refused, so a workload with two (a PyTorchJob's
    Master and Worker, say) is refused in the same words by check and by kube-apiserver."""
    refused = [(e.template, enforced) for e, enforced in judged if enforced]
    if len(refused) < 2:
        return [evaluation for evaluation, _ in judged]
    message = _denial(ref, refused)
    return [
        dataclasses.replace(evaluation, message=message) if enforced else evaluation
        for evaluation, enforced in judged
    ]


def _with_unknown_fields(
    evaluations: list[PodEvaluation], unknown: list[UnknownField]
) -> list[PodEvaluation]:
    """The pods of one object, each warned of the unknown fields in its template, the first
    also of those outside every template (`spec.backofLimit` of a Job): each once."""
    if not unknown or not evaluations:
        return evaluations
    prefixes = [f"{field_path(e.template)}." if e.template else "" for e in evaluations]
    placed: list[list[str]] = [[] for _ in evaluations]
    for found in unknown:
        at = next(
            (i for i, prefix in enumerate(prefixes) if prefix and found.path.startswith(prefix)),
            0,
        )
        placed[at].append(found.warning())
    return [
        dataclasses.replace(e, warnings=tuple(dict.fromkeys((*extra, *e.warnings)))) if extra else e
        for e, extra in zip(evaluations, placed, strict=True)
    ]


def _classes(engine: Engine, inventory: Inventory) -> GpuClasses:
    """The GPU DeviceClasses the engine's mutation and validation read claims through
    with `inventory`."""
    return engine.capacity(inventory).dra.classes_for(engine.policy)


def object_ref(document: Document) -> ObjectRef:
    obj = document.object
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    return ObjectRef(
        source=document.source,
        line=document.line,
        api_version=_text(obj.get("apiVersion")),
        kind=_text(obj.get("kind")),
        namespace=_text(metadata.get("namespace")),
        name=_text(metadata.get("name") or metadata.get("generateName")),
    )


def _malformed(ref: ObjectRef, template: str, message: str) -> PodEvaluation:
    return PodEvaluation(ref, template, None, allowed=False, message=message)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
