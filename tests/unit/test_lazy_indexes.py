"""DerivedIndexes load namespaces on use and evict the least recently used beyond a budget."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from norax_core import NoraxConfig
from norax_core.indexes import DerivedIndexes
from norax_core.sidecar import IndexRow, Sidecar, row_bytes


def _rows(ns: str, n: int) -> list[IndexRow]:
    return [
        IndexRow(f"{ns}-{i}", ns, "episodic", 1e9 + i, ("word", f"w{i}"), (f"E{i % 3}",), i + 1)
        for i in range(n)
    ]


def _stored(budget_rows: float) -> DerivedIndexes:
    """Indexes over a sidecar holding namespaces a, b, c (10 rows each), none loaded."""
    side = Sidecar(None)
    for ns in "abc":
        side.upsert(_rows(ns, 10))
    mb = budget_rows * row_bytes(_rows("a", 1)[0]) / 2**20
    return DerivedIndexes(side, NoraxConfig(index_cache_mb=mb))


def test_a_namespace_loads_alone_on_first_use() -> None:
    idx = _stored(100)
    assert idx.loaded() == [] and idx.namespace_of == {}
    idx.ensure("b")
    assert idx.loaded() == ["b"]
    assert set(idx.namespace_of) == {f"b-{i}" for i in range(10)}
    assert idx.temporal.count("b") == 10 and idx.bm25.count("b") == 10
    assert idx.graph.count("b") == 10 and idx.bm25.count("a") == 0
    assert idx.nbytes == sum(row_bytes(r) for r in _rows("b", 10))
    assert idx.count(None) == 30 and idx.namespaces() == ["a", "b", "c"]
    assert idx.homes(["a-1", "b-2", "zz"]) == {"a-1": "a", "b-2": "b"}  # a is not loaded


def test_least_recently_used_is_evicted_beyond_the_budget() -> None:
    idx = _stored(25)  # two namespaces of 10 fit, three do not
    idx.ensure("a")
    idx.ensure("b")
    idx.ensure("a")  # a is now the most recent
    idx.ensure("c")
    assert idx.loaded() == ["a", "c"] and idx.evictions == 1
    assert not any(m.startswith("b-") for m in idx.namespace_of)
    assert idx.bm25.count("b") == 0 and idx.temporal.count("b") == 0 and idx.graph.count("b") == 0
    with idx.held(["b"]):  # nothing is evicted inside
        assert idx.loaded() == ["a", "c", "b"]
    assert idx.loaded() == ["c", "b"]  # trimmed on leaving, least recent first


def test_the_namespace_in_use_stays_even_over_budget() -> None:
    idx = _stored(0)
    for ns in "abca":
        idx.ensure(ns)
        assert idx.loaded() == [ns]


def test_writes_load_nothing_but_a_new_namespace() -> None:
    idx = _stored(100)
    rows = [IndexRow("a-new", "a", "episodic", 5.0, ("x",), (), 99)]
    idx.claim(["a"])
    idx.apply(rows)
    assert idx.loaded() == [] and idx.homes(["a-new"]) == {"a-new": "a"}
    assert idx.last_seq == 99
    idx.claim(["fresh"])
    idx.apply([IndexRow("f-1", "fresh", "episodic", 5.0, ("y",), (), 100)])
    assert idx.loaded() == ["fresh"] and idx.namespace_of == {"f-1": "fresh"}
    assert idx.remove(["a-new", "f-1", "nope"]) == ["a-new", "f-1"]
    idx.ensure("a")
    assert idx.temporal.count("a") == 10  # the removed row is gone from the sidecar too


@pytest.mark.parametrize("louvain_edges", [1, 10_000])
def test_communities_survive_an_eviction(louvain_edges: int) -> None:
    idx = _stored(100)
    idx.graph.background_min_edges = louvain_edges
    idx.ensure("a")
    before = idx.graph.communities("a")
    idx.evict("a")
    assert idx.sidecar.graph_state("a") is not None
    idx.ensure("a")
    space = idx.graph.space("a", wait=False)
    assert space is not None and space.changes == 0  # adopted, no rerun pending
    assert idx.graph.communities("a") == before
    idx.graph.close()


def test_roles_held_in_memory_follow_snapshots_and_writes(tmp_path: Path) -> None:
    """The roles the turns and exchange stages read agree with the sidecar's rows."""
    side = Sidecar(tmp_path / "sidecar.sqlite3")
    side.upsert([replace(r, role="user" if i % 2 else "") for i, r in enumerate(_rows("a", 6))])
    side.upsert(_rows("b", 6))
    idx = DerivedIndexes(side, NoraxConfig(index_cache_mb=0))  # one namespace at a time
    ids = [f"a-{i}" for i in range(6)] + ["b-1", "zz"]
    want = {f"a-{i}": "user" if i % 2 else "" for i in range(6)}
    idx.ensure("a")  # from its rows
    assert idx.roles("a", ids) == want  # b-1 is in another namespace, zz nowhere
    idx.ensure("b")  # a is evicted and snapshotted
    assert idx.roles("b", ids) == {"b-1": ""} and idx.roles("a", ids) == {}
    idx.ensure("a")  # from its snapshot
    assert idx.restored == 1 and idx.roles("a", ids) == want
    idx.apply([replace(_rows("a", 6)[1], role="assistant"), replace(_rows("a", 6)[2], role="user")])
    idx.remove(["a-3"])
    want.update({"a-1": "assistant", "a-2": "user"})
    del want["a-3"]
    idx.ensure("a")  # as a search does before reading them
    assert idx.roles("a", ids) == want


class _ServerRows:
    """A client's row source: every namespace is read from elsewhere, none kept."""

    complete = False

    def rows(self, namespace: str) -> list[IndexRow]:
        return _rows(namespace, 10)

    def homes(self, ids: object) -> dict[str, tuple[str, int]]:
        return {}

    def has(self, namespace: str) -> bool:
        return True

    def namespaces(self) -> list[str]:
        return []

    def count(self) -> int:
        return 0


def test_a_client_keeps_saved_communities_within_its_budget() -> None:
    # A worker serving thousands of namespaces: each eviction saves the namespace's
    # communities in the in-memory sidecar, which must not grow with every namespace served.
    from norax_core.indexes import _TRIM_STATES_EVERY, GRAPH_STATES_SHARE

    mb = 25 * row_bytes(_rows("a", 1)[0]) / 2**20  # two namespaces of 10 fit
    idx = DerivedIndexes(Sidecar(None), NoraxConfig(index_cache_mb=mb), _ServerRows())
    lengths = []
    for i in range(300):
        idx.ensure(f"n{i}")
        saved = idx.sidecar._conn.execute("SELECT length(state) FROM graph_state").fetchall()
        lengths.append(sum(n for (n,) in saved))
    assert idx.evictions == 298 and max(n for (n,) in saved) > 0
    largest = max(n for (n,) in saved)
    bound = idx.budget // GRAPH_STATES_SHARE + _TRIM_STATES_EVERY * largest
    assert max(lengths) <= bound < 300 * largest
    # the most recently evicted keep theirs: reloaded without recomputing
    assert idx.sidecar.graph_state("n297") is not None
    idx.graph.close()
