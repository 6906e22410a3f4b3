"""A namespace restored from a published snapshot, served before its rows reach SQL.

Over a real ``chroma run``: a client that restores a namespace keeps its rows in memory
(:meth:`~norax_core.sidecar.Sidecar.cache`) and answers searches, filtered ones too, from
them; it writes them to its sidecar only when SQL must answer. Searches from two threads
while a third writes to the namespace, then an eviction and reload, must answer as a
process that read the namespace from Chroma's rows; a namespace evicted without a write
never writes them, and its rows still reach the snapshot file a later process serves.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_client_snapshots import NOW, _age_log, _client, _open
from test_published_snapshots import _blob

from norax_core import NoraxMemory
from norax_core.maintenance import check_store
from norax_core.published import SUFFIX

pytestmark = pytest.mark.server

QUERIES = ("zebra quartz harbour", "ship Colby note", "lantern at the harbour")
WHERE: dict[str, Any] = {"topic": "ship"}


def _answers(mem: NoraxMemory) -> list[list[tuple[str, float, str]]]:
    out = []
    for q in QUERIES:
        for where in (None, WHERE):
            got = mem.search(q, k=8, namespace="a", now=NOW, where=where)
            out.append([(r.id, r.score, r.text) for r in got])
    return out


def _seed(url: str, collection: str, tmp: Path) -> list[list[tuple[str, float, str]]]:
    """Namespaces a and b; a first client reads a from Chroma's rows and publishes it."""
    with _open(url, collection, tmp / "seed.sqlite3") as mem:
        for ns in ("a", "b"):
            mem.add(
                [f"note {i} about the harbour ship {i % 5} and Colby" for i in range(40)],
                ids=[f"{ns}{i}" for i in range(40)],
                namespace=ns,
                created_at=[NOW - 3600 * i for i in range(40)],
                metadata=[{"topic": "ship" if i % 2 else "harbour"} for i in range(40)],
            )
    _age_log(url, collection, 120.0)  # written two minutes ago
    with _open(url, collection, tmp / "first.sqlite3") as mem:
        got = _answers(mem)
        assert mem.store.indexes.restored == 0 and mem.rows_read == ["a"]
    assert _blob(_client(url), collection)
    return got


def _in_sql(mem: NoraxMemory, ns: str = "a") -> int:
    side = mem.store.indexes.sidecar
    sql = "SELECT count(*) FROM memories WHERE namespace = ?"
    return int(side._db.execute(sql, (ns,)).fetchone()[0])


def _fresh(url: str, collection: str, snap: Path) -> NoraxMemory:
    """A client process (its own snapshot file ``snap``)."""
    return _open(url, collection, snap)


def test_a_restored_namespace_is_searched_written_from_threads_evicted_and_reloaded(
    chroma_url: str, tmp_path: Path
) -> None:
    collection = f"rest-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    with _fresh(chroma_url, collection, tmp_path / "fresh.sqlite3") as mem:
        side = mem.store.indexes.sidecar
        assert _answers(mem) == before  # filtered searches included
        assert mem.store.indexes.restored == 1 and mem.rows_read == []
        assert side.settled == 0 and _in_sql(mem) == 0  # served from memory
        assert all(
            r.metadata["topic"] == "ship"
            for r in mem.search("note", namespace="a", where=WHERE, now=NOW)
        )
        stop, errors = threading.Event(), []

        def search() -> None:
            try:
                while not stop.is_set():
                    for where in (None, WHERE):
                        got = mem.search(QUERIES[0], k=8, namespace="a", now=NOW, where=where)
                        assert got and all(r.namespace == "a" for r in got)
                        if where:
                            assert all(r.metadata["topic"] == "ship" for r in got)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=search) for _ in range(2)]
        for t in threads:
            t.start()
        mem.add(
            ["zebra quartz harbour lantern"],
            ids=["new-a"],
            namespace="a",
            created_at=[NOW],
            metadata=[{"topic": "ship"}],
        )
        mem.upsert(
            ["zebra quartz ship"],
            ids=["a3"],
            namespace="a",
            created_at=[NOW],
            metadata=[{"topic": "ship"}],
        )
        assert mem.delete(["a5"], namespace="a") == 1
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        assert side.settled >= 1 and _in_sql(mem) == 40  # written before the first write
        written = _answers(mem)
        assert {"new-a", "a3"} <= {m for m, _, _ in written[0][:3]}
        assert "a5" not in {m for got in written for m, _, _ in got}
        with mem.store.lock:
            mem.store.indexes.evict("a")
        assert _in_sql(mem) == 0
        assert _answers(mem) == written  # reloaded from Chroma's rows (the blob is gone)
        assert mem.store.indexes.restored == 1 and mem.rows_read == ["a"]
        assert check_store(mem).ok
    assert not _blob(_client(chroma_url), collection)  # the writes unpublished it
    with _fresh(
        chroma_url, collection, tmp_path / "other.sqlite3"
    ) as other:  # a process reading Chroma's rows
        assert _answers(other) == written and other.rows_read == ["a"]


def test_an_evicted_restored_namespace_never_writes_its_rows_and_reaches_the_file(
    chroma_url: str, tmp_path: Path
) -> None:
    collection, snap = f"rest-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    before = _seed(chroma_url, collection, tmp_path)
    with _fresh(chroma_url, collection, snap) as mem:
        assert _answers(mem) == before
        with mem.store.lock:
            mem.store.indexes.evict("a")
        assert _answers(mem) == before  # restored again from the blob
        assert mem.store.indexes.restored == 2 and mem.store.indexes.sidecar.settled == 0
        served = sorted(mem.store.indexes.sidecar.namespace_records("a"))
        assert len(served) == 40 and all(r[9] is not None for r in served)
    # at close the file got its snapshot, with the rows kept in memory
    _client(chroma_url).delete_collection(collection + SUFFIX)
    with _fresh(chroma_url, collection, snap) as mem:
        assert _answers(mem) == before
        assert mem.store.indexes.restored == 1 and mem.rows_read == []
        assert sorted(mem.store.indexes.sidecar.namespace_records("a")) == served
        assert check_store(mem).ok
