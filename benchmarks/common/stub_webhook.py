"""A webhook server on gpu-admission's stack that decides nothing: the `allow-python` and
`patch-floor` arms of `benchmarks.apiserver`.

    python -m benchmarks.common.stub_webhook --port P --tls-cert C --tls-key K [--patch FILE]

FastAPI routes under uvicorn with the settings `gpu-admission serve` gives it: the
same TLS context (TLS 1.2 or later, AEAD suites), the guarded httptools protocol and
keep-alive timeout of `webhook.http.limits`, no access log, the event loop uvicorn
picks (uvloop), `gc.freeze()` before serving. Each review's body is read and decoded
with orjson for its uid (kube-apiserver refuses a reply with another uid), and
answered:

- without ``--patch``: allowed, no patch, on both routes (`allow-python`);
- with ``--patch FILE`` (a JSON Patch, a list of operations): `/mutate` answers allowed
  with that patch, base64'd once at start, for every review whatever its pod (the patch
  gpu-admission's engine returns for the benchmark's pod, worked out beforehand);
  `/validate` allowed (`patch-floor`).

So the difference to `ours` is the engine (and the envelope's pydantic parsing, the
body budget, the metrics), and the difference between the two arms is the mutation
itself: a larger reply, and kube-apiserver decoding and applying the patch and
checking the pod again.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
from collections.abc import Sequence
from pathlib import Path

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

from webhook.http.limits import EdgeLimits, guarded_protocol
from webhook.service.certificate_reload import serving_context

JSON = "application/json"
GRACEFUL_SHUTDOWN_SECONDS = 5


def reply_parts(patch: Sequence[object] | None) -> tuple[bytes, bytes]:
    """The reply around its uid: ``prefix + orjson.dumps(uid) + suffix``."""
    response: dict[str, object] = {"uid": "UID", "allowed": True}
    if patch is not None:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(patch))).decode("ascii")
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    prefix, suffix = orjson.dumps(review).split(b'"UID"')
    return prefix, suffix


def create_app(patch: Sequence[object] | None) -> FastAPI:
    app = FastAPI(title="stub", docs_url=None, redoc_url=None, openapi_url=None)
    allow = reply_parts(None)
    mutation = reply_parts(patch) if patch is not None else allow

    def answer(body: bytes, parts: tuple[bytes, bytes]) -> Response:
        uid = orjson.loads(body)["request"]["uid"]
        return Response(parts[0] + orjson.dumps(uid) + parts[1], media_type=JSON)

    @app.post("/mutate")
    async def mutate(request: Request) -> Response:
        return answer(await request.body(), mutation)

    @app.post("/validate")
    async def validate(request: Request) -> Response:
        return answer(await request.body(), allow)

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response(b"ok", media_type="text/plain")

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-cert", type=Path, required=True)
    parser.add_argument("--tls-key", type=Path, required=True)
    parser.add_argument("--patch", type=Path, help="JSON Patch file /mutate answers with")
    args = parser.parse_args()
    patch = orjson.loads(args.patch.read_bytes()) if args.patch else None
    context = serving_context()
    context.load_cert_chain(args.tls_cert, args.tls_key)
    limits = EdgeLimits()
    config = uvicorn.Config(
        create_app(patch),
        host=args.host,
        port=args.port,
        ssl_context_factory=lambda config, default: context,
        http=guarded_protocol(limits),
        timeout_keep_alive=limits.idle_seconds,
        log_config=None,
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    config.load()
    if config.ssl is not context:
        raise RuntimeError("uvicorn does not serve with the given TLS context")
    server = uvicorn.Server(config)
    gc.freeze()
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(server.serve())


if __name__ == "__main__":
    main()
