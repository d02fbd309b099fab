"""The metrics app: ``GET /metrics`` on a port of its own, in plain HTTP.

Apart from the admission port so that a NetworkPolicy can admit Prometheus to one and
kube-apiserver to the other, and so that a scrape never waits behind reviews.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webhook.http.metrics import CONTENT_TYPE, Metrics


def create_metrics_app(metrics: Metrics) -> Starlette:
    async def exposition(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    return Starlette(routes=[Route("/metrics", exposition, methods=["GET"])])
