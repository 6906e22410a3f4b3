"""The direct read of published blobs (norax_core/fast_get.py) over a real ``chroma run``.

It answers exactly what ``Collection.get(ids=..., include=["metadatas"])`` answers, sends the
request chromadb's client sends (headers included: a relay in front of the server records
both), is what a cold client namespace's restore uses, and hands over to the client's own
read when a proxy applies (from the environment now, or mounted in the client's session),
for an embedded client, and when the server is gone; a kept connection the server closed
(a restart) is retried on a new one. Base64 values asked for (``b64``) come decoded from the
body's own bytes when plain, else as the ordinary parse gives them (escaped, odd, damaged),
and no value read stays tied to the buffer later bodies are read into.
"""

from __future__ import annotations

import base64
import copy
import http.client
import http.server
import shutil
import tempfile
import threading
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import chromadb
import httpx
import pytest
from chromadb.config import Settings
from test_published_snapshots import _fresh, _search, _seed

try:  # `python -m pytest` puts the repo root on sys.path
    from tests.chroma_server import free_port, start, stop
except ImportError:
    from chroma_server import free_port, start, stop

from norax_core import fast_get

pytestmark = pytest.mark.server

_BIG = "QUJD" * 300_000  # 1.2 MB of base64, as a published part holds


def _records(client: Any, name: str) -> Any:
    col = client.get_or_create_collection(name, embedding_function=None)
    col.upsert(
        ids=["h", "p0", "p1", "p2"],
        metadatas=[
            {"head": True, "parts": 3, "taken": 1.5, "ns": "é ☃"},
            {"digest": "d", "b": _BIG},
            {"digest": "d", "b": _BIG[::-1]},
            {"digest": "d", "b": "x"},
        ],
        embeddings=[[1.0]] * 4,
    )
    return col


_ASKED = ["h", "p0", "p1", "nope", "p2", "p3"]  # two missing


def _client_get(col: Any) -> tuple[list[str], list[Any]]:
    got = col.get(ids=_ASKED, include=["metadatas"])
    return got["ids"], got["metadatas"]


def _direct(col: Any) -> tuple[list[str], list[Any]]:
    """fast_get.get, asserted to have read directly."""
    before = fast_get.stats.direct
    got = fast_get.get(col, _ASKED)
    assert fast_get.stats.direct == before + 1
    return got


def _fallback(col: Any) -> tuple[list[str], list[Any]]:
    """fast_get.get, asserted to have handed over to the client's own read."""
    before = (fast_get.stats.direct, fast_get.stats.fallback)
    got = fast_get.get(col, _ASKED)
    assert (fast_get.stats.direct, fast_get.stats.fallback) == (before[0], before[1] + 1)
    return got


def _http(url: str, headers: dict[str, str] | None = None, **settings: Any) -> Any:
    """``HttpClient``; its ``headers`` become the settings' ``chroma_server_headers``."""
    u = urllib.parse.urlparse(url)
    return chromadb.HttpClient(
        host=u.hostname, port=u.port, headers=headers, settings=Settings(**settings)
    )


@pytest.fixture(autouse=True)
def _no_env_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)


def test_it_answers_what_collection_get_answers(chroma_url: str) -> None:
    col = _records(_http(chroma_url), f"fg-{uuid.uuid4().hex[:8]}")
    want = _client_get(col)
    assert sorted(want[0]) == ["h", "p0", "p1", "p2"]
    assert _direct(col) == want
    assert _direct(col) == want  # on the kept connection
    col.delete(ids=["p1"])
    assert _direct(col) == _client_get(col)
    assert fast_get.get(col, ["nope"]) == ([], [])


def test_threads_read_at_once_each_on_its_own_connection(chroma_url: str) -> None:
    col = _records(_http(chroma_url), f"fg-{uuid.uuid4().hex[:8]}")
    want = _client_get(col)
    direct = fast_get.stats.direct
    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda _: fast_get.get(col, _ASKED), range(30)))
    assert got == [want] * 30 and fast_get.stats.direct == direct + 30
    port = int(urllib.parse.urlparse(chroma_url).port or 0)
    assert 1 <= len(fast_get._pool("127.0.0.1", port)._idle) <= fast_get.IDLE


def test_a_cold_client_namespace_is_restored_through_it(chroma_url: str, tmp_path: Path) -> None:
    collection = f"fgpub-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    direct = fast_get.stats.direct
    with _fresh(chroma_url, collection, tmp_path) as mem:
        assert _search(mem) == before
        assert mem.store.indexes.restored == 1 and mem.rows_read == []
    assert fast_get.stats.direct == direct + 1


def test_a_refused_read_raises_the_clients_own_error(chroma_url: str) -> None:
    client = _http(chroma_url)
    col = _records(client, f"fg-{uuid.uuid4().hex[:8]}")
    client.delete_collection(col.name)
    with pytest.raises(Exception) as theirs:  # noqa: PT011 - whatever the client raises
        col.get(ids=_ASKED, include=["metadatas"])
    with pytest.raises(type(theirs.value)) as ours:
        _fallback(col)
    assert str(ours.value) == str(theirs.value)


