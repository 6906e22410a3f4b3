"""A real OpenAI-compatible embeddings server on 127.0.0.1, for tests without a key.

Usage::

    with FakeOpenAIServer() as server:
        client = openai.OpenAI(api_key="test", base_url=server.base_url)
        client.embeddings.create(model="text-embedding-3-small", input=["hi"])
        server.requests[-1].body["input"]  # -> ["hi"]

Vectors are a hashed bag of words (see :func:`fake_embedding`), so they are deterministic and
texts sharing words are similar. Both ``encoding_format`` values are served; the openai
client asks for ``base64`` unless told otherwise.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

MODEL_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


def fake_embedding(text: str, dim: int) -> np.ndarray:
    """L2-normalised hashed bag of lower-cased words; ``dim`` float32 values."""
    vector = np.zeros(dim, dtype=np.float32)
    for word in re.findall(r"\w+", text.lower()) or [""]:
        digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
        vector[digest % dim] += 1.0 if (digest >> 32) & 1 else -1.0
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:  # words whose signs cancel out: keep the vector usable
        vector[0] = norm = 1.0
    return vector / norm


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: Any
    """The parsed JSON body (the raw text if it is not JSON)."""


@dataclass
class _Failure:
    status: int
    message: str
    remaining: int


class FakeOpenAIServer:
    """Serves ``POST /v1/embeddings`` in a background thread on a free port.

    Args:
        default_dim: Vector length for unknown models when the request has no ``dimensions``.
        shuffle: Return ``data`` in a random order (each item keeps its ``index``).
    """

    def __init__(self, *, default_dim: int = 1536, shuffle: bool = False) -> None:
        self.default_dim = default_dim
        self.shuffle = shuffle
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._failure: _Failure | None = None
        self._rng = random.Random(0)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What to pass as ``base_url`` to the openai clients."""
        return f"http://127.0.0.1:{self.port}/v1"

    # --- behaviour ---------------------------------------------------------------------------

    def fail_next(
        self, status: int = 500, message: str = "injected failure", count: int = 1
    ) -> None:
        """Answer the next ``count`` requests with an OpenAI-style error."""
        with self._lock:
            self._failure = _Failure(status, message, count)

    def embedding_requests(self) -> list[ReceivedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/embeddings")]

    def expected(self, texts: Sequence[str], dim: int = 1536) -> np.ndarray:
        """The vectors this server returns for ``texts``."""
        return np.stack([fake_embedding(t, dim) for t in texts])

    def _respond(self, request: ReceivedRequest) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(request)
            failure = self._failure
            if failure is not None:
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failure = None
        if failure is not None:
            return failure.status, _error(failure.message, "server_error")
        if request.method != "POST" or request.path.rstrip("/") != "/v1/embeddings":
            return 404, _error(f"no route {request.method} {request.path}", "invalid_request_error")
        body = request.body
        if not isinstance(body, dict) or "input" not in body or "model" not in body:
            return 400, _error("'input' and 'model' are required", "invalid_request_error")
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        if not all(isinstance(t, str) and t for t in texts):
            return 400, _error("each input must be a non-empty string", "invalid_request_error")
        dim = body.get("dimensions") or MODEL_DIMS.get(body["model"], self.default_dim)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = fake_embedding(text, dim)
            encoded: Any = (
                base64.b64encode(vector.astype("<f4").tobytes()).decode()
                if as_base64
                else vector.tolist()
            )
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        if self.shuffle:
            with self._lock:
                self._rng.shuffle(data)
        tokens = sum(len(t.split()) for t in texts)
        return 200, {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeOpenAIServer

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        request = ReceivedRequest(
            self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
        )
        status, payload = self.fake._respond(request)
        out = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_POST = do_GET = _handle

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass
