"""Scored candidate pools: query a store once, then rank it under many weightings.

A :class:`Pool` holds, for one query, every memory of the searched namespace with all four
signal scores, plus what is needed to re-derive other settings without querying again:
memory ages and kinds (temporal decay constants), creation times, words.
:func:`pool_table` turns pools into a :class:`~norax_core.ranking.Table` (each signal's
proposals are its own ranking of the whole namespace, as its ``top`` gives them), and
:func:`~norax_core.ranking.rank`, the function ``search`` calls, ranks it. :func:`rank_pool`
is that call for one pool; a test checks it against ``search`` on full-size conversations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from norax_core.config import NoraxConfig
from norax_core.engine import NoraxMemory
from norax_core.kinds import STANDING
from norax_core.latest import Statements
from norax_core.models import DEFAULT_NAMESPACE, SIGNALS
from norax_core.query import QueryPlan, plan_query
from norax_core.ranking import Plan, Table, rank, signal_ranks
from norax_core.retrieval import BridgeSource, bridge_source
from norax_core.signals.base import Query
from norax_core.signals.bm25 import BM25Index, BM25Signal
from norax_core.signals.context import neighbour_map, session_numbers, session_positions
from norax_core.signals.temporal import SECONDS_PER_DAY, decay
from norax_core.stages.supersede import link_slots
from norax_core.tokenize import Tokenizer
from norax_core.weights import Weights

__all__ = [
    "ALL_SIGNALS",
    "check_store_params",
    "Pool",
    "PoolRequest",
    "PoolWords",
    "add_bm25_variants",
    "build_pools",
    "pool_bm25",
    "pool_table",
    "pool_temporal",
    "plan_groups",
    "rank_pool",
]

ALL_SIGNALS = Weights(1.0, 1.0, 1.0, 1.0, name="all")
"""Every signal on: the widest candidate pool."""


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


@dataclass(frozen=True)
class PoolWords:
    """A pool's words (see :class:`Pool`); pools of one namespace share ``rows``."""

    query: frozenset[str]
    rows: Sequence[frozenset[str]]
    cues: frozenset[str]
    change: frozenset[str]
    now: frozenset[str] = frozenset()
    shift: frozenset[str] = frozenset()


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
        bridge: The bridge step's view of the namespace and query (``None``: no entity graph).
        newer: The memories superseding each candidate (:mod:`norax_core.supersession`).
        roles: Each candidate's ``role`` metadata (``None`` where it has none).
        inferred: Each candidate's inferred kind (:mod:`norax_core.kinds`; the lane).
        words: Each candidate's tokens and the query's, with the store's update cues
            (latest wins' attribute rule, :class:`~norax_core.latest.Statements`).
    """

    request: PoolRequest
    ids: list[str]
    scores: np.ndarray
    age_days: np.ndarray
    kinds: list[str]
    created_at: np.ndarray
    size: int
    config: NoraxConfig
    bridge: BridgeSource | None = field(default=None, repr=False)
    newer: Mapping[str, tuple[str, ...]] | None = field(default=None, repr=False)
    roles: Sequence[object] | None = field(default=None, repr=False)
    inferred: Sequence[str] | None = field(default=None, repr=False)
    words: PoolWords | None = field(default=None, repr=False)
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

    @cached_property
    def plan(self) -> QueryPlan:
        """The query's reading, as :meth:`NoraxMemory.search` makes it."""
        return plan_query(self.request.query, self.request.now)


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


def rank_pool(pool: Pool, weights: Weights, k: int, config: NoraxConfig | None = None) -> list[str]:
    """The ids :meth:`NoraxMemory.search` returns for this query with ``weights`` and ``k``.

    Args:
        pool: A pool built with every signal on, holding the whole namespace.
        weights: Fusion weights; the query's intent selects them and their ``params`` apply
            to ``config`` as in the engine.
        k: Results wanted (``pool.size`` ranks every candidate).
        config: Engine configuration (default: the one the pool was scored with).
    """
    ((_, table, plan),) = plan_groups([pool], weights, config)
    return rank(table, plan, k).ids(0)


def plan_groups(
    pools: Sequence[Pool], weights: Weights, config: NoraxConfig | None = None
) -> list[tuple[list[int], Table, Plan]]:
    """The pools grouped by the weights their query's intent selects, ready to rank.

    Queries whose intent has an override in ``weights`` (:meth:`Weights.for_intent`) form
    one group per intent, the rest one group under the global weights; each group comes with
    its :func:`pool_table` (scored under the chosen weights' ``params``) and its
    :meth:`Plan.of <norax_core.ranking.Plan.of>`, so ``rank(table, plan, k)`` ranks each pool
    as :meth:`NoraxMemory.search` ranks its query.

    Returns:
        ``[(pool indices, table, plan)]``, the global group first.
    """
    if not pools:
        raise ValueError("no pools to rank")
    base = config or pools[0].config
    groups: dict[str | None, list[int]] = {}
    for i, p in enumerate(pools):
        intent = p.plan.intent.value
        groups.setdefault(intent if intent in weights.intents else None, []).append(i)
    out = []
    for key in sorted(groups, key=lambda g: "" if g is None else g):
        chosen = weights.for_intent(key)
        idx = groups[key]
        table = pool_table([pools[i] for i in idx], chosen.applied(base))
        out.append((idx, table, Plan.of(chosen, base)))
    return out


def pool_table(pools: Sequence[Pool], config: NoraxConfig | None = None) -> Table:
    """The pools as one :class:`~norax_core.ranking.Table`, scored under ``config``.

    Temporal scores follow ``config``'s decay constants and BM25 its ``k1`` and ``b`` (see
    :func:`add_bm25_variants`); each signal's proposals are its own ranking of the pool.

    Raises:
        ValueError: ``config`` wants add-time parameters the pools' store was not built with.
    """
    if not pools:
        raise ValueError("no pools to rank")
    cfg = config or pools[0].config
    for p in pools:
        check_store_params(p.config, cfg)
    q, n = len(pools), max(max(len(p.ids) for p in pools), 1)
    scores = np.zeros((len(SIGNALS), q, n))
    valid = np.zeros((q, n), dtype=bool)
    created = np.zeros((q, n))
    width = max((len(k) for p in pools for k in p.kinds), default=1)
    kinds = np.full((q, n), "", dtype=f"<U{max(width, 1)}")
    for i, p in enumerate(pools):
        m = len(p.ids)
        kinds[i, :m] = p.kinds
        scores[:, i, :m] = p.scores
        scores[SIGNALS.index("temporal"), i, :m] = pool_temporal(p, cfg)
        scores[SIGNALS.index("bm25"), i, :m] = pool_bm25(p, cfg)
        valid[i, :m] = True
        created[i, :m] = p.created_at
    proposed = np.stack([signal_ranks(scores[j], valid, None, s) for j, s in enumerate(SIGNALS)])
    return Table(
        scores=scores,
        proposed=proposed,
        valid=valid,
        tie=None,  # pool ids are sorted
        size=np.array([p.size for p in pools], dtype=np.int64),
        created=created,
        neighbours=PoolNeighbours(pools, n),
        ids=[p.ids for p in pools],
        plans=[p.plan for p in pools],
        entities=[None if p.bridge is None else p.bridge.at(p.ids, n) for p in pools],
        sessions=PoolSessions(pools, n),
        positions=PoolPositions(pools, n),
        users=lambda wanted=None: np.array(
            [
                [r == "user" for r in (p.roles or ())] + [False] * (n - len(p.roles or ()))
                for p in pools
            ],
            dtype=bool,
        ),
        newer=link_slots([p.index_of for p in pools], [p.newer or {} for p in pools], n),
        kinds=kinds,
        statements=_statements(pools, n),
        standing=np.array(
            [
                [k in STANDING for k in (p.inferred or ())] + [False] * (n - len(p.inferred or ()))
                for p in pools
            ],
            dtype=bool,
        ),
    )


def _statements(pools: Sequence[Pool], n: int) -> Statements | None:
    """The pools' words as a table's statements (``None`` if a pool lacks them)."""
    got = [p.words for p in pools]
    if any(w is None for w in got):
        return None
    words = [w for w in got if w is not None]

    def replies(wanted: np.ndarray | None = None) -> np.ndarray:  # every row's
        out = np.zeros((len(pools), n), dtype=bool)
        for i, p in enumerate(pools):
            out[i, : len(p.ids)] = [r == "assistant" for r in (p.roles or [None] * len(p.ids))]
        return out

    return Statements(
        query=[w.query for w in words],
        words=lambda i, rows: [words[i].rows[r] for r in rows],
        replies=replies,
        cues=words[0].cues,
        change=words[0].change,
        now=words[0].now,
        shift=words[0].shift,
    )


class PoolNeighbours:
    """Neighbour slots of pools that hold whole namespaces (cached per window and gap)."""

    def __init__(self, pools: Sequence[Pool], n: int) -> None:
        self.pools, self.n = pools, n
        self._cache: dict[tuple[int, float], list[np.ndarray]] = {}

    def __call__(self, window: int, gap: float) -> list[np.ndarray]:
        """See :data:`~norax_core.ranking.Neighbours`."""
        hit = self._cache.get((window, gap))
        if hit is not None:
            return hit
        if any(len(p.ids) < p.size for p in self.pools):
            raise ValueError("context propagation needs pools that hold the whole namespace")
        out = np.full((2 * window, len(self.pools), self.n), self.n, dtype=np.int64)
        for i, p in enumerate(self.pools):
            ordered, times = timeline(p)
            row = p.index_of
            for m, near in neighbour_map(ordered, times, window, gap).items():
                out[: len(near), i, row[m]] = [row[x] for x in near]
        self._cache[(window, gap)] = slots = list(out)
        return slots


class _PoolTimelines:
    """Per memory of whole-namespace pools, a number from its timeline split at a gap.

    Cached per gap; subclasses say which number (``per_timeline``).
    """

    per_timeline: Callable[[Sequence[float], float], Sequence[int]]
    needs: str

    def __init__(self, pools: Sequence[Pool], n: int) -> None:
        self.pools, self.n = pools, n
        self._cache: dict[float, np.ndarray] = {}

    def __call__(self, gap: float, wanted: np.ndarray | None = None) -> np.ndarray:
        hit = self._cache.get(gap)  # every row's, whatever ``wanted``
        if hit is not None:
            return hit
        if any(len(p.ids) < p.size for p in self.pools):
            raise ValueError(f"{self.needs} needs pools that hold the whole namespace")
        out = np.full((len(self.pools), self.n), -1, dtype=np.int64)
        for i, p in enumerate(self.pools):
            ordered, times = timeline(p)
            row = p.index_of
            out[i, [row[m] for m in ordered]] = type(self).per_timeline(times, gap)
        self._cache[gap] = out
        return out


class PoolSessions(_PoolTimelines):
    """Session numbers (see :data:`~norax_core.ranking.Sessions`)."""

    per_timeline = staticmethod(session_numbers)
    needs = "coverage"


class PoolPositions(_PoolTimelines):
    """Positions in their session (see :data:`~norax_core.ranking.Positions`)."""

    per_timeline = staticmethod(session_positions)
    needs = "the opener boost"


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
    meta: dict[str, tuple[float, str, object, str]] = {}
    tokens: dict[tuple[str, ...], list[frozenset[str]]] = {}
    links = memory.store.indexes.supersede
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
                meta[m.id] = (
                    m.created_at.timestamp(),
                    m.kind,
                    m.metadata.get("role"),
                    m.inferred_kind,
                )
        scores = np.array(
            [[cands.signals[s].get(m, 0.0) for m in ids] for s in SIGNALS], dtype=np.float64
        ).reshape(len(SIGNALS), len(ids))
        created = np.array([meta[m][0] for m in ids], dtype=np.float64)
        key = tuple(ids)
        with memory.store.lock:  # the bridge view reads the store's entity graph
            if key not in tokens:
                tokens[key] = links.words(cands.query.namespace, ids)
            words = PoolWords(
                frozenset(memory.store.indexes.tokenizer(req.query)),
                tokens[key],
                links.cues,
                links.outright,
                links.now_words,
                links.shifts,
            )
            pool = Pool(
                request=req,
                ids=ids,
                scores=scores,
                age_days=(req.now - created) / SECONDS_PER_DAY,
                kinds=[meta[m][1] for m in ids],
                created_at=created,
                size=size,
                config=replace(memory.config, embed_context=memory.add_config.embed_context),
                bridge=bridge_source(memory.store.indexes, cands.query),
                newer=memory.store.superseding(cands.query.namespace, ids),
                roles=[meta[m][2] for m in ids],
                inferred=[meta[m][3] for m in ids],
                words=words,
            )
        out.append(pool)
        if progress:
            progress(1)
    return out
