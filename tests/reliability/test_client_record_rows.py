"""A client reads its search results from the records its sidecar rows hold
(norax_core/store/client_records.py), over a real ``chroma run``.

A namespace loaded from Chroma's rows, or restored from a published snapshot, holds its
records at once; one restored from a snapshot whose rows lack them (a client's own writes
hold none) gets them once its searches have read by id as many times as the fill reads.
Either way a search then asks Chroma for none of its results, and what it returns is what
Chroma holds once the indexes caught up: another process's update, delete and move are
seen at the next pull, a write racing the fill is never overwritten by an older record,
the records are charged to the index budget and leave with the namespace, and two
collections (tenants) with the same ids keep their own.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from _support import open_store
from test_client_records import _twelve
from test_client_snapshots import _client, _fill
from test_published_snapshots import _fresh, _rewrite, _seed

from norax_core import NoraxMemory
from norax_core.sidecar import record_bytes
from norax_core.store import client_records

pytestmark = pytest.mark.server

NOW = 1_700_000_000.0
INTERVAL = 0.2


def _open(url: str, collection: str, **kwargs: Any) -> NoraxMemory:
    return open_store(client=_client(url), collection=collection, sync_interval=INTERVAL, **kwargs)


def _reads(mem: NoraxMemory) -> list[dict[str, Any]]:
    """Spy on the store's collection: the keyword arguments of each ``get`` of records by
    ids (a search's results, a pull's changed ids, ``get``)."""
    col = mem.store.collection
    get, calls = col.get, []

    def spied(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ids") is not None and "documents" in (kwargs.get("include") or ()):
            calls.append(kwargs)
        return get(*args, **kwargs)

    col.get = spied
    return calls


def _hits(mem: NoraxMemory, ns: str = "n", k: int = 20) -> dict[str, Any]:
    return {r.id: r for r in mem.search("harbour ship", k=k, namespace=ns, now=NOW)}


def _truth(mem: NoraxMemory, got: dict[str, Any]) -> dict[str, tuple[str, object, str]]:
    return {m.id: (m.text, m.metadata, m.namespace) for m in mem.get(list(got))}  # Chroma's


def _as_read(got: dict[str, Any]) -> dict[str, tuple[str, object, str]]:
    return {m: (r.text, r.metadata, r.namespace) for m, r in got.items()}


def _charged(mem: NoraxMemory, ns: str) -> int:
    rows = mem.store.indexes.sidecar.namespace_records(ns)
    return sum(record_bytes(r[9], r[10]) for r in rows)


def test_results_come_from_the_rows_and_follow_another_process(chroma_url: str) -> None:
    name = f"rows-{uuid.uuid4().hex[:8]}"
    a, b = _open(chroma_url, name), _open(chroma_url, name)
    try:
        _twelve(b)
        time.sleep(2 * INTERVAL)
        reads = _reads(a)
        got = _hits(a)  # loads n from Chroma's rows: their records come with them
        assert len(got) == 12 and reads == []
        assert _as_read(got) == _truth(a, got)
        reads.clear()

        b.upsert(
            ["note 2 about the harbour ship, rewritten"],
            ids=["m2"],
            namespace="n",
            metadata=[{"i": 22}],
        )
        b.delete(["m3", "m4"])
        b.add(["note 4 about the harbour ship, moved"], ids=["m4"], namespace="o")
        time.sleep(2 * INTERVAL)
        a.store.maybe_sync("n")  # pulls them from the change log (reading their records)
        reads.clear()
        got = _hits(a)
        assert got["m2"].text == "note 2 about the harbour ship, rewritten"
        assert got["m2"].metadata == {"i": 22}
        assert "m3" not in got and "m4" not in got
        moved = _hits(a, "o")
        assert reads == []  # pulled rows carry their records too
        assert _as_read(got) == _truth(a, got)
        assert _as_read(moved) == {"m4": ("note 4 about the harbour ship, moved", {}, "o")}
    finally:
        a.close()
        b.close()


def test_records_are_charged_to_the_budget_and_leave_with_the_namespace(
    chroma_url: str,
) -> None:
    name = f"rows-{uuid.uuid4().hex[:8]}"
    with _open(chroma_url, name) as mem:
        mem.add(
            [f"note {i} about the harbour ship" for i in range(10)],
            ids=[f"m{i}" for i in range(10)],
            namespace="n",
            metadata=[{"i": i} for i in range(10)],
        )
        indexes = mem.store.indexes
        indexes.evict("n")
        _hits(mem)  # loaded from Chroma's rows
        held = _charged(mem, "n")
        assert held > 10 * len("note 0 about the harbour ship")
        assert indexes.nbytes == sum(indexes._loaded.values()) + held
        indexes.evict("n")
        assert indexes.sidecar.namespace_records("n") == [] and indexes.nbytes == 0
        reads = _reads(mem)
        _hits(mem)
        assert reads == [] and indexes.nbytes == sum(indexes._loaded.values()) + held


def _seed_bare(url: str, collection: str, tmp: Path) -> None:
    """Namespace a published, its blob's rows without records."""
    _seed(url, collection, tmp)
    _rewrite(_client(url), collection, old=False, bare=True)


def test_a_published_namespace_answers_from_the_records_of_its_blob(
    chroma_url: str, tmp_path: Path
) -> None:
    collection = f"rows-{uuid.uuid4().hex[:8]}"
    _seed(chroma_url, collection, tmp_path)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        indexes, reads = mem.store.indexes, _reads(mem)
        got = _hits(mem, "a", k=30)
        assert indexes.restored == 1 and reads == []  # no result read from Chroma
        assert not indexes.sidecar.lacking_records("a") and _charged(mem, "a") > 0
        assert indexes.nbytes == sum(indexes._loaded.values()) + _charged(mem, "a")
        assert _as_read(got) == _truth(mem, got)


