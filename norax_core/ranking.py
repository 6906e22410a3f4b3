"""Ranking: the one function that turns scored candidates into results.

:func:`rank` is what :meth:`NoraxMemory.search <norax_core.NoraxMemory.search>`,
``norax bench`` and ``norax fit`` all call. Its input is a :class:`Table`: for one query or a
batch of queries, every candidate's four signal scores, each signal's own ranking of them
(which decides who is a candidate), and what context propagation and latest wins need
(neighbours in the session timeline, creation times, words). Its output is a
:class:`Ranking`: the fused score of every candidate after each stage, so every result can
say what moved it. A search builds a table of one query from the store's signals; the
benchmark builds a batch from pools that hold every memory of a namespace.

The stages, in order (each one a plain array operation over the whole batch):

1. **candidates**: each signal with a positive weight proposes its best ``pool`` memories
   (``max(pool_min, pool_factor * k)``; recency only ``recency_candidates`` unless it is the
   only signal);
2. **fusion**: weighted sum of the normalised scores, or weighted reciprocal rank fusion;
3. **context** (:mod:`norax_core.signals.context`): the neighbours of the best
   ``CONTEXT_SEEDS * k`` candidates join, and every candidate borrows from its best neighbour;
4. **bridges** (:mod:`norax_core.stages.bridges`): a personalised PageRank over the
   namespace's memories and entities, seeded by the best ``bridge_seeds`` candidates and the
   query's entities; the memories it reaches most join and every candidate gains from it;
5. **period** (:mod:`norax_core.stages.period`): when the query names a period, candidates
   created inside it (or just outside) gain a share of their score;
6. **latest wins** (:mod:`norax_core.latest`): among the best ``latest_wins_depth``, a newer
   memory that states the same attribute of the same subject as an older, better one passes
   it;
7. **supersession** (:mod:`norax_core.stages.supersede`): memories linked at write time as
   superseding one of the best ``supersede_depth`` candidates pass it (and join them);
8. **turns** (:mod:`norax_core.stages.turns`): memories that open their session, and the
   user's own when the query asks what the user said, gain a share of their score; for a
   query asking for an order, each session's ``j``-th best keeps ``(1 - session_spread) ** j``
   of its score (results spread over the sessions);
9. **exchange** (:mod:`norax_core.stages.exchange`): the reply to a user message among the
   best ``exchange_depth`` (or the user message a reply answers) joins right after it;
10. **lane** (:mod:`norax_core.stages.lane`): up to ``lane_slots`` standing instructions
   and preferences that match the query (above ``lane_similarity``, or leading the other
   standing memories by ``lane_margin``) take reserved places in the top k, from
   ``lane_place`` on (0: the last places);
11. **order**: best first, ties to the smaller id.

New stages belong here too, as fields of :class:`Plan` and steps of :func:`rank`, so that
search and the benchmarks cannot drift apart. Stages that did not win on held-out data were
removed (the adaptive mix, session coverage, freshness, latest wins' cosine rule; README,
component table).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

import numpy as np

from norax_core.config import NoraxConfig
from norax_core.models import SIGNALS
from norax_core.stages import exchange, lane, period, supersede, turns
from norax_core.weights import FusionMethod, Weights, shares

if TYPE_CHECKING:
    from norax_core.latest import Statements
    from norax_core.query import Intent, QueryPlan
    from norax_core.stages.bridges import BridgeInput

__all__ = [
    "CONTEXT_SEEDS",
    "Extend",
    "STAGES",
    "NEVER",
    "POSITIVE_ONLY",
    "Plan",
    "Ranking",
    "Table",
    "proposal_sizes",
    "rank",
    "signal_ranks",
]

CONTEXT_SEEDS = 2
"""With context propagation, the neighbours of the best ``CONTEXT_SEEDS * k`` candidates are
scored and join the pool (a memory's context can lift it into the top k)."""
NEVER = np.iinfo(np.int32).max
"""The position of a memory its signal did not propose."""
POSITIVE_ONLY = frozenset({"bm25", "graph"})
"""Signals that propose only memories they score above zero (BM25 needs a shared term, the
graph a shared entity); dense and temporal rank every memory."""
STAGES = (
    "context",
    "bridges",
    "period",
    "latest_wins",
    "supersede",
    "turns",
    "exchange",
    "lane",
)
"""The stages after fusion, in the order :func:`rank` runs them (:meth:`Ranking.explain`)."""
_EXPLAINED = ("fused", *STAGES)
_B, _D, _T, _G = (SIGNALS.index(s) for s in ("bm25", "dense", "temporal", "graph"))

Neighbours = Callable[[int, float], list[np.ndarray]]
"""``(window, gap) -> slots``: per neighbour slot a ``(q, n)`` array of the row of that
neighbour of each row, ``n`` where there is none (a padding column that scores 0)."""
Sessions = Callable[[float], np.ndarray]
"""``gap -> (q, n)`` each row's session in its namespace's timeline split where consecutive
memories are more than ``gap`` seconds apart (equal numbers: same session; padding any)."""


class Positions(Protocol):
    """``(gap, wanted=None) -> (q, n)`` each row's position in its session.

    0: it opens it; -1: unknown. Sessions split where consecutive memories are more than
    ``gap`` seconds apart. With a ``(q, n)`` mask ``wanted``, only those rows' positions need
    be read (a stage that reads a few rows; the others may hold -1).
    """

    def __call__(self, gap: float, wanted: np.ndarray | None = None, /) -> np.ndarray:
        """Each row's position (those of ``wanted``, if given)."""
        ...


class Users(Protocol):
    """``(wanted=None) -> (q, n)`` whether each row was written by the user.

    Its ``role`` metadata is ``"user"``. With a ``(q, n)`` mask ``wanted``, only those rows
    need be read (the others may be False).
    """

    def __call__(self, wanted: np.ndarray | None = None, /) -> np.ndarray:
        """Whether each row is the user's (those of ``wanted``, if given)."""
        ...


@dataclass(frozen=True)
class Plan:
    """How to rank: fusion weights and the query-time parameters of every stage.

    Attributes:
        weights: Weight per signal, in :data:`~norax_core.SIGNALS` order.
        method: Weighted sum or reciprocal rank fusion.
        rrf_k: The RRF constant.
        pool_min: Each signal proposes at least this many candidates ...
        pool_factor: ... and at least ``pool_factor * k``.
        recency_candidates: Candidates recency proposes beside other signals.
        context_window: Neighbours on each side that lend context (0: off).
        context_weight: Share of the best neighbour's score (0: off).
        context_gap: Seconds between two memories that end a session.
        latest_weight: Latest wins' weight (:func:`norax_core.latest.state_wins`; at most
            1: off).
        latest_depth: How many of the best candidates latest wins compares.
        latest_shared: Query words the two memories of latest wins' attribute rule must
            both hold (:func:`norax_core.latest.same_attribute`).
        latest_cues: Which cues the attribute rule reads (:data:`norax_core.latest.
            CUE_LEVELS`).
        latest_subject: Whether, in the attribute rule, an outright change of a subject the
            query names is enough (:func:`norax_core.latest.same_attribute`).
        bridge_weight: What the bridge step's walk mass adds to a candidate (0: off).
        bridge_seeds: First-pass candidates that seed the bridge step.
        bridge_candidates: Memories the bridge step reaches most that join the candidates.
        bridge_seed_gain: Whether the bridge step's seeds gain their walk mass too.
        bridge_skip_query: Whether the bridge walk leaves out the query's own entities.
        period_boost: Share of its score a candidate inside a named period gains (0: off).
        opener_boost: Share of its score a memory opening its session gains (0: off).
        opener_span: Positions in the session over which the opener boost fades.
        speaker_boost: Share of its score a user's memory gains when the query asks what the
            user said (0: off).
        supersede_weight: Supersession's share of the gap (0: off).
        supersede_depth: How many of the best candidates lift what supersedes them.
        supersede_pull: Whether a superseding memory outside that depth is lifted (and
            joins the candidates).
        exchange_weight: Share of its anchor's score an exchange partner rises to (0: off).
        exchange_depth: How many of the best candidates bring their exchange partner.
        lane_slots: Places of the top k reserved for matching standing memories (0: off).
        lane_similarity: The least query cosine of a standing memory that matches.
        lane_margin: The lead over the next best standing memory's cosine with which one
            below ``lane_similarity`` still matches (0: only the absolute bar).
        lane_floor: The least cosine that lead counts from.
        session_spread: Share of its score the ``j``-th best candidate of a session loses
            ``j`` times over, for queries asking for an order (0: off; turns stage).
        lane_place: The first place the lane's memories take (0: the last places).
    """

    weights: tuple[float, float, float, float]
    method: FusionMethod = FusionMethod.WEIGHTED_SUM
    rrf_k: float = 60.0
    pool_min: int = 50
    pool_factor: int = 3
    recency_candidates: int = 5
    context_window: int = 0
    context_weight: float = 0.0
    context_gap: float = 3600.0
    latest_weight: float = 0.0
    latest_depth: int = 10
    latest_shared: int = 3
    latest_cues: str = "update"
    latest_subject: bool = False
    bridge_weight: float = 0.0
    bridge_seeds: int = 5
    bridge_candidates: int = 10
    bridge_seed_gain: bool = False
    bridge_skip_query: bool = False
    period_boost: float = 0.0
    opener_boost: float = 0.0
    opener_span: float = 10.0
    speaker_boost: float = 0.0
    supersede_weight: float = 0.0
    supersede_depth: int = 10
    supersede_pull: bool = True
    exchange_weight: float = 0.0
    exchange_depth: int = 5
    lane_slots: int = 0
    lane_similarity: float = 0.35
    lane_margin: float = 0.0
    lane_floor: float = 0.1
    session_spread: float = 0.0
    lane_place: int = 0

    @classmethod
    def of(cls, weights: Weights, config: NoraxConfig, intent: Intent | str | None = None) -> Plan:
        """The plan of a search with ``weights`` under ``config``.

        The one place a search's weights become its ranking: the weights of the query's
        ``intent`` are selected (:meth:`Weights.for_intent`, the global ones without an
        override or without an intent) and their ``params`` applied to ``config``
        (:meth:`Weights.applied`). Kept for the last few (weights, config, intent) asked:
        both are frozen, and every search asks twice with the same ones.
        """
        key = (id(weights), id(config), intent)
        hit = _PLANS.get(key)
        if hit is not None and hit[0] is weights and hit[1] is config:
            return hit[2]
        plan = cls._of(weights, config, intent)
        if len(_PLANS) >= 64:
            _PLANS.pop(next(iter(_PLANS)), None)  # threads may race here: no KeyError
        _PLANS[key] = (weights, config, plan)
        return plan

    @classmethod
    def _of(cls, weights: Weights, config: NoraxConfig, intent: Intent | str | None) -> Plan:
        chosen = weights.for_intent(intent)
        cfg = chosen.applied(config)
        w = chosen.as_dict()
        on = cfg.context_on
        same = {f: getattr(cfg, _CONFIG_NAME.get(f, f)) for f in _FROM_CONFIG}
        return cls(
            weights=tuple(float(w[s]) for s in SIGNALS),  # type: ignore[arg-type]
            method=chosen.method,
            rrf_k=chosen.rrf_k,
            context_window=cfg.context_window if on else 0,
            context_weight=cfg.context_weight if on else 0.0,
            **same,
        )

    @property
    def context_on(self) -> bool:
        """Whether candidates borrow from their neighbours."""
        return self.context_window > 0 and self.context_weight > 0


_PLANS: dict[tuple[int, int, object], tuple[Weights, NoraxConfig, Plan]] = {}
"""Plans by the ids of their weights and config (held, so an id is not reused) and intent."""


def proposal_sizes(plan: Plan, k: int, size: int) -> dict[str, int]:
    """How many candidates each signal proposes for a top-``k`` search of ``size`` memories.

    Signals without weight propose none. Recency alone says nothing about relevance: beside
    other signals it proposes only ``recency_candidates``; on its own a full pool.
    """
    k = min(k, size)
    pool = max(plan.pool_min, plan.pool_factor * k)
    on = [s for s, w in zip(SIGNALS, plan.weights, strict=True) if w > 0]
    out = {}
    for s in on:
        n = plan.recency_candidates if s == "temporal" and on != ["temporal"] else pool
        if n > 0:
            out[s] = min(n, size)
    return out


def signal_ranks(
    scores: np.ndarray, valid: np.ndarray, tie: np.ndarray | None, signal: str
) -> np.ndarray:
    """Each row's position in ``signal``'s own ranking of the rows, ``(q, n)``.

    What a signal's ``top`` proposes, derived from its scores of every memory: best first,
    ties to the smaller id; rows the signal would not propose get :data:`NEVER`.
    """
    order = _order(scores, valid, tie)
    q, n = scores.shape
    ranks = np.empty((q, n), dtype=np.int32)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(n, dtype=np.int32), (q, n)), -1)
    # Positives sort before the rest, so a positive's rank already counts positives only.
    blocked = ~valid | (scores <= 0) if signal in POSITIVE_ONLY else ~valid
    return np.where(blocked, NEVER, ranks)


