"""The in-process vector matrices and the exact top-n over them (pure logic, no store)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from norax_core.signals.dense import exact_top, similarity
from norax_core.signals.vectors import NamespaceMatrix, VectorCache


def reference(mat: np.ndarray, ids: list[str], q: np.ndarray, n: int) -> dict[str, float]:
    """Score every row, sort by (-score, id): the definition exact_top must match."""
    sims = similarity(mat, q).tolist()
    ranked = sorted(zip(ids, sims, strict=True), key=lambda p: (-p[1], p[0]))
    return dict(ranked[:n])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(0, 400),
    n=st.integers(1, 80),
    dim=st.sampled_from([3, 16, 384]),
    distinct=st.integers(1, 50),  # few distinct vectors: many exact ties
    unit=st.booleans(),
    shift=st.floats(-0.5, 0.5),  # pushes similarities below 0 (clipped: ties at 0)
)
def test_exact_top_equals_sorting_every_row(seed, m, n, dim, distinct, unit, shift):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(distinct, dim)).astype(np.float32)
    mat = base[rng.integers(0, distinct, size=m)] + np.float32(shift)
    if unit and m:
        mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    mat = mat.astype(np.float32)
    q = rng.normal(size=dim).astype(np.float32)
    q /= np.linalg.norm(q)
    ids = [f"m{i:04d}" for i in rng.permutation(m)]
    max_norm = float(np.linalg.norm(mat, axis=1).max()) if m else 0.0
    got = exact_top(mat, ids, q, n, max_norm)
    want = reference(mat, ids, q, n)
    assert list(got.items()) == list(want.items())


def test_exact_top_ties_at_one_and_zero_break_by_id():
    v = np.array([[1.0, 0.0]] * 3 + [[-1.0, 0.0]] * 3, dtype=np.float32)
    ids = ["c", "a", "b", "z", "y", "x"]
    got = exact_top(v, ids, np.array([1.0, 0.0], np.float32), 5, 1.0)
    assert list(got.items()) == [("a", 1.0), ("b", 1.0), ("c", 1.0), ("x", 0.0), ("y", 0.0)]


def test_matrix_rows_follow_puts_and_drops():
    rng = np.random.default_rng(0)
    block, ref = NamespaceMatrix(), {}
    for step in range(400):
        ids = [f"m{int(i)}" for i in rng.integers(0, 60, size=rng.integers(1, 6))]
        ids = list(dict.fromkeys(ids))
        if step % 3 == 2:
            block.drop(ids)
            for mid in ids:
                ref.pop(mid, None)
        else:
            vecs = rng.normal(size=(len(ids), 8)).astype(np.float32)
            block.put(ids, vecs)
            ref.update(zip(ids, vecs, strict=True))
        assert sorted(block.ids) == sorted(ref) and len(block) == len(ref)
        for mid, vec in ref.items():
            np.testing.assert_array_equal(block.vector(mid), vec)
        found, rows = block.rows(sorted(ref))
        assert found == sorted(ref)
        np.testing.assert_array_equal(block.matrix[rows], np.stack([ref[m] for m in found]))
    block.drop(list(ref))
    assert len(block) == 0 and block.nbytes <= 16 * 8 * 4  # memory given back


def test_stale_marks_and_lru_budget():
    def load(ns: str) -> NamespaceMatrix:
        block = NamespaceMatrix()
        block.put([f"{ns}{i}" for i in range(100)], np.ones((100, 10), np.float32))
        return block

    refreshed: list[tuple[str, list[str]]] = []

    def refresh(ns: str, block: NamespaceMatrix) -> None:
        refreshed.append((ns, sorted(block.stale)))
        block.stale.clear()

    block_bytes = load("x").nbytes
    cache = VectorCache(budget_bytes=2 * block_bytes)
    for ns in ("a", "b", "a", "c"):
        cache.block(ns, load, refresh)
    assert cache.loaded() == ["a", "c"]  # b was least recently used
    cache.mark_stale("b", ["b1"])  # not loaded: nothing to do
    cache.mark_stale("a", ["a1", "a2"])
    cache.drop("a", ["a3"])
    assert "a3" not in cache.get("a")
    cache.block("a", load, refresh)
    assert refreshed == [("a", ["a1", "a2"])]
    cache.clear()
    assert cache.loaded() == [] and cache.nbytes == 0


def test_matrix_refuses_vectors_of_another_dimension():
    block = NamespaceMatrix()
    block.put(["a"], np.ones((1, 4), np.float32))
    with pytest.raises(ValueError, match="dimension"):
        block.put(["b"], np.ones((1, 5), np.float32))
