"""Offline evaluation of manifests against a policy: `check`, `explain` and `policy test`.

It owns reading manifests (with line numbers), evaluating them with the
engine as kube-apiserver would send them, and presenting what the engine
reported (text, prose, report data, JUnit XML, diffs). No argument parsing (that is
``webhook.cli``) and no cluster. It imports the engine, the policy and
``webhook.errors``, never another wing of its layer.
"""

from webhook.offline.documents import Document, ManifestError, read_documents
from webhook.offline.evaluation import PodEvaluation, Report, evaluate

__all__ = ["Document", "ManifestError", "PodEvaluation", "Report", "evaluate", "read_documents"]
