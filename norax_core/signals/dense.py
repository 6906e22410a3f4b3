"""Embedding similarity (cosine), exact over each namespace's own vectors."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from itertools import filterfalse
from typing import Any

import numpy as np

from norax_core.signals.base import Query
from norax_core.signals.vectors import (
    NAMESPACE_KEY,
    NamespaceMatrix,
    VectorCache,
    fetch_into,
    load_namespace,
)

SMALL_FILTER = 256
"""In a namespace too large for an in-process matrix (``NoraxConfig.dense_exact_limit``), a
filter that leaves at most this many memories is still searched exactly, from their stored
vectors (one ``get``), instead of through Chroma's filtered HNSW search. That search walks one
graph built over every namespace and drops the nodes of others; with the near-duplicate
vectors agents store ("ok", "Thanks!", one preference phrased alike by many users) it often
stops before it reaches a small set's memories: with 53 shared phrasings over 3,000 tenants
(20,000 memories, the real model), 36-42 % of the tenants' searches missed some of their own
memories, and which ones depended on the other tenants."""


def chroma_where(namespace: str, where: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Chroma filter for one namespace, and-ed with the user's filter if any."""
    ns = {NAMESPACE_KEY: namespace}
    return {"$and": [ns, dict(where)]} if where else ns


def cosine_to_unit(cos: np.ndarray) -> np.ndarray:
    """Cosine similarity clipped to [0, 1]: orthogonal or opposite meaning scores 0."""
    out = np.maximum(cos, 0.0)  # np.clip's values, without its wrapper's cost
    return np.minimum(out, 1.0, out=out)  # type: ignore[no-any-return]


def similarity(embeddings: Any, query: np.ndarray) -> np.ndarray:
    """Clipped cosine of stored unit vectors with the query, in float64, row by row.

    Computed here rather than read from Chroma's distances, in the same way for every
    candidate, so that a memory's score depends on its vector and the query only: Chroma's
    distances and a float32 matrix product round differently (about one float32 ulp), and
    which one scored a memory depended on what the rest of the collection, other namespaces
    included, held. Found by the tenant-isolation property test.
    """
    # Chroma stores float32; a server sends each as its shortest decimal, which parses to a
    # nearby float64: rounding to float32 first recovers the stored value, so the score is
    # the same over a server, embedded, or from an in-process matrix.
    mat = np.asarray(embeddings, dtype=np.float32).reshape(-1, query.shape[-1])
    # float64 products of the float32 values (each widened exactly), in one pass
    prod = np.multiply(mat, np.asarray(query, dtype=np.float64))
    return cosine_to_unit(np.add.reduce(prod, axis=1))  # what .sum(axis=1) calls


def float32_error(dim: int, max_norm: float, query_norm: float) -> float:
    """A bound on how far a float32 dot product of two ``dim``-vectors is from the exact one.

    With unit roundoff ``u = 2**-24``, any summation order gives
    ``|fl(x . y) - x . y| <= dim * u * sum_i |x_i y_i| <= dim * u * |x| |y|`` (Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1); rounding the
    query to float32 adds at most ``u * |x| |y|``. Doubled for safety, plus a margin for the
    float64 reference's own rounding.
    """
    return 2.0 * (dim + 1) * 2.0**-24 * max_norm * query_norm + 1e-9


def exact_top(
    matrix: np.ndarray, ids: Sequence[str], query: np.ndarray, n: int, max_norm: float
) -> dict[str, float]:
    """The ``n`` rows most similar to ``query`` by :func:`similarity`, ties broken by id.

    Exactly what scoring every row with :func:`similarity` and sorting by ``(-score, id)``
    gives, at the cost of one float32 matrix-vector product: that product's error bound
    (:func:`float32_error`) brackets each row's score, rows whose upper bound cannot reach
    the ``n``-th best lower bound are left out, and only the remaining few (about ``n``) are
    scored in float64 and sorted.

    Args:
        matrix: One vector per row (float32).
        ids: The id of each row.
        query: The query vector.
        n: How many to return.
        max_norm: An upper bound of the rows' norms.

    Returns:
        Id to score, best first.
    """
    m = len(ids)
    if m == 0 or n <= 0:
        return {}
    q32 = np.asarray(query, dtype=np.float32)
    approx = matrix @ q32
    q64 = np.asarray(query, dtype=np.float64)
    # |q| only widens the bound: a dot product's rounding is far below its doubling margin.
    tol = float32_error(matrix.shape[1], max_norm, math.sqrt(float(q64 @ q64)))
    # The n-th best (clipped) lower bound: a row whose upper bound is below it cannot be in
    # the top n, nor tie with it.
    floor = 0.0
    if m > n:
        floor = min(max(float(np.partition(approx, m - n)[m - n]) - tol, 0.0), 1.0)
    upper = approx + tol
    pick = np.flatnonzero(upper >= floor) if floor > 0.0 else np.flatnonzero(upper > 0.0)
    exact = similarity(matrix[pick], q64).tolist()
    # (-score, id) pairs sort best first, ties by id: no key function to call per pair.
    ranked = sorted([(-s, ids[i]) for i, s in zip(pick.tolist(), exact, strict=True) if s > 0.0])
    del ranked[n:]
    if len(ranked) < n:  # the rest score 0 (clipped): the smallest ids among them
        positive = {mid for _, mid in ranked}
        zeros = heapq.nsmallest(n - len(ranked), (i for i in ids if i not in positive))
        ranked += [(-0.0, mid) for mid in zeros]
    return {mid: -s for s, mid in ranked}


