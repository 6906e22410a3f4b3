"""Scored candidate pools: query a store once, then rank it under many weightings.

A :class:`Pool` holds, for one query, every candidate any signal proposed with all four
signal scores, plus what is needed to re-derive other settings without querying again:
memory ages and kinds (temporal decay constants), and each signal's own ranking (candidate
pool sizes). :func:`rank_pool` then reproduces what :meth:`NoraxMemory.search` would return for
any :class:`Weights` (a test pins that), using the engine's own fusion functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from norax_core.config import NoraxConfig
from norax_core.engine import NoraxMemory
from norax_core.fusion import fuse, rank
from norax_core.latest import latest_wins, pair_cosines
from norax_core.models import DEFAULT_NAMESPACE, SIGNALS
from norax_core.retrieval import CONTEXT_SEEDS
from norax_core.signals.base import Query
from norax_core.signals.bm25 import BM25Index, BM25Signal
from norax_core.signals.context import neighbour_map, propagate
from norax_core.signals.temporal import SECONDS_PER_DAY, decay
from norax_core.tokenize import Tokenizer
from norax_core.weights import Weights

__all__ = [
    "ALL_SIGNALS",
    "check_store_params",
    "Pool",
    "PoolRequest",
    "add_bm25_variants",
    "build_pools",
    "pool_bm25",
    "pool_temporal",
    "proposals",
    "rank_pool",
]

ALL_SIGNALS = Weights(1.0, 1.0, 1.0, 1.0, name="all")
"""Every signal on: the widest candidate pool."""

_POSITIVE_ONLY = frozenset({"bm25", "graph"})
"""Signals that propose only memories they score above zero (BM25 needs a shared term, the
graph a shared entity); dense and temporal rank every memory."""


@dataclass(frozen=True)
class PoolRequest:
    """One query to pool, with its relevance judgements.

    Attributes:
        query: The query text.
        namespace: Namespace searched.
        now: Query time, epoch seconds.
        relevant: Ids of the relevant memories.
        qid: An id for reports.
        category: A label for per-category means.
        original: Ids of superseded information (knowledge updates), if any.
        updated: Ids of the newer information, if any.
    """

    query: str
    namespace: str | None
    now: float
    relevant: tuple[str, ...]
    qid: str = ""
    category: str = ""
    original: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()


@dataclass
class Pool:
    """One query's candidates and their signal scores.

    Attributes:
        request: The query and its judgements.
        ids: Candidate ids, sorted (the engine breaks score ties by id, so index order is
            tie order).
        scores: ``(4, n)`` signal scores in :data:`~norax_core.SIGNALS` order, as the store
            computed them with its own configuration.
        age_days: Age of each candidate at query time.
        kinds: Each candidate's memory kind.
        created_at: Creation time of each candidate, epoch seconds.
        size: How many memories the searched namespace holds (caps ``k``).
        config: The store configuration the scores were computed with.
        vectors: ``(n, dim)`` stored embeddings of the candidates (for latest wins), or
            ``None``; pools of one namespace with the same ids share one array.
    """

    request: PoolRequest
    ids: list[str]
    scores: np.ndarray
    age_days: np.ndarray
    kinds: list[str]
    created_at: np.ndarray
    size: int
    config: NoraxConfig
    vectors: np.ndarray | None = field(default=None, repr=False)
    bm25_rows: dict[tuple[float, float], np.ndarray] = field(default_factory=dict, repr=False)
    """BM25 scores of the candidates under other ``(k1, b)`` (see :func:`add_bm25_variants`)."""
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def index_of(self) -> dict[str, int]:
        """``{id: position among the candidates}``."""
        if not self._index:
            self._index = {m: i for i, m in enumerate(self.ids)}
        return self._index

    def index(self, mid: str) -> int | None:
        """Position of ``mid`` among the candidates, ``None`` if it is not one."""
        return self.index_of.get(mid)


def pool_bm25(pool: Pool, config: NoraxConfig) -> np.ndarray:
    """BM25 scores of the candidates under ``config``'s ``bm25_k1`` and ``bm25_b``."""
    key = (config.bm25_k1, config.bm25_b)
    if key == (pool.config.bm25_k1, pool.config.bm25_b):
        return pool.scores[SIGNALS.index("bm25")]
    try:
        return pool.bm25_rows[key]
    except KeyError:
        raise ValueError(
            f"the pool has no BM25 scores for k1={key[0]}, b={key[1]}: add them with "
            "add_bm25_variants"
        ) from None


