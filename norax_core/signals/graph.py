"""The entity-graph signal: memories that share, or sit near, the query's entities.

:class:`GraphSignal` scores the memories of a namespace from the query's entities (the formula
is in its docstring) by reading :class:`~norax_core.signals.entity_graph.EntityGraph`, which
keeps the per-namespace co-occurrence graphs and their communities. ``EntityGraph`` is
re-exported here, where the rest of Norax imports it from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import partial
from itertools import repeat
from typing import Any

import numpy as np

from norax_core.signals.base import Query
from norax_core.signals.entity_graph import EntityGraph, NamespaceGraph
from norax_core.signals.graph_hoods import Hoods

__all__ = ["EntityGraph", "GraphConfig", "GraphSignal", "personalized_pagerank"]


@dataclass(frozen=True)
class GraphConfig:
    """Weights and limits of :class:`GraphSignal`.

    Attributes:
        direct: Weight of the query entities a memory shares (IDF-weighted).
        community: Weight of community peers of the query entities.
        proximity: Weight of personalised-PageRank proximity to the query entities.
        damping: PageRank damping (probability of following an edge rather than restarting).
        neighbours: First-hop neighbours kept per query entity.
        second_hop: First-hop neighbours expanded again, and neighbours kept for each.
        hub_fraction: Entities in more than this share of the namespace's memories (and in
            more than ``min_hub_df``) are hubs: never expanded nor reached, only matched
            directly when they are query entities (they tell little and cost most).
        min_hub_df: No entity in this many memories or fewer is a hub.
        max_iter: PageRank iterations at most.
        tol: PageRank convergence tolerance (per node, L1).
    """

    direct: float = 0.6
    community: float = 0.1
    proximity: float = 0.3
    damping: float = 0.5
    neighbours: int = 32
    second_hop: int = 8
    hub_fraction: float = 0.02
    min_hub_df: int = 50
    max_iter: int = 50
    tol: float = 1e-6

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"GraphConfig.{f.name} must be a number >= 0, got {value!r}")
        if self.direct + self.community + self.proximity <= 0:
            raise ValueError("GraphConfig: direct + community + proximity must be > 0")
        if self.damping >= 1:
            raise ValueError(f"GraphConfig.damping must be in [0, 1), got {self.damping}")


def personalized_pagerank(
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    personalization: np.ndarray,
    *,
    damping: float = 0.5,
    max_iter: int = 50,
    tol: float = 1e-6,
) -> np.ndarray:
    """Personalised PageRank by power iteration over a weighted edge list.

    Parameters
    ----------
    n : int
        Number of nodes, numbered ``0 .. n-1``.
    src, dst, weight : numpy.ndarray
        Directed weighted edges ``src -> dst`` (both directions for an undirected graph).
    personalization : numpy.ndarray
        Restart distribution over the nodes (non-negative, summing to 1).
    damping : float
        Probability of following an edge at each step; ``1 - damping`` restarts.
    max_iter, tol : int, float
        Stop after ``max_iter`` steps or once the L1 change is below ``n * tol``.

    Returns
    -------
    numpy.ndarray
        The fixed point of ``x = damping * (W x + (d . x) p) + (1 - damping) p``, where ``W``
        is the column-normalised weight matrix and dangling nodes ``d`` jump to ``p``.

    Examples
    --------
    >>> x = personalized_pagerank(
    ...     2, np.array([0, 1]), np.array([1, 0]), np.ones(2), np.array([1.0, 0.0])
    ... )
    >>> [round(float(v), 3) for v in x]
    [0.667, 0.333]

    References
    ----------
    .. [1] Page, Brin, Motwani and Winograd, "The PageRank citation ranking: Bringing order
       to the Web", Stanford InfoLab, 1999.
    .. [2] Haveliwala, "Topic-sensitive PageRank", WWW 2002.
    .. [3] networkx ``pagerank_alg.py``: the same update and dangling-node handling.
    """  # noqa: D416 - NumPy sections on purpose: an algorithm docstring (STYLE.md)
    out_strength = np.bincount(src, weights=weight, minlength=n)
    share = weight / out_strength[src]
    share *= damping  # folded into the shares: a step is d W x + (1 - d + d lost) p
    dangling = np.flatnonzero(out_strength == 0)
    p = np.asarray(personalization, np.float64)
    restart = (1 - damping) * p
    x = p.copy()
    pair, diff = np.empty(len(src)), np.empty(n)
    add = np.add.reduce  # ``sum`` without the method's Python wrapper
    for _ in range(max_iter):  # the plain steps, in place (values equal up to rounding)
        prev = x
        # into ``out``, mode "raise" buffers (3 x slower); "wrap" reads the same values
        np.multiply(share, prev.take(src, out=pair, mode="wrap"), out=pair)
        x = np.bincount(dst, weights=pair, minlength=n)
        if len(dangling):  # else only the restart
            np.add(x, (1 - damping + damping * add(prev.take(dangling))) * p, out=x)
        else:
            np.add(x, restart, out=x)
        if add(np.abs(np.subtract(x, prev, out=diff), out=diff)) < n * tol:
            break
    return x


@dataclass(frozen=True)
class _Tables:
    """One query's entity weights, and every memory's score summed from them."""

    ents: np.ndarray  # entity ids: the seeds first, then the rest of the neighbourhood
    direct: np.ndarray  # per entity: ν(q) / |S| if a seed, else 0
    log_peer: np.ndarray  # per entity: log(1 - c(e)), 0 if not a peer
    log_near: np.ndarray  # per entity: log(1 - r(e)), seeds included
    n_seeds: int
    cand: np.ndarray  # the rows holding any of ``ents``, ascending
    total: np.ndarray  # their scores (unclipped)
    by_row: np.ndarray  # every row's score (at most 1), 0 for the others, and a last 0 for -1


def _new_hoods(cfg: GraphConfig, space: NamespaceGraph) -> Hoods:
    hub_df = max(cfg.hub_fraction * len(space.slot), cfg.min_hub_df)
    return Hoods(space, cfg.neighbours, cfg.second_hop, hub_df)


_MAX_P = 1.0 - 1e-12  # keeps log(1 - p) finite; moves a score by at most 1e-12


class GraphSignal:
    r"""Scores memories by the query entities they share or sit near in the entity graph.

    Parameters
    ----------
    graph : EntityGraph
        The graph to read (never written to, except for lazy community upkeep).
    config : GraphConfig, optional
        Weights and neighbourhood limits; :class:`GraphConfig` defaults when omitted.

    Notes
    -----
    For a query in a namespace of ``N`` memories, let ``S`` be its entities that are in the
    namespace's graph (none gives zero everywhere), ``df(e)`` the number of memories with
    ``e``, ``idf(e) = ln(1 + (N - df(e) + 0.5) / (df(e) + 0.5))`` [1]_, and ``ν(e) = idf(e) /
    idf_max`` its specificity: its IDF as a share of the largest possible (``df = 1``). A
    memory ``m`` with entities ``E_m`` scores

    ``s(m) = w_d D(m) + w_c C(m) + w_p P(m)``, with ``w_d + w_c + w_p = 1`` (0.6, 0.1, 0.3):

    * direct: ``D(m) = Σ_{q ∈ S ∩ E_m} ν(q) / |S|``, the share of the query's entities that
      ``m`` contains, each counted by its specificity: a rare entity counts almost fully, a hub
      in half the memories about a tenth;
    * community: ``C(m) = 1 - Π_{e ∈ E_m ∩ L∖S} (1 - c(e))``, a noisy-OR [5]_ over ``m``'s
      entities of the neighbourhood ``L`` that share a Louvain community [2]_ with query
      entities, with ``c(e) = ν(e) Σ_{q ∈ S : comm(q) = comm(e)} idf(q) / Σ_{q ∈ S} idf(q)``;
    * proximity: ``P(m) = 1 - Π_{e ∈ E_m ∩ L} (1 - r(e))``, with ``r(e) = π(e) ν(e) /
      max_{f ∈ L} π(f) ν(f)``, where ``π`` is personalised PageRank [3]_ [4]_ (damping 0.5)
      on the subgraph induced by ``L``, restarting at the seeds in proportion to their IDF.
      The seeds take part, so an entity reached only through a hub seed (little restart
      mass, many neighbours) stays far below a specific query entity.

    ``L`` is ``S`` plus, for each non-hub seed, its ``neighbours`` best non-hub neighbours
    (co-occurrence weight times IDF) and the ``second_hop`` best of each of their first
    ``second_hop``. Each term lies in [0, 1] and depends only on the query and the namespace
    (not on which ids are asked about), so ``s(m)`` lies in [0, 1] without dividing by the
    best candidate, and :meth:`top` and :meth:`score` agree. Noisy-OR lets several nearby
    entities add up while saturating below 1. A memory holding the query's entities thus
    scores near 1; one that only shares their strong, specific neighbours about
    ``0.1 C + 0.3 P``, typically 0.15-0.4; one outside ``L`` scores 0.

    Every memory of ``L``'s entities (read from the inverted index, hub seeds' included) is
    scored once per query and namespace version, in one pass over their spans: :meth:`top`
    ranks those scores and :meth:`score` and :meth:`explain` look them up.

    Examples
    --------
    >>> g = EntityGraph()
    >>> g.add_many("ns", [("a", ["colby", "wallet"]), ("b", ["colby", "base"]), ("c", ["cat"])])
    >>> sig = GraphSignal(g)
    >>> q = Query(text="", namespace="ns", now=0.0, entities=("wallet",))
    >>> {k: round(v, 2) for k, v in sig.top(q, 5).items()}
    {'a': 0.95, 'b': 0.21}
    >>> sig.explain(q, ["b"])
    {'b': ('base', 'colby')}

    References
    ----------
    .. [1] Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
       Foundations and Trends in IR, 2009 (the IDF).
    .. [2] Blondel, Guillaume, Lambiotte and Lefebvre, "Fast unfolding of communities in large
       networks", J. Stat. Mech., 2008 (Louvain).
    .. [3] Haveliwala, "Topic-sensitive PageRank", WWW 2002.
    .. [4] Gutiérrez et al., "HippoRAG: Neurobiologically Inspired Long-Term Memory for Large
       Language Models", NeurIPS 2024 (PageRank personalised on the query's entities,
       damping 0.5).
    .. [5] Pearl, "Probabilistic Reasoning in Intelligent Systems", 1988 (noisy-OR).
    """  # noqa: D416 - NumPy sections on purpose: the formula docstring (STYLE.md)

    name = "graph"

    def __init__(self, graph: EntityGraph, config: GraphConfig | None = None) -> None:
        self.graph = graph
        self.config = config or GraphConfig()
        c = self.config
        total = c.direct + c.community + c.proximity
        self._w = (c.direct / total, c.community / total, c.proximity / total)
        self._cache: dict[tuple[str, tuple[str, ...], int], _Tables | None] = {}
        # what a namespace's Hoods depend on besides its graph, and their builder (made once)
        self._hoods_key = (
            f"graph-hoods:{c.hub_fraction!r}:{c.min_hub_df}:{c.neighbours}:{c.second_hop}"
        )
        self._hoods_of = partial(_new_hoods, self.config)

    # -- the Signal protocol --------------------------------------------------------------

    def top(self, query: Query, n: int) -> dict[str, float]:
        """Up to ``n`` best memories of ``query.namespace``, best first."""
        space, t = self._prepare(query)
        if space is None or t is None or n <= 0:
            return {}
        cand, total = self._admitted(query, space, t.cand, t.total)
        positive = total > 0
        cand, total = cand[positive], total[positive]
        if len(cand) > n:  # the n best; ties at the cut to the smaller id, as BM25's top
            kth = np.partition(total, len(total) - n)[len(total) - n]
            above, tied = np.flatnonzero(total > kth), np.flatnonzero(total == kth)
            need = n - len(above)
            if len(tied) > need:
                names = space.ids
                tied = np.array(sorted(tied.tolist(), key=lambda j: names[cand[j]] or "")[:need])
            best = np.concatenate([above, tied])
            cand, total = cand[best], total[best]
        ids = [space.ids[r] or "" for r in cand.tolist()]
        ranked = sorted(zip((-total).tolist(), ids, strict=True))
        return {mid: min(-neg, 1.0) for neg, mid in ranked}

    def score(self, query: Query, ids: Sequence[str]) -> dict[str, float]:
        """The score of each of ``ids`` that ``query.allowed`` admits (0.0 if not indexed)."""
        space, t = self._prepare(query)
        admitted = ids if query.allowed is None else [i for i in ids if i in query.allowed]
        if space is None or t is None or not admitted:
            return dict.fromkeys(admitted, 0.0)
        rows = np.fromiter(map(space.slot.get, admitted, repeat(-1)), np.int64, len(admitted))
        return dict(zip(admitted, t.by_row[rows].tolist(), strict=True))

    def explain(self, query: Query, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """For each admitted id, the entities behind its score.

        Query entities the memory shares come first, in query order; then its community
        peers and nearby entities, strongest contribution first (ties in the memory's order).
        """
        space, t = self._prepare(query)
        admitted = ids if query.allowed is None else [i for i in ids if i in query.allowed]
        out: dict[str, tuple[str, ...]] = dict.fromkeys(admitted, ())
        if space is None or t is None or not admitted:
            return out
        rows = np.fromiter(map(space.slot.get, admitted, repeat(-1)), np.int64, len(admitted))
        scored = (t.by_row[rows] > 0).nonzero()[0].tolist()  # the others hold nothing that pulls
        if not scored:
            return out
        _, wc, wp = self._w
        pull = (-wc * np.expm1(t.log_peer) - wp * np.expm1(t.log_near)).tolist()
        ents, s = t.ents.tolist(), t.n_seeds
        # each entity's place: the seeds by query order, below every other's -pull (> -1)
        place: dict[int, float] = dict(zip(ents[:s], range(-s - 2, -2), strict=True))
        place.update((e, -p) for e, p in zip(ents[s:], pull[s:], strict=True) if p > 0)
        ents_of, names = space.row_ents, space.names
        for i, row in zip(scored, rows[scored].tolist(), strict=True):
            hits = sorted([e for e in ents_of(row) if e in place], key=place.__getitem__)
            out[admitted[i]] = tuple(map(names.__getitem__, hits))
        return out

    # -- internals ------------------------------------------------------------------------

    def _combine(self, d: Any, log_c: Any, log_p: Any) -> Any:
        """``w_d D + w_c C + w_p P`` from ``D`` and the noisy-ORs' log complements."""
        wd, wc, wp = self._w
        return wd * d - wc * np.expm1(log_c) - wp * np.expm1(log_p)

    @staticmethod
    def _admitted(
        query: Query, space: NamespaceGraph, cand: np.ndarray, total: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        if query.allowed is None or not len(cand):
            return cand, total
        if len(query.allowed) < len(cand):
            allowed = [space.slot[i] for i in query.allowed if i in space.slot]
            keep = np.isin(cand, np.array(allowed, np.int64))
        else:
            keep = np.array([space.ids[r] in query.allowed for r in cand.tolist()], bool)
        return cand[keep], total[keep]

    def _prepare(self, query: Query) -> tuple[NamespaceGraph | None, _Tables | None]:
        space = self.graph.space(query.namespace)
        if space is None:
            return None, None
        key = (query.namespace, tuple(query.entities), space.version)
        if key not in self._cache:
            if len(self._cache) >= 8:
                del self._cache[next(iter(self._cache))]
            self._cache[key] = self._tables(space, query.entities)
        return space, self._cache[key]

    def _tables(self, space: NamespaceGraph, entities: Sequence[str]) -> _Tables | None:
        seeds = list(dict.fromkeys(space.eid[q] for q in entities if q in space.eid))
        if not seeds:
            return None
        cfg = self.config
        # each seed's block depends on the graph alone: kept until it changes
        hoods: Hoods = space.memo(self._hoods_key, self._hoods_of)
        blocks, ents, starts = hoods.union(seeds)
        s, m = len(seeds), len(ents)
        idf = hoods.idf[ents]
        nu = idf / hoods.idf1
        direct = np.zeros(m)
        direct[:s] = nu[:s] / s
        if m == s:
            return self._rows(space, ents, direct, np.zeros(m), np.zeros(m), s)
        src, dst, wts = hoods.edges(blocks, ents, starts)
        restart = np.zeros(m)
        restart[:s] = idf[:s] / np.add.reduce(idf[:s])
        pi = personalized_pagerank(
            m,
            src,
            dst,
            wts,
            restart,
            damping=cfg.damping,
            max_iter=cfg.max_iter,
            tol=cfg.tol,
        )
        rel = pi * nu
        top = np.maximum.reduce(rel)
        near = np.minimum(rel / top, _MAX_P) if top > 0 else np.zeros(m)
        comm = space.comm[ents]
        share: dict[int, float] = {}
        for c, v in zip(comm[:s].tolist(), restart[:s].tolist(), strict=True):
            share[c] = share.get(c, 0.0) + v
        peer = np.zeros(m)
        for c, v in share.items():
            peer[comm == c] = v
        peer *= nu
        peer[:s] = 0.0
        np.minimum(peer, _MAX_P, out=peer)
        return self._rows(space, ents, direct, np.log1p(-peer), np.log1p(-near), s)

    def _rows(
        self,
        space: NamespaceGraph,
        ents: np.ndarray,
        direct: np.ndarray,
        log_peer: np.ndarray,
        log_near: np.ndarray,
        n_seeds: int,
    ) -> _Tables:
        """The tables, with the score of every row holding any of ``ents``.

        A row's sums ``D``, ``log(1 - C)`` and ``log(1 - P)`` add its entities in the order
        of ``ents`` (whatever order each entity lists its rows in), read from the
        incidence's spans: hub seeds included, one gather for all of them.
        """
        inc = space.incidence()
        flat, lengths = inc.gather(inc.ent_ptr, inc.ent_rows, ents)
        size = len(space.ids)
        cand = np.bincount(flat, minlength=size).nonzero()[0]
        d, lc, lp = (
            np.bincount(flat, weights=col.repeat(lengths), minlength=size)[cand]
            for col in (direct, log_peer, log_near)
        )
        total = self._combine(d, lc, lp)
        by_row = np.zeros(size + 1)
        by_row[cand] = np.minimum(total, 1.0)
        return _Tables(ents, direct, log_peer, log_near, n_seeds, cand, total, by_row)