def test_a_client_with_a_timeout_reads_through_its_own_get(chroma_url: str) -> None:
    client = _http(chroma_url)
    col = _records(client, f"fg-{uuid.uuid4().hex[:8]}")
    client._server._session.timeout = httpx.Timeout(30.0)
    assert _fallback(col) == _client_get(col)


def test_an_embedded_client_reads_through_its_own_get(tmp_path: Path) -> None:
    col = _records(chromadb.PersistentClient(path=str(tmp_path / "c")), "fgc")
    assert _fallback(col) == _client_get(col)


def test_a_proxy_named_by_the_environment_is_left_to_the_client(
    chroma_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    col = _records(_http(chroma_url), f"fg-{uuid.uuid4().hex[:8]}")
    want = _client_get(col)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # after the client was made
    assert _fallback(col) == want
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # httpx would not use it for this host
    assert _direct(col) == want
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    assert _fallback(col) == want


class _Relay:
    """An HTTP relay to a server that records each request; as a proxy or in front of it.

    ``rewrite``: applied to the body of each answer to a ``get`` it relays.
    """

    def __init__(self, target: str) -> None:
        self.target = urllib.parse.urlparse(target)
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        self.rewrite: Callable[[bytes], bytes] | None = None  # of the answer to a get
        relay = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = urllib.parse.urlparse(self.path)._replace(scheme="", netloc="").geturl()
                relay.seen.append((self.command, self.path, dict(self.headers), body))
                conn = http.client.HTTPConnection(relay.target.hostname, relay.target.port)
                conn.request(self.command, path, body or None, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                if relay.rewrite is not None and path.endswith("/get"):
                    data = relay.rewrite(data)
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.getheader("Content-Type") or "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _relay

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def relay(chroma_url: str) -> Iterator[_Relay]:
    r = _Relay(chroma_url)
    yield r
    r.close()


def test_it_sends_the_clients_request_and_headers(chroma_url: str, relay: _Relay) -> None:
    name = f"fg-{uuid.uuid4().hex[:8]}"
    _records(_http(chroma_url), name)
    client = _http(
        relay.url,
        headers={"X-Norax-Test": "kept"},
        chroma_client_auth_provider="chromadb.auth.token_authn.TokenAuthClientProvider",
        chroma_client_auth_credentials="s3cret",
    )
    col = client.get_collection(name)
    want = _client_get(col)
    theirs = relay.seen[-1]
    assert _direct(col) == want
    ours = relay.seen[-1]
    assert ours[:2] == theirs[:2] and ours[3] == theirs[3]  # method, path, body
    theirs_h, ours_h = ({k.lower(): v for k, v in r[2].items()} for r in (theirs, ours))
    assert theirs_h["x-norax-test"] == ours_h["x-norax-test"] == "kept"
    assert theirs_h["authorization"] == ours_h["authorization"] == "Bearer s3cret"
    del theirs_h["accept-encoding"], ours_h["accept-encoding"]  # ours: identity
    assert theirs_h == ours_h


def test_a_proxy_in_the_clients_session_is_left_to_the_client(
    chroma_url: str, relay: _Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    col = _records(_http(chroma_url), f"fg-{uuid.uuid4().hex[:8]}")
    want = _client_get(col)
    monkeypatch.setenv("HTTP_PROXY", relay.url)
    proxied = _http(chroma_url).get_collection(col.name)  # httpx mounts the proxy
    monkeypatch.delenv("HTTP_PROXY")  # gone from the environment: the session still has it
    seen = len(relay.seen)
    assert _fallback(proxied) == want
    assert len(relay.seen) == seen + 1 and relay.seen[-1][1].startswith(chroma_url + "/")


def test_a_connection_the_server_closed_is_opened_again() -> None:
    path, port = tempfile.mkdtemp(prefix="norax-fg-"), free_port()
    proc = start(path, port)
    try:
        col = _records(_http(f"http://127.0.0.1:{port}"), "fgc")
        want = _client_get(col)
        assert _direct(col) == want
        stop(proc)
        with pytest.raises(Exception) as theirs:  # noqa: PT011 - whatever the client raises
            col.get(ids=_ASKED, include=["metadatas"])
        with pytest.raises(type(theirs.value)):  # the same, from its own read
            _fallback(col)
        proc = start(path, port)
        retried = fast_get.stats.retried
        assert _direct(col) == want
        stop(proc)
        proc = start(path, port)  # the kept connection is closed by this restart
        assert _direct(col) == want
        assert fast_get.stats.retried == retried + 1
    finally:
        stop(proc)
        shutil.rmtree(path, ignore_errors=True)


def _b64_records(client: Any, name: str, values: list[str]) -> Any:
    col = client.get_or_create_collection(name, embedding_function=None)
    ids = [f"p{i}" for i in range(len(values))]
    metas: list[Any] = [{"digest": "d", "b": v, "n": i} for i, v in enumerate(values)]
    col.upsert(
        ids=["h", *ids],
        metadatas=[{"head": True, "ns": "é ☃"}, *metas],
        embeddings=[[1.0]] * (1 + len(ids)),
    )
    return col


def _decoded(got: tuple[list[str], list[Any]]) -> tuple[list[str], list[Any]]:
    """``got`` with each ``b`` value base64-decoded (as Published.get decodes a str)."""
    metas = [
        m
        if m is None or "b" not in m or type(m["b"]) is bytes
        else {**m, "b": base64.b64decode(m["b"], validate=True)}
        for m in got[1]
    ]
    return got[0], metas


_B = ["h", "p0", "p1", "p2", "nope"]


def test_base64_values_come_decoded_from_the_body(chroma_url: str) -> None:
    values = [_BIG, base64.b64encode(bytes(range(256)) * 999).decode(), ""]
    col = _b64_records(_http(chroma_url), f"fg-{uuid.uuid4().hex[:8]}", values)
    got = col.get(ids=_B, include=["metadatas"])
    want = _decoded((got["ids"], got["metadatas"]))
    direct = fast_get.stats.direct
    ours = fast_get.get(col, _B, b64="b")
    assert fast_get.stats.direct == direct + 1
    assert ours == want
    assert all(type(m["b"]) is bytes for m in ours[1] if "b" in m)
    assert fast_get.get(col, _B) == (got["ids"], got["metadatas"])  # not asked: str


@pytest.mark.parametrize(
    "odd",
    [
        "damaged",  # not base64: the caller's own decode raises
        "escaped",  # a JSON escape in the value (same text, but not its own bytes)
        "spaced",  # a space after the colon: the mark is not found
        "twice",  # the key twice in one object (JSON keeps the last)
        "quoted",  # a key ending in an escaped quote and b
    ],
)
def test_a_body_not_plain_is_parsed_as_usual(chroma_url: str, relay: _Relay, odd: str) -> None:
    name = f"fg-{uuid.uuid4().hex[:8]}"
    values = ["QUJD" * 1000, "QUJD!" if odd == "damaged" else "RUZH"]
    _b64_records(_http(chroma_url), name, values)
    rewrite = {
        "damaged": lambda d: d,
        "escaped": lambda d: d.replace(b'"RUZH"', b'"RU\\u005aH"'),
        "spaced": lambda d: d.replace(b'"b":"RUZH"', b'"b": "RUZH"'),
        "twice": lambda d: d.replace(b'"b":"RUZH"', b'"b":"QUJD","b":"RUZH"'),
        "quoted": lambda d: d.replace(b'"b":"RUZH"', b'"x\\"b":"RUZH","b":""'),
    }[odd]
    relay.rewrite = rewrite
    col = _http(relay.url).get_collection(name)
    got = col.get(ids=_B, include=["metadatas"])
    want = (got["ids"], got["metadatas"])
    assert all(type(m["b"]) is str for m in want[1] if "b" in m)
    direct = fast_get.stats.direct
    assert fast_get.get(col, _B, b64="b") == want  # as the client parses it, str values
    assert fast_get.stats.direct == direct + 1


def test_no_value_read_changes_when_later_bodies_are_read(chroma_url: str) -> None:
    client = _http(chroma_url)
    small = _b64_records(client, f"fg-{uuid.uuid4().hex[:8]}", ["QUJD" * 10, "RUZH"])
    big = _b64_records(client, f"fg-{uuid.uuid4().hex[:8]}", [_BIG, _BIG[::-1]])
    first = fast_get.get(small, _B, b64="b")
    kept = copy.deepcopy(first)
    seconds = [fast_get.get(c, _B, b64="b") for c in (big, small, big)]
    assert first == kept and seconds[1] == kept
    assert seconds[0] == seconds[2] == _decoded(fast_get.get(big, _B))
    with ThreadPoolExecutor(4) as pool:  # each thread its own buffer
        got = list(pool.map(lambda i: fast_get.get((small, big)[i % 2], _B, b64="b"), range(16)))
    assert got == [kept, seconds[0]] * 8


def test_a_body_larger_than_a_kept_buffer_is_read_as_it_comes(
    chroma_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    col = _b64_records(_http(chroma_url), f"fg-{uuid.uuid4().hex[:8]}", [_BIG, "RUZH"])
    want = fast_get.get(col, _B, b64="b")
    monkeypatch.setattr(fast_get, "KEEP", 1000)
    monkeypatch.setattr(fast_get, "_local", threading.local())
    assert fast_get.get(col, _B, b64="b") == want
    assert getattr(fast_get._local, "buf", None) is None


def test_a_clients_open_connects_for_its_first_cold_read(
    chroma_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = f"fgpub-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    monkeypatch.setattr(fast_get, "_pools", {})  # no connection kept from other tests
    port = int(urllib.parse.urlparse(chroma_url).port or 0)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        idle = list(fast_get._pool("127.0.0.1", port)._idle)
        assert len(idle) == 1 and idle[0][0].sock is not None  # opened by the open
        direct = fast_get.stats.direct
        assert _search(mem) == before
        assert mem.store.indexes.restored == 1 and fast_get.stats.direct == direct + 1
        assert [c for c, _ in fast_get._pool("127.0.0.1", port)._idle] == [idle[0][0]]