def add_bm25_variants(
    pools: Sequence[Pool],
    documents: Mapping[str, Sequence[tuple[str, str]]],
    grid: Sequence[tuple[float, float]],
) -> None:
    """Score every pool's candidates with BM25 under each ``(k1, b)`` of ``grid``.

    ``documents`` maps a namespace to its ``(id, text)`` pairs in the order the store
    ingested them; the index is rebuilt here with the pools' tokenizer settings, so the
    scores equal what the store's BM25 signal gives with those parameters.
    """
    if not pools:
        return
    cfg = pools[0].config
    tokenizer = Tokenizer(stem=cfg.stem, stopwords=cfg.stopwords)
    index = BM25Index(k1=cfg.bm25_k1, b=cfg.bm25_b)
    for ns, docs in documents.items():
        for mid, text in docs:
            index.add(ns, mid, tokenizer(text))
    for k1, b in grid:
        signal = BM25Signal(index, tokenizer, k1=k1, b=b)
        for p in pools:
            ns = p.request.namespace or DEFAULT_NAMESPACE
            q = Query(p.request.query, ns, p.request.now, tokens=tuple(tokenizer(p.request.query)))
            got = signal.score(q, p.ids)
            p.bm25_rows[(k1, b)] = np.array([got.get(m, 0.0) for m in p.ids], dtype=np.float64)


def pool_temporal(pool: Pool, config: NoraxConfig) -> np.ndarray:
    """Temporal scores of the candidates under ``config``'s decay constants."""
    if dict(config.decay_days) == dict(pool.config.decay_days) and (
        config.default_decay_days == pool.config.default_decay_days
    ):
        return pool.scores[SIGNALS.index("temporal")]
    taus = np.array([config.tau_days(k) for k in pool.kinds], dtype=np.float64)
    return decay(pool.age_days, taus)


