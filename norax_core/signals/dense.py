"""Embedding similarity through Chroma's HNSW index (cosine space)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from norax_core.signals.base import Query

NAMESPACE_KEY = "norax_namespace"
EXACT_LIMIT = 256
"""A namespace (or filtered set) of at most this many memories is searched exactly, by its
stored vectors, instead of through Chroma's filtered HNSW search. That search walks one graph
built over every namespace and drops the nodes of others; with the near-duplicate vectors
agents store ("ok", "Thanks!", one preference phrased alike by many users) it often stops
before it reaches a small namespace's memories: with 53 shared phrasings over 3,000 tenants
(20,000 memories, the real model), 36-42 % of the tenants' searches missed some of their own
memories, and which ones depended on the other tenants. Exact search costs one ``get`` of at
most this many vectors, about what the HNSW query costs."""


def chroma_where(namespace: str, where: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Chroma filter for one namespace, and-ed with the user's filter if any."""
    ns = {NAMESPACE_KEY: namespace}
    return {"$and": [ns, dict(where)]} if where else ns


def cosine_to_unit(cos: np.ndarray) -> np.ndarray:
    """Cosine similarity clipped to [0, 1]: orthogonal or opposite meaning scores 0."""
    return np.clip(cos, 0.0, 1.0)


def similarity(embeddings: Any, query: np.ndarray) -> np.ndarray:
    """Clipped cosine of stored unit vectors with the query, in float64, row by row.

    Computed here rather than read from Chroma's distances, in the same way for every
    candidate, so that a memory's score depends on its vector and the query only: Chroma's
    distances and a float32 matrix product round differently (about one float32 ulp), and
    which one scored a memory depended on what the rest of the collection, other namespaces
    included, held. Found by the tenant-isolation property test.
    """
    mat = np.asarray(embeddings, dtype=np.float64).reshape(-1, query.shape[-1])
    return cosine_to_unit((mat * np.asarray(query, dtype=np.float64)).sum(axis=1))


class DenseSignal:
    """Cosine similarity between the query embedding and each memory's stored embedding.

    ``top`` asks Chroma's HNSW index with the namespace and metadata filter applied inside the
    query (filter before ranking). ``score`` reuses the last ``top`` answer and fetches the
    stored embeddings of any other candidate (one ``get``), so every candidate gets its real
    similarity.

    Namespaces of at most :data:`EXACT_LIMIT` memories are searched exactly instead (see
    there); larger ones still depend on HNSW's approximate, collection-wide graph.

    Args:
        collection: The Chroma collection.
        namespace_of: The namespace of a memory id as the derived indexes know it (``None``
            if unknown). With it, ``score`` fetches embeddings only, and Chroma's metadata
            only for ids it does not know (for example written by another process).
        members: The ids of a namespace when it holds at most :data:`EXACT_LIMIT` memories,
            else ``None``. Without it, every search goes through HNSW.
    """

    name = "dense"

    def __init__(
        self,
        collection: Any,
        namespace_of: Callable[[str], str | None] | None = None,
        members: Callable[[str], Collection[str] | None] | None = None,
    ) -> None:
        self._collection = collection
        self._namespace_of = namespace_of
        self._members = members
        self._last: tuple[Query, dict[str, float]] | None = None

    def top(self, query: Query, n: int) -> dict[str, float]:
        """Up to ``n`` nearest memories in the namespace (and filter)."""
        if query.embedding is None or n <= 0:
            return {}
        pool: Collection[str] | None = query.allowed
        if pool is None and self._members is not None:
            pool = self._members(query.namespace)
        if pool is not None and len(pool) <= EXACT_LIMIT:
            out = self._exact(query, sorted(pool), n)
        else:
            res = self._collection.query(
                query_embeddings=[query.embedding.tolist()],
                n_results=n,
                where=chroma_where(query.namespace, query.where),
                include=["embeddings"],
            )
            ids = res["ids"][0]
            sims = similarity(res["embeddings"][0], query.embedding)
            out = {mid: float(s) for mid, s in zip(ids, sims.tolist(), strict=True)}
            if query.allowed is not None:
                out = {m: s for m, s in out.items() if m in query.allowed}
        self._last = (query, out)
        return out

    def _exact(self, query: Query, pool: list[str], n: int) -> dict[str, float]:
        """The ``n`` most similar of ``pool`` (ids of the query's namespace), ties by id."""
        if not pool or query.embedding is None:
            return {}
        got = self._collection.get(ids=pool, include=["embeddings"])
        if got["embeddings"] is None or not len(got["ids"]):
            return {}
        sims = similarity(got["embeddings"], query.embedding).tolist()
        ranked = sorted(zip(got["ids"], sims, strict=True), key=lambda p: (-p[1], p[0]))
        return {mid: float(s) for mid, s in ranked[:n]}

    def score(self, query: Query, ids: Sequence[str]) -> dict[str, float]:
        """Similarity for each id; ids outside the namespace or filter score 0."""
        out = dict.fromkeys(ids, 0.0)
        if query.embedding is None or not ids:
            return out
        last = self._last
        known = last[1] if last is not None and _same_search(last[0], query) else {}
        missing = [m for m in ids if m not in known]
        for m in ids:
            if m in known:
                out[m] = known[m]
        if not missing:
            return out
        home = self._namespace_of
        spaces = {m: home(m) for m in missing} if home is not None else {}
        # Ids of another namespace (as far as the indexes know) score 0 without a fetch.
        fetch = [m for m in missing if spaces.get(m) in (None, query.namespace)]
        if not fetch:
            return out
        unknown = fetch if home is None else [m for m in fetch if spaces[m] is None]
        include = ["embeddings", "metadatas"] if unknown else ["embeddings"]
        got = self._collection.get(ids=fetch, include=include)
        emb = got["embeddings"]
        if emb is None or not len(got["ids"]):
            return out
        sims = similarity(emb, query.embedding)
        metas = got["metadatas"] if unknown else [None] * len(got["ids"])
        for mid, meta, s in zip(got["ids"], metas, sims.tolist(), strict=True):
            ns = spaces.get(mid) or (meta or {}).get(NAMESPACE_KEY)
            if ns == query.namespace and (query.allowed is None or mid in query.allowed):
                out[mid] = float(s)
        return out


def _same_search(a: Query, b: Query) -> bool:
    """Whether two queries ask the same dense search (entities may differ: dense ignores them).

    The engine asks Chroma before the query's entities are extracted, then scores with the
    complete query.
    """
    return a is b or (
        a.embedding is b.embedding
        and a.namespace == b.namespace
        and a.allowed is b.allowed
        and a.where == b.where
    )
