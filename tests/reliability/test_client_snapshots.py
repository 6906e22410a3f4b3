"""Client snapshots (norax_core/client_snapshots.py) over a real ``chroma run``: a snapshot
is served only while the change log (norax_core/sync.py) names no write to its namespace
since its rows were read, within the log's retention.

Every write comes from a second process, so what the reader trusts is what another process
left in the log: a write to the namespace, a write to another one, an entry of an older
version (no namespaces), then an expired snapshot, a corrupt one and a write made behind
Norax's back (which ``check`` finds and ``repair`` clears).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import chromadb
import pytest
from _support import open_store, rewrite_text

from norax_core import NoraxMemory, snapshots
from norax_core.maintenance import check_store, repair_store
from norax_core.published import SUFFIX
from norax_core.sync import LOG_SUFFIX

pytestmark = pytest.mark.server

NOW = 1_700_000_000.0
WEIGHTS = {"bm25": 0.4, "dense": 0.4, "temporal": 0.2, "graph": 0.0}

WRITER = textwrap.dedent(
    """
    import sys
    from urllib.parse import urlparse
    sys.path.insert(0, sys.argv[4])
    import chromadb
    from _support import open_store

    url, collection, namespace = sys.argv[1], sys.argv[2], sys.argv[3]
    u = urlparse(url)
    mem = open_store(client=chromadb.HttpClient(host=u.hostname, port=u.port),
                     collection=collection)
    mem.upsert(["zebra quartz lantern"], ids=[namespace + "3"], namespace=namespace,
               created_at=[NOW])
    mem.add(["zebra quartz harbour"], ids=["new-" + namespace], namespace=namespace,
            created_at=[NOW])
    mem.close()
    """.replace("NOW", repr(NOW))
)


def _client(url: str) -> chromadb.HttpClient:
    u = urlparse(url)
    return chromadb.HttpClient(host=u.hostname, port=u.port)


def _open(url: str, collection: str, snap: Path) -> NoraxMemory:
    mem = open_store(
        client=_client(url), collection=collection, snapshot_path=snap, weights=WEIGHTS
    )
    source = mem.store.indexes.source
    reads = source.rows
    mem.rows_read = []  # type: ignore[attr-defined]  # namespaces whose rows came from Chroma

    def counted(namespace: str) -> object:
        mem.rows_read.append(namespace)  # type: ignore[attr-defined]
        return reads(namespace)

    source.rows = counted
    return mem


def _write(url: str, collection: str, namespace: str) -> None:
    support = str(Path(__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", WRITER, url, collection, namespace, support],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _search(mem: NoraxMemory, ns: str = "a") -> list[tuple[str, float]]:
    got = mem.search("zebra quartz harbour", k=8, namespace=ns, now=NOW)
    return [(r.id, r.score) for r in got]


def _age_log(url: str, collection: str, seconds: float) -> None:
    """Move every log entry ``seconds`` into the past (the seeding happened long ago)."""
    log = _client(url).get_collection(collection + LOG_SUFFIX)
    got = log.get(include=["metadatas"])
    metas = [{**m, "ts": float(m["ts"]) - seconds} for m in got["metadatas"]]
    log.update(ids=got["ids"], metadatas=metas)


def _unpublish(url: str, collection: str) -> None:
    """Delete the snapshots published in Chroma: the file alone is under test."""
    _client(url).delete_collection(collection + SUFFIX)


def _fill(url: str, collection: str) -> None:
    """30 memories in each of namespaces a and b, written two minutes ago."""
    with open_store(client=_client(url), collection=collection) as mem:
        for ns in ("a", "b"):
            mem.add(
                [f"note {i} about the harbour ship {i % 5} and Colby" for i in range(30)],
                ids=[f"{ns}{i}" for i in range(30)],
                namespace=ns,
                created_at=[NOW - 3600 * i for i in range(30)],
            )
    _age_log(url, collection, 120.0)


def _seed(url: str, collection: str, snap: Path) -> list[tuple[str, float]]:
    """:func:`_fill`; a first reader loads a from Chroma and stores its snapshot at close, a
    second serves it from the file."""
    _fill(url, collection)
    with _open(url, collection, snap) as mem:
        got = _search(mem)
        assert mem.store.indexes.restored == 0 and mem.rows_read == ["a"]
    with _open(url, collection, snap) as mem:
        assert _search(mem) == got  # served from the snapshot, the same answer
        assert mem.store.indexes.restored == 1
        assert mem.rows_read == []  # nothing of namespace a read from Chroma
    return got


def _from_rows(mem: NoraxMemory, before: list[tuple[str, float]]) -> None:
    """``mem`` answers as ``before`` with namespace a read from Chroma's rows, no snapshot."""
    assert _search(mem) == before
    assert mem.store.indexes.restored == 0 and mem.rows_read == ["a"]


