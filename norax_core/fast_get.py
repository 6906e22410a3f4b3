"""One large read by id over Chroma's HTTP API, without the client's per-request overhead.

A cold namespace of a client is restored from its published blob (:mod:`norax_core.published`):
one ``get`` of 17 ids whose answer is one JSON body of several MB (2.6 MB for 1,000 memories).
Through chromadb's client that read took 10.0 ms (median; Chroma 1.5.9, ``chroma run`` on the
same host), the same request with httpx alone 6.3 ms and with the standard library's
:mod:`http.client` 3.9 ms: httpx reads the body 64 KB at a time through h11, and the client then
decodes it to ``str`` before parsing it. :func:`get` sends exactly the request chromadb's
``Collection.get(ids=..., include=["metadatas"])`` sends (its URL, its body, the client's
headers: auth and ``chroma_server_headers`` included) over a kept :mod:`http.client`
connection, and parses the body as chromadb does (orjson, then ``deserialize_metadata``).
The body is read into a buffer the thread keeps (:data:`KEEP`), and the values of a blob's
base64 key are decoded from the body's own bytes (:func:`_parse_b64`) rather than made a
``str`` first: two fresh multi-MB allocations less per read, whose pages the process faulted
in each time (4 cold first queries of 1k-memory namespaces in a fresh client process:
3,960 minor faults instead of 6,030, CPU per query 12.4-12.9 ms instead of 14.1-15.4).

It is used only where it clearly is that same request, and it hands over to the ordinary
``Collection.get`` otherwise, whose answer (or error) is then exactly what it always was:

* the collection's client is not chromadb's own HTTP client (an embedded store, a subclass),
  or tracing (OpenTelemetry) is configured, which that client's calls report to;
* the URL is not plain ``http`` (TLS settings are the client's to apply) or carries a user;
* httpx would send it through a proxy: a proxy mounted in the client's session, or one the
  environment names for that host now (``urllib.request.getproxies``/``proxy_bypass``);
* the session has cookies, auth, query parameters, event hooks or a timeout of its own;
* the request fails (a kept connection the server closed is retried once on a new one), the
  answer is not ``200``, is encoded, or is not a body of the expected shape.

Connections are kept per server and process (a child after ``fork`` opens its own), at most
:data:`IDLE` idle ones each, one per concurrent reader; one idle longer than the client's
``keepalive_secs`` (what httpx keeps) is closed rather than reused. A client's open opens
one (:func:`connect`), so that its first cold namespace does not connect first.
"""

from __future__ import annotations

import functools
import http.client
import os
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

_b64: Any
try:
    import pybase64 as _b64
except ImportError:  # pragma: no cover - an older chromadb
    import base64 as _b64

IDLE = 4
"""Idle connections kept per server."""
KEEP = 8 << 20
"""A thread keeps a buffer this large at most for the bodies it reads (see :func:`_body`)."""
_local = threading.local()


@dataclass
class Stats:
    """Counters, for tests and monitoring: reads served directly, handed over, retried."""

    direct: int = 0
    fallback: int = 0
    retried: int = 0


stats = Stats()


@dataclass(frozen=True)
class _Request:
    host: str
    port: int
    path: str
    headers: dict[str, str]
    keepalive: float | None


def get(col: Any, ids: Sequence[str], b64: str | None = None) -> tuple[list[str], list[Any]]:
    """``(ids, metadatas)`` of ``col.get(ids=ids, include=["metadatas"])``, read directly if it can.

    ``ids``: valid Chroma ids (non-empty, distinct strings), as the caller's own.
    ``b64``: a metadata key holding base64; when read directly and every value of that key is
    plain base64, those values come decoded (``bytes``), else as the ``str`` they are.
    """
    req = _request(col)
    got = None if req is None else _read(req, ids, b64)
    if got is None:
        stats.fallback += 1
        res = col.get(ids=list(ids), include=["metadatas"])
        return list(res["ids"]), list(res["metadatas"])
    stats.direct += 1
    return got