def proposals(signal: str, scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` candidates ``signal`` itself would propose, best first.

    Ties go to the smaller id (index), as in the engine's BM25 and graph ``top``.
    """
    order = np.lexsort((np.arange(scores.size), -scores))
    if signal in _POSITIVE_ONLY:
        order = order[scores[order] > 0]
    return order[:n]


def rank_pool(pool: Pool, weights: Weights, k: int, config: NoraxConfig | None = None) -> list[str]:
    """The ids :meth:`NoraxMemory.search` returns for this query with ``weights`` and ``k``.

    Args:
        pool: A pool built with every signal on and candidates at least as deep as the
            search's own pool.
        weights: Fusion weights; their ``params`` apply to ``config`` as in the engine.
        k: Results wanted (``len(pool.ids)`` ranks the whole pool).
        config: Engine configuration (default: the one the pool was scored with).
    """
    cfg = config or pool.config
    if weights.params:
        cfg = cfg.with_params(weights.params)
    check_store_params(pool.config, cfg)
    k = min(k, pool.size)
    if k == 0:
        return []
    scores = pool.scores.copy()
    scores[SIGNALS.index("temporal")] = pool_temporal(pool, cfg)
    scores[SIGNALS.index("bm25")] = pool_bm25(pool, cfg)
    n_pool = cfg.pool_size(k)
    weight = weights.as_dict()
    # As in the engine: beside other signals recency proposes a few of the newest memories,
    # on its own a full pool.
    recency_only = [s for s, v in weight.items() if v > 0] == ["temporal"]
    chosen: set[int] = set()
    for s, w in weight.items():
        n = cfg.recency_candidates if s == "temporal" and not recency_only else n_pool
        if w > 0 and n > 0:
            chosen.update(proposals(s, scores[SIGNALS.index(s)], n).tolist())
    cand = [pool.ids[i] for i in sorted(chosen)]
    table = {s: {pool.ids[i]: float(scores[j, i]) for i in chosen} for j, s in enumerate(SIGNALS)}
    fused = fuse(table, cand, weights)
    if cfg.context_on:
        fused = _context(pool, scores, cand, fused, weights, cfg, k)
    if cfg.latest_on:
        fused = _latest(pool, fused, cfg)
    return rank(fused, k)


def _latest(pool: Pool, fused: dict[str, float], cfg: NoraxConfig) -> dict[str, float]:
    """What :func:`~norax_core.retrieval.with_latest_wins` does, from the pool's stored vectors."""
    if pool.vectors is None:
        raise ValueError("latest wins needs pools with their vectors (build_pools keeps them)")
    top = rank(fused, cfg.latest_wins_depth)
    rows = [pool.index_of[m] for m in top]
    if len(rows) < 2:
        return fused
    return latest_wins(
        fused,
        top,
        pool.created_at[rows].tolist(),
        pair_cosines(pool.vectors[rows]),
        cfg.latest_wins_similarity,
        cfg.latest_wins_weight,
    )


def check_store_params(pooled: NoraxConfig, wanted: NoraxConfig) -> None:
    """Refuse to rank a pool for add-time parameters its store was not built with.

    Raises:
        ValueError: ``wanted.embed_context`` differs from the pooled store's.
    """
    if wanted.embed_context != pooled.embed_context:
        raise ValueError(
            f"the pools come from a store built with embed_context={pooled.embed_context}, "
            f"the weights want {wanted.embed_context}: pool a store built with it"
        )


def timeline(pool: Pool) -> tuple[list[str], list[float]]:
    """The pool's memories in time order, ties by id (the engine's neighbour order)."""
    order = sorted(range(len(pool.ids)), key=lambda i: (pool.created_at[i], pool.ids[i]))
    return [pool.ids[i] for i in order], [float(pool.created_at[i]) for i in order]


def _context(
    pool: Pool,
    scores: np.ndarray,
    cand: list[str],
    fused: dict[str, float],
    weights: Weights,
    cfg: NoraxConfig,
    k: int,
) -> dict[str, float]:
    """What :func:`~norax_core.retrieval.with_context` does, on a pool of the whole namespace.

    Pools never carry a ``where`` filter, so every memory of the namespace may be a neighbour.
    """
    if len(pool.ids) < pool.size:
        raise ValueError("context propagation needs pools that hold the whole namespace")
    ordered, times = timeline(pool)
    window, gap = cfg.context_window, cfg.context_gap_seconds
    seeds = rank(fused, CONTEXT_SEEDS * k)
    near = neighbour_map(ordered, times, window, gap, wanted=seeds)
    known = set(cand)
    extra = [m for m in dict.fromkeys(n for s in seeds for n in near[s]) if m not in known]
    if extra:
        cand = cand + extra
        rows = [pool.index(m) for m in cand]
        table = {
            s: {m: float(scores[j, r]) for m, r in zip(cand, rows, strict=True) if r is not None}
            for j, s in enumerate(SIGNALS)
        }
        fused = fuse(table, cand, weights)
    return propagate(
        fused, neighbour_map(ordered, times, window, gap, wanted=cand), cfg.context_weight
    )


def build_pools(
    memory: NoraxMemory,
    requests: Sequence[PoolRequest],
    *,
    depth: int | None = None,
    recency_depth: int = 50,
    progress: Callable[[int], None] | None = None,
) -> list[Pool]:
    """Query ``memory`` once per request with every signal on and keep the scored pools.

    Args:
        memory: The store.
        requests: Queries with their judgements.
        depth: Candidates each signal proposes (default: the whole namespace, so any
            later pool size or feature can be evaluated exactly).
        recency_depth: Candidates the temporal signal proposes.
        progress: Called with 1 after each query.
    """
    every = Weights(1.0, 1.0, 1.0, 1.0, params={"recency_candidates": recency_depth}, name="all")
    meta: dict[str, tuple[float, str]] = {}
    shared: dict[tuple[str, ...], np.ndarray] = {}
    out: list[Pool] = []
    for req in requests:
        size = memory.count(req.namespace)
        cands = memory.candidates(
            req.query,
            k=max(size, 1),
            namespace=req.namespace,
            now=req.now,
            weights=every,
            pool=max(depth or size, 1),
        )
        ids = sorted(cands.ids)
        missing = [m for m in ids if m not in meta]
        if missing:
            for m in memory.get(missing):
                meta[m.id] = (m.created_at.timestamp(), m.kind)
        scores = np.array(
            [[cands.signals[s].get(m, 0.0) for m in ids] for s in SIGNALS], dtype=np.float64
        ).reshape(len(SIGNALS), len(ids))
        created = np.array([meta[m][0] for m in ids], dtype=np.float64)
        key = tuple(ids)
        if key not in shared:
            got = memory.embeddings(ids)
            shared[key] = np.stack([got[m] for m in ids]) if ids else np.zeros((0, 0), np.float32)
        out.append(
            Pool(
                request=req,
                ids=ids,
                scores=scores,
                age_days=(req.now - created) / SECONDS_PER_DAY,
                kinds=[meta[m][1] for m in ids],
                created_at=created,
                size=size,
                config=replace(memory.config, embed_context=memory.add_config.embed_context),
                vectors=shared[key],
            )
        )
        if progress:
            progress(1)
    return out
