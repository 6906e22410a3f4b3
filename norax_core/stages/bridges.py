"""Bridges: a second graph step for multi-hop questions.

A multi-hop question names one thing and asks about another ("what did Colby's sister bring
to the party?"): the memory that answers it rarely shares the question's words, but it shares
an entity with a memory that does. After the first pass has ranked the candidates, the
entities of its best ``seeds`` memories, with the query's own entities, seed a personalised
PageRank over the namespace's memories and entities (a bipartite graph: a memory is joined to
each entity it mentions). The memories the walk reaches most, beyond the seeds' own restart
mass, are the bridges: the best ``candidates`` of them join the candidates, and every
candidate gains ``weight`` times its (normalised) walk mass.

:func:`bridge_scores` is the math on one query (pure, numpy only); the stage in
:func:`norax_core.ranking.rank` calls it for every query of a table, so search, ``norax
bench`` and ``norax fit`` share it. :class:`MemoryEntities` is what it reads: a namespace's
``(memory, entity)`` pairs, from the entity graph the store keeps
(:meth:`~norax_core.signals.entity_graph.NamespaceGraph.pairs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import repeat
from typing import TYPE_CHECKING

import numpy as np
import numpy.ma  # noqa: F401 - np.unique imports it at first use (~25 ms in a first search)

from norax_core.stages.walk import Step, iterate

if TYPE_CHECKING:
    from norax_core.signals.entity_graph import NamespaceGraph

__all__ = ["BridgeInput", "MemoryEntities", "best_rows", "bridge_scores"]

DAMPING = 0.5
"""Probability of following an edge rather than restarting (HippoRAG's 0.5)."""
HUB_FRACTION = 0.02
MIN_HUB_DF = 50
"""Entities in more than ``HUB_FRACTION`` of the namespace's memories (and more than
``MIN_HUB_DF``) are hubs and not walked through, as in the graph signal: a speaker's name or
"user" would join everything to everything."""


@dataclass(frozen=True)
class MemoryEntities:
    """A namespace's memories and their entities as a bipartite graph.

    Attributes:
        rows: ``(nnz,)`` the memory row of each ``(memory, entity)`` pair.
        ents: ``(nnz,)`` the entity id of each pair (each pair once).
        n_rows: Memory rows (some may be empty).
        n_ents: Entity ids.
        ids: The memory id of each row (``None`` for an empty one): ties and new rows.
        row_of: The row of each memory id.
        size: Memories of the namespace (for IDF and the hub threshold).
    """

    rows: np.ndarray
    ents: np.ndarray
    n_rows: int
    n_ents: int
    ids: Sequence[str | None]
    row_of: Mapping[str, int]
    size: int

    @classmethod
    def of(cls, space: NamespaceGraph) -> MemoryEntities:
        """The view of a namespace's entity graph (build it through ``space.memo``)."""
        rows, ents = space.pairs()
        return cls(
            rows, ents, len(space.ids), len(space.names), tuple(space.ids), dict(space.slot),
            len(space.slot),
        )  # fmt: skip

    @cached_property
    def walkable(self) -> _Walkable:
        """The walk's pairs and shares without a filter (computed once per view)."""
        return _Walkable.of(self, None)

    def rows_for(self, ids: Sequence[str], pad: int | None = None) -> np.ndarray:
        """The row of each of ``ids`` (-1 if not in the graph), padded with -1 to ``pad``."""
        out = np.full(len(ids) if pad is None else pad, -1, np.int64)
        out[: len(ids)] = np.fromiter(map(self.row_of.get, ids, repeat(-1)), np.int64, len(ids))
        return out


@dataclass(frozen=True)
class BridgeInput:
    """One query's view of its namespace for the bridge stage.

    Attributes:
        graph: The namespace's memories and entities.
        rows: ``(n,)`` the graph row of each table row (-1: none).
        query: The entity ids of the query's entities (those in the graph).
        allowed: ``(graph.n_rows,)`` rows the query's filter admits; ``None``: all.
    """

    graph: MemoryEntities
    rows: np.ndarray
    query: np.ndarray
    allowed: np.ndarray | None = None


def bridge_scores(
    graph: MemoryEntities,
    seeds: np.ndarray,
    weights: np.ndarray,
    query: np.ndarray,
    allowed: np.ndarray | None = None,
    *,
    damping: float = DAMPING,
    seed_gain: bool = False,
    skip_query: bool = False,
) -> np.ndarray:
    r"""Walk mass of every memory from the first-pass memories and the query's entities.

    Parameters
    ----------
    graph : MemoryEntities
        The namespace's ``(memory, entity)`` pairs.
    seeds : numpy.ndarray
        Rows of the first-pass memories that seed the walk.
    weights : numpy.ndarray
        Their restart weights (their first-pass scores; non-positive ones are dropped).
    query : numpy.ndarray
        Entity ids of the query's entities: the restart mass, in proportion to their IDF,
        when no seed has a positive weight.
    allowed : numpy.ndarray, optional
        Rows the filter admits: the walk runs as if the namespace held only those (the
        others are neither seeds nor reached nor passed through, nor counted in the IDF).
    damping : float
        Probability of following an edge.
    seed_gain : bool
        Whether a seed keeps the mass the walk brings it beyond its own restart mass (else
        a seed scores 0).
    skip_query : bool
        Whether the walk leaves out the query's own entities (as it leaves out hubs): it then
        moves only through the other entities of what the first pass found, and none of its
        restart is on the query's entities.

    Returns
    -------
    numpy.ndarray
        ``(graph.n_rows,)`` in [0, 1]: each memory's stationary mass, divided by the largest
        one; 0 for every memory the walk does not reach, and for the seeds themselves (they
        are what the walk starts from) unless ``seed_gain``: then a seed scores what it
        receives through its entities, its stationary mass less its restart mass.

    Notes
    -----
    Personalised PageRank [1]_ [2]_ on the bipartite graph of memories and entities, as
    HippoRAG 2 [3]_ walks passages and phrases together: from a memory ``m`` the walk moves
    to one of its entities ``e`` with probability ``idf(e) / \sum_{f \in E_m} idf(f)``
    (``idf`` as BM25's, over the namespace's memories), from an entity to one of its
    memories uniformly, and restarts with probability ``1 - damping`` at

    ``p = w / \sum w`` on the seeds (on the query's entities, ``idf(q) / \sum idf``, when no
    seed has a positive weight). Restarting partly on the query's entities too, as HippoRAG
    does, lowered LoCoMo's multi-hop gain and was removed (``docs/benchmarks.md``).

    Hub entities (in more than 2 % of the memories and more than 50) are left out, as the
    graph signal leaves them out of its neighbourhoods; a memory without other entities
    sends its mass back to ``p``. A non-seed memory gains mass only through an entity it
    shares with the seeds or the query (or with memories that do), the more the rarer the
    entity; the seeds' own mass is set to 0, so the scores rank the memories the first pass
    did not already put first (with ``seed_gain`` a seed keeps what it receives beyond its
    restart mass, so in a small namespace, where the seeds are most of it, a seed that
    shares a rare entity with a better seed still rises; an entity of one memory only, which
    would return the walk to it, is then left out). Power iteration until the L1 change is
    below 1e-7 (at most 30 steps: the error shrinks by ``damping`` per step).

    Examples
    --------
    >>> g = MemoryEntities(
    ...     rows=np.array([0, 0, 1, 1, 2]), ents=np.array([0, 1, 1, 2, 3]),
    ...     n_rows=3, n_ents=4, ids=["a", "b", "c"], row_of={"a": 0, "b": 1, "c": 2}, size=3,
    ... )
    >>> b = bridge_scores(g, np.array([0]), np.array([1.0]), np.array([0]))
    >>> [round(float(v), 2) for v in b]  # "b" shares entity 1 with the seed "a"; "c" nothing
    [0.0, 1.0, 0.0]

    References
    ----------
    .. [1] Page, Brin, Motwani and Winograd, "The PageRank citation ranking: Bringing order
       to the Web", Stanford InfoLab, 1999.
    .. [2] Haveliwala, "Topic-sensitive PageRank", WWW 2002.
    .. [3] Gutiérrez et al., "From RAG to Memory: Non-Parametric Continual Learning for Large
       Language Models" (HippoRAG 2), ICML 2025: personalised PageRank over passages and
       phrases, seeded by the query's phrases and its dense-retrieved passages.
    """  # noqa: D416 - NumPy sections on purpose: an algorithm docstring (STYLE.md)
    n, e = graph.n_rows, graph.n_ents
    out = np.zeros(n)
    walkable = graph.walkable if allowed is None else _Walkable.of(graph, allowed)
    ok = (weights > 0) & (seeds >= 0)
    if allowed is not None:
        ok &= allowed[np.maximum(seeds, 0)]
    p_mem = np.bincount(seeds[ok], weights=weights[ok], minlength=n)  # np.add.at, faster
    p_ent = np.zeros(e)
    q = query[(query >= 0) & (query < e)] if len(query) else query
    if len(q):  # np.unique's sorted distinct ids, without its overhead on a few
        q = np.array(sorted(set(q.tolist())), np.int64)
        q = q[walkable.df[q] > 0]
    if skip_query and len(q):
        walk = walkable.without(q, seed_gain)
        q = q[walk.has[q]]  # the restart only on entities the walk still follows
    elif seed_gain:
        walk = walkable.gain
        if len(q):
            q = q[walk.has[q]]
    else:
        walk = walkable.step
    if len(q) and not skip_query:
        p_ent[q] = walkable.idf[q]
    on_mem = bool(p_mem.sum() > 0)  # the restart on the seeds, else on the query's entities
    if not on_mem and p_ent.sum() <= 0 or not walk.pairs:
        return out
    p = p_mem if on_mem else p_ent
    p /= p.sum()
    walk_mass, restart = iterate(walk, p, on_mem, damping)
    if seed_gain:
        walk_mass = np.maximum(walk_mass - restart * p_mem, 0.0)
    else:
        walk_mass[p_mem > 0] = 0.0
    if allowed is not None:
        walk_mass[~allowed] = 0.0
    top = walk_mass.max()
    return walk_mass / top if top > 0 else out


@dataclass(frozen=True)
class _Walkable:
    """The pairs the walk follows (hubs and filtered-out memories dropped), with IDFs.

    Its walks (:class:`Step`) go from a memory to an entity in proportion to the entity's
    IDF, and from an entity to each of its memories uniformly.
    """

    rows: np.ndarray
    ents: np.ndarray
    df: np.ndarray
    idf: np.ndarray
    n: int

    @classmethod
    def of(cls, graph: MemoryEntities, allowed: np.ndarray | None) -> _Walkable:
        e = graph.n_ents
        rows, ents = graph.rows, graph.ents
        if allowed is not None and len(rows):
            keep = allowed[rows]
            rows, ents = rows[keep], ents[keep]
        size = graph.size if allowed is None else int(allowed.sum())  # as if alone
        df = np.bincount(ents, minlength=e).astype(np.float64)
        hub = df > max(HUB_FRACTION * size, MIN_HUB_DF)
        if hub.any() and len(rows):
            keep = ~hub[ents]
            rows, ents = rows[keep], ents[keep]
            df = np.bincount(ents, minlength=e).astype(np.float64)
        idf = np.log1p((size - df + 0.5) / (df + 0.5))
        return cls(rows, ents, df, idf, graph.n_rows)

    @cached_property
    def gainful(self) -> tuple[np.ndarray, np.ndarray]:
        """The pairs without entities of one memory only (the walk with ``seed_gain``)."""
        keep = self.df[self.ents] > 1
        return self.rows[keep], self.ents[keep]

    @cached_property
    def step(self) -> Step:
        """The walk over every pair (computed once per view)."""
        return self._step(self.rows, self.ents)

    @cached_property
    def gain(self) -> Step:
        """The walk over :attr:`gainful` (``seed_gain``; computed once per view)."""
        return self._step(*self.gainful)

    def without(self, q: np.ndarray, seed_gain: bool) -> Step:
        """The walk leaving out the entities ``q`` (``skip_query``)."""
        return (self.gain if seed_gain else self.step).without(q)

    def _step(self, rows: np.ndarray, ents: np.ndarray) -> Step:
        return Step.of(self.n, len(self.df), rows, ents, self.df, self.idf)


def best_rows(score: np.ndarray, n: int, ids: Sequence[str | None]) -> np.ndarray:
    """The rows of the ``n`` highest positive scores, ties to the smaller id, best first."""
    pos = np.flatnonzero(score > 0)
    if n <= 0 or not len(pos):
        return np.zeros(0, np.int64)
    vals = score[pos]
    if len(pos) > n:
        kth = np.partition(vals, len(pos) - n)[len(pos) - n]
        keep = vals >= kth
        pos, vals = pos[keep], vals[keep]
    rows = pos.tolist()  # by (-score, id), then row: the order of a stable sort of the rows
    ranked = sorted(zip((-vals).tolist(), [ids[r] or "" for r in rows], rows, strict=True))
    return np.array([r for *_, r in ranked[:n]], np.int64)