def connect(col: Any) -> None:
    """Open a connection for :func:`get` of ``col`` now, if none is kept (a client's open).

    The first cold namespace's read then does not connect first (0.2 ms of CPU and 0.3 of
    wall in a fresh process). Nothing when :func:`get` would hand over; a failure is left
    for the read to meet.
    """
    req = _request(col)
    if req is None:
        return
    pool = _pool(req.host, req.port)
    conn, kept = pool.take(req.keepalive)
    if not kept:
        try:
            conn.connect()
        except Exception:  # noqa: BLE001 - the read connects (or hands over) itself
            conn.close()
            return
    pool.give(conn)


def _request(col: Any) -> _Request | None:
    """The request chromadb's client would send for ``col``'s ``get``, if it sends it plainly."""
    try:
        import httpx
        from chromadb.api.fastapi import FastAPI
    except ImportError:
        return None
    server = getattr(col, "_client", None)
    if type(server) is not FastAPI:  # embedded, or a client of other behaviour
        return None
    try:
        if server._settings.chroma_otel_collection_endpoint:
            return None
        session = server._session
        if not isinstance(session, httpx.Client) or session.auth is not None:
            return None
        if session.cookies or session.params or any(session.event_hooks.values()):
            return None
        limits = session.timeout
        if any(x is not None for x in (limits.connect, limits.read, limits.write, limits.pool)):
            return None  # chromadb's client waits without a timeout, as http.client does
        path = f"/tenants/{col.tenant}/databases/{col.database}/collections/{col.id}/get"
        url = server.get_api_url() + urllib.parse.quote(path, safe="/")
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port or 80
        if parts.scheme != "http" or not host or parts.username or parts.query:
            return None
        if session._transport_for_url(_url(url)) is not session._transport:
            return None  # a proxy mounted when the client was made
        if not isinstance(session._transport, httpx.HTTPTransport):
            return None
        if _env_proxy(host):
            return None
        headers = {
            k: v for k, v in server.get_request_headers().items() if k.lower() != "accept-encoding"
        }
        return _Request(host, port, parts.path, headers, server.keepalive_secs)
    except Exception:  # noqa: BLE001 - anything unexpected: the client's own read
        return None


@functools.lru_cache(maxsize=64)
def _url(url: str) -> Any:
    """``httpx.URL(url)`` (immutable; parsing it took 25 of the 40 us :func:`_request` takes)."""
    import httpx

    return httpx.URL(url)


def _env_proxy(host: str) -> bool:
    """Whether the environment names a proxy httpx would use for plain ``http`` to ``host``."""
    if not any(k[-6:].lower() == "_proxy" for k in os.environ):  # 10 us; getproxies 80
        return False
    env = urllib.request.getproxies()
    return bool(env.get("http") or env.get("all")) and not urllib.request.proxy_bypass(host)


def _read(req: _Request, ids: Sequence[str], b64: str | None) -> tuple[list[str], list[Any]] | None:
    """Post the read and parse its answer; ``None`` if it did not clearly succeed."""
    body = orjson.dumps(
        {
            "ids": list(ids),
            "where": None,
            "limit": None,
            "offset": None,
            "where_document": None,
            "include": ["metadatas"],
        }
    )
    pool = _pool(req.host, req.port)
    conn, reused = pool.take(req.keepalive)
    try:
        try:
            status, encoding, data = _post(conn, req, body)
        except ConnectionError:
            if not reused:
                raise
            conn.close()  # the server closed the kept connection: once more, on a new one
            stats.retried += 1
            status, encoding, data = _post(conn, req, body)
    except Exception:  # noqa: BLE001 - refused, reset, malformed: the client's own read
        conn.close()
        return None
    pool.give(conn)
    if status != 200 or encoding not in ("", "identity"):
        return None
    if b64 is not None:
        got = _parse_b64(data, ids, b64)
        if got is not None:
            return got
    return _parse(data, ids)


def _post(
    conn: http.client.HTTPConnection, req: _Request, body: bytes
) -> tuple[int, str, bytes | memoryview]:
    conn.request("POST", req.path, body, req.headers)
    resp = conn.getresponse()
    data = _body(resp)
    return resp.status, (resp.getheader("Content-Encoding") or "").strip().lower(), data


