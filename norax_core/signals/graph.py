"""The entity-graph signal: memories that share, or sit near, the query's entities.

:class:`EntityGraph` holds one co-occurrence graph per namespace: entities are nodes (with the
number of memories that mention them), two entities of the same memory are joined by an edge
whose weight counts such memories, and an inverted index maps each entity to its memories.
Namespaces share nothing (ids, counts, IDF, edges, communities, caches), so writes to one can
never change a score in another.

Community policy: Louvain (fixed seed) partitions each namespace's graph. Between runs an entity
that appears for the first time joins, at once, the community it has the most edge weight to
among its already-placed neighbours (a new community if none); removed entities just leave.
Every add, replace or remove of a memory counts as one change, and when a namespace's changes
since its last run exceed ``refresh_fraction`` (10 %) of its memories, Louvain is rerun for that
namespace only, lazily, by the next query or :meth:`EntityGraph.communities` call. A freshly
rebuilt graph therefore runs Louvain once at its first query, unless :meth:`load_state_dict`
supplies communities saved for the identical graph (same fingerprint).

The graph is derived data, rebuilt from ``(namespace, id, entities)`` triples with
:meth:`EntityGraph.add_many`.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import combinations, count
from typing import Any

import networkx as nx
import numpy as np

from norax_core.signals.base import Query

__all__ = ["EntityGraph", "GraphConfig", "GraphSignal", "personalized_pagerank"]

STATE_VERSION = 1
_CLOCK = count(1)  # versions unique across spaces, so a recreated namespace misses the cache
LOUVAIN_SEED = 42
MAX_EDGE_ENTITIES = 64
"""Only the first this many entities of a memory get co-occurrence edges (bounds a huge text's
cost at 2,016 edges); all of them are still indexed."""


def _memory_hash(memory_id: str, entities: Sequence[str]) -> int:
    data = "\x1f".join([memory_id, *entities]).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class _Space:
    """One namespace's graph, inverted index and communities."""

    def __init__(self) -> None:
        self.slot: dict[str, int] = {}  # memory id -> row in the score arrays
        self.ids: list[str | None] = []  # row -> memory id (None: free)
        self.free: list[int] = []
        self.ents: dict[int, tuple[str, ...]] = {}  # row -> entities
        self.post: dict[str, set[int]] = {}  # entity -> rows
        self.adj: dict[str, dict[str, int]] = {}  # entity -> neighbour -> co-occurrences
        self.comm: dict[str, int] = {}
        self.next_comm = 0
        self.changes = 0  # memory writes since the last Louvain run
        self.fingerprint = 0  # XOR of the memories' hashes: equal graphs, equal prints
        self.version = next(_CLOCK)  # changes on every write (query cache key)
        self.arrays: dict[str, np.ndarray] = {}  # cached posting arrays

    def rows(self, entity: str) -> np.ndarray:
        arr = self.arrays.get(entity)
        if arr is None:
            arr = np.fromiter(self.post[entity], dtype=np.int64, count=len(self.post[entity]))
            self.arrays[entity] = arr
        return arr

    def add(self, memory_id: str, entities: Sequence[str]) -> None:
        if memory_id in self.slot:
            self.remove(memory_id)
        ents = tuple(dict.fromkeys(e for e in entities if e))
        row = self.free.pop() if self.free else len(self.ids)
        if row == len(self.ids):
            self.ids.append(memory_id)
        else:
            self.ids[row] = memory_id
        self.slot[memory_id] = row
        self.ents[row] = ents
        for e in ents:
            self.post.setdefault(e, set()).add(row)
            self.arrays.pop(e, None)
            self.adj.setdefault(e, {})
        for a, b in combinations(ents[:MAX_EDGE_ENTITIES], 2):
            self.adj[a][b] = self.adj[a].get(b, 0) + 1
            self.adj[b][a] = self.adj[b].get(a, 0) + 1
        for e in ents:
            if e not in self.comm:
                self.comm[e] = self._strongest_community(e)
        self.fingerprint ^= _memory_hash(memory_id, ents)
        self.changes += 1
        self.version = next(_CLOCK)

    def _strongest_community(self, entity: str) -> int:
        pull: dict[int, int] = {}
        for nb, w in self.adj[entity].items():
            c = self.comm.get(nb)
            if c is not None:
                pull[c] = pull.get(c, 0) + w
        if pull:
            return min(pull, key=lambda c: (-pull[c], c))
        self.next_comm += 1
        return self.next_comm - 1

    def remove(self, memory_id: str) -> bool:
        row = self.slot.pop(memory_id, None)
        if row is None:
            return False
        ents = self.ents.pop(row)
        self.ids[row] = None
        self.free.append(row)
        for a, b in combinations(ents[:MAX_EDGE_ENTITIES], 2):
            for u, v in ((a, b), (b, a)):
                if self.adj[u][v] == 1:
                    del self.adj[u][v]
                else:
                    self.adj[u][v] -= 1
        for e in ents:
            self.post[e].discard(row)
            self.arrays.pop(e, None)
            if not self.post[e]:
                del self.post[e], self.adj[e], self.comm[e]
        self.fingerprint ^= _memory_hash(memory_id, ents)
        self.changes += 1
        self.version = next(_CLOCK)
        return True

    def to_networkx(self) -> nx.Graph:
        g = nx.Graph()
        for e in sorted(self.post):  # sorted: Louvain's result depends on insertion order
            g.add_node(e, count=len(self.post[e]), community=self.comm[e])
        for a in sorted(self.adj):
            for b in sorted(self.adj[a]):
                if a < b:
                    g.add_edge(a, b, weight=self.adj[a][b])
        return g

    def set_communities(self, groups: Iterable[Iterable[str]]) -> None:
        ordered = sorted((sorted(g) for g in groups), key=lambda g: (-len(g), g[0] if g else ""))
        self.comm = {e: cid for cid, g in enumerate(ordered) for e in g if e in self.post}
        self.next_comm = len(ordered)
        for e in self.post:  # entities the groups did not cover
            if e not in self.comm:
                self.comm[e] = self._strongest_community(e)
        self.version = next(_CLOCK)


