"""What `gpu-admission explain` prints: one object in prose, or several, each in turn.

One object (a Pod, a workload with its templates, or a claim object), with the
ResourceClaimTemplates and ResourceClaims its pods name, is said as it always was: each
pod or template in prose (webhook.offline.prose), then each claim object, with nothing
around them. Several objects, or input that cannot all be read, are said in the order
`check` lists them, each headed by its line of check's report and its prose indented
under it, then check's summary:

    allowed  Pod/etl  examples/cpu-pod.yaml:1
        pod 'etl' would be admitted. It would run on no GPU node; ...

        gpu-admission would not change it.

    DENIED   Pod/no-class  examples/denied/no-class.yaml:2  workload-class: pod requests ...
        pod 'no-class' would be denied:
          - workload-class: pod requests nvidia.com/gpu but has no label ...

    skipped  Service/llm-server  app.yaml:40  v1 Service has no pod template
        Service 'llm-server': nothing to explain, v1 Service has no pod template

    ERROR    broken.yaml:2  not valid YAML: ...

    2 pods: 1 allowed, 1 denied; 1 object skipped; 1 file unreadable
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.offline.claim_documents import is_claim_object
from webhook.offline.documents import Document, ManifestError
from webhook.offline.evaluation import Report, SkippedObject
from webhook.offline.prose import explain, explain_claim_object
from webhook.offline.text import (
    INDENT,
    claim_object_line,
    error_line,
    pod_line,
    skipped_line,
    summary_line,
)


def subjects(documents: Sequence[Document]) -> list[Document]:
    """The objects to explain: all but the claim objects their pods may name, or the claim
    objects when there is nothing else."""
    return [d for d in documents if not is_claim_object(d.object)] or list(documents)


def explain_one(report: Report) -> str:
    """The report of one object: why it is not explained, or its pods' prose and that of the
    claim objects read with it, one after another."""
    lines = [f"{nothing_to_explain(skipped)}\n" for skipped in report.skipped]
    explained = [explain(pod) for pod in report.pods]
    explained += [explain_claim_object(claim) for claim in report.claim_objects]
    return "".join(lines) + "\n".join(explained)


def explain_each(report: Report, errors: Sequence[ManifestError] = ()) -> str:
    """Every object of `report`, then every file that could not be read (`errors`), as check
    lists them: its line, its explanation indented under it, a blank line; then the
    summary."""
    entries = [(pod_line(pod), explain(pod)) for pod in report.pods]
    entries += [(claim_object_line(c), explain_claim_object(c)) for c in report.claim_objects]
    entries += [(skipped_line(s), nothing_to_explain(s)) for s in report.skipped]
    entries += [(error_line(error), "") for error in errors]
    blocks = [_block(header, body) for header, body in entries]
    return "".join(f"{block}\n" for block in blocks) + summary_line(report, errors)


def nothing_to_explain(skipped: SkippedObject) -> str:
    return f"{skipped.object.describe}: nothing to explain, {skipped.reason}"


def _block(header: str, body: str) -> str:
    """`header`, then each line of `body` indented (blank lines left blank)."""
    lines = [header, *(f"{INDENT}{line}" if line else "" for line in body.splitlines())]
    return "".join(f"{line}\n" for line in lines)