def test_a_published_namespace_gets_its_records_once(chroma_url: str, tmp_path: Path) -> None:
    collection = f"rows-{uuid.uuid4().hex[:8]}"
    _seed_bare(chroma_url, collection, tmp_path)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        indexes, reads = mem.store.indexes, _reads(mem)
        first = {r.id for r in mem.search("harbour ship", k=3, namespace="a", now=NOW)}
        assert indexes.restored == 1 and len(reads) == 1  # no records in the blob: by id
        assert _charged(mem, "a") == 0
        got = _hits(mem, "a", k=30)  # misses again: the namespace's records, in one read
        assert len(reads) == 2 and len(reads[1]["ids"]) == 30 and set(got) > first
        assert all(r[9] is not None for r in indexes.sidecar.namespace_records("a"))
        assert indexes.nbytes == sum(indexes._loaded.values()) + _charged(mem, "a") > 0
        indexes.sidecar._parsed.clear()  # nothing kept as parsed: every result from a row
        assert _hits(mem, "a", k=30).keys() == got.keys() and len(reads) == 2
        assert _as_read(got) == _truth(mem, got)


def test_a_namespace_is_filled_once_its_reads_by_id_would_have_paid_for_it(
    chroma_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = f"rows-{uuid.uuid4().hex[:8]}"
    _seed_bare(chroma_url, collection, tmp_path)
    monkeypatch.setattr(client_records, "FILL_IDS", 10)  # a's 30 records: a fill of 3 reads
    with _fresh(chroma_url, collection, tmp_path) as mem:
        reads, sidecar = _reads(mem), mem.store.indexes.sidecar
        for _ in range(3):  # rent: each search reads its results by id
            sidecar._parsed.clear()
            mem.search("harbour ship", k=3, namespace="a", now=NOW)
        assert [len(r["ids"]) for r in reads] == [3, 3, 3] and _charged(mem, "a") == 0
        sidecar._parsed.clear()
        got = _hits(mem, "a", k=30)  # buy: the fill's 3 reads, then every result from a row
        assert [len(r["ids"]) for r in reads[3:]] == [10, 10, 10]
        assert not sidecar.lacking_records("a")
        assert _as_read(got) == _truth(mem, got)


def test_a_namespace_lacking_too_many_records_is_not_filled(
    chroma_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = f"rows-{uuid.uuid4().hex[:8]}"
    _seed_bare(chroma_url, collection, tmp_path)
    monkeypatch.setattr(client_records, "FILL_MAX", 29)  # namespace a lacks 30
    with _fresh(chroma_url, collection, tmp_path) as mem:
        reads = _reads(mem)
        mem.search("harbour ship", k=3, namespace="a", now=NOW)
        got = _hits(mem, "a", k=30)
        assert [len(r["ids"]) for r in reads] == [3, 27]  # by id, as before: no fill
        assert mem.store.indexes.sidecar.lacking_records("a") and _charged(mem, "a") == 0
        assert _as_read(got) == _truth(mem, got)


def test_a_write_racing_the_fill_is_not_overwritten(chroma_url: str, tmp_path: Path) -> None:
    collection = f"rows-{uuid.uuid4().hex[:8]}"
    _seed_bare(chroma_url, collection, tmp_path)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        mem.search("harbour ship", k=3, namespace="a", now=NOW)  # restored, without records
        col = mem.store.collection
        get = col.get

        def racing(*args: Any, **kwargs: Any) -> Any:
            got = get(*args, **kwargs)
            if "documents" in kwargs.get("include", ()):  # the fill's first read
                col.get = get  # once: the fill read the old records; now a write lands
                mem.upsert(["note 7 about the harbour ship, rewritten"], ids=["a7"], namespace="a")
            return got

        col.get = racing
        got = _hits(mem, "a", k=30)
        assert col.get is get  # the fill ran, and the write came after its read
        assert got["a7"].text == "note 7 about the harbour ship, rewritten"
        assert _hits(mem, "a", k=30)["a7"].text == "note 7 about the harbour ship, rewritten"
        assert _as_read(got) == _truth(mem, got)


def test_two_collections_with_the_same_ids_keep_their_own_records(chroma_url: str) -> None:
    names = [f"rows-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    stores = [_open(chroma_url, n) for n in names]
    try:
        for t, mem in enumerate(stores):
            mem.add(
                [f"tenant {t} note {i} about the harbour ship" for i in range(5)],
                ids=[f"m{i}" for i in range(5)],
                namespace="n",
                metadata=[{"tenant": t}] * 5,
            )
            mem.store.indexes.evict("n")  # loaded again from Chroma's rows
        for t, mem in enumerate(stores):
            got = _hits(mem)
            assert {r.metadata["tenant"] for r in got.values()} == {t}
            assert all(r.text.startswith(f"tenant {t} ") for r in got.values())
    finally:
        for mem in stores:
            mem.close()


def test_fill_is_never_used_for_an_unloaded_namespace(chroma_url: str) -> None:
    name = f"rows-{uuid.uuid4().hex[:8]}"
    _fill(chroma_url, name)
    with _open(chroma_url, name) as mem:
        store = mem.store
        assert client_records.fill(store.collection, store.indexes, store.lock, "a") == 0
        assert mem.store.indexes.sidecar.namespace_records("a") == []
