"""The policy engine: pure evaluation of admission requests against a compiled policy."""

from webhook.engine.decision import Decision, Violation
from webhook.engine.request import AdmissionRequest
from webhook.engine.review import Engine

__all__ = ["AdmissionRequest", "Decision", "Engine", "Violation"]
