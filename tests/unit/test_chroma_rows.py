"""A client reads a large namespace from Chroma in bounded parts, with nothing lost or mixed."""

from __future__ import annotations

import uuid
import weakref
from typing import Any

import chromadb
import numpy as np
import pytest

from norax_core.sidecar import IndexRow
from norax_core.signals.vectors import NamespaceMatrix
from norax_core.store import chroma as chroma_store
from norax_core.store.chroma import ChromaRows


class _Gets:
    """A Chroma collection that records how many records each ``get`` brought."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self.sizes: list[tuple[int, bool]] = []

    def get(self, **kwargs: Any) -> Any:
        got = self.collection.get(**kwargs)
        self.sizes.append((len(got["ids"]), "embeddings" in kwargs.get("include", [])))
        return got


def _row(mid: str, doc: str, meta: dict[str, Any]) -> IndexRow:
    return IndexRow(mid, meta["norax_namespace"], "episodic", 0.0, (doc,), (), 0)


@pytest.mark.parametrize("n", [5, 10, 25])
def test_a_large_namespace_is_read_in_parts(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chroma_store, "ROWS_PER_GET", 7)
    client = chromadb.EphemeralClient()
    col = client.create_collection(f"rows-{uuid.uuid4().hex[:8]}")
    try:
        rng = np.random.default_rng(0)
        ids = [f"m{i:03d}" for i in range(n + 6)]
        spaces = ["big" if i % 4 else "other" for i in range(n)] + ["other"] * 6
        col.add(
            ids=ids,
            documents=[f"doc {m}" for m in ids],
            embeddings=rng.normal(size=(len(ids), 4)).astype(np.float32),
            metadatas=[{"norax_namespace": ns} for ns in spaces],
        )
        whole = col.get(where={"norax_namespace": "big"}, include=["documents", "embeddings"])
        seen: dict[str, NamespaceMatrix] = {}
        gets = _Gets(col)
        rows = ChromaRows(gets, _row, lambda ns, block: seen.__setitem__(ns, block)).rows("big")
        assert [r.id for r in rows] == whole["ids"]  # all, once, in Chroma's order
        assert [r.tokens[0] for r in rows] == whole["documents"]
        assert {r.namespace for r in rows} == {"big"}
        got = seen["big"]
        assert got.ids == whole["ids"]
        np.testing.assert_allclose(got.matrix[: len(rows)], whole["embeddings"], rtol=1e-6)
        assert max(size for size, vectors in gets.sizes if vectors) <= 7
        assert len(gets.sizes) == (1 if len(whole["ids"]) < 7 else 2 + -(-len(rows) // 7) - 1)
    finally:
        client.delete_collection(col.name)


class _Response(dict):  # type: ignore[type-arg]
    """A ``get``'s answer that can be watched with a weak reference."""


class _Watched(_Gets):
    """Records, at each ``get``, how many earlier answers are still alive."""

    def __init__(self, collection: Any) -> None:
        super().__init__(collection)
        self.answers: list[weakref.ref[_Response]] = []
        self.alive: list[int] = []

    def get(self, **kwargs: Any) -> Any:
        self.alive.append(sum(ref() is not None for ref in self.answers))
        got = _Response(super().get(**kwargs))
        self.answers.append(weakref.ref(got))
        return got


def test_one_decoded_part_is_alive_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each part with its vectors decodes to about 100 KB per memory: the previous part must
    # be garbage before the next is read, or a read's peak doubles.
    monkeypatch.setattr(chroma_store, "ROWS_PER_GET", 4)
    client = chromadb.EphemeralClient()
    col = client.create_collection(f"rows-{uuid.uuid4().hex[:8]}")
    try:
        ids = [f"m{i:03d}" for i in range(13)]
        col.add(
            ids=ids,
            documents=[f"doc {m}" for m in ids],
            embeddings=np.ones((len(ids), 4), dtype=np.float32),
            metadatas=[{"norax_namespace": "big"}] * len(ids),
        )
        seen: dict[str, NamespaceMatrix] = {}
        gets = _Watched(col)
        rows = ChromaRows(gets, _row, lambda ns, block: seen.__setitem__(ns, block)).rows("big")
        assert sorted(r.id for r in rows) == ids and len(seen["big"]) == 13
        assert len(gets.alive) == 5 and gets.alive == [0] * 5  # first, ids, then 3 parts
    finally:
        client.delete_collection(col.name)
