"""The records the adapters ingest (norax_core.ingest.memory_record / write_records), offline."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from norax_core.ingest import MemoryRecord, memory_record, write_records


class _Recorder:
    """Stands in for a NoraxMemory: remembers what ``add`` / ``upsert`` were called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], dict[str, Any]]] = []

    def add(self, texts: list[str], **kwargs: Any) -> list[str]:
        self.calls.append(("add", texts, kwargs))
        return list(kwargs["ids"])

    def upsert(self, texts: list[str], **kwargs: Any) -> list[str]:
        self.calls.append(("upsert", texts, kwargs))
        return list(kwargs["ids"])


def test_memory_record_reads_time_and_kind_and_keeps_storable_metadata() -> None:
    meta = {
        "when": "2026-01-01",
        "kind": "semantic",
        "score": 0.5,
        "norax_kind": "x",
        "day": date(2026, 1, 2),
        "tags": ["a"],
        "n": 3,
    }
    rec = memory_record("m", "body", meta, time_key="when", skip=("kind", "score"))
    stored = {"day": "2026-01-02", "n": 3}
    assert rec == MemoryRecord("m", "body", "2026-01-01", "semantic", stored)
    assert rec == ("m", "body", "2026-01-01", "semantic", stored)  # the adapters' tuples
    # kind is kept in the metadata unless skipped, and only a string kind counts as a kind
    assert memory_record(None, "t", {"kind": 3}, time_key="created_at") == (
        None,
        "t",
        None,
        None,
        {"kind": 3},
    )


def test_write_records_fills_ids_and_kinds() -> None:
    mem = _Recorder()
    recs = [
        MemoryRecord("a", "one", 1.0, "semantic", {"x": 1}),
        MemoryRecord(None, "two", None, None, {}),
    ]
    ids = write_records(mem, recs, namespace="team")  # type: ignore[arg-type]
    ((method, texts, kw),) = mem.calls
    assert method == "add" and texts == ["one", "two"]
    assert ids == kw["ids"] and ids[0] == "a" and len(ids[1]) == 32  # a fresh uuid4 hex
    assert kw["kind"] == ["semantic", "episodic"]
    assert kw["created_at"] == [1.0, None]
    assert kw["namespace"] == "team"
    assert kw["metadata"] == [{"x": 1}, {}]


@pytest.mark.parametrize(
    ("kind", "expected"), [(None, ["semantic", "episodic"]), ("p", ["p", "p"])]
)
def test_write_records_kind_for_all_wins_and_upsert_upserts(
    kind: str | None, expected: list[str]
) -> None:
    mem = _Recorder()
    recs = [MemoryRecord("a", "one", None, "semantic", {}), MemoryRecord("b", "t", None, None, {})]
    write_records(mem, recs, kind=kind, upsert=True)  # type: ignore[arg-type]
    ((method, _, kw),) = mem.calls
    assert method == "upsert" and kw["kind"] == expected and kw["namespace"] is None


def test_write_records_keeps_a_blank_id_for_the_memory_to_refuse() -> None:
    mem = _Recorder()
    write_records(mem, [MemoryRecord("", "t", None, None, {})])  # type: ignore[arg-type]
    assert mem.calls[0][2]["ids"] == [""]


def test_nothing_to_write_writes_nothing() -> None:
    mem = _Recorder()
    assert write_records(mem, []) == []  # type: ignore[arg-type]
    assert mem.calls == []