class DenseSignal:
    """Cosine similarity between the query embedding and each memory's stored embedding.

    A namespace of at most ``exact_limit`` memories is ranked exactly over its own vectors,
    held in process as one float32 matrix (:mod:`norax_core.signals.vectors`, loaded from
    Chroma on first use and kept in step by the store's writes), with the metadata filter
    applied to the rows before ranking. Its answer depends on that namespace's memories
    only: not on other tenants, not on an approximate index. A larger namespace is searched
    through Chroma's filtered HNSW index, approximate and built over every namespace (a
    filter that leaves at most :data:`SMALL_FILTER` of its memories is still exact).

    Every score is :func:`similarity` of the stored vector (float64), however the memory was
    found. ``score`` reuses the last ``top`` answer and computes the others.

    Args:
        collection: The Chroma collection.
        namespace_of: The namespace of a memory id as the derived indexes know it (``None``
            if unknown). With it, ``score`` fetches embeddings only, and Chroma's metadata
            only for ids it does not know (for example written by another process).
        cache: Returns the store's :class:`~norax_core.signals.vectors.VectorCache` (the
            derived indexes', which a repair may replace). ``None``: always HNSW.
        size: How many memories the derived indexes hold in a namespace.
        members: The ids the derived indexes hold in a namespace.
        exact_limit: Namespaces above this many memories go through HNSW.
        on_load: Told of each matrix read from Chroma (from the search's thread).
    """

    name = "dense"

    def __init__(
        self,
        collection: Any,
        namespace_of: Callable[[str], str | None] | None = None,
        cache: Callable[[], VectorCache] | None = None,
        size: Callable[[str], int] | None = None,
        members: Callable[[str], Collection[str]] | None = None,
        exact_limit: int = 0,
        on_load: Callable[[str, NamespaceMatrix], None] | None = None,
    ) -> None:
        self._collection = collection
        self._on_load = on_load
        self._namespace_of = namespace_of
        self._cache = cache
        self._size = size
        self._members = members
        self.exact_limit = exact_limit
        self._last: tuple[Query, dict[str, float]] | None = None

    # -- the namespace's matrix -----------------------------------------------------------

    def _exact(self, namespace: str) -> VectorCache | None:
        """The cache, when ``namespace`` is searched from its matrix."""
        cache, size = self._cache, self._size
        if cache is None or size is None or self._members is None or self._namespace_of is None:
            return None
        return cache() if size(namespace) <= self.exact_limit else None

    def exact(self, namespace: str) -> bool:
        """Whether ``namespace`` is searched from its matrix (in this thread, no hand-off)."""
        return self._exact(namespace) is not None

    def _block(self, cache: VectorCache, namespace: str) -> NamespaceMatrix:
        """The namespace's matrix, up to date (the caller holds ``cache.lock``)."""
        home, members = self._namespace_of, self._members
        if home is None or members is None:  # see _exact
            raise RuntimeError("the dense signal has no derived indexes to follow")

        def member(mid: str) -> bool:
            return home(mid) == namespace

        def load(ns: str) -> NamespaceMatrix:
            block = load_namespace(self._collection, ns, member, members(ns))
            if self._on_load is not None:
                self._on_load(ns, block)
            return block

        def refresh(ns: str, block: NamespaceMatrix) -> None:
            fetch_into(self._collection, block, sorted(block.stale), member)

        return cache.block(namespace, load, refresh)

    # -- the signal -----------------------------------------------------------------------

    def top(self, query: Query, n: int) -> dict[str, float]:
        """Up to ``n`` nearest memories in the namespace (and filter)."""
        if query.embedding is None or n <= 0:
            return {}
        cache = self._exact(query.namespace)
        if cache is not None:
            with cache.lock:
                block = self._block(cache, query.namespace)
                if query.allowed is None:
                    mat, ids = block.matrix, block.ids
                else:
                    ids, rows = block.rows(query.allowed)  # row order does not matter
                    mat = block.matrix[rows]
                out = exact_top(mat, ids, query.embedding, n, block.max_norm)
        elif query.allowed is not None and len(query.allowed) <= SMALL_FILTER:
            out = self._get_top(query, sorted(query.allowed), n)
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

    def _get_top(self, query: Query, pool: list[str], n: int) -> dict[str, float]:
        """The ``n`` most similar of ``pool`` (ids of the query's namespace), by one ``get``."""
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
        hits = list(filter(known.__contains__, ids)) if known else []
        missing: Sequence[str] = ids
        if hits:
            out.update(zip(hits, map(known.__getitem__, hits), strict=True))
            missing = list(filterfalse(known.__contains__, ids))
        if not missing:
            return out
        cache = self._exact(query.namespace)
        if cache is not None:
            allowed = query.allowed
            with cache.lock:
                block = self._block(cache, query.namespace)
                found, rows = block.rows(
                    missing if allowed is None else [m for m in missing if m in allowed]
                )
                sims = similarity(block.matrix[rows], query.embedding).tolist()
            out.update(zip(found, sims, strict=True))
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

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each of ``ids`` that exists (float32).

        From the loaded matrices where they hold the id (and it is not stale), else from
        Chroma (one ``get``).
        """
        out: dict[str, np.ndarray] = {}
        home, cache = self._namespace_of, self._cache() if self._cache is not None else None
        if cache is not None and home is not None:
            with cache.lock:
                for mid in ids:
                    ns = home(mid)
                    block = cache.get(ns) if ns is not None else None
                    if block is not None and mid in block and mid not in block.stale:
                        out[mid] = block.vector(mid)
        rest = [m for m in ids if m not in out]
        if rest:
            got = self._collection.get(ids=rest, include=["embeddings"])
            if got["embeddings"] is not None:
                for mid, vec in zip(got["ids"], got["embeddings"], strict=True):
                    out[mid] = np.asarray(vec, dtype=np.float32)
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
