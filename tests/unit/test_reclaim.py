"""A worker's caches stay within their budgets, and the memory its reads and evictions free
goes back to the OS (:mod:`norax_core.reclaim`)."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from norax_core import NoraxConfig, reclaim
from norax_core.indexes import DerivedIndexes
from norax_core.reclaim import READ_BYTES_PER_ROW, TRIM_AFTER, Reclaimer
from norax_core.sidecar import IndexRow, Sidecar, row_bytes
from norax_core.signals.vectors import NamespaceMatrix, VectorCache

ROWS, DIM = 30, 8


class _Trims:
    """Stands for ``malloc_trim``: counts calls."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, pad: int) -> int:
        self.calls.append(pad)
        return 1


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> _Trims:
    fake = _Trims()
    monkeypatch.setattr(reclaim, "_TRIM", fake)
    return fake


def _rows(ns: str) -> list[IndexRow]:
    return [
        IndexRow(
            f"{ns}-{i}",
            ns,
            "episodic",
            1e9 + i,
            ("word", f"{ns}w{i}", f"t{i % 7}"),
            (f"{ns}E{i % 4}", f"E{i % 3}"),
            i + 1,
        )
        for i in range(ROWS)
    ]


class _Server:
    """A client's row source (Chroma): each read brings the namespace's vectors too."""

    complete = False

    def __init__(self) -> None:
        self.vectors: VectorCache | None = None

    def rows(self, namespace: str) -> list[IndexRow]:
        rows = _rows(namespace)
        if self.vectors is not None:
            block = NamespaceMatrix()
            block.put([r.id for r in rows], np.ones((len(rows), DIM), dtype=np.float32))
            self.vectors.restore(namespace, block)
        return rows

    def homes(self, ids: object) -> dict[str, tuple[str, int]]:
        return {}

    def has(self, namespace: str) -> bool:
        return True

    def namespaces(self) -> list[str]:
        return []

    def count(self) -> int:
        return 0


def _worker(fit: int) -> DerivedIndexes:
    """A client's indexes whose budgets hold ``fit`` namespaces (indexes and vectors)."""
    per_ns = sum(row_bytes(r) for r in _rows("x"))
    matrix = 32 * DIM * 4  # the matrix's capacity: 30 rows grow it to 32
    config = NoraxConfig(
        index_cache_mb=(fit + 0.5) * per_ns / 2**20, dense_cache_mb=(fit + 0.5) * matrix / 2**20
    )
    source = _Server()
    idx = DerivedIndexes(Sidecar(None), config, source)
    source.vectors = idx.vectors
    return idx


def test_a_trim_waits_for_enough_freed_bytes(trims: _Trims) -> None:
    rec = Reclaimer(threshold=1000)
    rec.freed(600)
    rec.freed(-5)  # nothing negative counts
    assert not rec.settle() and trims.calls == [] and rec.due == 600
    rec.freed(400)
    assert rec.settle() and trims.calls == [0] and rec.trims == 1
    assert rec.due == 0 and rec.cpu_s >= 0.0
    assert not rec.settle()  # nothing due since


def test_without_malloc_trim_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reclaim, "_TRIM", None)
    rec = Reclaimer(threshold=1)
    rec.freed(10**9)
    assert not rec.settle() and rec.trims == 0
    assert not reclaim.available()


def test_dropped_matrices_are_reported_freed() -> None:
    freed: list[int] = []
    cache = VectorCache(budget_bytes=2 * 16 * DIM * 4, freed=freed.append)
    for ns in "abc":
        block = NamespaceMatrix()
        block.put([f"{ns}{i}" for i in range(10)], np.ones((10, DIM), dtype=np.float32))
        cache.restore(ns, block)  # c pushes a out
    assert cache.loaded() == ["b", "c"] and freed == [16 * DIM * 4]
    cache.evict("b")
    assert freed == [16 * DIM * 4] * 2


def test_caches_stay_within_budget_over_many_namespaces(trims: _Trims) -> None:
    # A client worker serving 300 namespaces with budgets that hold 3: every structure
    # keyed by namespace holds the loaded ones only, and the accounted bytes stay in budget.
    idx = _worker(fit=3)
    for i in range(300):
        idx.ensure(f"n{i:03d}")
        assert idx.nbytes <= idx.budget and idx.vectors.nbytes <= idx.vectors.budget_bytes
    loaded = set(idx.loaded())
    assert len(loaded) == 3 and idx.evictions == 297
    assert set(idx.vectors.loaded()) <= loaded
    assert {ns for ns in idx.namespace_of.values()} == loaded
    assert set(idx._standing) <= loaded and set(idx._roles) <= loaded
    assert set(idx._bases) <= loaded and set(idx._snapped) <= loaded
    assert all(idx.bm25.count(f"n{i:03d}") == 0 for i in range(297))
    assert all(idx.temporal.count(f"n{i:03d}") == 0 for i in range(297))
    assert all(idx.graph.count(f"n{i:03d}") == 0 for i in range(297))
    # the reads' transients and the evictions were counted and trimmed in steps
    read = 300 * ROWS * READ_BYTES_PER_ROW
    evicted = 297 * (sum(row_bytes(r) for r in _rows("x")) + 32 * DIM * 4)
    assert len(trims.calls) == idx.reclaim.trims == (read + evicted) // TRIM_AFTER
    assert idx.reclaim.due < TRIM_AFTER
    idx.graph.close()


def test_memory_held_does_not_grow_with_the_namespaces_served(trims: _Trims) -> None:
    # Bytes actually allocated (tracemalloc, not RSS) after 50 and after 250 namespaces:
    # what the budgets do not hold must not pile up per namespace served.
    idx = _worker(fit=3)
    for i in range(50):
        idx.ensure(f"n{i:03d}")
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(50, 250):
            idx.ensure(f"n{i:03d}")
        gc.collect()
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    per_ns = sum(row_bytes(r) for r in _rows("x"))
    assert grown < 4 * per_ns  # 200 more namespaces served: about one namespace's worth
    idx.graph.close()


def test_a_c_library_without_malloc_trim_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    class _NoTrim:  # musl, macOS: no such symbol
        def __init__(self, name: object) -> None:
            pass

        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    monkeypatch.setattr(reclaim.ctypes, "CDLL", _NoTrim)
    assert reclaim._malloc_trim() is None

    def _windows(name: object) -> object:
        raise TypeError("expected a library name")

    monkeypatch.setattr(reclaim.ctypes, "CDLL", _windows)
    assert reclaim._malloc_trim() is None


@pytest.mark.skipif(not reclaim.available(), reason="this C library has no malloc_trim")
def test_the_real_trim_runs() -> None:
    rec = Reclaimer(threshold=1)
    junk = [bytearray(4096) for _ in range(2_000)]  # freed heap memory to give back
    rec.freed(sum(map(len, junk)))
    del junk
    assert rec.settle() and rec.trims == 1 and rec.cpu_s < 1.0