def _body(resp: http.client.HTTPResponse) -> bytes | memoryview:
    """The response's body: a view of this thread's kept buffer when of a stated length.

    The view is valid until this thread's next read (:func:`_read` consumes it before it
    returns). A body larger than :data:`KEEP` (or of no stated length) is read as ``bytes``.
    """
    n = resp.length
    if resp.chunked or n is None or n > KEEP:
        return resp.read()
    buf = getattr(_local, "buf", None)
    if buf is None or len(buf) < n:  # a new one, never resized: a view may still be held
        buf = _local.buf = bytearray(min(KEEP, max(n + n // 4, 1 << 16)))
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        k = resp.readinto(view[got:])
        if not k:
            raise http.client.IncompleteRead(bytes(view[:got]), n - got)
        got += k
    return view


def _parse(data: bytes | memoryview, asked: Sequence[str]) -> tuple[list[str], list[Any]] | None:
    """The answer's ids and metadatas as chromadb's client gives them, if of that shape."""
    from chromadb.api.types import deserialize_metadata

    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    ids, metas = doc.get("ids"), doc.get("metadatas")
    if not isinstance(ids, list) or not isinstance(metas, list) or len(ids) != len(metas):
        return None
    wanted = set(asked)
    if not all(isinstance(i, str) and i in wanted for i in ids):
        return None
    if not all(m is None or isinstance(m, dict) for m in metas):
        return None
    return ids, [None if m is None else deserialize_metadata(m) for m in metas]


def _parse_b64(
    data: bytes | memoryview, asked: Sequence[str], key: str
) -> tuple[list[str], list[Any]] | None:
    """:func:`_parse` with the values of ``key`` decoded from the body's own bytes.

    The 2.5 MB ``str`` of a 1k-memory namespace's base64 is never made: each
    ``"key":"`` value (up to the next quote) is cut out of the body, the rest parsed as
    usual (each such value then ``""``), and decoded where it lies. Base64 needs no JSON
    escape, so a value that decodes (``validate``: nothing but the alphabet, no backslash
    or quote) is its own text. ``None`` (the ordinary parse, whose ``str`` values the
    caller decodes itself) when anything is not that plain: the mark not right after
    ``{`` or ``,`` (a compact key: its first quote is not an escaped one), values that are
    not each one metadata's (as many as the metadatas holding ``key``), a value that is not
    valid base64 (an escape, or a damaged blob: the caller's decode raises its error).
    """
    view = memoryview(data)
    raw: bytes | bytearray = view.obj if isinstance(data, memoryview) else data  # type: ignore[assignment]
    end, mark = len(view), b'"' + key.encode() + b'":"'
    spans: list[tuple[int, int]] = []
    pieces: list[memoryview] = []
    at = 0
    i = raw.find(mark, 0, end)
    while i >= 0:
        start = i + len(mark)
        close = raw.find(b'"', start, end)
        if i == 0 or raw[i - 1] not in b"{," or close < 0:
            return None
        pieces.append(view[at:start])
        spans.append((start, close))
        at = close
        i = raw.find(mark, close + 1, end)
    if not spans:
        return None
    pieces.append(view[at:end])
    got = _parse(b"".join(pieces), asked)
    if got is None:
        return None
    holders = [m for m in got[1] if m is not None and key in m]
    if len(holders) != len(spans) or any(m[key] != "" for m in holders):
        return None
    try:
        values = [_b64.b64decode(view[a:b], validate=True) for a, b in spans]
    except ValueError:  # binascii.Error is one
        return None
    for m, value in zip(holders, values, strict=True):
        m[key] = bytes(value)
    return got


class _Pool:
    """The idle connections to one server, each with when it was last used."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()

    def take(self, keepalive: float | None) -> tuple[http.client.HTTPConnection, bool]:
        """A connection, and whether it is a kept one (open before this read)."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, used = self._idle.pop()
            if conn.sock is not None and (keepalive is None or now - used < keepalive):
                return conn, True
            conn.close()
        return http.client.HTTPConnection(self.host, self.port), False

    def give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if conn.sock is not None and len(self._idle) < IDLE:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()


_pools: dict[tuple[str, int], _Pool] = {}
_pools_pid = os.getpid()
_pools_lock = threading.Lock()


def _pool(host: str, port: int) -> _Pool:
    global _pools, _pools_pid
    with _pools_lock:
        if _pools_pid != os.getpid():  # a forked child: the parent's sockets are not its own
            _pools, _pools_pid = {}, os.getpid()
        pool = _pools.get((host, port))
        if pool is None:
            pool = _pools[(host, port)] = _Pool(host, port)
        return pool
