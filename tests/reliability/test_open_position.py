"""An embedded open by Chroma's write position (norax_core/store/position.py).

A store closed after Norax's own writes opens without a single Chroma call; any write made
behind Norax's back (plain Chroma add, delete, a re-created collection), between sessions or
during one, moves the position and is found at the next open; a sidecar emptied for a
rebuild forgets its position.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import chromadb
import pytest
from _support import behind_norax, open_store, spy_chroma, swap_record

from norax_core import NoraxMemory
from norax_core.engine import SIDECAR_FILE
from norax_core.sidecar import POSITION_KEY
from norax_core.store.position import read_position

NOW = 1_700_000_000.0


def _fill(mem: NoraxMemory) -> None:
    for ns in ("a", "b"):
        mem.add(
            [f"{ns} note {i} about the harbour ship {i % 7}" for i in range(30)],
            ids=[f"{ns}{i}" for i in range(30)],
            namespace=ns,
            created_at=[NOW - 3600 * i for i in range(30)],
        )
    mem.delete(["a29"])
    mem.upsert(["a note 0 rewritten"], ids=["a0"], namespace="a", created_at=NOW)


def _recorded(store: Path) -> str:
    with sqlite3.connect(store / SIDECAR_FILE) as db:
        got = db.execute("SELECT value FROM meta WHERE key = ?", (POSITION_KEY,)).fetchone()
    return "" if got is None else str(got[0])


def _found_swap(mem: NoraxMemory) -> None:
    hits = {r.id for r in mem.search("lighthouse Priya", k=40, namespace="a", now=NOW)}
    assert "x1" in hits and "a5" not in hits
    assert mem.count("a") == 29 and mem.check().ok


def test_an_open_after_norax_writes_asks_chroma_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
    assert _recorded(store).endswith(f":{read_position(store)}")
    calls = spy_chroma(monkeypatch, ("count", "get", "query", "peek"))
    with open_store(store) as mem:
        assert calls == [] and mem.store.position is not None and mem.store.position.known
        assert mem.count() == 59 and mem.namespaces() == ["a", "b"]
        assert calls == []  # counts come from the sidecar
        assert [r.text for r in mem.search("rewritten", k=1, namespace="a", now=NOW)] == [
            "a note 0 rewritten"
        ]
    monkeypatch.undo()
    with open_store(store) as mem:
        assert mem.check().ok


def test_a_change_behind_norax_between_sessions_is_found_at_open(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
    behind_norax(store, swap_record)
    with open_store(store) as mem:
        _found_swap(mem)
        assert mem.store.position is not None and mem.store.position.known  # recorded again
    behind_norax(store, lambda col: col.delete(ids=["b3"]))
    with open_store(store) as mem:
        assert mem.count("b") == 29 and "b3" not in mem.store.indexes.sidecar.ids()


def test_a_change_behind_norax_during_a_session_is_found_at_the_next_open(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
    with open_store(store) as mem:
        mem.add(["b note 99"], ids=["b99"], namespace="b", created_at=NOW)
        behind_norax(store, swap_record)  # another client of the folder, while Norax has it open
        mem.add(["b note 98"], ids=["b98"], namespace="b", created_at=NOW)
        assert mem.store.position is not None and not mem.store.position.known
    assert _recorded(store) == ""
    with open_store(store) as mem:
        _found_swap(mem)
        assert mem.count("b") == 32


def test_a_change_after_the_last_norax_write_is_found(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
        behind_norax(store, swap_record)  # after the last write, before the close
    with open_store(store) as mem:
        _found_swap(mem)


def test_a_recreated_collection_is_not_taken_for_the_old_one(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        mem.add(["only memory"], ids=["m1"], namespace="a", created_at=NOW)
    client = chromadb.PersistentClient(path=str(store))
    try:  # the same write position (one record) in a new collection of the same name
        old = client.get_collection("norax")
        got = old.get(include=["embeddings", "metadatas"])
        client.delete_collection("norax")
        new = client.create_collection(
            "norax", metadata=old.metadata, configuration={"hnsw": {"space": "cosine"}}
        )
        new.add(
            ids=["m2"],
            embeddings=got["embeddings"],
            documents=["other"],
            metadatas=got["metadatas"],
        )
    finally:
        client.close()
    with open_store(store) as mem:
        assert mem.store.indexes.sidecar.ids() == {"m2"} and mem.check().ok


def test_a_sidecar_emptied_for_a_rebuild_forgets_its_position(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
    assert _recorded(store)
    with sqlite3.connect(store / SIDECAR_FILE) as db:  # as a new schema version does at open
        db.execute("UPDATE meta SET value = 'old' WHERE key = 'schema'")
    with open_store(store) as mem:
        assert mem.count() == 59 and mem.check().ok
    assert _recorded(store)  # rebuilt, then recorded again


def test_a_hand_edit_of_the_sidecar_voids_its_position(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
    with sqlite3.connect(store / SIDECAR_FILE) as db:  # Chroma unchanged: only the trigger tells
        db.execute("DELETE FROM memories WHERE id = 'b7'")
    assert _recorded(store) == ""
    with open_store(store) as mem:
        assert mem.count("b") == 30 and mem.check().ok
    assert _recorded(store)