_CONFIG_NAME = {
    "context_gap": "context_gap_seconds",
    "latest_weight": "latest_wins_weight",
    "latest_depth": "latest_wins_depth",
    "latest_shared": "latest_wins_shared",
    "latest_cues": "latest_wins_cues",
    "latest_subject": "latest_wins_subject",
}
"""Plan fields whose :class:`NoraxConfig` field has another name."""
_FROM_CONFIG = tuple(
    f.name
    for f in fields(Plan)
    if f.name not in {"weights", "method", "rrf_k", "context_window", "context_weight"}
)
"""Plan fields :meth:`Plan.of` copies from the config (the others come from the weights, or
depend on whether context propagation is on)."""


@dataclass(frozen=True)
class Table:
    """Scored candidates of ``q`` queries, ``n`` rows each (shorter ones padded).

    Attributes:
        scores: ``(4, q, n)`` normalised signal scores, in :data:`~norax_core.SIGNALS` order.
        proposed: ``(4, q, n)`` each row's position in each signal's own ranking
            (:data:`NEVER` if that signal did not propose it).
        valid: ``(q, n)`` real rows (False for padding).
        tie: ``(q, n)`` tie order: among equal scores the smaller value ranks first (the
            rank of the row's id among the query's ids); ``None`` when the rows are in id
            order already.
        size: ``(q,)`` memories the query's namespace (and filter) holds: caps ``k``.
        created: ``(q, n)`` creation times, epoch seconds (latest wins).
        neighbours: The rows' neighbours in their session (context propagation).
        ids: Each query's row ids, for reading results (optional in a batch).
        plans: Each query's reading (:class:`~norax_core.query.QueryPlan`: intent, named
            periods, entities), for stages that adapt to the question; ``None`` if unknown.
        entities: Each query's namespace as memories and entities, with the query's entities
            (:class:`~norax_core.stages.bridges.BridgeInput`; the bridge stage); ``None``
            for a query whose namespace has no entities.
        newer: ``(s, q, n)`` per slot, the row of a memory that supersedes each row
            (:mod:`norax_core.supersession`; ``n``: none). A search's table holds them.
        sessions: The rows' sessions in their namespace's timeline.
        positions: The rows' positions in their sessions (the turns stage's openers).
        users: Which rows the user wrote (the turns stage's speaker boost).
        kinds: ``(q, n)`` each row's memory kind (``""`` for padding).
        standing: ``(q, n)`` whether each row is a standing instruction or preference
            (its inferred kind; the lane).
        statements: The rows' and queries' words and which rows are replies (latest wins'
            attribute rule, :class:`norax_core.latest.Statements`).
    """

    scores: np.ndarray
    proposed: np.ndarray
    valid: np.ndarray
    tie: np.ndarray | None
    size: np.ndarray
    created: np.ndarray | None = None
    neighbours: Neighbours | None = None
    ids: list[list[str]] | None = None
    plans: Sequence[QueryPlan | None] | None = None
    entities: Sequence[BridgeInput | None] | None = None
    newer: np.ndarray | None = None
    sessions: Sessions | None = None
    positions: Positions | None = None
    users: Users | None = None
    kinds: np.ndarray | None = None
    standing: np.ndarray | None = None
    statements: Statements | None = None


