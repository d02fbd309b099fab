"""Offline evaluation of manifests against a policy: `check`, `explain` and `policy test`.

No argument parsing here (see webhook/offline_cli.py): reading manifests,
evaluating them with the engine, and presenting the results.
"""

from webhook.offline.documents import Document, ManifestError, read_documents
from webhook.offline.evaluation import PodEvaluation, Report, evaluate

__all__ = ["Document", "ManifestError", "PodEvaluation", "Report", "evaluate", "read_documents"]
