"""A search's candidate table: the rows :func:`norax_core.ranking.rank` ranks, grown in place.

:func:`search_table` turns a search's :class:`~norax_core.retrieval.Candidates` into a
:class:`~norax_core.ranking.Table` of one query, and gives the ranking the way to add the
context neighbours and bridge memories it asks for. What a row holds depends on its id alone
(its scores, time, standing, graph row, role, neighbours), so each is read once per id into
columns over the table's one id list, however often the table grows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import repeat

import numpy as np

from norax_core.config import NoraxConfig
from norax_core.indexes import DerivedIndexes
from norax_core.latest import Statements
from norax_core.models import SIGNALS
from norax_core.ranking import NEVER, Extend, Table
from norax_core.retrieval import Candidates, bridge_source, signal_set
from norax_core.signals.dense import DenseSignal
from norax_core.stages import lane
from norax_core.stages.supersede import link_slots

__all__ = ["neighbour_slots", "search_table"]


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
    (:meth:`DerivedIndexes.standing`) that the lane could pick (:meth:`_Rows.lane_rows`),
    so the lane can lift them.

    Args:
        cands: The search's candidates (:func:`gather`).
        indexes: The store's derived indexes.
        dense: The store's dense signal.
        cfg: The search's configuration.
        supersede: Whether the supersession stage will run (its rows are joined).
        roles: The ``role`` metadata of ids (the turns stage's speaker boost); without it
            no row counts as the user's.
    """
    rows = _Rows(cands, indexes, dense, cfg, supersede, roles)
    # With context propagation on, the context stage grows the table first (:meth:`extend`),
    # and that joins the memories superseding any row: until then they would be rows no
    # stage reads, so they join there, scored with the context neighbours.
    first = [] if cfg.context_on else rows.joined(cands.ids)
    first += rows.lane_rows({*cands.ids, *first})
    rows.scored(first)
    return rows.table(sorted([*cands.ids, *first])), rows.extend