class Extend(Protocol):
    """Grows a table that does not hold every memory (a search's holds only candidates)."""

    def __call__(
        self, table: Table, wanted: np.ndarray, /, add: Sequence[Sequence[str]] = ()
    ) -> Table:
        """A table with rows added (existing rows keep their index).

        Args:
            table: The table to grow.
            wanted: ``(q, n)`` mask: the session neighbours of these rows join.
            add: Per query, ids of memories that join too (the bridge stage's).
        """
        ...


@dataclass(frozen=True)
class Ranking:
    """What :func:`rank` found.

    Attributes:
        table: The table ranked (with any rows context added).
        k: ``(q,)`` results per query (``k`` capped by the namespace size).
        candidates: ``(q, n)`` rows that are candidates (proposed, or context neighbours).
        fused: ``(q, n)`` fused signal scores.
        context: ``(q, n)`` after context propagation (``fused`` when it is off).
        score: ``(q, n)`` final scores (after the last stage).
        after: ``(q, n)`` scores after each of :data:`STAGES` (the previous ones where a
            stage is off), for :meth:`explain`.
    """

    table: Table
    k: np.ndarray
    candidates: np.ndarray
    fused: np.ndarray
    context: np.ndarray
    score: np.ndarray
    after: Mapping[str, np.ndarray] = field(default_factory=dict)

    @cached_property
    def order(self) -> np.ndarray:
        """``(q, n)`` rows best first, ties to the smaller id; non-candidates last."""
        return _order(self.score, self.candidates, self.table.tie)

    def positions(self, qs: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Rank (from 0) of row ``rows[i]`` of query ``qs[i]``; a huge one if no candidate."""
        tie = self.table.tie
        score = np.where(self.candidates, self.score, -np.inf)
        out = np.full(qs.shape, NEVER, dtype=np.int64)
        n = score.shape[1]
        for a in range(0, qs.size, 512):  # (chunk, n) comparisons
            b = slice(a, a + 512)
            q, r = qs[b], rows[b]
            sc = score[q]
            own = sc[np.arange(q.size), r][:, None]
            t = np.arange(n)[None, :] if tie is None else tie[q]
            t_own = r[:, None] if tie is None else t[np.arange(q.size), r][:, None]
            ahead = (sc > own) | ((sc == own) & (t < t_own))
            out[b] = np.where(self.candidates[q, r], ahead.sum(axis=1), NEVER)
        return out

    def top(self, q: int = 0) -> list[int]:
        """The rows of query ``q``'s results, best first."""
        kept: dict[int, list[int]] = self.__dict__.setdefault("_tops", {})  # frozen: computed once
        if q not in kept:
            n = int(min(self.k[q], self.candidates[q].sum()))
            kept[q] = self.order[q, :n].tolist()
        return list(kept[q])

    def ids(self, q: int = 0) -> list[str]:
        """The ids of query ``q``'s results, best first (needs ``table.ids``)."""
        if self.table.ids is None:
            raise ValueError("this table carries no ids")
        names = self.table.ids[q]
        return [names[r] for r in self.top(q)]

    def explain(self, q: int, row: int) -> dict[str, float]:
        """What moved a result: its fused score and each later stage's change of it.

        Keys ``fused`` and each of :data:`STAGES`; their values sum to the final score.
        """
        return self.explained(q, [row])[0]

    def explained(self, q: int, rows: Sequence[int]) -> list[dict[str, float]]:
        """:meth:`explain` of each of ``rows`` of query ``q`` (one array operation)."""
        at = np.asarray(rows, dtype=np.int64)
        steps = np.stack(
            [self.fused[q][at], *(self.after.get(s, self.score)[q][at] for s in STAGES)]
        )
        steps[1:] -= steps[:-1].copy()  # each stage's change: the float difference of its scores
        return [dict(zip(_EXPLAINED, col, strict=True)) for col in steps.T.tolist()]


def rank(table: Table, plan: Plan, k: int | np.ndarray, extend: Extend | None = None) -> Ranking:
    """Rank every query of ``table`` under ``plan``: the one ranking of Norax.

    Args:
        table: The scored rows.
        plan: Weights and stage parameters.
        k: Results wanted, one for all queries or one per query.
        extend: For a table that lacks some memories' rows (a search's table holds only
            proposed memories): adds context neighbours and bridge memories as rows. Tables
            that hold whole namespaces (the benchmark's) need none.

    Returns:
        The :class:`Ranking`.
    """
    plan = _shared(plan)
    kk = np.minimum(np.asarray(k, dtype=np.int64), table.size).astype(np.int64, copy=False)
    if kk.shape != table.size.shape:
        kk = np.broadcast_to(kk, table.size.shape).copy()
    cand = _candidates(table, plan, kk)
    fused = _fuse(table, plan, cand)
    ctx = fused
    if plan.context_on:
        table, cand, fused, ctx = _context(table, plan, kk, cand, fused, extend)
    bridged = ctx
    if plan.bridge_weight > 0:  # may add rows: the earlier stages' arrays grow with them
        table, cand, fused, ctx, bridged = _bridges(table, plan, cand, fused, ctx, extend)
    after = {"context": ctx, "bridges": bridged}
    score = after["period"] = _period(table, plan, bridged) if plan.period_boost > 0 else bridged
    if plan.latest_weight > 1:
        score = _state(table, plan, cand, score)
    after["latest_wins"] = score
    if plan.supersede_weight > 0:
        top = _best(score, cand, table.tie, np.full(kk.shape, plan.supersede_depth))
        sw = (plan.supersede_weight, plan.supersede_pull)
        cand, score = supersede.supersede_arrays(score, cand, top, table.newer, *sw)
    after["supersede"] = score
    if plan.opener_boost > 0 or plan.speaker_boost > 0 or plan.session_spread > 0:
        score = _turns(table, plan, cand, score)
    after["turns"] = score
    if plan.exchange_weight > 0:
        score = _exchange(table, plan, cand, score)
    after["exchange"] = score
    if plan.lane_slots > 0:
        cand, score = _lane(table, plan, kk, cand, score)
    return Ranking(table, kk, cand, fused, ctx, score, after)


def _shared(plan: Plan) -> Plan:
    """``plan`` with its weights as shares: only their ratios matter, and no scale overflows.

    Kept for the last few plans ranked (frozen; :meth:`Plan.of` hands a search the same one).
    """
    hit = _SHARES.get(id(plan))
    if hit is not None and hit[0] is plan:
        return hit[1]
    out = replace(plan, weights=shares(plan.weights))  # type: ignore[arg-type]
    if len(_SHARES) >= 64:
        _SHARES.pop(next(iter(_SHARES)), None)  # threads may race here: no KeyError
    _SHARES[id(plan)] = (plan, out)
    return out


_SHARES: dict[int, tuple[Plan, Plan]] = {}
"""Plans with their weights as shares, by the id of the plan (held, so an id is not reused)."""


def _order(score: np.ndarray, cand: np.ndarray, tie: np.ndarray | None) -> np.ndarray:
    """Rows best first, ties to the smaller tie key; non-candidates last."""
    key = -np.where(cand, score, -np.inf)
    if tie is None:
        return np.argsort(key, axis=-1, kind="stable")
    return np.lexsort((tie, key), axis=-1)


def _candidates(table: Table, plan: Plan, kk: np.ndarray) -> np.ndarray:
    """Rows some weighted signal proposes (:func:`proposal_sizes`, for every query at once)."""
    pool = np.maximum(plan.pool_min, plan.pool_factor * kk)[:, None]
    on = [i for i, v in enumerate(plan.weights) if v > 0]
    cand = np.zeros(table.valid.shape, dtype=bool)
    for i in on:
        n = plan.recency_candidates if i == _T and on != [_T] else pool
        cand |= table.proposed[i] < n
    return cand & table.valid


def _fuse(table: Table, plan: Plan, cand: np.ndarray) -> np.ndarray:
    """Fused scores of every row (weighted sum), or RRF over the candidates."""
    sc = table.scores
    w0 = plan.weights
    if plan.method is not FusionMethod.RRF:
        # summed in signal order, as sum(w_s * score_s) / sum(w_s)
        return (0.0 + w0[_B] * sc[_B] + w0[_D] * sc[_D] + w0[_T] * sc[_T] + w0[_G] * sc[_G]) / sum(
            w0
        )
    return _rrf(table, plan, cand, np.broadcast_to(np.asarray(w0), (cand.shape[0], len(w0))))


def _rrf(table: Table, plan: Plan, cand: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted RRF over the candidates, with ``(q, s)`` weights."""
    sc = table.scores
    fused = np.zeros(cand.shape)
    for i, v in enumerate(plan.weights):
        if v <= 0:
            continue
        ok = cand & (sc[i] > 0)
        ranks = signal_ranks(np.where(ok, sc[i], 0.0), ok, table.tie, "bm25")
        fused += np.where(ok, w[:, i, None] / (plan.rrf_k + ranks + 1.0), 0.0)
    return fused / (w.sum(axis=1)[:, None] / (plan.rrf_k + 1))  # type: ignore[no-any-return]


def _best(score: np.ndarray, cand: np.ndarray, tie: np.ndarray | None, m: np.ndarray) -> np.ndarray:
    """Mask of each query's best ``m`` candidates (ties to the smaller tie key)."""
    if tie is None:  # rows in id order: a partition, not a sort (the fitter's hot path)
        masked = np.where(cand, score, -np.inf)
        out = np.zeros_like(cand)
        for want in np.unique(m):
            qs = np.flatnonzero(m == want)
            sub = masked[qs]
            want = int(min(want, sub.shape[1]))
            if want == 0:
                continue
            kth = -np.partition(-sub, want - 1, axis=1)[:, want - 1 : want]
            above = sub > kth
            tied = sub == kth
            room = want - above.sum(axis=1, keepdims=True)
            out[qs] = (above | (tied & (np.cumsum(tied, axis=1) <= room))) & cand[qs]
        return out
    order = _order(score, cand, tie)
    keep = np.arange(score.shape[1])[None, :] < np.minimum(m, cand.sum(axis=1))[:, None]
    out = np.zeros_like(cand)
    out[np.arange(out.shape[0])[:, None], order] = keep  # put_along_axis, without its overhead
    return out


def _context(
    table: Table,
    plan: Plan,
    kk: np.ndarray,
    cand: np.ndarray,
    fused: np.ndarray,
    extend: Extend | None,
) -> tuple[Table, np.ndarray, np.ndarray, np.ndarray]:
    """Context stage: seeds' neighbours join, then each candidate borrows from its best."""
    seeds = _best(fused, cand, table.tie, CONTEXT_SEEDS * kk)
    if extend is not None:
        n0 = cand.shape[1]
        table = extend(table, seeds)
        pad = table.valid.shape[1] - n0
        if pad:
            cand, seeds = _padded(cand, pad), _padded(seeds, pad)
            fused = _fuse(table, plan, cand)
    if table.neighbours is None:
        raise ValueError("context propagation needs the table's neighbours")
    slots = table.neighbours(plan.context_window, plan.context_gap)
    q, n = cand.shape
    rows, cols = np.nonzero(seeds)
    known = np.zeros((q, n + 1), dtype=bool)
    known[:, :n] = cand
    for nb in slots:
        known[rows, nb[rows, cols]] = True
    known = known[:, :n] & table.valid
    if plan.method is FusionMethod.RRF:  # ranks among the candidates changed
        fused = _fuse(table, plan, known)
    return table, known, fused, _borrow(plan, slots, known, fused)


def _padded(a: np.ndarray, pad: int) -> np.ndarray:
    """``a`` with ``pad`` zero columns appended (``np.pad``'s result, without its overhead)."""
    return np.concatenate([a, np.zeros((a.shape[0], pad), dtype=a.dtype)], axis=1)


def _borrow(
    plan: Plan, slots: list[np.ndarray], known: np.ndarray, fused: np.ndarray
) -> np.ndarray:
    """Every row's score after borrowing from its best neighbour among ``known``."""
    q, n = known.shape
    sent = np.zeros((q, n + 1))
    sent[:, :n] = np.where(known, fused, 0.0)
    best = np.zeros((q, n))
    qi = np.arange(q)[:, None]
    for nb in slots:
        np.maximum(best, sent[qi, nb], out=best)  # take_along_axis, without its overhead
    lam = plan.context_weight
    return (fused + lam * best) / (1.0 + lam)  # type: ignore[no-any-return]


def _bridges(
    table: Table,
    plan: Plan,
    cand: np.ndarray,
    fused: np.ndarray,
    ctx: np.ndarray,
    extend: Extend | None,
) -> tuple[Table, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bridge stage: a walk from the best candidates; the memories it reaches join and gain."""
    from norax_core.stages.bridges import best_rows, bridge_scores

    if table.entities is None:
        raise ValueError("the bridge step needs the table's entities")
    q, n = cand.shape
    seeds = _best(ctx, cand, table.tie, np.full(q, plan.bridge_seeds))
    walks: list[np.ndarray | None] = [None] * q
    joins: list[list[str]] = [[] for _ in range(q)]
    add: list[list[str]] = [[] for _ in range(q)]
    for i, view in enumerate(table.entities):
        if view is None:
            continue
        g = view.graph
        rows = np.flatnonzero(seeds[i])
        walk = bridge_scores(
            g,
            view.rows[rows],
            ctx[i, rows],
            view.query,
            view.allowed,
            seed_gain=plan.bridge_seed_gain,
            skip_query=plan.bridge_skip_query,
        )
        walks[i] = walk
        joins[i] = [g.ids[r] or "" for r in best_rows(walk, plan.bridge_candidates, g.ids)]
        have = set(view.rows[view.rows >= 0].tolist())
        add[i] = [m for m in joins[i] if g.row_of[m] not in have]
    if any(add):
        if extend is None:
            raise ValueError("the bridge step reached memories the table lacks: pass extend")
        n0 = n
        table = extend(table, np.zeros_like(cand), add)
        n = table.valid.shape[1]
        grown = np.zeros((q, n), dtype=cand.dtype)  # the new rows are no candidates yet
        grown[:, :n0] = cand
        cand = grown
        fused = _fuse(table, plan, cand)
        if plan.context_on and table.neighbours is not None:
            slots = table.neighbours(plan.context_window, plan.context_gap)
            ctx = _borrow(plan, slots, cand, fused)
        elif plan.context_on:
            raise ValueError("context propagation needs the table's neighbours")
        else:
            ctx = fused
    gain = np.zeros((q, n))
    joined = np.zeros((q, n), dtype=bool)
    for i, view in enumerate(table.entities or ()):
        reached = walks[i]
        if view is None or reached is None:
            continue
        at = view.rows[:n]
        gain[i] = np.where(at >= 0, reached[np.maximum(at, 0)], 0.0)
        wanted = np.zeros(view.graph.n_rows + 1, dtype=bool)  # the last: a row of none (-1)
        wanted[[view.graph.row_of[m] for m in joins[i]]] = True
        joined[i] = wanted[at]
    cand = cand | (joined & table.valid)
    return table, cand, fused, ctx, ctx + plan.bridge_weight * gain


def _state(table: Table, plan: Plan, cand: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Latest wins' attribute rule over each query's best ``latest_depth`` candidates."""
    st = table.statements
    if st is None or table.created is None:
        raise ValueError("latest wins' attribute rule needs the table's statements and times")
    from norax_core.latest import state_wins

    m = min(plan.latest_depth, score.shape[1])
    top = _order(score, cand, table.tie)[:, :m]
    read = np.zeros(cand.shape, dtype=bool)  # the rule compares these rows only
    read[np.arange(top.shape[0])[:, None], top] = True
    replies = st.replies(read)
    cues = st.cue_set(plan.latest_cues)
    change = st.change | st.shift if plan.latest_subject else None
    if change is not None:
        cues = cues | st.shift
    out = score.copy()
    for i in range(score.shape[0]):
        rows = top[i][cand[i, top[i]] & ~np.isnan(table.created[i, top[i]])]
        query = st.query[i] - st.cues - st.now  # "the latest", "these days": not asked about
        if rows.size < 2 or not query:
            continue
        out[i, rows] = state_wins(
            score[i, rows].tolist(),
            table.created[i, rows].tolist(),
            st.words(i, rows.tolist()),
            replies[i, rows].tolist(),
            query,
            cues,
            plan.latest_shared,
            plan.latest_weight,
            change,
        )
    return out


def _period(table: Table, plan: Plan, score: np.ndarray) -> np.ndarray:
    """Period stage: candidates created in (or near) a period the query names gain."""
    if table.created is None:
        raise ValueError("the period boost needs the table's creation times")
    named = [[(p.start, p.end) for p in (x.periods if x else ())] for x in table.plans or ()]
    starts, ends = period.period_bounds(named)
    if starts.size == 0:
        return score
    u = period.inside(table.created, starts, ends)
    return period.boost(score, u, plan.period_boost)


def _flags(table: Table, name: str) -> np.ndarray:
    """``(q,)`` each query's plan's boolean ``name`` (False without a plan)."""
    plans = table.plans or [None] * table.valid.shape[0]
    return np.array([bool(p is not None and getattr(p, name)) for p in plans], dtype=bool)


def _turns(table: Table, plan: Plan, cand: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Turns stage: openers and own-words users' memories gain; order queries spread."""
    own = _flags(table, "own_words")
    position = user = None
    if plan.opener_boost > 0:
        if table.positions is None:
            raise ValueError("the opener boost needs the table's positions")
        position = table.positions(plan.context_gap)
    if plan.speaker_boost > 0 and own.any():
        if table.users is None:
            raise ValueError("the speaker boost needs the table's users")
        user = table.users()
    f = turns.turns_factor(
        score.shape, position, user, own, plan.opener_boost, plan.opener_span, plan.speaker_boost
    )
    out = score * f
    order = _flags(table, "ordering")
    if plan.session_spread > 0 and order.any():
        if table.sessions is None:
            raise ValueError("the session spread needs the table's sessions")
        sessions = table.sessions(plan.context_gap)
        out = out * turns.spread_factor(out, cand, sessions, table.tie, order, plan.session_spread)
    return out  # type: ignore[no-any-return]


def _exchange(table: Table, plan: Plan, cand: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Exchange stage: the partners of the best ``exchange_depth`` join right after them."""
    if table.neighbours is None or table.positions is None or table.users is None:
        raise ValueError("the exchange stage needs the table's neighbours, positions and users")
    slots = table.neighbours(1, plan.context_gap)
    top = _best(score, cand, table.tie, np.full(cand.shape[0], plan.exchange_depth))
    # only the best candidates' partners are lifted: read them and their neighbours alone
    q, n = cand.shape
    qs, rs = np.nonzero(top & cand)
    read = np.zeros((q, n + 1), dtype=bool)
    read[qs, rs] = True
    for nb in slots:
        read[qs, nb[qs, rs]] = True
    read = read[:, :n]
    position, user = table.positions(plan.context_gap, read), table.users(read)
    return exchange.exchange_slots(score, cand, top, slots, position, user, plan.exchange_weight)


def _lane(
    table: Table, plan: Plan, kk: np.ndarray, cand: np.ndarray, score: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Lane stage: matching standing instructions and preferences take places in the top k."""
    if table.standing is None:
        raise ValueError("the lane needs the table's standing memories")
    match = np.where(table.standing & table.valid, table.scores[_D], 0.0)
    return lane.reserve(
        score,
        cand,
        table.tie,
        kk,
        match,
        plan.lane_similarity,
        plan.lane_slots,
        plan.lane_margin,
        plan.lane_floor,
        plan.lane_place,
    )
