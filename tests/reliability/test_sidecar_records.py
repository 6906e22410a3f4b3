"""A search's results read from the sidecar (embedded): what Chroma's records say, exactly.

The sidecar keeps each memory's document and metadata as Chroma returns them (Chroma hands
some float metadata back one ulp off what it was given: the write reads them back), so a
search's results equal Chroma's records field for field, after adds, upserts that drop keys,
deletes and a reopen, and a search of a loaded namespace asks Chroma nothing. ``norax
check`` reports a sidecar document or metadata that differs from Chroma's and ``repair``
fixes it; a failed add leaves neither side changed.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _support import open_store, spy_chroma

from norax_core import NoraxMemory
from norax_core.engine import SIDECAR_FILE
from norax_core.errors import InvalidInputError

NOW = 1_700_000_000.0


def _fill(mem: NoraxMemory) -> None:
    rng = random.Random(5)
    for ns in ("a", "b"):
        mem.add(
            [f"{ns} note {i} about the harbour ship {i % 7}" for i in range(40)],
            ids=[f"{ns}{i}" for i in range(40)],
            namespace=ns,
            created_at=[NOW - 3600 * i - rng.random() for i in range(40)],
            metadata=[
                {"score": rng.uniform(-1e6, 1e6), "tag": f"t{i % 3}", "n": i, "ok": i % 2 == 0}
                for i in range(40)
            ],
        )
    mem.upsert(
        ["a note 1 rewritten about the harbour"], ids=["a1"], namespace="a", metadata={"x": 0.1}
    )
    mem.delete(["a2"])


def _same_as_chroma(mem: NoraxMemory) -> int:
    seen = 0
    for ns in ("a", "b"):
        for q in ("harbour ship 3", "note rewritten", "ship 5"):
            got = mem.search(q, k=15, namespace=ns, now=NOW)
            truth = {m.id: m for m in mem.get([r.id for r in got])}  # from Chroma
            for r in got:
                t = truth[r.id]
                assert (r.text, r.kind, r.created_at, r.namespace) == (
                    t.text,
                    t.kind,
                    t.created_at,
                    t.namespace,
                )
                assert (r.metadata, r.entities, r.inferred_kind) == (
                    t.metadata,
                    t.entities,
                    t.inferred_kind,
                )
                seen += 1
    return seen


def test_results_from_the_sidecar_are_chromas_records(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
        assert _same_as_chroma(mem) > 60
        hit = mem.search("note rewritten", k=1, namespace="a", now=NOW)[0]
        assert hit.id == "a1" and hit.metadata == {"x": 0.1}  # the upsert dropped the old keys
    with open_store(store) as mem:
        assert _same_as_chroma(mem) > 60 and mem.check().ok


def test_a_search_of_a_loaded_namespace_asks_chroma_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
    calls = spy_chroma(monkeypatch, ("count", "get", "query"))
    with open_store(store) as mem:
        got = mem.search("harbour ship 3", k=10, namespace="b", now=NOW)
        assert len(got) == 10 and calls == []  # snapshot, sidecar rows and records


def test_check_reports_and_repair_fixes_a_sidecar_record(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
    with sqlite3.connect(store / SIDECAR_FILE) as db:
        db.execute("UPDATE memories SET document = 'forged' WHERE id = 'b3'")
        db.execute("UPDATE memories SET metadata = '{\"tag\": \"no\"}' WHERE id = 'b4'")
    with open_store(store, reconcile=False) as mem:  # as `norax check` opens it
        report = mem.check()
        stale = {m: f for n in report for m, f in n.stale.items()}
        assert not report.ok and stale == {"b3": ("document",), "b4": ("metadata",)}
        mem.repair()
        assert mem.check().ok
        texts = {r.id: r.text for r in mem.search("b note 3", k=40, namespace="b", now=NOW)}
        assert texts["b3"] == "b note 3 about the harbour ship 3"


def test_a_failed_add_leaves_neither_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)

        real, failed = mem.store.collection.get, []

        def refuse(*a: Any, **k: Any) -> Any:  # the read-back after the add fails, once
            if not failed:
                failed.append(1)
                raise RuntimeError("disk full")
            return real(*a, **k)

        monkeypatch.setattr(mem.store.collection, "get", refuse)
        with pytest.raises(InvalidInputError):
            mem.add(["c note"], ids=["c1"], namespace="c", created_at=NOW)
        monkeypatch.undo()
        assert mem.get(["c1"]) == [] and mem.count("c") == 0 and mem.check().ok
    with sqlite3.connect(store / SIDECAR_FILE) as db:
        assert db.execute("SELECT count(*) FROM memories WHERE id = 'c1'").fetchone() == (0,)


def test_decoded_records_follow_every_write(tmp_path: Path) -> None:
    """The sidecar keeps decoded records between searches: a write, delete or repair of a
    result's row shows in the next search, and changing a result changes no later one."""
    with open_store(tmp_path / "s") as mem:
        _fill(mem)

        def hits(ns: str = "a") -> dict[str, Any]:
            return {r.id: r for r in mem.search("harbour ship 3", k=40, namespace=ns, now=NOW)}

        first = hits()
        first["a3"].metadata["tag"] = "changed by the caller"  # type: ignore[index]
        assert hits()["a3"].metadata["tag"] == "t0"
        mem.upsert(
            ["a note 3 now about the harbour ship 3 at dawn"],
            ids=["a3"],
            namespace="a",
            metadata={"y": 2},
        )
        got = hits()["a3"]
        assert (got.text, got.metadata) == (
            "a note 3 now about the harbour ship 3 at dawn",
            {"y": 2},
        )
        mem.delete(["a10"])
        assert "a10" in first and "a10" not in hits()
        mem.add(["a note 10 back about the harbour ship 3"], ids=["a10"], namespace="a")
        assert hits()["a10"].text == "a note 10 back about the harbour ship 3"
        before = hits("b")
        mem.repair()  # rebuilds the sidecar's rows
        assert {m: r.text for m, r in hits("b").items()} == {m: r.text for m, r in before.items()}
        assert _same_as_chroma(mem) > 60
