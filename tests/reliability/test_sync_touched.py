"""ChangeLog.touched (norax_core.sync): which namespaces the log's entries since a time name,
as client snapshots ask it (norax_core.client_snapshots). Two change logs share one real
Chroma client (as two processes share a server); the reader's clock is set by the test.
"""

from __future__ import annotations

from pathlib import Path

import chromadb

from norax_core.sync import LOG_SUFFIX, ChangeLog

T0 = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _pair(tmp_path: Path) -> tuple[ChangeLog, ChangeLog, Clock, Clock, chromadb.ClientAPI]:
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    wclock, rclock = Clock(), Clock()
    writer = ChangeLog(client, "mem", clock=wclock)
    reader = ChangeLog(client, "mem", clock=rclock)
    return writer, reader, wclock, rclock, client


def test_touched_names_the_namespaces_written_since(tmp_path: Path) -> None:
    writer, reader, wclock, rclock, _ = _pair(tmp_path)
    writer.record("add", ["a1"], ["a"])
    wclock.now = rclock.now = T0 + 100
    writer.record("upsert", ["b1", "c1"], {"b", "c"})
    assert reader.touched(T0 + 50) == {"b", "c"}  # one get: nothing covered yet
    assert reader.touched(T0 - 1) == {"a", "b", "c"}  # further back: read again
    wclock.now = rclock.now = T0 + 102
    writer.record("delete", ["d1"], ["d"])
    reader.pull()  # the pull's get (metadata included) covers the new entry
    assert reader.touched(T0 + 101) == {"d"}


def test_an_entry_without_namespaces_means_any(tmp_path: Path) -> None:
    writer, reader, _, _, _ = _pair(tmp_path)
    writer.record("upsert", ["x"])  # namespaces unknown
    assert reader.touched(T0 - 1) is None
    _, reader2, *_ = _pair(tmp_path / "old")
    raw = chromadb.PersistentClient(path=str(tmp_path / "old" / "chroma"))
    raw.get_collection("mem" + LOG_SUFFIX).add(  # an older version's entry: no "ns"
        ids=["old-1"],
        documents=['["y"]'],
        metadatas=[{"op": "add", "writer": "old", "seq": 1, "ts": T0}],
        embeddings=[[1.0]],
    )
    assert reader2.touched(T0 - 1) is None
    assert reader2.touched(T0 + 1) == frozenset()


def test_a_gap_in_the_pulls_is_read_again(tmp_path: Path) -> None:
    writer, reader, wclock, rclock, _ = _pair(tmp_path)
    rclock.now = T0 + 1
    reader.pull()  # covers [T0 - 29, T0 + 1]
    wclock.now = T0 + 200
    writer.record("add", ["a1"], ["a"])
    rclock.now = T0 + 400
    reader.reconciled()  # a reconcile, not a pull: the log was not read in between
    reader.pull()  # covers [T0 + 370, T0 + 400] only: the entry at T0 + 200 is outside
    assert reader.touched(T0 + 100) == {"a"}  # so this reads the log again