class _Rows:
    """The rows of one search's table, read once per id however often the table grows.

    A row's scores, creation time, standing, graph row, role and catalog neighbours
    depend on its id alone, and a grown table keeps its existing rows first (:meth:`extend`):
    each is read for the new rows only, into columns over the table's one id list.
    """

    def __init__(
        self,
        cands: Candidates,
        indexes: DerivedIndexes,
        dense: DenseSignal,
        cfg: NoraxConfig,
        supersede: bool,
        roles: Callable[[list[str]], Mapping[str, object]] | None,
    ) -> None:
        q = self.q = cands.query
        self.cands, self.cfg, self.supersede, self.roles = cands, cfg, supersede, roles
        self.catalog, self.links = indexes.temporal, indexes.supersede
        self.signals = signal_set(indexes, dense, cfg)
        self.got = {s: dict(cands.signals[s]) for s in SIGNALS}  # grown by scored(), in place
        self.bridge = bridge_source(indexes, q) if cfg.bridges_on else None
        standing = set(indexes.standing(q.namespace)) if cfg.lane_slots > 0 else set()
        self.standing = standing if q.allowed is None else standing & q.allowed
        self.query_words = frozenset(q.tokens)  # the tokens BM25 reads (the engine's tokenizer)
        self.near_of: dict[tuple[int, float], dict[str, tuple[str, ...]]] = {}
        self.ids: list[str] = []  # the rows so far, in row order
        self.row_of: dict[str, int] = {}
        self.cols: list[np.ndarray] = []  # scores, created, standing (graph rows: below)
        self.graph_rows: np.ndarray | None = None
        self.role: dict[str, str] = {}  # the roles read so far ("" for none)
        self.proposed: np.ndarray | None = None  # (4, 1, n0): only first-table rows are proposed

    def near(self, ids: Sequence[str], window: int, gap: float) -> dict[str, tuple[str, ...]]:
        """The catalog neighbours of ``ids`` (the filter's), read once per id and window."""
        known = self.near_of.setdefault((window, gap), {})
        todo = [m for m in ids if m not in known]  # the catalog maps a repeated id once
        if todo:
            q = self.q
            known.update(self.catalog.neighbours(q.namespace, todo, window, gap, allowed=q.allowed))
        return known

    def newer_of(self, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """The memories superseding ``ids`` (same namespace; an excluded one never joins)."""
        q = self.q
        return self.links.newer(q.namespace, ids, q.allowed) if self.supersede else {}

    def joined(self, ids: Sequence[str]) -> list[str]:
        """The memories superseding ``ids`` that the table lacks."""
        known = set(ids)
        got = self.newer_of(ids).values()
        return [m for m in dict.fromkeys(x for v in got for x in v) if m not in known]

    def lane_rows(self, have: set[str]) -> list[str]:
        """The standing memories, beyond ``have``, that the lane could pick, sorted.

        Only those (:func:`~norax_core.stages.lane.pickable`, by their dense score) need
        rows; the others are read as any memory is, should a stage bring them in (their
        context, bridge or supersession neighbours): a row no signal proposed and no stage
        reached changes nobody's score.
        """
        rest_of = self.standing - have
        if not rest_of or self._outranked(have):  # most searches: nothing to sort or score
            return []
        rest = sorted(rest_of)
        got = self.signals["dense"].score(self.q, rest)
        match = np.array([got.get(m, 0.0) for m in rest], dtype=np.float64)
        keep = lane.pickable(match, self.cfg.lane_similarity, self.cfg.lane_slots)
        return [m for m, kept in zip(rest, keep.tolist(), strict=True) if kept]

    def _outranked(self, have: set[str]) -> bool:
        """Whether the dense proposals show that no standing memory beyond ``have`` is pickable.

        An exact dense top-``n`` (:func:`~norax_core.signals.dense.exact_top`) scores every
        memory it left out at most its lowest score: below ``lane_similarity``, and behind
        ``lane_slots + 1`` standing memories ``have`` holds, none of them is pickable
        (:func:`~norax_core.stages.lane.pickable`), so the lane needs no scores of them.
        """
        top = self.cands.proposed.get("dense")
        if not top or not self.signals["dense"].exact(self.q.namespace):  # type: ignore[attr-defined]
            return False
        dense = self.cands.signals["dense"]
        floor = min(dense[m] for m in top)
        if floor >= self.cfg.lane_similarity:
            return False
        ahead = sum(1 for m in self.standing & have if dense.get(m, -1.0) >= floor)
        return ahead > self.cfg.lane_slots

    def scored(self, extra: list[str]) -> None:
        """Every signal's scores of ``extra`` join the search's."""
        if extra:
            for s in SIGNALS:
                self.got[s].update(self.signals[s].score(self.q, extra))

    def grow(self, ids: list[str]) -> int:
        """Make ``ids`` the rows (a table grows at its end); the first new row's index."""
        have = len(self.ids)
        if not have or self.ids != ids[:have]:
            have, self.ids, self.row_of, self.cols = 0, [], {}, []
            self.graph_rows = self.proposed = None
        new = ids[have:]
        if not new and self.cols:  # an empty table still gets its (empty) columns
            return have
        q, catalog, got, zero = self.q, self.catalog, self.got, repeat(0.0)
        part = [
            np.array([list(map(got[s].get, new, zero)) for s in SIGNALS], dtype=np.float64),
            np.array(catalog.created(q.namespace, new), dtype=np.float64),
            np.array([m in self.standing for m in new], dtype=bool),
        ]
        if have:
            part = [
                np.concatenate([b, a], axis=a.ndim - 1)
                for a, b in zip(part, self.cols, strict=True)
            ]
        self.cols = part
        if self.bridge is not None:
            g = self.bridge.graph.rows_for(new)
            self.graph_rows = g if self.graph_rows is None else np.concatenate([self.graph_rows, g])
        self.row_of.update(zip(new, range(have, len(ids)), strict=False))
        self.ids = list(ids)
        return have

    def users(self, n: int, role: str, wanted: np.ndarray | None = None) -> np.ndarray:
        """``(1, n)`` whether each of the first ``n`` rows (those of ``wanted``) has ``role``."""
        at = range(n) if wanted is None else np.flatnonzero(wanted[0]).tolist()
        ids, known = self.ids, self.role
        todo = [ids[r] for r in at if ids[r] not in known]
        if todo:
            found = self.roles(todo) if self.roles is not None else {}
            known.update((m, str(found.get(m) or "")) for m in todo)
        if wanted is None:
            return np.array([[known[m] == role for m in ids[:n]]], dtype=bool)
        out = np.zeros((1, n), dtype=bool)
        out[0, at] = [known[ids[r]] == role for r in at]
        return out

    def proposals(self, n: int) -> np.ndarray:
        """``(4, 1, n)`` each row's position in each signal's proposals (:data:`NEVER`: none)."""
        if self.proposed is None:
            at = [[NEVER] * n for _ in SIGNALS]  # plain lists: a few dozen rows
            row_of = self.row_of
            for place, s in zip(at, SIGNALS, strict=True):
                for i, m in enumerate(self.cands.proposed.get(s, ())):
                    place[row_of[m]] = i
            self.proposed = np.array(at, dtype=np.int32).reshape(len(SIGNALS), 1, n)
        have = self.proposed.shape[2]
        if have == n:
            return self.proposed.copy()
        out = np.full((len(SIGNALS), 1, n), NEVER, dtype=np.int32)
        out[:, :, :have] = self.proposed
        return out

    def table(self, ids: list[str]) -> Table:
        """The table whose rows are ``ids``."""
        self.grow(ids)
        q, catalog, links, rows = self.q, self.catalog, self.links, self.row_of
        n = len(ids)
        scores, created, standing = (a.copy() for a in self.cols)
        graph_rows = None if self.graph_rows is None else self.graph_rows.copy()
        tie = np.empty(n, dtype=np.int64)
        tie[sorted(range(n), key=ids.__getitem__)] = np.arange(n)
        slots: dict[tuple[int, float], list[np.ndarray]] = {}

        def neighbours(window: int, gap: float) -> list[np.ndarray]:
            if (window, gap) not in slots:
                found = self.near(ids, window, gap)
                slots[window, gap] = neighbour_slots(rows, found, ids, window, n)
            return [a.copy() for a in slots[window, gap]]

        def sessions(gap: float) -> np.ndarray:
            return np.array([catalog.sessions(q.namespace, ids, gap, allowed=q.allowed)])

        def positions(gap: float, wanted: np.ndarray | None = None) -> np.ndarray:
            if wanted is None:
                got = catalog.session_positions(q.namespace, ids, gap, allowed=q.allowed)
                return np.array([got], dtype=np.int64)
            at = np.flatnonzero(wanted[0]).tolist()
            out = np.full((1, n), -1, dtype=np.int64)
            some = [ids[r] for r in at]
            out[0, at] = catalog.session_positions(q.namespace, some, gap, allowed=q.allowed)
            return out

        def users(wanted: np.ndarray | None = None) -> np.ndarray:
            return self.users(n, "user", wanted)

        def words(_: int, at: Sequence[int]) -> list[frozenset[str]]:
            return links.words(q.namespace, [ids[r] for r in at])

        return Table(
            scores=scores.reshape(len(SIGNALS), 1, n),
            proposed=self.proposals(n),
            valid=np.ones((1, n), dtype=bool),
            tie=tie[None, :],
            size=np.array([self.cands.size], dtype=np.int64),
            created=created.reshape(1, n),
            neighbours=neighbours,
            ids=[ids],
            plans=[q.plan],
            entities=None if self.bridge is None else [self.bridge.view(graph_rows)],  # type: ignore[arg-type]
            sessions=sessions,
            positions=positions,
            users=users,
            newer=link_slots([rows], [self.newer_of(ids)], n),
            standing=standing.reshape(1, n),
            statements=Statements(
                query=[self.query_words],
                words=words,
                replies=lambda wanted=None: self.users(n, "assistant", wanted),
                cues=links.cues,
                change=links.outright,
                now=links.now_words,
                shift=links.shifts,
            ),
        )

    def extend(self, t: Table, wanted: np.ndarray, add: Sequence[Sequence[str]] = ()) -> Table:
        """:data:`~norax_core.ranking.Extend`: the neighbours of ``wanted`` and ``add`` join."""
        q, cfg = self.q, self.cfg
        ids = t.ids[0] if t.ids is not None else []
        seeds = [ids[r] for r in np.flatnonzero(wanted[0]).tolist()]
        # neighbours among the memories the filter allows: an excluded one never takes a slot
        found = self.near(seeds, cfg.context_window, cfg.context_gap_seconds)
        known = set(ids)
        joining = [x for s in seeds for x in found.get(s, ())]
        if add:  # the bridge step's memories: the namespace's graph, so only check the filter
            joining += [m for m in add[0] if q.allowed is None or m in q.allowed]
        extra = [m for m in dict.fromkeys(joining) if m not in known]
        extra += self.joined([*ids, *extra])  # and the memories superseding any of them
        if not extra:
            return t
        self.scored(extra)
        return self.table([*ids, *extra])  # existing rows keep their index


def neighbour_slots(
    rows_of: Mapping[str, int],
    near: Mapping[str, tuple[str, ...]],
    ids: list[str],
    window: int,
    pad: int,
) -> list[np.ndarray]:
    """One query's neighbour slots (see :data:`Neighbours`) from ``{id: neighbour ids}``.

    Each row's neighbours that are rows (of the first ``pad``) fill its slots from the first
    on, in ``near``'s order.
    """
    width = 2 * window
    # plain lists: a table holds a few dozen rows, for which numpy's per-call cost dominates
    out = [[pad] * pad for _ in range(width)]
    get_row = rows_of.get
    for col, m in enumerate(ids):
        slot = 0
        for x in near.get(m, ()):
            row = get_row(x, pad)
            if row < pad:  # a neighbour that is no row (or added after this table) is skipped
                out[slot][col] = row
                slot += 1
    return list(np.array(out, dtype=np.int64).reshape(width, 1, pad))