class EntityGraph:
    """Per-namespace entity co-occurrence graphs with an inverted index and communities.

    Args:
        refresh_fraction: Rerun Louvain for a namespace once its memory writes since the last
            run exceed this fraction of its memories (see the module docstring).
        seed: Louvain's random seed.
    """

    def __init__(self, *, refresh_fraction: float = 0.1, seed: int = LOUVAIN_SEED) -> None:
        if refresh_fraction < 0:
            raise ValueError(f"refresh_fraction must be >= 0, got {refresh_fraction}")
        self.refresh_fraction = refresh_fraction
        self.seed = seed
        self._spaces: dict[str, _Space] = {}
        self._pending: dict[str, dict[str, Any]] = {}

    # -- writes ---------------------------------------------------------------------------

    def add(self, namespace: str, memory_id: str, entities: Sequence[str]) -> None:
        """Index one memory's entities, replacing the memory if its id exists."""
        if isinstance(entities, str):
            raise TypeError("entities must be a sequence of strings, not one string")
        self._spaces.setdefault(namespace, _Space()).add(memory_id, entities)

    def add_many(self, namespace: str, items: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Index ``(memory_id, entities)`` pairs: the fast path to rebuild a namespace."""
        for memory_id, entities in items:
            self.add(namespace, memory_id, entities)

    def remove(self, namespace: str, memory_id: str) -> bool:
        """Forget one memory; returns whether it was there."""
        space = self._spaces.get(namespace)
        if space is None or not space.remove(memory_id):
            return False
        if not space.slot:
            del self._spaces[namespace]
        return True

    # -- reads ----------------------------------------------------------------------------

    def count(self, namespace: str) -> int:
        """Number of memories indexed in ``namespace``."""
        space = self._spaces.get(namespace)
        return len(space.slot) if space else 0

    def ids(self, namespace: str) -> list[str]:
        """Memory ids of ``namespace``, in no particular order."""
        space = self._spaces.get(namespace)
        return list(space.slot) if space else []

    def namespaces(self) -> list[str]:
        """Namespaces holding at least one memory, sorted."""
        return sorted(self._spaces)

    def entities_of(self, namespace: str, memory_id: str) -> tuple[str, ...]:
        """A memory's entities (empty if unknown)."""
        space = self._spaces.get(namespace)
        row = space.slot.get(memory_id) if space else None
        return space.ents[row] if space is not None and row is not None else ()

    def graph(self, namespace: str) -> nx.Graph:
        """A copy of the namespace's graph.

        Nodes carry ``count`` (memories mentioning the entity) and ``community``; edges carry
        ``weight`` (memories mentioning both ends).
        """
        space = self._space(namespace)
        return space.to_networkx() if space else nx.Graph()

    def communities(self, namespace: str) -> dict[str, int]:
        """Entity -> community id for ``namespace`` (refreshed first if stale)."""
        space = self._space(namespace)
        return dict(space.comm) if space else {}

    def refresh(self, namespace: str) -> None:
        """Rerun Louvain for ``namespace`` now (for example off the query path)."""
        space = self._spaces.get(namespace)
        if space is not None:
            self._louvain(space)

    def _space(self, namespace: str) -> _Space | None:
        """The namespace's space with current communities; ``None`` if empty."""
        space = self._spaces.get(namespace)
        if space is None:
            return None
        saved = self._pending.pop(namespace, None)
        if saved is not None and saved.get("fingerprint") == f"{space.fingerprint:016x}":
            try:
                space.set_communities(saved["communities"])
                space.changes = int(saved.get("changes", 0))
            except (TypeError, ValueError):
                space.changes = len(space.slot) + 1  # unreadable: recompute below
        if space.changes > self.refresh_fraction * len(space.slot):
            self._louvain(space)
        return space

    def _louvain(self, space: _Space) -> None:
        g = space.to_networkx()
        space.set_communities(nx.community.louvain_communities(g, weight="weight", seed=self.seed))
        space.changes = 0

    # -- persistence ----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The communities of every namespace, JSON-serialisable.

        Each namespace is saved with the fingerprint of the graph it was computed on, so that
        :meth:`load_state_dict` reuses it only for the same graph.
        """
        out: dict[str, Any] = {}
        for ns, space in self._spaces.items():
            groups: dict[int, list[str]] = {}
            for e, c in space.comm.items():
                groups.setdefault(c, []).append(e)
            out[ns] = {
                "fingerprint": f"{space.fingerprint:016x}",
                "changes": space.changes,
                "communities": [sorted(g) for _, g in sorted(groups.items())],
            }
        return {"version": STATE_VERSION, "namespaces": out}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Adopt saved communities for namespaces whose graph is unchanged.

        May be called before or after the graph is rebuilt: the fingerprint check happens at
        the namespace's next read. A namespace whose graph differs is recomputed as usual.

        Raises:
            ValueError: If ``state`` is not a state of this version.
        """
        if not isinstance(state, Mapping) or state.get("version") != STATE_VERSION:
            raise ValueError(f"not an EntityGraph state of version {STATE_VERSION}")
        spaces = state.get("namespaces", {})
        if not isinstance(spaces, Mapping):
            raise ValueError("state['namespaces'] must be a mapping")
        for ns, saved in spaces.items():
            if isinstance(saved, Mapping) and isinstance(saved.get("communities"), list):
                self._pending[ns] = dict(saved)


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
            more than ``min_hub_df`` memories) are hubs: their neighbourhood is not expanded
            (they tell little and cost most).
        min_hub_df: No entity in this many memories or fewer is a hub.
        max_iter: PageRank iterations at most.
        tol: PageRank convergence tolerance (L1).
    """

    direct: float = 0.6
    community: float = 0.1
    proximity: float = 0.3
    damping: float = 0.5
    neighbours: int = 32
    second_hop: int = 8
    hub_fraction: float = 0.05
    min_hub_df: int = 50
    max_iter: int = 50
    tol: float = 1e-6

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or value < 0 or math.isnan(value):
                raise ValueError(f"GraphConfig.{f.name} must be a number >= 0, got {value!r}")
        if self.direct + self.community + self.proximity <= 0:
            raise ValueError("GraphConfig: direct + community + proximity must be > 0")
        if not 0 <= self.damping < 1:
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
        Directed weighted edges ``src -> dst`` (give both directions for an undirected graph).
    personalization : numpy.ndarray
        Restart distribution over the nodes (non-negative, summing to 1).
    damping : float
        Probability of following an edge at each step; ``1 - damping`` restarts.
    max_iter, tol : int, float
        Stop after ``max_iter`` steps or when the L1 change is below ``n * tol``.

    Returns:
    -------
    numpy.ndarray
        The stationary distribution ``x = damping * (W x + d x p) + (1 - damping) p`` where
        ``W`` is the column-normalised weight matrix and dangling nodes ``d`` jump to ``p``.

    Examples:
    --------
    >>> x = personalized_pagerank(
    ...     2, np.array([0, 1]), np.array([1, 0]), np.ones(2), np.array([1.0, 0.0])
    ... )
    >>> [round(v, 3) for v in x]
    [0.667, 0.333]

    References:
    ----------
    .. [1] Page, Brin, Motwani, Winograd, "The PageRank citation ranking: Bringing order to the
       Web", Stanford InfoLab, 1999.
    .. [2] Haveliwala, "Topic-sensitive PageRank", WWW 2002.
    .. [3] networkx ``pagerank_alg.py`` (same update and dangling handling).
    """
    out_strength = np.bincount(src, weights=weight, minlength=n)
    share = weight / out_strength[src]
    dangling = out_strength == 0
    x = personalization.copy()
    for _ in range(max_iter):
        prev = x
        x = np.bincount(dst, weights=share * prev[src], minlength=n)
        x = damping * (x + prev[dangling].sum() * personalization) + (1 - damping) * personalization
        if np.abs(x - prev).sum() < n * tol:
            break
    return x


