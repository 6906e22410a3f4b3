"""The read path of a search: the candidate table that :func:`norax_core.ranking.rank` ranks.

:meth:`NoraxMemory.search` validates the query, embeds it and holds the store's lock; the
functions here ask the store's signals for their proposals and scores (:func:`gather`) and
turn them into a :class:`~norax_core.ranking.Table` of one query (:func:`search_table`),
which can grow by the context neighbours the ranking asks for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from norax_core.batch import in_background
from norax_core.config import NoraxConfig
from norax_core.indexes import DerivedIndexes
from norax_core.latest import Statements
from norax_core.models import SIGNALS, Explanation, Memory, SearchResult
from norax_core.ranking import NEVER, Extend, Ranking, Table
from norax_core.signals.base import Query, Signal
from norax_core.signals.dense import DenseSignal
from norax_core.stages.bridges import BridgeInput, MemoryEntities
from norax_core.stages.supersede import link_slots
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
        q = dataclasses.replace(q, entities=tuple(entities.result()))
    for name, sig in signals.items():
        if name in wanted and name != "dense":
            tops[name] = sig.top(q, wanted[name])
    union: dict[str, None] = dict.fromkeys(forced)
    proposed: dict[str, list[str]] = {}
    for name in signals:
        if name in tops:
            top = tops[name]
            got = top.result() if isinstance(top, Future) else top
            proposed[name] = sorted(got, key=lambda m, g=got: (-g[m], m))  # type: ignore[misc]
            union.update(dict.fromkeys(proposed[name]))
    cand = list(union)
    scores = {name: sig.score(q, cand) for name, sig in signals.items()}
    matched = indexes.graph_signal.explain(q, cand) if explain else {}
    return Candidates(q, k, cand, scores, matched, proposed, size, weights)


def search_table(
    cands: Candidates,
    indexes: DerivedIndexes,
    dense: DenseSignal,
    cfg: NoraxConfig,
    *,
    supersede: bool = False,
    roles: Callable[[list[str]], Mapping[str, object]] | None = None,
) -> tuple[Table, Extend]:
    """The candidate table of one search, and how to add the context neighbours it asks for.

    The caller holds the store's lock while :func:`~norax_core.ranking.rank` runs. With
    ``supersede``, the table also holds (as rows no signal proposed) the memories that
    supersede its rows (:mod:`norax_core.supersession`), among those the filter allows, so
    the supersession stage can pull them in; with the lane on (``cfg.lane_slots``), the
    namespace's standing instructions and preferences the filter allows
    (:meth:`DerivedIndexes.standing`), so the lane can lift them.

    Args:
        cands: The search's candidates (:func:`gather`).
        indexes: The store's derived indexes.
        dense: The store's dense signal.
        cfg: The search's configuration.
        supersede: Whether the supersession stage will run (its rows are joined).
        roles: The ``role`` metadata of ids (the turns stage's speaker boost); without it
            no row counts as the user's.
    """
    q = cands.query
    catalog = indexes.temporal
    links = indexes.supersede
    state = {"signals": cands.signals}
    bridge = bridge_source(indexes, q) if cfg.bridges_on else None
    standing = set(indexes.standing(q.namespace)) if cfg.lane_slots > 0 else set()
    query_words = frozenset(q.tokens)  # the tokens BM25 reads (engine: the same tokenizer)
    if q.allowed is not None:
        standing &= q.allowed

    # What a table's stages ask of the catalog and the roles depends on each id alone, so
    # it is read once per id for the whole search, however often the table grows.
    near_of: dict[tuple[int, float], dict[str, tuple[str, ...]]] = {}
    role_of: dict[str, object] = {}

    def near(ids: Sequence[str], window: int, gap: float) -> dict[str, tuple[str, ...]]:
        known = near_of.setdefault((window, gap), {})
        todo = [m for m in ids if m not in known]  # the catalog maps a repeated id once
        if todo:
            known.update(catalog.neighbours(q.namespace, todo, window, gap, allowed=q.allowed))
        return known

    def roles_of(ids: list[str]) -> Mapping[str, object]:
        todo = [m for m in ids if m not in role_of]
        if todo and roles is not None:
            found = roles(todo)
            role_of.update((m, found.get(m)) for m in todo)
        return role_of

    def newer_of(ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        # same namespace by construction; an excluded memory never joins
        return links.newer(q.namespace, ids, q.allowed) if supersede else {}

    signals = signal_set(indexes, dense, cfg)

    def scored(extra: list[str]) -> None:
        old = state["signals"]
        state["signals"] = {s: {**old[s], **signals[s].score(q, extra)} for s in SIGNALS}

    def joined(ids: Sequence[str]) -> list[str]:
        """The memories superseding ``ids`` that the table lacks."""
        known = set(ids)
        got = newer_of(ids).values()
        return [m for m in dict.fromkeys(x for v in got for x in v) if m not in known]

    # A row's scores, creation time, kind, standing and graph row depend on its id alone: a
    # grown table (existing rows first, :func:`extend`) reads them for its new rows only.
    grown: list[Any] = []  # [ids, scores, created, kinds, standing, graph rows]

    def columns(ids: list[str]) -> list[Any]:
        have = len(grown[0]) if grown else 0
        if not have or grown[0] != ids[:have]:
            have, grown[:] = 0, []
        new = ids[have:]
        got = state["signals"]
        zero = repeat(0.0)
        part = [
            np.array([list(map(got[s].get, new, zero)) for s in SIGNALS], dtype=np.float64),
            np.array(catalog.created(q.namespace, new), dtype=np.float64),
            np.array(catalog.kinds(q.namespace, new), dtype=str),
            np.array([m in standing for m in new], dtype=bool),
            None if bridge is None else bridge.graph.rows_for(new),
        ]
        if have:
            axis = [1, 0, 0, 0, 0]
            part = [
                None if a is None else np.concatenate([b, a], axis=x)
                for a, b, x in zip(part, grown[1:], axis, strict=True)
            ]
        grown[:] = [list(ids), *part]
        return [a if a is None else a.copy() for a in part]

    def table(ids: list[str]) -> Table:
        rows = {m: r for r, m in enumerate(ids)}
        n = len(ids)
        scores, created, kinds, standing_rows, graph_rows = columns(ids)
        proposed = np.full((len(SIGNALS), 1, n), NEVER, dtype=np.int32)
        for i, s in enumerate(SIGNALS):
            top = cands.proposed.get(s, ())
            if top:
                proposed[i, 0, [rows[m] for m in top]] = np.arange(len(top))
        tie = np.empty(n, dtype=np.int64)
        tie[sorted(range(n), key=ids.__getitem__)] = np.arange(n)

        slots: dict[tuple[int, float], list[np.ndarray]] = {}

        def neighbours(window: int, gap: float) -> list[np.ndarray]:
            if (window, gap) not in slots:
                found = near(ids, window, gap)
                slots[window, gap] = neighbour_slots(rows, found, ids, window, n)
            return [a.copy() for a in slots[window, gap]]

        def sessions(gap: float) -> np.ndarray:
            return np.array([catalog.sessions(q.namespace, ids, gap, allowed=q.allowed)])

        def positions(gap: float) -> np.ndarray:
            got = catalog.session_positions(q.namespace, ids, gap, allowed=q.allowed)
            return np.array([got], dtype=np.int64)

        def users(role: str = "user") -> np.ndarray:
            found = roles_of(ids)
            return np.array([[found.get(m) == role for m in ids]], dtype=bool)

        def words(_: int, at: Sequence[int]) -> list[frozenset[str]]:
            return links.words(q.namespace, [ids[r] for r in at])

        return Table(
            scores=scores.reshape(len(SIGNALS), 1, n),
            proposed=proposed,
            valid=np.ones((1, n), dtype=bool),
            tie=tie[None, :],
            size=np.array([cands.size], dtype=np.int64),
            created=created.reshape(1, n),
            neighbours=neighbours,
            ids=[ids],
            plans=[q.plan],
            entities=None if bridge is None else [bridge.view(graph_rows)],
            sessions=sessions,
            positions=positions,
            users=users,
            newer=link_slots([rows], [newer_of(ids)], n),
            kinds=kinds.reshape(1, n),
            standing=standing_rows.reshape(1, n),
            statements=Statements(
                query=[query_words],
                words=words,
                replies=lambda: users("assistant"),
                cues=links.cues,
                change=links.outright,
                now=links.now_words,
                shift=links.shifts,
            ),
        )

    def extend(t: Table, wanted: np.ndarray, add: Sequence[Sequence[str]] = ()) -> Table:
        ids = t.ids[0] if t.ids is not None else []
        seeds = [ids[r] for r in np.flatnonzero(wanted[0]).tolist()]
        # neighbours among the memories the filter allows: an excluded one never takes a slot
        found = near(seeds, cfg.context_window, cfg.context_gap_seconds)
        known = set(ids)
        joining = [x for s in seeds for x in found.get(s, ())]
        if add:  # the bridge step's memories: the namespace's graph, so only check the filter
            joining += [m for m in add[0] if q.allowed is None or m in q.allowed]
        extra = [m for m in dict.fromkeys(joining) if m not in known]
        extra += joined([*ids, *extra])  # and the memories superseding any of them
        if not extra:
            return t
        scored(extra)
        return table([*ids, *extra])  # existing rows keep their index

    first = joined(cands.ids)
    first += sorted(standing - set(cands.ids) - set(first))
    if first:
        scored(first)
    return table(sorted([*cands.ids, *first])), extend


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


def neighbour_slots(
    rows_of: Mapping[str, int],
    near: Mapping[str, tuple[str, ...]],
    ids: list[str],
    window: int,
    pad: int,
) -> list[np.ndarray]:
    """One query's neighbour slots (see :data:`Neighbours`) from ``{id: neighbour ids}``."""
    out = np.full((2 * window, 1, pad), pad, dtype=np.int64)
    slot: list[int] = []  # one assignment for all rows: (slot, row) -> neighbour row
    col: list[int] = []
    val: list[int] = []
    get = near.get
    for r, m in enumerate(ids):
        nb = get(m)
        if nb:
            found = [rows_of[x] for x in nb if x in rows_of]
            slot += range(len(found))
            col += [r] * len(found)
            val += found
    if val:
        out[slot, 0, col] = val
    return list(out)


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
    scores = ranking.table.scores[:, 0, :]
    qp = cands.query.plan
    info = None
    if qp is not None:
        override = qp.intent.value if qp.intent.value in weights.intents else None
        info = dataclasses.replace(qp.info(), weights_intent=override)
    return [
        SearchResult(
            **vars(records[mid]),
            score=float(ranking.score[0, r]),
            signals={s: float(scores[i, r]) for i, s in enumerate(SIGNALS)},
            matched_entities=tuple(cands.matched.get(mid, ())),
            query_plan=info,
            explanation=Explanation(**ranking.explain(0, r)),
        )
        for mid, r in zip(ranking.ids(), ranking.top(), strict=True)
        if mid in records
    ]
