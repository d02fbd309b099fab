"""The engine: an admission request and a compiled policy in, a decision out.

It owns the webhooks, each declared once with its rules, selector, conditions and
judge (``handlers/``, the registry ``HANDLERS`` the configurations and routes are made
from), the mutation (affinity, tolerations, priority, GPU counts, co-location,
device isolation), the validation rules (``rules/``, declared once in its
registry ``RULES``, which also names the rules a policy's `enforcement` may use),
each rule's outcome for a pod, the workload templates, the autoscaler checks and
what capacity is known now. It is pure: no I/O, no clock, no HTTP and no Kubernetes client. It
imports only the policy wing and ``webhook.errors``; every other wing may
import it.
"""

from webhook.engine.decision import Decision, RuleOutcome, Violation
from webhook.engine.request import AdmissionRequest
from webhook.engine.review import Engine
from webhook.engine.rules import RULES

__all__ = ["RULES", "AdmissionRequest", "Decision", "Engine", "RuleOutcome", "Violation"]
