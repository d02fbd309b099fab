"""HTTP responses of the admission app: a review's encoded reply, and the probes' JSON.

A review refused for want of room (413: too large; 503: no room for it now; 408: its
body cut off while it still arrived) closes its connection, and a 503 says when to try
again: kube-apiserver's client retries a 503 within the webhook's timeout only when
told when to, so a review refused for a moment then gets through. A 429 (a source over
its share of the policy route) says when too, and keeps its connection.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import Response

from webhook.http.judging import Judged

JSON = "application/json"
RETRY_AFTER_SECONDS = "1"


def review_reply(judged: Judged) -> Response:
    """The response carrying ``judged``'s encoded reply with its status."""
    headers = None
    if judged.status in (408, 413):
        headers = {"connection": "close"}
    elif judged.status == 503:
        headers = {"connection": "close", "retry-after": RETRY_AFTER_SECONDS}
    elif judged.status == 429:
        headers = {"retry-after": RETRY_AFTER_SECONDS}
    return Response(judged.reply, status_code=judged.status, media_type=JSON, headers=headers)


def json_reply(content: Any, status: int) -> Response:
    return Response(orjson.dumps(content), status_code=status, media_type=JSON)
