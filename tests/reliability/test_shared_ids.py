"""Two processes writing the same ids and namespaces over one Chroma server (issue 24 A, B, 7).

Two real OS processes (children answering JSON commands on stdin) open one collection of a
real ``chroma run`` through ``chromadb.HttpClient``. A process that has a namespace loaded
but has not pulled the other's latest writes (its sync interval is long) must still refuse
what one process refuses: an id stored in another namespace, a duplicate add. A memory the
other process moved between namespaces must leave the old namespace's indexes at the next
pull, and a stale process must not delete or overwrite it in its new namespace.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _procs import OpenProc, Records, serving

from norax_core import InvalidInputError

pytestmark = pytest.mark.server

STALE = 3600.0  # a sync interval no test outlasts: the process never pulls by itself
FAST = 0.2


@pytest.fixture
def server(chroma_url: str) -> Iterator[tuple[OpenProc, Records]]:
    """``open_proc(interval)`` starts a process on a fresh collection; the collection's records."""
    with serving(chroma_url, "ids") as srv:
        yield srv.open, srv.records


def test_a_stale_process_cannot_take_an_id_another_process_just_stored(server) -> None:  # type: ignore[no-untyped-def]
    open_proc, records = server
    a, b = open_proc(FAST), open_proc(STALE)
    b.ok("add", text="the harbour ledger is balanced", id="b-p", ns="p")
    assert b.ok("search", text="harbour ledger", ns="p") == ["b-p"]  # p is loaded in B
    a.ok("add", text="the lighthouse keeper owns the red boat", id="shared-id", ns="p")

    moved = b.ask("upsert", text="a tenant of q writes here", id="shared-id", ns="q")
    assert moved.get("error") == "InvalidInputError", moved
    dup = b.ask("add", text="a tenant of q writes here", id="shared-id", ns="q")
    assert dup.get("error") == "DuplicateIdError", dup
    dup_same = b.ask("add", text="the same namespace, another text", id="shared-id", ns="p")
    assert dup_same.get("error") == "DuplicateIdError", dup_same

    held = records()
    assert held["shared-id"] == ("p", "the lighthouse keeper owns the red boat")
    assert set(held) == {"b-p", "shared-id"}  # nothing of the refused writes stayed
    assert a.ok("count", ns="p") == 2 and a.ok("count", ns="q") == 0
    assert a.ok("check") == []
    assert b.ok("count", ns="q") == 0


def test_a_memory_moved_by_another_process_leaves_the_old_namespace(server) -> None:  # type: ignore[no-untyped-def]
    open_proc, records = server
    a, b = open_proc(FAST), open_proc(FAST)
    a.ok("add", text="the orbit plan for the launch", id="x", ns="p")
    a.ok("add", text="the forest ranger counted owls", id="y", ns="p")
    assert a.ok("indexed", ns="p") == ["x", "y"]  # p loaded in A; q is not
    assert b.ok("delete", id="x", ns="p") == 1
    b.ok("add", text="the orbit plan, now in q", id="x", ns="q")
    deadline = time.time() + 10
    while a.ok("indexed", ns="p") != ["y"] and time.time() < deadline:
        time.sleep(0.1)  # A's next pull
    assert a.ok("indexed", ns="p") == ["y"]
    assert a.ok("count", ns="p") == 1 and a.ok("count", ns="q") == 1
    assert a.ok("check") == []
    assert records()["x"] == ("q", "the orbit plan, now in q")


def test_a_stale_process_cannot_delete_or_overwrite_a_memory_moved_away(server) -> None:  # type: ignore[no-untyped-def]
    open_proc, records = server
    a, b = open_proc(STALE), open_proc(FAST)
    a.ok("add", text="the orbit plan for the launch", id="x", ns="p")
    assert a.ok("indexed", ns="p") == ["x"]
    assert b.ok("delete", id="x", ns="p") == 1
    b.ok("add", text="a tenant of q owns this now", id="x", ns="q")

    assert a.ok("delete", id="x", ns="p") == 0  # not p's any more
    over = a.ask("upsert", text="p writes over it", id="x", ns="p")
    assert over.get("error") == "InvalidInputError", over
    assert records()["x"] == ("q", "a tenant of q owns this now")
    assert b.ok("count", ns="q") == 1 and b.ok("check") == []


# -- the same races, pinned in one process: two stores on one Chroma client -------------------


class Racing:
    """A store's Chroma collection where another store writes just before ``op`` runs."""

    def __init__(self, collection: Any, op: str, first: Any) -> None:
        self._collection, self._op, self._first = collection, op, first

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._collection, name)
        if name != self._op or self._first is None:
            return real

        def call(**kwargs: Any) -> Any:
            first, self._first = self._first, None
            first()
            return real(**kwargs)

        return call


@pytest.fixture
def two(tmp_path: Path):  # type: ignore[no-untyped-def]
    import chromadb
    from _support import open_store

    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    a = open_store(client=client, collection="shared", sync_interval=STALE)
    b = open_store(client=client, collection="shared", sync_interval=STALE)
    yield a, b
    a.close()
    b.close()


def _held(mem: Any) -> dict[str, tuple[str, str]]:
    got = mem.store.collection.get(include=["documents", "metadatas"])
    return {
        m: (meta["norax_namespace"], doc)
        for m, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
    }


@pytest.mark.parametrize("ns", ["p", "q"])
def test_an_add_racing_another_add_of_the_same_id_is_refused_and_undone(two, ns: str) -> None:  # type: ignore[no-untyped-def]
    from norax_core import DuplicateIdError

    a, b = two
    b.add("the harbour ledger is balanced", ids="b-p", namespace="p")  # p loaded in B
    # A stores shared-id after B checked its ids and before B's Chroma add: Chroma keeps
    # A's record and ignores B's (and writes B's other id).
    race = lambda: a.add("the lighthouse keeper", ids="shared-id", namespace="p")  # noqa: E731
    b.store.collection = Racing(b.store.collection, "add", race)
    with pytest.raises(DuplicateIdError, match="shared-id"):
        b.add(["b writes this", "and this one"], ids=["shared-id", "b-new"], namespace=ns)
    assert _held(a) == {
        "b-p": ("p", "the harbour ledger is balanced"),
        "shared-id": ("p", "the lighthouse keeper"),
    }  # B's other id was undone, A's memory kept
    assert b.count(ns) == (2 if ns == "p" else 0)  # B indexes what Chroma holds
    assert a.check().ok and b.check().ok


def test_an_upsert_racing_another_add_of_the_same_id_is_refused(two) -> None:  # type: ignore[no-untyped-def]
    a, b = two
    b.add("the harbour ledger is balanced", ids="b-q", namespace="q")
    # A stores shared-id in p after B's check of its ids and before B reads the records it
    # replaces: the write itself must see that the id lives in p now.
    real = b.store.refuse_moves

    def check_then_race(rows: Any) -> None:
        real(rows)
        a.add("the lighthouse keeper", ids="shared-id", namespace="p")

    b.store.refuse_moves = check_then_race
    with pytest.raises(InvalidInputError, match="another namespace"):
        b.upsert("q writes over it", ids="shared-id", namespace="q")
    assert _held(a)["shared-id"] == ("p", "the lighthouse keeper")
    assert a.count("p") == 1 and b.count("q") == 1 and a.check().ok
