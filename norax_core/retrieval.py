"""The read path of a search: the candidate pool, context propagation and latest wins.

:meth:`NoraxMemory.search` validates the query, embeds it and holds the store's lock; the
functions here do the work over its derived indexes and dense signal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from norax_core.batch import in_background
from norax_core.config import NoraxConfig
from norax_core.fusion import fuse, rank
from norax_core.indexes import DerivedIndexes
from norax_core.latest import latest_wins, pair_cosines
from norax_core.models import SIGNALS
from norax_core.signals.base import Query, Signal
from norax_core.signals.context import propagate
from norax_core.signals.dense import DenseSignal
from norax_core.weights import Weights

CONTEXT_SEEDS = 2
"""With context propagation, the neighbours of the best ``CONTEXT_SEEDS * k`` candidates are
scored and join the pool (a memory's context can lift it into the top k)."""


@dataclass(frozen=True)
class Candidates:
    """A search's candidate pool before fusion.

    Attributes:
        query: The prepared query (tokens, embedding, entities, clock).
        k: The number of results asked for, capped at what the namespace (and filter) holds.
        ids: Candidate ids, in the order the signals proposed them.
        signals: Each signal's normalised score for every candidate.
        matched: Entities each candidate shares with the query (graph breakdown).
    """

    query: Query
    k: int
    ids: list[str]
    signals: dict[str, dict[str, float]]
    matched: dict[str, tuple[str, ...]]


def signal_set(indexes: DerivedIndexes, dense: DenseSignal, cfg: NoraxConfig) -> dict[str, Signal]:
    """The four signals, with the search's BM25 parameters and decay rates."""
    return {
        "bm25": indexes.bm25_signal.with_params(cfg.bm25_k1, cfg.bm25_b),
        "dense": dense,
        "temporal": indexes.temporal.with_decay(cfg.tau_days),
        "graph": indexes.graph_signal,
    }


def gather(
    q: Query,
    entities: Future[list[str]] | None,
    indexes: DerivedIndexes,
    dense: DenseSignal,
    cfg: NoraxConfig,
    weight: Mapping[str, float],
    *,
    k: int,
    size: int,
    pool: int,
    forced: Sequence[str] = (),
) -> Candidates:
    """Each weighted signal proposes its top ``pool``; every candidate gets all four scores.

    Args:
        q: The query, without its entities yet.
        entities: The query's entity extraction, running in the background (or ``None``).
        indexes: The store's derived indexes (the caller holds the store's lock).
        dense: The store's dense signal.
        cfg: The search's configuration.
        weight: Signal weights; only signals with a positive weight propose candidates.
        k: Results asked for (at most ``size``).
        size: How many memories the namespace (and filter) holds.
        pool: How many candidates each signal proposes.
        forced: Ids that are candidates whatever the signals propose.
    """
    signals = signal_set(indexes, dense, cfg)
    # Recency alone says nothing about relevance: beside other signals it proposes only a
    # few of the newest memories; on its own it ranks the whole pool.
    recency_only = [s for s, v in weight.items() if v > 0] == ["temporal"]
    wanted: dict[str, int] = {}
    for name in signals:
        n = cfg.recency_candidates if name == "temporal" and not recency_only else pool
        if weight[name] > 0 and n > 0:
            wanted[name] = min(n, size)
    tops: dict[str, Future[dict[str, float]] | dict[str, float]] = {}
    if "dense" in wanted:  # Chroma works while the local signals do
        tops["dense"] = in_background(dense.top, q, wanted["dense"])
    if entities is not None:
        q = dataclasses.replace(q, entities=tuple(entities.result()))
    for name, sig in signals.items():
        if name in wanted and name != "dense":
            tops[name] = sig.top(q, wanted[name])
    proposed: dict[str, None] = dict.fromkeys(forced)
    for name in signals:
        if name in tops:
            top = tops[name]
            proposed.update(dict.fromkeys(top.result() if isinstance(top, Future) else top))
    cand = list(proposed)
    scores = {name: sig.score(q, cand) for name, sig in signals.items()}
    return Candidates(q, k, cand, scores, indexes.graph_signal.explain(q, cand))


def with_context(
    cands: Candidates,
    fused: dict[str, float],
    w: Weights,
    cfg: NoraxConfig,
    indexes: DerivedIndexes,
    dense: DenseSignal,
) -> tuple[Candidates, dict[str, float]]:
    """Context propagation (:mod:`norax_core.signals.context`), under the store's lock.

    The neighbours of the best ``CONTEXT_SEEDS * k`` candidates join the pool, then every
    memory borrows from its best-scoring neighbour.
    """
    q = cands.query
    catalog = indexes.temporal
    window, gap = cfg.context_window, cfg.context_gap_seconds
    seeds = rank(fused, CONTEXT_SEEDS * cands.k)
    # Neighbours among the memories the filter allows: an excluded one never takes a slot.
    near = catalog.neighbours(q.namespace, seeds, window, gap, allowed=q.allowed)
    known = set(cands.ids)
    extra = [m for m in dict.fromkeys(n for s in seeds for n in near.get(s, ())) if m not in known]
    if extra:
        signals = signal_set(indexes, dense, cfg)
        scores = {s: {**cands.signals[s], **signals[s].score(q, extra)} for s in SIGNALS}
        matched = {**cands.matched, **indexes.graph_signal.explain(q, extra)}
        cands = dataclasses.replace(
            cands, ids=[*cands.ids, *extra], signals=scores, matched=matched
        )
        fused = fuse(cands.signals, cands.ids, w)
    near = catalog.neighbours(q.namespace, cands.ids, window, gap, allowed=q.allowed)
    return cands, propagate(fused, near, cfg.context_weight)


def with_latest_wins(
    fused: dict[str, float],
    cfg: NoraxConfig,
    created: Callable[[list[str]], Sequence[float]],
    vectors: Callable[[list[str]], Mapping[str, np.ndarray]],
) -> dict[str, float]:
    """The latest-wins rule (:mod:`norax_core.latest`) over the best candidates.

    Args:
        fused: Fused scores.
        cfg: The search's configuration.
        created: Creation times of ids (NaN for a memory deleted meanwhile).
        vectors: Stored embeddings of the ids that still exist.
    """
    top = rank(fused, cfg.latest_wins_depth)
    times = created(top)
    vecs = vectors(top)
    # A memory deleted meanwhile has no vector or time: it is left out of the comparison.
    keep = [i for i, m in enumerate(top) if m in vecs and not np.isnan(times[i])]
    top = [top[i] for i in keep]
    if len(top) < 2:
        return fused
    return latest_wins(
        fused,
        top,
        [times[i] for i in keep],
        pair_cosines(np.stack([vecs[m] for m in top])),
        cfg.latest_wins_similarity,
        cfg.latest_wins_weight,
    )
