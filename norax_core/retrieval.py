"""The read path of a search: its candidates, and its results from their ranking.

:meth:`NoraxMemory.search` validates the query, embeds it and holds the store's lock; the
functions here ask the store's signals for their proposals and scores (:func:`gather`), which
:func:`norax_core.search_table.search_table` turns into the table the ranking ranks, and
build the results from the ranking (:func:`search_results`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from norax_core.batch import in_background
from norax_core.config import NoraxConfig
from norax_core.indexes import DerivedIndexes
from norax_core.models import SIGNALS, Explanation, Memory, SearchResult, assembled, varied
from norax_core.ranking import Ranking
from norax_core.signals.base import Query, Signal
from norax_core.signals.dense import DenseSignal
from norax_core.stages.bridges import BridgeInput, MemoryEntities
from norax_core.weights import Weights


@dataclass(frozen=True)
class Candidates:
    """A search's candidate pool before fusion.

    Attributes:
        query: The prepared query (tokens, embedding, entities, clock).
        k: The number of results asked for, capped at what the namespace (and filter) holds.
        ids: Candidate ids, in the order the signals proposed them.
        signals: Each signal's normalised score for every candidate.
        matched: Entities each candidate shares with the query (graph breakdown).
        proposed: Each signal's own proposals, best first (empty for a signal that proposed
            none).
        size: How many memories the namespace (and filter) holds.
        weights: The weights chosen for the query (its intent's, where the search's weights
            have an override for it), which decided the proposals.
    """

    query: Query
    k: int
    ids: list[str]
    signals: dict[str, dict[str, float]]
    matched: dict[str, tuple[str, ...]]
    proposed: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    size: int = 0
    weights: Weights | None = None


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
    wanted: Mapping[str, int],
    *,
    k: int,
    size: int,
    weights: Weights | None = None,
    forced: Sequence[str] = (),
    explain: bool = True,
) -> Candidates:
    """Each weighted signal proposes its top ``pool``; every candidate gets all four scores.

    Args:
        q: The query, without its entities yet.
        entities: The query's entity extraction, running in the background (or ``None``).
        indexes: The store's derived indexes (the caller holds the store's lock).
        dense: The store's dense signal.
        cfg: The search's configuration.
        wanted: How many candidates each signal proposes
            (:func:`~norax_core.ranking.proposal_sizes`); signals not listed propose none.
        k: Results asked for (at most ``size``).
        size: How many memories the namespace (and filter) holds.
        weights: The weights chosen for the query (recorded on the candidates).
        forced: Ids that are candidates whatever the signals propose.
        explain: Whether ``matched`` holds every candidate's shared entities (else empty).
    """
    signals = signal_set(indexes, dense, cfg)
    tops: dict[str, Future[dict[str, float]] | dict[str, float]] = {}
    if "dense" in wanted:  # Chroma works while the local signals do; a matrix is local
        if dense.exact(q.namespace):
            tops["dense"] = dense.top(q, wanted["dense"])
        else:
            tops["dense"] = in_background(dense.top, q, wanted["dense"])
    if entities is not None:
        q = varied(q, entities=tuple(entities.result()))
    for name, sig in signals.items():
        if name in wanted and name != "dense":
            tops[name] = sig.top(q, wanted[name])
    union: dict[str, None] = dict.fromkeys(forced)
    proposed: dict[str, list[str]] = {}
    for name in signals:
        if name in tops:
            top = tops[name]
            got = top.result() if isinstance(top, Future) else top
            # (-score, id) pairs sort best first, ties by id, with no key function to call
            proposed[name] = [m for _, m in sorted([(-s, m) for m, s in got.items()])]
            union.update(dict.fromkeys(proposed[name]))
    cand = list(union)
    scores = {name: sig.score(q, cand) for name, sig in signals.items()}
    matched = indexes.graph_signal.explain(q, cand) if explain else {}
    return Candidates(q, k, cand, scores, matched, proposed, size, weights)


@dataclass(frozen=True)
class BridgeSource:
    """What the bridge stage reads for one search: the namespace's graph, query, filter."""

    graph: MemoryEntities
    query: np.ndarray
    allowed: np.ndarray | None

    def at(self, ids: Sequence[str], pad: int | None = None) -> BridgeInput:
        """The view of a table whose rows are ``ids`` (padded with none to ``pad`` rows)."""
        return BridgeInput(self.graph, self.graph.rows_for(ids, pad), self.query, self.allowed)

    def view(self, rows: np.ndarray) -> BridgeInput:
        """The view of a table whose rows are the graph rows ``rows`` (-1: none)."""
        return BridgeInput(self.graph, rows, self.query, self.allowed)


def bridge_source(indexes: DerivedIndexes, q: Query) -> BridgeSource | None:
    """What the bridge stage reads for query ``q``; ``None`` if its namespace has no graph.

    The namespace's memories x entities (cached until the graph changes), the query's entity
    ids and the rows its filter admits. The caller holds the store's lock.
    """
    space = indexes.graph.space(q.namespace)
    if space is None:
        return None
    graph: MemoryEntities = space.memo("bridges", MemoryEntities.of)
    ents = np.array([space.eid[e] for e in q.entities if e in space.eid], np.int64)
    allowed = None
    if q.allowed is not None:
        allowed = np.zeros(graph.n_rows, bool)
        allowed[graph.rows_for([m for m in q.allowed if m in graph.row_of])] = True
    return BridgeSource(graph, ents, allowed)


_EXPLANATION = tuple(f.name for f in dataclasses.fields(Explanation))
"""An :class:`Explanation`'s fields, in its constructor's order (its ``vars()`` order)."""


def search_results(
    ranking: Ranking,
    cands: Candidates,
    records: Mapping[str, Memory],
    weights: Weights,
) -> list[SearchResult]:
    """A search's results from its ranking: each with its signals, plan and explanation.

    Args:
        ranking: The ranking of the search's table.
        cands: The search's candidates (query, matched entities).
        records: The stored memories of the ranked ids (one deleted meanwhile is skipped).
        weights: The weights the search was given (their per-intent overrides are named in
            ``query_plan.weights_intent``).
    """
    names = ranking.table.ids[0] if ranking.table.ids is not None else []
    rows = [r for r in ranking.top() if names[r] in records]
    qp = cands.query.plan
    info = None
    if qp is not None:
        override = qp.intent.value if qp.intent.value in weights.intents else None
        info = varied(qp.info(), weights_intent=override)
    signals = ranking.table.scores[:, 0, rows].T.tolist()
    matched = cands.matched
    out = []
    for r, score, got, parts in zip(
        rows,
        ranking.score[0, rows].tolist(),
        signals,
        ranking.explained(0, rows),
        strict=True,
    ):
        values = {  # the memory's fields, then the search's: SearchResult's field order
            **vars(records[names[r]]),
            "score": score,
            "signals": dict(zip(SIGNALS, got, strict=True)),
            "matched_entities": tuple(matched.get(names[r], ())),
            "query_plan": info,
            "explanation": assembled(Explanation, {f: parts[f] for f in _EXPLANATION}),
        }
        out.append(assembled(SearchResult, values))
    return out
