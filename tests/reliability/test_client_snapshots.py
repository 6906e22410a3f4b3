"""Client snapshots (norax_core/client_snapshots.py) over a real ``chroma run``: a snapshot
is served only while no Norax process has written its namespace since it was taken.

Every check writes from a second process, so the marks the reader trusts are the ones
another process left in Chroma: a finished write, a write killed after Chroma stored it
(its mark stays busy), then a corrupt snapshot and a write made behind Norax's back (which
``check`` finds and ``repair`` clears).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from urllib.parse import urlparse

import chromadb
import pytest
from _support import open_store

from norax_core import NoraxMemory
from norax_core.maintenance import check_store, repair_store

pytestmark = pytest.mark.server

NOW = 1_700_000_000.0
WEIGHTS = {"bm25": 0.4, "dense": 0.4, "temporal": 0.2, "graph": 0.0}

WRITER = textwrap.dedent(
    """
    import os, sys
    from urllib.parse import urlparse
    sys.path.insert(0, sys.argv[4])
    import chromadb
    from _support import open_store
    from norax_core.write_marks import WriteMarks

    url, collection, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    u = urlparse(url)
    mem = open_store(client=chromadb.HttpClient(host=u.hostname, port=u.port),
                     collection=collection)
    if mode == "crash":  # Chroma stores the write, then the process dies before "done"
        set_mark = WriteMarks._set
        def dying(self, namespaces, busy):
            if not busy:
                os._exit(3)
            set_mark(self, namespaces, busy)
        WriteMarks._set = dying
    mem.upsert(["zebra quartz lantern"], ids=["a3"], namespace="a", created_at=[NOW])
    mem.add(["zebra quartz harbour"], ids=["a-new-" + mode], namespace="a", created_at=[NOW])
    mem.close()
    """.replace("NOW", repr(NOW))
)


def _client(url: str) -> chromadb.HttpClient:
    u = urlparse(url)
    return chromadb.HttpClient(host=u.hostname, port=u.port)


def _open(url: str, collection: str, snap: Path) -> NoraxMemory:
    return open_store(
        client=_client(url), collection=collection, snapshot_path=snap, weights=WEIGHTS
    )


def _write(url: str, collection: str, mode: str) -> int:
    support = str(Path(__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", WRITER, url, collection, mode, support],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if mode != "crash":
        assert done.returncode == 0, done.stderr
    return done.returncode


def _search(mem: NoraxMemory, text: str = "zebra quartz harbour") -> list[tuple[str, float]]:
    return [(r.id, r.score) for r in mem.search(text, k=8, namespace="a", now=NOW)]


def _seed(url: str, collection: str, snap: Path) -> list[tuple[str, float]]:
    """30 memories in namespace a; a reader loads it from Chroma and stores its snapshot."""
    with open_store(client=_client(url), collection=collection) as mem:
        mem.add(
            [f"note {i} about the harbour ship {i % 5} and Colby" for i in range(30)],
            ids=[f"a{i}" for i in range(30)],
            namespace="a",
            created_at=[NOW - 3600 * i for i in range(30)],
        )
    with _open(url, collection, snap) as mem:
        got = _search(mem)
        assert mem.store.indexes.restored == 0
    with _open(url, collection, snap) as mem:
        assert _search(mem) == got  # served from the snapshot, the same answer
        assert mem.store.indexes.restored == 1
    return got


def test_a_write_by_another_process_bypasses_the_snapshot(chroma_url: str, tmp_path: Path) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    before = _seed(chroma_url, collection, snap)
    _write(chroma_url, collection, "done")
    with _open(chroma_url, collection, snap) as mem:
        after = _search(mem)
        assert mem.store.indexes.restored == 0  # the marks changed: loaded from Chroma
        assert after != before and {"a3", "a-new-done"} <= {m for m, _ in after[:2]}
    with _open(chroma_url, collection, snap) as mem:  # the new snapshot, taken at close
        assert _search(mem) == after
        assert mem.store.indexes.restored == 1


def test_a_write_killed_after_chroma_stored_it_leaves_nothing_to_serve(
    chroma_url: str, tmp_path: Path
) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    _seed(chroma_url, collection, snap)
    assert _write(chroma_url, collection, "crash") == 3
    for _ in range(2):  # its mark stays busy: no snapshot is served, none is stored
        with _open(chroma_url, collection, snap) as mem:
            got = _search(mem)
            assert mem.store.indexes.restored == 0
            assert got[0][0] == "a3"  # its new text (the process died before its add)
            assert mem.get(["a3"])[0].text == "zebra quartz lantern"


def test_a_corrupt_snapshot_is_ignored_and_a_write_behind_norax_is_repaired(
    chroma_url: str, tmp_path: Path
) -> None:
    collection, snap = f"snap-{uuid.uuid4().hex[:8]}", tmp_path / "snap.sqlite3"
    before = _seed(chroma_url, collection, snap)
    with sqlite3.connect(snap) as db:
        db.execute("UPDATE client_snapshots SET state = x'00ff'")
    with _open(chroma_url, collection, snap) as mem:
        assert _search(mem) == before
        assert mem.store.indexes.restored == 0
    # Plain Chroma rewrites a memory: no Norax mark, so the snapshot still looks valid.
    raw = _client(chroma_url).get_collection(collection)
    old = raw.get(ids=["a3"], include=["metadatas", "embeddings"])
    raw.update(
        ids=["a3"],
        documents=["zebra quartz harbour"],
        metadatas=old["metadatas"],
        embeddings=old["embeddings"],
    )
    with _open(chroma_url, collection, snap) as mem:
        assert not check_store(mem).ok  # the check sees what the snapshot holds
        repair_store(mem)
        assert check_store(mem).ok
    with _open(chroma_url, collection, snap) as mem:
        assert mem.store.indexes.restored == 0 or mem.store.indexes.restored == 1
        assert _search(mem)[0][0] == "a3"
