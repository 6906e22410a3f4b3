"""A client's search results (the records of a loaded namespace) are kept between searches,
and are exactly what reading Chroma after the indexes caught up would give.

A client with sync on keeps the records it read from Chroma (``Sidecar.kept_records``): its
own writes, another process's writes pulled from the change log, and the namespace's
eviction (a write made behind Norax's back is seen at the reload) all drop them. Two clients
of one real ``chroma run`` server stand for two processes.
"""

from __future__ import annotations

import time
import uuid
from typing import Any
from urllib.parse import urlparse

import chromadb
import pytest
from _support import open_store

from norax_core import NoraxMemory

pytestmark = pytest.mark.server

NOW = 1_700_000_000.0
INTERVAL = 0.2


def _open(url: str, collection: str, **kwargs: Any) -> NoraxMemory:
    u = urlparse(url)
    client = chromadb.HttpClient(host=u.hostname, port=u.port)
    return open_store(client=client, collection=collection, sync_interval=INTERVAL, **kwargs)


def _hits(mem: NoraxMemory) -> dict[str, Any]:
    return {r.id: r for r in mem.search("harbour ship", k=20, namespace="n", now=NOW)}


def _twelve(mem: NoraxMemory) -> None:
    """Twelve notes in namespace n, a minute apart, each with metadata ``{"i": i}``."""
    mem.add(
        [f"note {i} about the harbour ship {i % 3}" for i in range(12)],
        ids=[f"m{i}" for i in range(12)],
        namespace="n",
        created_at=[NOW - 60 * i for i in range(12)],
        metadata=[{"i": i} for i in range(12)],
    )


def _truth(mem: NoraxMemory, got: dict[str, Any]) -> dict[str, tuple[str, object]]:
    return {m.id: (m.text, m.metadata) for m in mem.get(list(got))}  # read from Chroma


def test_kept_records_follow_own_pulled_and_hidden_writes(chroma_url: str) -> None:
    name = f"kept-{uuid.uuid4().hex[:8]}"
    a, b = _open(chroma_url, name), _open(chroma_url, name)
    try:
        _twelve(b)
        time.sleep(2 * INTERVAL)
        first = _hits(a)
        assert len(first) == 12
        first["m1"].metadata["i"] = -1  # type: ignore[index]  # the caller's copy
        assert _hits(a)["m1"].metadata == {"i": 1}
        kept = a.store.indexes.sidecar._parsed["chroma"]
        assert set(first) <= set(kept)  # a second search asks Chroma for none of them

        b.upsert(["note 2 about the harbour ship, rewritten"], ids=["m2"], namespace="n")
        b.delete(["m3"])
        time.sleep(2 * INTERVAL)  # a's next search pulls both from the change log
        got = _hits(a)
        assert got["m2"].text == "note 2 about the harbour ship, rewritten"
        assert got["m2"].metadata == {} and "m3" not in got
        assert {m: (r.text, r.metadata) for m, r in got.items()} == _truth(a, got)

        a.upsert(["note 4 about the harbour ship, mine"], ids=["m4"], namespace="n")
        assert _hits(a)["m4"].text == "note 4 about the harbour ship, mine"

        # behind Norax's back (no log entry): seen once the namespace is read again
        col = a.store.collection
        rec = col.get(ids=["m5"], include=["documents", "metadatas"])
        col.update(ids=["m5"], metadatas=[{**rec["metadatas"][0], "i": 55}])
        with a.store.lock:
            a.store.indexes.evict("n")
        got = _hits(a)
        assert got["m5"].metadata == {"i": 55}
        assert {m: (r.text, r.metadata) for m, r in got.items()} == _truth(a, got)
    finally:
        a.close()
        b.close()


def test_a_client_without_sync_reads_every_record_from_chroma(chroma_url: str) -> None:
    name = f"kept-{uuid.uuid4().hex[:8]}"
    u = urlparse(chroma_url)
    with open_store(
        client=chromadb.HttpClient(host=u.hostname, port=u.port), collection=name, sync_interval=0
    ) as mem:
        mem.add(["note about the harbour ship"], ids=["x"], namespace="n", metadata={"i": 1})
        assert _hits(mem)["x"].metadata == {"i": 1}
        col = mem.store.collection
        rec = col.get(ids=["x"], include=["metadatas"])
        col.update(ids=["x"], metadatas=[{**rec["metadatas"][0], "i": 2}])
        assert _hits(mem)["x"].metadata == {"i": 2}  # as before: nothing kept
