"""An HTTP server that keeps objects the way kube-apiserver does, for the real client.

GET reads an object, POST to its collection creates it (409 AlreadyExists if it
exists), PUT replaces it (409 Conflict unless the body carries the current
resourceVersion). ``interlopers`` counts writes by someone else to make before the
next replacements, so a test can make a write lose the race; ``refused`` answers
every request for a path with a Status of its own (a 403, say). Every request is
recorded as ``METHOD path``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client

Json = dict[str, Any]


class FakeApiServer:
    def __init__(self) -> None:
        self.objects: dict[str, Json] = {}
        self.requests: list[str] = []
        self.interlopers = 0
        self.refused: dict[str, tuple[int, str, str]] = {}
        self._versions = 0

    def put(self, path: str, obj: Json) -> None:
        """Store ``obj`` at ``path`` as if someone had written it."""
        self.objects[path] = self._versioned(obj)

    def _versioned(self, obj: Json) -> Json:
        self._versions += 1
        stored = json.loads(json.dumps(obj))
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._versions)
        return stored

    def answer(self, method: str, path: str, body: Json | None) -> tuple[int, Json]:
        self.requests.append(f"{method} {path}")
        if path in self.refused:
            return _status(*self.refused[path])
        if method == "GET":
            found = self.objects.get(path)
            return (200, found) if found is not None else _status(404, "NotFound", "not found")
        assert body is not None
        if method == "POST":
            path = f"{path}/{body['metadata']['name']}"
            if path in self.objects:
                return _status(409, "AlreadyExists", "it already exists")
            self.objects[path] = self._versioned(body)
            return 201, self.objects[path]
        if path not in self.objects:
            return _status(404, "NotFound", "not found")
        if self.interlopers:
            self.interlopers -= 1
            self.objects[path] = self._versioned(self.objects[path])
        current = self.objects[path]["metadata"]["resourceVersion"]
        if body["metadata"].get("resourceVersion") != current:
            return _status(409, "Conflict", "the object has been modified")
        self.objects[path] = self._versioned(body)
        return 200, self.objects[path]


def _status(code: int, reason: str, message: str) -> tuple[int, Json]:
    return code, {"kind": "Status", "code": code, "reason": reason, "message": message}


@contextmanager
def serving(fake: FakeApiServer) -> Iterator[Any]:
    """A kubernetes ``ApiClient`` talking to ``fake``; ``api.configuration.host`` is its URL."""

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, answer = fake.answer(self.command, self.path.split("?")[0], body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    api = client.ApiClient(configuration)
    try:
        yield api
    finally:
        api.close()
        server.shutdown()
        server.server_close()
