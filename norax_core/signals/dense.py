"""Embedding similarity through Chroma's HNSW index (cosine space)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from norax_core.signals.base import Query

NAMESPACE_KEY = "norax_namespace"


def chroma_where(namespace: str, where: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Chroma filter for one namespace, and-ed with the user's filter if any."""
    ns = {NAMESPACE_KEY: namespace}
    return {"$and": [ns, dict(where)]} if where else ns


def cosine_to_unit(cos: np.ndarray) -> np.ndarray:
    """Cosine similarity clipped to [0, 1]: orthogonal or opposite meaning scores 0."""
    return np.clip(cos, 0.0, 1.0)


class DenseSignal:
    """Cosine similarity between the query embedding and each memory's stored embedding.

    ``top`` asks Chroma's HNSW index with the namespace and metadata filter applied inside the
    query (filter before ranking). ``score`` reuses the last ``top`` answer and fetches the
    stored embeddings of any other candidate, so every candidate gets its real similarity.
    """

    name = "dense"

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self._last: tuple[Query, dict[str, float]] | None = None

    def top(self, query: Query, n: int) -> dict[str, float]:
        """Up to ``n`` nearest memories in the namespace (and filter)."""
        if query.embedding is None or n <= 0:
            return {}
        res = self._collection.query(
            query_embeddings=[query.embedding.tolist()],
            n_results=n,
            where=chroma_where(query.namespace, query.where),
            include=["distances"],
        )
        ids = res["ids"][0]
        # Chroma's cosine distance is 1 - cos.
        sims = cosine_to_unit(1.0 - np.asarray(res["distances"][0], dtype=np.float64))
        out = {mid: float(s) for mid, s in zip(ids, sims.tolist(), strict=True)}
        if query.allowed is not None:
            out = {m: s for m, s in out.items() if m in query.allowed}
        self._last = (query, out)
        return out

    def score(self, query: Query, ids: Sequence[str]) -> dict[str, float]:
        """Similarity for each id; ids outside the namespace or filter score 0."""
        out = dict.fromkeys(ids, 0.0)
        if query.embedding is None or not ids:
            return out
        last = self._last
        known = last[1] if last is not None and last[0] is query else {}
        missing = [m for m in ids if m not in known]
        for m in ids:
            if m in known:
                out[m] = known[m]
        if missing:
            got = self._collection.get(ids=missing, include=["embeddings", "metadatas"])
            emb = got["embeddings"]
            if emb is not None and len(got["ids"]):
                mat = np.asarray(emb, dtype=np.float32)
                sims = cosine_to_unit(mat @ query.embedding.astype(np.float32))
                for mid, meta, s in zip(got["ids"], got["metadatas"], sims.tolist(), strict=True):
                    in_ns = (meta or {}).get(NAMESPACE_KEY) == query.namespace
                    if in_ns and (query.allowed is None or mid in query.allowed):
                        out[mid] = float(s)
        return out
