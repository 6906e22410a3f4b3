"""A client's cached rows: restored from a shared snapshot in one bulk insert, exactly."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from norax_core import snapshots
from norax_core.sidecar import IndexRow, Sidecar


def _rows(ns: str, n: int) -> list[IndexRow]:
    return [
        IndexRow(
            f"{ns}-{i}",
            ns,
            "episodic",
            1e9 + i,
            ("word", f"w{i}", "café"),
            (f"E{i % 3}",),
            i + 1,
            "user" if i % 2 else "",
            "preference" if i % 3 == 0 else "",
            f"doc {i}",
            json.dumps({"norax_namespace": ns}),
        )
        for i in range(n)
    ]


def _triggers(side: Sidecar) -> set[str]:
    got = side._conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    return {r[0] for r in got}


def test_an_in_memory_sidecar_has_no_per_row_triggers_a_file_keeps_them(tmp_path: Path) -> None:
    assert _triggers(Sidecar(None)) == set()
    on_disk = _triggers(Sidecar(tmp_path / "side.sqlite3"))
    assert {"snapshots_row_in", "memories_insert_position"} <= on_disk


def test_cached_records_round_trip_through_a_shared_snapshot() -> None:
    first, second = Sidecar(None), Sidecar(None)
    first.upsert(_rows("a", 40) + _rows("b", 5), done=())
    records = first.namespace_records("a")
    ids = {str(r[0]) for r in records}
    blob = snapshots.pack_rows(records)
    second.upsert(_rows("a", 3)[:1] + _rows("b", 2), done=())  # a stale cached row of a
    second.cache("a", snapshots.unpack_rows(blob, ids, "a"))
    by_id = lambda side: sorted(side.namespace_rows("a"), key=lambda r: r.id)  # noqa: E731
    assert by_id(second) == by_id(first)
    assert sorted(second.namespace_records("a")) == sorted(records)
    assert len(second.namespace_rows("b")) == 2  # another namespace's rows stay


def test_rows_of_another_form_namespace_or_ids_are_refused() -> None:
    side = Sidecar(None)
    side.upsert(_rows("a", 4), done=())
    records = side.namespace_records("a")
    ids = {str(r[0]) for r in records}
    blob = snapshots.pack_rows(records)
    with pytest.raises(ValueError, match="not snapshot rows"):
        snapshots.unpack_rows(blob, ids, "b")
    with pytest.raises(ValueError, match="disagree"):
        snapshots.unpack_rows(blob, ids | {"a-9"}, "a")
    old_form = pickle.dumps(_rows("a", 4))  # the rows blob before ROWS_VERSION 2
    with pytest.raises(ValueError, match="not snapshot rows"):
        snapshots.unpack_rows(old_form, ids, "a")
    with pytest.raises(ValueError, match="unreadable"):
        snapshots.unpack_rows(b"\x00junk", ids, "a")
