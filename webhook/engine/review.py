"""The engine's one seam: an admission request in, a decision out.

Pure: no HTTP, no Kubernetes client, no files, no clocks. The pod is read as
the plain mapping it arrived as; the patch is computed against it. What the
cluster has now comes in as data (an ``Inventory``) with each review; what it
means for the policy's pools is worked out once per inventory and kept.

Each request is judged by the webhook it came through, declared once in a registry of
handlers (``webhook.engine.handlers.HANDLERS`` unless another is given): ``answer``
takes the handler's name, as the route of its path does; ``mutate`` and ``validate``
find the handler kube-apiserver would call, for callers that have no path (offline,
tests, benchmarks). Pods are judged by a registry of rules (``webhook.engine.rules.RULES``
unless another is given), which also says which rule names a policy's `enforcement` may
use: an ``Engine`` refuses a policy naming another, so every use of a policy goes
through one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.engine.autoscalers import ScaleTarget, scale_target
from webhook.engine.capacity.now import STATIC, CapacityNow, CapacityTracker
from webhook.engine.decision import Decision, RuleOutcome, Violation, allow
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects, pod_claims
from webhook.engine.handlers import HANDLERS, Handler, HandlerRegistry, ResourceRule, Review
from webhook.engine.inventory import UNKNOWN, Inventory
from webhook.engine.kept import KeptAnswers
from webhook.engine.mutate import created_pod
from webhook.engine.placement_answers import PlacementAnswers
from webhook.engine.placement_index import PlacementIndex
from webhook.engine.pod import PodView
from webhook.engine.pod_answers import MAX_ANSWERS, pod_key
from webhook.engine.request import AdmissionRequest, refusal
from webhook.engine.rules import RULES, Findings, Registry, RuleContext
from webhook.engine.rules.host_access import refuse_folders_holding_the_stack
from webhook.engine.rules.reach import may_reach_gpu_node
from webhook.engine.templates import template_kinds
from webhook.policy.compiled import Policy


class Engine:
    def __init__(
        self, policy: Policy, rules: Registry = RULES, handlers: HandlerRegistry = HANDLERS
    ) -> None:
        """Raises PolicyError when the policy's `enforcement` names a rule not in `rules`,
        or its hostAccess allows a folder holding the runtime's sockets or the GPUs'."""
        rules.refuse_unknown_rules(policy)
        refuse_folders_holding_the_stack(policy)
        self.policy = policy
        self.rules = rules
        self.handlers = handlers
        self.routes = handlers.routes(policy)
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
        self, request: AdmissionRequest, read: ClaimObjects = NO_CLAIMS, handler: str | None = None
    ) -> tuple[ClaimSource, ...]:
        """The ResourceClaimTemplates and ResourceClaims (in the request's namespace) whose
        objects the judge of `request` needs for the pods under review, each once: none for
        a pod without claims, or anything that is not a pod or workload. `handler` is the
        webhook it came through, when known.

        A pod's binding needs the pod first (``webhook.engine.binding``): asked again with
        what was `read`, the claims it names come after it. A caller reads until nothing
        new is asked for."""
        reads = self.routes.reads(request, handler)
        return () if reads is None else reads(self, request, read)

    def reads_afresh(self, request: AdmissionRequest, handler: str | None = None) -> bool:
        """Whether what ``claim_sources`` names for `request` must be read at its review,
        never taken from what others read a moment ago."""
        return self.routes.reads_afresh(request, handler)

    def answer(self, handler: str, review: Review) -> Decision:
        """The decision of the webhook named `handler` (``webhook.engine.handlers``) on the
        review; a request it does not judge is admitted."""
        if (refused := refusal(review.request)) is not None:
            return refused
        return self._judged(self.routes.route(handler, review.request), review)

    def mutate(
        self,
        request: AdmissionRequest,
        inventory: Inventory = UNKNOWN,
        claims: ClaimObjects = NO_CLAIMS,
    ) -> Decision:
        """The decision of the mutating webhook kube-apiserver would send `request` to: what
        a workload pod needs injected at its CREATE, debug containers added later isolated
        from the node's GPUs; everything else passes. `claims` holds the objects of the
        pod's claims (see `claim_sources`)."""
        if (refused := refusal(request)) is not None:
            return refused
        review = Review(request, inventory, claims)
        return self._judged(self.routes.matching(request, mutating=True), review)

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
        """The decision of the validating webhook kube-apiserver would send `request` to:
        pods and workloads whose pods break an enforced rule refused, with every reason at
        once; the others warned of and audited. Exempted pods are not judged.

        An autoscaler is always admitted, with a warning when it can scale `scaled` (the
        workload it targets, as the cluster has it) beyond what its pools have now. A
        caller that worked out the autoscaler's `target` to read `scaled` passes it on.
        `claims` holds the objects of the pods' claims (see `claim_sources`); a
        ResourceClaimTemplate or ResourceClaim created is judged against every pool."""
        if (refused := refusal(request)) is not None:
            return refused
        review = Review(request, inventory, claims, scaled, target)
        return self._judged(self.routes.matching(request, mutating=False), review)

    def _judged(self, found: tuple[Handler, ResourceRule] | None, review: Review) -> Decision:
        judge = None if found is None else found[1].judges[review.request.operation]
        return allow() if judge is None else judge(self, review)

    def findings(
        self, pod: PodView, now: CapacityNow = STATIC, claims: ClaimObjects = NO_CLAIMS
    ) -> Findings:
        """What the rules find in the pod: its violations, each with the mode the policy
        gives its rule for the pod, and every rule's outcome. Kept for the next pod of the
        same template (``webhook.engine.pod_answers``)."""
        return self.findings_kept_by(pod_key(pod, claims), pod, now, claims)

    def findings_kept_by(
        self, key: bytes | None, pod: PodView, now: CapacityNow, claims: ClaimObjects
    ) -> Findings:
        """The findings of `pod`, kept by `key` (``webhook.engine.pod_answers``) unless it
        is None."""
        if key is None:
            return self._found(pod, now, claims)
        return self.kept_findings.get(key, now, lambda: self._found(pod, now, claims))

    def _found(self, pod: PodView, now: CapacityNow, claims: ClaimObjects) -> Findings:
        resolved = pod_claims(self.policy, pod, claims, now.dra.classes_for(self.policy))
        return self.rules.judge(
            RuleContext.of(self.policy, pod, now, self.placement, resolved, self.answers)
        )

    def reaches_gpu_node(self, pod: PodView, now: CapacityNow = STATIC) -> bool:
        """Whether the pod is a class pod, asks for GPUs or can land on a GPU node: what the
        runtime's device checks ask first (``webhook.engine.rules.reach``)."""
        context = RuleContext.of(self.policy, pod, now, self.placement, answers=self.answers)
        return may_reach_gpu_node(context)

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

    def created_pod_violations(
        self, obj: dict[str, Any], now: CapacityNow = STATIC, claims: ClaimObjects = NO_CLAIMS
    ) -> list[Violation]:
        """The violations of a pod as it will be admitted: after our mutation at its CREATE."""
        return self.pod_violations(created_pod(self.policy, obj, now, claims), now, claims)
