"""The inspector's reads (``Store.browse``, ``Store.neighbourhood``) meet lazy namespaces,
tenant isolation, filters and concurrent writes: what they answer never depends on what is
loaded, never crosses a namespace, and never fails while other threads write.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from _support import open_store

from norax_core import NoraxConfig, NoraxMemory

NOW = 1_700_000_000.0
TINY = NoraxConfig(index_cache_mb=0.0)  # every use of another namespace evicts the last
PEOPLE = ["Colby", "Priya", "Marco", "Alice", "Bob"]


def _fill(mem: NoraxMemory, namespaces: list[str], n: int = 15) -> None:
    for ns in namespaces:
        mem.add(
            [
                f"{PEOPLE[i % 5]} met {PEOPLE[(i + len(ns)) % 5]} about {ns} item {i}"
                for i in range(n)
            ],
            ids=[f"{ns}-{i}" for i in range(n)],
            namespace=ns,
            created_at=[NOW - 60 * i for i in range(n)],
            metadata=[{"half": i % 2} for i in range(n)],
        )


def _view(mem: NoraxMemory, ns: str) -> tuple[Any, ...]:
    total, page = mem.store.browse(ns, limit=100)
    graph, shared = mem.store.neighbourhood(ns, f"{ns}-3")
    return (
        total,
        [m.id for m in page],
        sorted(graph.nodes(data=True)),
        sorted((min(a, b), max(a, b), w) for a, b, w in graph.edges(data="weight")),
        shared,
    )


def test_reads_of_evicted_namespaces_equal_a_store_that_keeps_them(tmp_path: Path) -> None:
    names = ["u1", "u22", "u333"]
    with open_store(tmp_path / "big") as big, open_store(tmp_path / "tiny", config=TINY) as tiny:
        for mem in (big, tiny):
            _fill(mem, names)
        for _ in range(2):
            for ns in names:
                got = _view(tiny, ns)
                assert tiny.store.indexes.loaded() == [ns]  # the read loaded it, others went
                assert got == _view(big, ns)
                assert all(m.startswith(f"{ns}-") for m in got[1])
                assert all(m.startswith(f"{ns}-") for ids in got[4].values() for m in ids)
        assert tiny.store.indexes.evictions >= 5


def test_browse_filters_are_the_search_filters(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        _fill(mem, ["a", "b"])
        where = {"half": 1}
        total, page = mem.store.browse("a", where=where, limit=100)
        assert {m.id for m in page} == set(mem.store.allowed("a", where) or ())
        assert total == len(page) == 7
        hits = mem.search("Colby met", k=20, namespace="a", where=where, now=NOW)
        assert {r.id for r in hits} <= {m.id for m in page}
        # created_at bounds: [since, until)
        _, window = mem.store.browse("a", since=NOW - 180, until=NOW - 60, limit=100)
        assert [m.id for m in window] == ["a-2", "a-3"]


def test_reads_while_other_threads_write_and_delete(tmp_path: Path) -> None:
    with open_store(tmp_path / "c", config=TINY) as mem:
        _fill(mem, ["r", "w"])
        errors: list[BaseException] = []
        stop = threading.Event()

        def writer() -> None:
            try:
                for i in range(30):
                    mem.add(f"Colby wrote note {i}", ids=f"w-new-{i}", namespace="w")
                    mem.delete(f"w-{i % 15}", namespace="w")
            except BaseException as exc:
                errors.append(exc)
            finally:
                stop.set()

        def reader(ns: str) -> None:
            try:
                while not stop.is_set():
                    total, page = mem.store.browse(ns, limit=100)
                    ids = [m.id for m in page]
                    assert len(ids) == len(set(ids)) and all(i.startswith(f"{ns}-") for i in ids)
                    assert ns != "r" or total == 15
                    mem.store.neighbourhood(ns, ids[0])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer)] + [
            threading.Thread(target=reader, args=(ns,)) for ns in ("r", "w", "r")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert errors == []
        total, _ = mem.store.browse("w", limit=1)
        assert total == 15 + 30 - 15