def _idf(df: int, n: int) -> float:
    """BM25's always-positive IDF (Lucene variant): ``ln(1 + (n - df + 0.5) / (df + 0.5))``."""
    return math.log1p((n - df + 0.5) / (df + 0.5))


@dataclass
class _Tables:
    """Per-query entity weights: everything a memory score is summed from."""

    direct: dict[str, float]  # seed -> idf share (sums to 1)
    peer: dict[str, float]  # community peer -> weight in [0, 1)
    near: dict[str, float]  # neighbourhood entity -> relative proximity in (0, 1)


_MAX_P = 1.0 - 1e-12  # keeps log1p(-p) finite; changes a score by at most 1e-12


class GraphSignal:
    r"""Scores memories by the query entities they share or sit near in the entity graph.

    For a query with entities ``Q`` in a namespace of ``N`` memories, let ``S = Q ∩ nodes``
    (query entities absent from the graph are ignored; none left gives zero everywhere),
    ``idf(e) = ln(1 + (N - df_e + 0.5) / (df_e + 0.5))`` and ``ν(e) = idf(e) / idf(1)`` its
    share of the largest possible IDF. A memory ``m`` with entities ``E_m`` scores

    .. math::

        s(m) = w_d D(m) + w_c C(m) + w_p P(m), \\qquad w_d + w_c + w_p = 1

    * direct: ``D(m) = Σ_{q ∈ S ∩ E_m} idf(q) / Σ_{q ∈ S} idf(q)``, the IDF-weighted share of
      the query's entities that ``m`` contains (rare entities count more, hubs almost nothing);
    * community: ``C(m) = 1 - Π_{e ∈ E_m ∩ L \\ S} (1 - c(e))`` with
      ``c(e) = ν(e) Σ_{q ∈ S, comm(q) = comm(e)} idf(q) / Σ_{q ∈ S} idf(q)``: a noisy-OR over
      ``m``'s Louvain community peers of the query entities within the neighbourhood ``L``;
    * proximity: ``P(m) = 1 - Π_{e ∈ E_m ∩ L \\ S} (1 - r(e))`` with
      ``r(e) = π(e) ν(e) / max_f π(f) ν(f)``, where ``π`` is personalised PageRank on the
      subgraph induced by ``L``, restarting at ``S`` in proportion to IDF.

    ``L`` is ``S`` plus the ``neighbours`` best neighbours of each non-hub seed (ranked by
    co-occurrence times IDF) plus the ``second_hop`` best neighbours of their ``second_hop``
    best ones. Every term is in [0, 1] and depends only on the query and the namespace, so
    ``s(m)`` is in [0, 1] without dividing by the best candidate, and ``top`` and ``score`` agree.
    Noisy-OR lets several nearby entities add up while saturating below 1.

    Candidates for :meth:`top` come from the inverted index of ``L``'s entities only.

    References:
        Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009
        (IDF); Blondel et al., "Fast unfolding of communities in large networks", 2008
        (Louvain); Haveliwala, "Topic-sensitive PageRank", 2002, and Gutiérrez et al.,
        "HippoRAG: Neurobiologically Inspired Long-Term Memory for LLMs", 2024 (personalised
        PageRank seeded by query entities); Pearl, "Probabilistic Reasoning in Intelligent
        Systems", 1988 (noisy-OR).
    """

    name = "graph"

    def __init__(self, graph: EntityGraph, config: GraphConfig | None = None) -> None:
        self.graph = graph
        self.config = config or GraphConfig()
        total = self.config.direct + self.config.community + self.config.proximity
        self._w = (
            self.config.direct / total,
            self.config.community / total,
            self.config.proximity / total,
        )
        self._cache: dict[tuple[str, tuple[str, ...], int], _Tables] = {}

    # -- the Signal protocol --------------------------------------------------------------

    def top(self, query: Query, n: int) -> dict[str, float]:
        """Up to ``n`` best memories of ``query.namespace`` for the query's entities."""
        if n <= 0:
            return {}
        space, t = self._prepare(query)
        if space is None or t is None:
            return {}
        size = len(space.ids)
        wd, wc, wp = self._w
        total = np.zeros(size)
        for q, v in t.direct.items():
            total += np.bincount(space.rows(q), minlength=size) * (wd * v)
        for table, w in ((t.peer, wc), (t.near, wp)):
            if not table or w == 0:
                continue
            keys = list(table)
            rows = [space.rows(e) for e in keys]
            logs = np.repeat(np.log1p(-np.array([table[e] for e in keys])), [len(r) for r in rows])
            total += w * -np.expm1(np.bincount(np.concatenate(rows), weights=logs, minlength=size))
        cand = np.flatnonzero(total > 0)
        if query.allowed is not None:
            if len(query.allowed) < len(cand):
                allowed_rows = [space.slot[i] for i in query.allowed if i in space.slot]
                cand = np.intersect1d(cand, np.array(allowed_rows, dtype=np.int64))
            else:
                keep = [space.ids[r] in query.allowed for r in cand.tolist()]
                cand = cand[np.array(keep, dtype=bool)] if keep else cand
        if len(cand) > n:
            cand = cand[np.argpartition(-total[cand], n - 1)[:n]]
        ranked = sorted(
            ((float(total[r]), space.ids[r]) for r in cand.tolist()), key=lambda p: (-p[0], p[1])
        )
        return {mid: min(score, 1.0) for score, mid in ranked if mid is not None}

    def score(self, query: Query, ids: Sequence[str]) -> dict[str, float]:
        """The score of each of ``ids`` that ``query.allowed`` admits (0.0 if not in the graph)."""
        space, t = self._prepare(query)
        out: dict[str, float] = {}
        for mid in ids:
            if query.allowed is not None and mid not in query.allowed:
                continue
            row = space.slot.get(mid) if space is not None else None
            if space is None or t is None or row is None:
                out[mid] = 0.0
            else:
                out[mid] = self._score_row(space.ents[row], t)
        return out

    def explain(self, query: Query, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """For each admitted id, the entities behind its score, strongest first.

        Shared query entities come first (in query order), then the memory's community peers
        and nearby entities, by their contribution.
        """
        space, t = self._prepare(query)
        out: dict[str, tuple[str, ...]] = {}
        for mid in ids:
            if query.allowed is not None and mid not in query.allowed:
                continue
            row = space.slot.get(mid) if space is not None else None
            if space is None or t is None or row is None:
                out[mid] = ()
                continue
            ents = space.ents[row]
            shared = [q for q in t.direct if q in ents]
            _, wc, wp = self._w
            related = {e: wc * t.peer.get(e, 0.0) + wp * t.near.get(e, 0.0) for e in ents}
            others = sorted((e for e, v in related.items() if v > 0), key=lambda e: -related[e])
            out[mid] = tuple(shared + [e for e in others if e not in t.direct])
        return out

    # -- internals ------------------------------------------------------------------------

    def _score_row(self, ents: Sequence[str], t: _Tables) -> float:
        wd, wc, wp = self._w
        d = sum(t.direct.get(e, 0.0) for e in ents)
        c = -math.expm1(sum(math.log1p(-t.peer[e]) for e in ents if e in t.peer))
        p = -math.expm1(sum(math.log1p(-t.near[e]) for e in ents if e in t.near))
        return min(wd * d + wc * c + wp * p, 1.0)

    def _prepare(self, query: Query) -> tuple[_Space | None, _Tables | None]:
        space = self.graph._space(query.namespace)
        if space is None:
            return None, None
        key = (query.namespace, tuple(query.entities), space.version)
        tables = self._cache.get(key)
        if tables is None:
            tables = self._tables(space, query.entities)
            if len(self._cache) >= 16:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = tables
        return space, tables if tables.direct else None

    def _tables(self, space: _Space, entities: Sequence[str]) -> _Tables:
        cfg = self.config
        n = len(space.slot)
        seeds = [q for q in dict.fromkeys(entities) if q in space.post]
        if not seeds:
            return _Tables({}, {}, {})
        idf = {q: _idf(len(space.post[q]), n) for q in seeds}
        z = sum(idf.values())
        direct = {q: v / z for q, v in idf.items()}
        hub_df = max(cfg.hub_fraction * n, cfg.min_hub_df)

        def best(e: str, k: int) -> list[str]:
            if k == 0 or len(space.post[e]) > hub_df:
                return []
            nbrs = space.adj[e]
            return heapq.nlargest(
                int(k), nbrs, key=lambda v: (nbrs[v] * _idf(len(space.post[v]), n), v)
            )

        local = dict.fromkeys(seeds)
        for q in seeds:
            first = best(q, cfg.neighbours)
            local.update(dict.fromkeys(first))
            for u in first[: cfg.second_hop]:
                local.update(dict.fromkeys(best(u, cfg.second_hop)))
        nodes = list(local)
        if len(nodes) == len(seeds):
            return _Tables(direct, {}, {})
        index = {e: i for i, e in enumerate(nodes)}
        src: list[int] = []
        dst: list[int] = []
        wts: list[float] = []
        for i, u in enumerate(nodes):
            nbrs = space.adj[u]
            pairs = (
                ((v, w) for v, w in nbrs.items() if v in index)
                if len(nbrs) <= len(nodes)
                else ((v, nbrs[v]) for v in nodes if v in nbrs)
            )
            for v, w in pairs:
                src.append(i)
                dst.append(index[v])
                wts.append(float(w))
        restart = np.zeros(len(nodes))
        restart[: len(seeds)] = [direct[q] for q in seeds]
        pi = personalized_pagerank(
            len(nodes),
            np.array(src, dtype=np.int64),
            np.array(dst, dtype=np.int64),
            np.array(wts),
            restart,
            damping=cfg.damping,
            max_iter=cfg.max_iter,
            tol=cfg.tol,
        )
        idf_max = _idf(1, n)
        nu = {e: _idf(len(space.post[e]), n) / idf_max for e in nodes[len(seeds) :]}
        rel = {e: float(pi[index[e]]) * v for e, v in nu.items()}
        top_rel = max(rel.values())
        near = {e: min(r / top_rel, _MAX_P) for e, r in rel.items() if r > 0} if top_rel else {}
        share: dict[int, float] = {}
        for q in seeds:
            share[space.comm[q]] = share.get(space.comm[q], 0.0) + direct[q]
        peer = {
            e: min(share[space.comm[e]] * v, _MAX_P)
            for e, v in nu.items()
            if space.comm[e] in share and v > 0
        }
        return _Tables(direct, peer, near)