def test_a_write_to_the_namespace_by_another_process_bypasses_the_snapshot(
    chroma_url: str, tmp_path: Path
) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    before = _seed(chroma_url, collection, snap)
    _write(chroma_url, collection, "a")
    for _ in range(2):  # the entry is within lookback of the fresh snapshot too
        with _open(chroma_url, collection, snap) as mem:
            after = _search(mem)
            assert mem.store.indexes.restored == 0 and mem.rows_read == ["a"]
            assert after != before and {"a3", "new-a"} <= {m for m, _ in after[:2]}
    _age_log(chroma_url, collection, 120.0)  # the last snapshot was taken after the write
    with _open(chroma_url, collection, snap) as mem:
        assert _search(mem) == after
        assert mem.store.indexes.restored == 1 and mem.rows_read == []


def test_a_write_to_another_namespace_keeps_the_snapshot(chroma_url: str, tmp_path: Path) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    before = _seed(chroma_url, collection, snap)
    _write(chroma_url, collection, "b")
    with _open(chroma_url, collection, snap) as mem:
        assert _search(mem) == before
        assert mem.store.indexes.restored == 1 and mem.rows_read == []
        assert "new-b" in {m for m, _ in _search(mem, "b")}  # b itself from Chroma
        assert mem.rows_read == ["b"]


def test_an_entry_without_namespaces_bypasses_every_snapshot(
    chroma_url: str, tmp_path: Path
) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    before = _seed(chroma_url, collection, snap)
    log = _client(chroma_url).get_collection(collection + LOG_SUFFIX)
    meta = {"op": "upsert", "writer": "older-version", "seq": 1, "ts": time.time()}
    log.add(ids=["older-1"], documents=['["b1"]'], metadatas=[meta], embeddings=[[1.0]])
    with _open(chroma_url, collection, snap) as mem:
        _from_rows(mem, before)


def test_a_snapshot_older_than_the_log_retention_is_not_served(
    chroma_url: str, tmp_path: Path
) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    before = _seed(chroma_url, collection, snap)
    _age_log(chroma_url, collection, 7200.0)  # no entry names a since the snapshot...
    with sqlite3.connect(snap) as db:  # ...read an hour ago: entries since may be pruned
        db.execute("UPDATE client_snapshots SET taken = taken - 3600")
    _unpublish(chroma_url, collection)
    with _open(chroma_url, collection, snap) as mem:
        _from_rows(mem, before)
    with _open(chroma_url, collection, snap) as mem:  # stored afresh at that close
        assert _search(mem) == before
        assert mem.store.indexes.restored == 1 and mem.rows_read == []


def test_a_corrupt_snapshot_is_rebuilt_and_a_write_behind_norax_is_repaired(
    chroma_url: str, tmp_path: Path
) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    before = _seed(chroma_url, collection, snap)
    with sqlite3.connect(snap) as db:
        db.execute("UPDATE client_snapshots SET state = x'00ff'")
    _unpublish(chroma_url, collection)
    with _open(chroma_url, collection, snap) as mem:
        _from_rows(mem, before)
    with _open(chroma_url, collection, snap) as mem:  # stored afresh at that close
        assert _search(mem) == before
        assert mem.store.indexes.restored == 1
    # Plain Chroma rewrites a memory: no log entry, so the snapshot still looks valid.
    rewrite_text(_client(chroma_url).get_collection(collection), "a3", "zebra quartz harbour")
    with _open(chroma_url, collection, snap) as mem:
        assert not check_store(mem).ok  # the check sees what the snapshot holds
        repair_store(mem)
        assert check_store(mem).ok
    with _open(chroma_url, collection, snap) as mem:
        assert _search(mem)[0][0] == "a3"


def test_a_restored_namespace_caches_the_rows_a_chroma_read_would(
    chroma_url: str, tmp_path: Path
) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    _seed(chroma_url, collection, snap)
    _unpublish(chroma_url, collection)
    with open_store(client=_client(chroma_url), collection=collection) as mem:  # no file
        _search(mem)
        read = sorted(mem.store.indexes.sidecar.namespace_records("a"))
        standing, roles = mem.store.indexes.standing("a"), mem.store.indexes._roles["a"]
    with _open(chroma_url, collection, snap) as mem:
        _search(mem)
        assert mem.store.indexes.restored == 1 and mem.rows_read == []
        assert sorted(mem.store.indexes.sidecar.namespace_records("a")) == read
        assert mem.store.indexes.standing("a") == standing
        assert mem.store.indexes._roles["a"] == roles
        assert check_store(mem).ok


def test_a_snapshot_of_the_former_rows_form_is_not_served(chroma_url: str, tmp_path: Path) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    before = _seed(chroma_url, collection, snap)
    with sqlite3.connect(snap) as db:  # as written before ROWS_VERSION 2
        db.execute("UPDATE client_snapshots SET layout = ?", (snapshots.layout(),))
    _unpublish(chroma_url, collection)
    with _open(chroma_url, collection, snap) as mem:
        _from_rows(mem, before)
