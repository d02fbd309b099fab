"""The engine's one seam: an admission request in, a decision out.

Pure: no HTTP, no Kubernetes client, no files, no clocks. The pod is read as
the plain mapping it arrived as; the patch is computed against it. What the
cluster has now comes in as data (an ``Inventory``) with each review; what it
means for the policy's pools is worked out once per inventory and kept.

Pods are judged by a registry of rules (``webhook.engine.rules.RULES`` unless
another is given), which also says which rule names a policy's `enforcement` may
use: an ``Engine`` refuses a policy naming another, so every use of a policy
goes through one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import orjson

from webhook.engine.autoscalers import ScaleTarget, autoscaler_warnings, scale_target
from webhook.engine.binding import (
    CLAIM_RULES,
    binding_sources,
    bound_pod,
    is_pod_binding,
    pod_as_bound,
)
from webhook.engine.capacity_now import STATIC, CapacityNow, CapacityTracker
from webhook.engine.claim_objects import claim_object_kind, judge_claim_object
from webhook.engine.claims import ClaimSource
from webhook.engine.decision import (
    ENFORCE,
    EXEMPTION,
    Decision,
    RuleOutcome,
    Violation,
    allow,
    exempt,
    judge,
    malformed,
    reasons,
    shorten,
    subject,
)
from webhook.engine.env_keys import env_keys_kind, judge_env_keys
from webhook.engine.inventory import UNKNOWN, Inventory
from webhook.engine.kept import KeptAnswers
from webhook.engine.mutate import created_pod, isolate_ephemeral_containers, mutate_pod
from webhook.engine.placement_answers import PlacementAnswers
from webhook.engine.placement_index import PlacementIndex
from webhook.engine.pod import PodView, read_pod
from webhook.engine.pod_answers import MAX_ANSWERS, glance, kept_patch, pod_key
from webhook.engine.pod_claims import (
    MAX_SOURCES,
    NO_CLAIMS,
    ClaimObjects,
    pod_claims,
    sources_named,
)
from webhook.engine.request import AdmissionRequest, refusal
from webhook.engine.rules import RULES, Findings, Registry, RuleContext
from webhook.engine.rules.claims import RULE as CLAIMS_RULE
from webhook.engine.rules.device_access import privileged_containers
from webhook.engine.rules.device_env import check_device_env
from webhook.engine.rules.registry import with_modes
from webhook.engine.rules.visibility import check_visible_devices
from webhook.engine.templates import (
    POD,
    TemplateKind,
    pod_templates,
    template_kind,
    template_kinds,
)
from webhook.engine.workloads import template_violations, workload_denial
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy


class Engine:
    def __init__(self, policy: Policy, rules: Registry = RULES) -> None:
        """Raises PolicyError when the policy's `enforcement` names a rule not in `rules`."""
        rules.refuse_unknown_rules(policy)
        self.policy = policy
        self.rules = rules
        self.kinds = template_kinds(policy)
        self.placement = PlacementIndex.of(policy)
        self.answers = PlacementAnswers()
        self.kept_findings: KeptAnswers[Findings] = KeptAnswers(MAX_ANSWERS)
        self.kept_patches: KeptAnswers[bytes] = KeptAnswers(MAX_ANSWERS)
        self._tracker = CapacityTracker(policy)
        self._seen: tuple[Inventory, CapacityNow] = (UNKNOWN, STATIC)

    def capacity(self, inventory: Inventory) -> CapacityNow:
        """What the policy's pools have now per `inventory`, worked out once per inventory,
        and from the last one's where the two are alike."""
        seen, now = self._seen
        if inventory is seen:
            return now
        now = self._tracker.now(inventory)
        self._seen = (inventory, now)
        return now

    def claim_sources(
        self, request: AdmissionRequest, read: ClaimObjects = NO_CLAIMS
    ) -> tuple[ClaimSource, ...]:
        """The ResourceClaimTemplates and ResourceClaims (in the request's namespace) whose
        objects `mutate` and `validate` need for the pods under review, each once: none for
        a pod without claims, or anything that is not a pod or workload.

        A pod's binding needs the pod first (``webhook.engine.binding``): asked again with
        what was `read`, the claims it names come after it. A caller reads until nothing
        new is asked for."""
        if is_pod_binding(request):
            return binding_sources(request, read)
        if request.subresource or request.operation not in ("CREATE", "UPDATE"):
            return ()
        if not isinstance(request.object, dict):
            return ()
        if request.is_pod:
            return sources_named([request.object])[:MAX_SOURCES]
        kind = self._workload_kind(request)
        if kind is None:
            return ()
        try:
            templates = pod_templates(request.object, kind)
        except MalformedObject:
            return ()  # validation says what is wrong with it
        return sources_named(template for _, template in templates)[:MAX_SOURCES]

    def mutate(
        self,
        request: AdmissionRequest,
        inventory: Inventory = UNKNOWN,
        claims: ClaimObjects = NO_CLAIMS,
    ) -> Decision:
        """Inject what a workload pod needs at its CREATE, and isolate debug containers
        added later from the node's GPUs; everything else passes. `claims` holds the
        objects of the pod's claims (see `claim_sources`)."""
        if (refused := refusal(request)) is not None:
            return refused
        if request.is_ephemeral_containers_update:
            try:
                pod = read_pod(request.object, self.policy)
                return allow(isolate_ephemeral_containers(self.policy, pod, request.old_object))
            except MalformedObject as error:
                return malformed(str(error))
        if not request.is_pod_create:
            return allow()
        seen = glance(request.object, claims)
        if seen is not None:  # a replica of a template mutated before: not read again
            kept = self.kept_patches.peek(seen.key, self.capacity(inventory))
            if kept is not None:
                return allow(orjson.loads(kept))
        try:
            pod = read_pod(request.object, self.policy)
            workload = self.policy.classes.get(pod.labels.get(self.policy.workload_label, ""))
            if workload is None or not workload.mutate:
                return allow()
            now = self.capacity(inventory)

            def work_out() -> list[dict[str, Any]]:
                classes = now.dra.classes_for(self.policy)
                resolved = pod_claims(self.policy, pod, claims, classes)
                return mutate_pod(self.policy, pod, workload, now, resolved)

            key = seen.key if seen is not None else None
            return allow(kept_patch(self.kept_patches, key, now, work_out))
        except MalformedObject as error:
            return malformed(str(error))

    def scale_target(self, request: AdmissionRequest) -> ScaleTarget | None:
        """What an autoscaler under review scales; its object is for `validate` to read."""
        return scale_target(request)

    def validate(
        self,
        request: AdmissionRequest,
        inventory: Inventory = UNKNOWN,
        scaled: Mapping[str, Any] | None = None,
        *,
        target: ScaleTarget | None = None,
        claims: ClaimObjects = NO_CLAIMS,
    ) -> Decision:
        """Refuse pods and workloads whose pods break an enforced rule, with every reason at
        once; warn of and audit the others. Exempted pods are not judged.

        An autoscaler is always admitted, with a warning when it can scale `scaled` (the
        workload it targets, as the cluster has it) beyond what its pools have now. A
        caller that worked out the autoscaler's `target` to read `scaled` passes it on.
        `claims` holds the objects of the pods' claims (see `claim_sources`); a
        ResourceClaimTemplate or ResourceClaim created is judged against every pool."""
        if (refused := refusal(request)) is not None:
            return refused
        now = self.capacity(inventory)
        if is_pod_binding(request):
            return self._validate_binding(request, now, claims)
        if target is None and not request.is_pod:  # a pod is no autoscaler
            target = self.scale_target(request)
        if target is not None:
            warnings = autoscaler_warnings(self.policy, target, scaled, now, self.kinds)
            return Decision(allowed=True, warnings=tuple(warnings))
        if request.is_ephemeral_containers_update:
            return self._validate_ephemeral_containers(request)
        if request.is_pod_update:
            return self._validate_pod_update(request, now, claims)
        if request.is_pod_create:
            return self._validate_pod_create(request, now, claims)
        if claim_object_kind(request) is not None:
            return judge_claim_object(self.policy, request, now)
        if env_keys_kind(request) is not None:
            return judge_env_keys(self.policy, request)
        kind = self._workload_kind(request)
        return allow() if kind is None else self._validate_workload(request, kind, now, claims)

    def findings(
        self, pod: PodView, now: CapacityNow = STATIC, claims: ClaimObjects = NO_CLAIMS
    ) -> Findings:
        """What the rules find in the pod: its violations, each with the mode the policy
        gives its rule for the pod, and every rule's outcome. Kept for the next pod of the
        same template (``webhook.engine.pod_answers``)."""
        return self._findings_kept_by(pod_key(pod, claims), pod, now, claims)

    def _findings_kept_by(
        self, key: bytes | None, pod: PodView, now: CapacityNow, claims: ClaimObjects
    ) -> Findings:
        if key is None:
            return self._found(pod, now, claims)
        return self.kept_findings.get(key, now, lambda: self._found(pod, now, claims))

    def _found(self, pod: PodView, now: CapacityNow, claims: ClaimObjects) -> Findings:
        resolved = pod_claims(self.policy, pod, claims, now.dra.classes_for(self.policy))
        return self.rules.judge(
            RuleContext.of(self.policy, pod, now, self.placement, resolved, self.answers)
        )

    def rule_outcomes(
        self, pod: PodView, now: CapacityNow = STATIC, claims: ClaimObjects = NO_CLAIMS
    ) -> tuple[RuleOutcome, ...]:
        """Every rule's outcome for the pod: pass, fail, warn, audit or skip."""
        return self.findings(pod, now, claims).outcomes

    def pod_violations(
        self, pod: PodView, now: CapacityNow = STATIC, claims: ClaimObjects = NO_CLAIMS
    ) -> list[Violation]:
        """The pod's violations, each with the mode the policy gives its rule for the pod."""
        return list(self.findings(pod, now, claims).violations)

    def _validate_pod_create(
        self, request: AdmissionRequest, now: CapacityNow, claims: ClaimObjects
    ) -> Decision:
        """The pod as created, with every rule's outcome (all skipped for an exempt pod). A
        replica of a template judged before is not read again: its findings are kept."""
        seen = glance(request.object, claims)
        found = self.kept_findings.peek(seen.key, now) if seen is not None else None
        if seen is not None and found is not None:
            namespace = request.namespace or seen.namespace
            exemption = self.policy.exemption_for(namespace, seen.labels)
            if exemption is not None:
                return exempt(exemption.reason, self.rules.skipped)
            named = subject("pod", request.namespace, request.name or seen.name)
            return judge(found.violations, named, rules=found.outcomes)
        try:
            pod = read_pod(request.object, self.policy)
            exemption = self.policy.exemption_for(_namespace(request, pod), pod.labels)
            if exemption is not None:
                return exempt(exemption.reason, self.rules.skipped)
            key = seen.key if seen is not None else None
            found = self._findings_kept_by(key, pod, now, claims)
        except MalformedObject as error:
            return malformed(str(error))
        named = subject("pod", request.namespace, request.name or pod.name)
        return judge(found.violations, named, rules=found.outcomes)

    def _validate_ephemeral_containers(self, request: AdmissionRequest) -> Decision:
        """Debug containers added to a running pod may not pick GPUs by hand either, nor be
        privileged in a class pod (`kubectl debug --profile=sysadmin`): its node's GPUs
        are other pods'."""
        try:
            pod = read_pod(request.object, self.policy)
            exemption = self.policy.exemption_for(_namespace(request, pod), pod.labels)
            if exemption is not None:
                return exempt(exemption.reason)
            label = pod.labels.get(self.policy.workload_label)
            debug = pod.ephemeral_containers
            found = [
                *check_visible_devices(self.policy, debug),
                *check_device_env(self.policy, debug),
                # A class pod runs on a GPU node; where a pod of no class runs is only
                # known to it, and it was kept off GPU nodes at its CREATE.
                *(privileged_containers(debug) if label in self.policy.classes else ()),
            ]
            violations = with_modes(self.policy, label, found)
        except MalformedObject as error:
            return malformed(str(error))
        return judge(violations, subject("pod", request.namespace, request.name or pod.name))

    def _validate_pod_update(
        self, request: AdmissionRequest, now: CapacityNow, claims: ClaimObjects
    ) -> Decision:
        """A pod whose scheduling fields change (tolerations, or nodeSelector and affinity
        of a gated pod) is judged as it will be; an update is refused only for what it
        breaks, not for what was already so (a pod admitted before its namespace opted in,
        say, whose immutable fields could never be mended)."""
        try:
            pod = read_pod(request.object, self.policy)
            exemption = self.policy.exemption_for(_namespace(request, pod), pod.labels)
            if exemption is not None:
                return exempt(exemption.reason)
            violations = self.pod_violations(pod, now, claims)
        except MalformedObject as error:
            return malformed(str(error))
        if violations:
            before = {(v.rule, v.message) for v in self._old_violations(request, now, claims)}
            violations = [v for v in violations if (v.rule, v.message) not in before]
        named = subject("update of pod", request.namespace, request.name or pod.name)
        return judge(violations, named)

    def _validate_binding(
        self, request: AdmissionRequest, now: CapacityNow, claims: ClaimObjects
    ) -> Decision:
        """The pod bound judged again by the rules its claims decide, against the claims as
        the scheduler allocated them (see ``webhook.engine.binding``). A pod that could not
        be read is refused (the webhooks fail closed); one that is gone, or was not looked
        for (no cluster to read it from), is the binding's own business."""
        found = bound_pod(request, claims)
        if found is None:
            return allow()
        source, obj = found
        refused = (
            f"gpu-admission denied binding of pod {_qualified(request, source.name)!r}"
            f"{_bound_to(request)}, judged by its claims as the scheduler allocated them"
        )
        if source in claims.unreadable:
            reason = f"the pod could not be read ({claims.unreadable[source]})"
            return judge([Violation(CLAIMS_RULE, reason)], refused)
        if not isinstance(obj, dict):
            return allow()
        try:
            pod = read_pod(pod_as_bound(obj), self.policy)
            if not pod.resource_claims:
                return allow()
            exemption = self.policy.exemption_for(_namespace(request, pod), pod.labels)
            if exemption is not None:
                return exempt(exemption.reason)
            violations = [v for v in self.pod_violations(pod, now, claims) if v.rule in CLAIM_RULES]
        except MalformedObject as error:
            return malformed(str(error))
        enforced = [v.message for v in violations if v.mode == ENFORCE]
        message = (
            f"{refused}: {reasons(enforced)}; a pod keeps the claims it names, so give them "
            "back what they asked at its CREATE or create the pod again"
        )
        return judge(violations, refused, message)

    def _old_violations(
        self, request: AdmissionRequest, now: CapacityNow, claims: ClaimObjects
    ) -> list[Violation]:
        try:
            return self.pod_violations(read_pod(request.old_object, self.policy), now, claims)
        except MalformedObject:
            return []

    def created_pod_violations(
        self, obj: dict[str, Any], now: CapacityNow = STATIC, claims: ClaimObjects = NO_CLAIMS
    ) -> list[Violation]:
        """The violations of a pod as it will be admitted: after our mutation at its CREATE."""
        return self.pod_violations(created_pod(self.policy, obj, now, claims), now, claims)

    def _workload_kind(self, request: AdmissionRequest) -> TemplateKind | None:
        if request.operation not in ("CREATE", "UPDATE") or request.subresource:
            return None
        if not isinstance(request.object, dict):
            return None
        kind = template_kind(request.object, self.kinds)
        return None if kind is POD else kind

    def _validate_workload(
        self, request: AdmissionRequest, kind: TemplateKind, now: CapacityNow, claims: ClaimObjects
    ) -> Decision:
        exempted: list[str] = []

        def check(obj: dict[str, Any]) -> list[Violation]:
            labels = read_pod(obj, self.policy).labels
            exemption = self.policy.exemption_for(request.namespace, labels)
            if exemption is not None:
                exempted.append(exemption.reason)
                return []
            return self.created_pod_violations(obj, now, claims)

        try:
            found = template_violations(request.object, request.old_object, kind, check)
        except MalformedObject as error:
            return malformed(str(error))
        if not found and not exempted:
            return allow()
        named = subject(kind.kind, request.namespace, _workload_name(request))
        message = workload_denial(named, found, ENFORCE)
        decision = judge([v for t in found for v in t.violations], named, message)
        if exempted:
            annotations = {
                **decision.audit_annotations,
                EXEMPTION: "; ".join(dict.fromkeys(exempted)),
            }
            decision = dataclasses.replace(decision, audit_annotations=annotations)
        return decision


def _namespace(request: AdmissionRequest, pod: PodView) -> str:
    if request.namespace:
        return request.namespace
    metadata = pod.raw.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    return namespace if isinstance(namespace, str) else ""


def _qualified(request: AdmissionRequest, name: str) -> str:
    return f"{request.namespace}/{name}" if request.namespace else name


def _bound_to(request: AdmissionRequest) -> str:
    """` to node 'gpu-3'`, from the Binding's target; empty when it names none."""
    target = request.object.get("target") if isinstance(request.object, dict) else None
    node = target.get("name") if isinstance(target, dict) else None
    return f" to node {shorten(node, 80)!r}" if isinstance(node, str) and node else ""


def _workload_name(request: AdmissionRequest) -> str:
    metadata = request.object.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name = request.name or metadata.get("name") or metadata.get("generateName") or ""
    return name if isinstance(name, str) else ""
