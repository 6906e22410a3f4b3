"""The entity-graph signal: memories that share, or sit near, the query's entities.

:class:`EntityGraph` holds one co-occurrence graph per namespace: entities are nodes (with the
number of memories that mention them), two entities of the same memory are joined by an edge
whose weight counts such memories, and an inverted index maps each entity to its memories.
Namespaces share nothing (ids, counts, IDF, edges, communities, caches), so writes to one can
never change a score in another.

Community policy. Louvain (networkx, fixed seed) partitions each namespace's graph. Between
runs, an entity seen for the first time joins the community it has the most edge weight to
(a new one if none) when the namespace is next read; removed entities just leave. Every add,
replace or remove of a memory is one change; once a namespace's changes since its last run
exceed ``refresh_fraction`` (10 %) of its memories, its next read (a query or
:meth:`EntityGraph.communities`) reruns Louvain for that namespace only. A rebuilt graph thus
runs Louvain once, at its first query, unless :meth:`EntityGraph.load_state_dict` supplied
communities saved for the identical graph (same fingerprint). networkx's Louvain is pure Python
(seconds for 10^5 edges), so it runs on the ``louvain_max_edges`` heaviest edges only; entities
left out are then placed like new ones. :meth:`EntityGraph.refresh` runs it off the query path.

The graph is derived data, rebuilt from ``(namespace, id, entities)`` triples with
:meth:`EntityGraph.add_many`.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import combinations, count
from typing import Any

import networkx as nx
import numpy as np

from norax_core.signals.base import Query

__all__ = ["EntityGraph", "GraphConfig", "GraphSignal", "personalized_pagerank"]

STATE_VERSION = 1
LOUVAIN_SEED = 42
MAX_EDGE_ENTITIES = 64
"""Only the first this many entities of a memory get co-occurrence edges (bounds one huge
text at 2,016 edges); all of them are still indexed."""
_CLOCK = count(1)  # versions unique across spaces: a recreated namespace misses the cache


def _memory_hash(memory_id: str, entities: Sequence[str]) -> int:
    data = "\x1f".join([memory_id, *entities]).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def _idf(df: np.ndarray | float, n: int) -> Any:
    """BM25's always-positive IDF (Lucene variant): ``ln(1 + (n - df + 0.5) / (df + 0.5))``."""
    return np.log1p((n - df + 0.5) / (df + 0.5))


class _Space:
    """One namespace: memories, entities (interned as ints), postings, edges, communities."""

    def __init__(self) -> None:
        self.slot: dict[str, int] = {}  # memory id -> row
        self.ids: list[str | None] = []  # row -> memory id (None: free)
        self.ents: list[tuple[int, ...]] = []  # row -> entity ids
        self.row_tie = np.zeros(64, np.int64)  # row -> crc32 of the id: content-based tie-break
        self.free_rows: list[int] = []
        self.eid: dict[str, int] = {}  # entity -> id
        self.names: list[str] = []  # id -> entity ("" when free)
        self.free_eids: list[int] = []
        self.counts: list[int] = []  # id -> memories mentioning it
        self._df = np.zeros(64, np.int64)  # numpy copy of counts, synced lazily at reads
        self._stale: set[int] = set()
        self.tie = np.zeros(64, np.int64)  # id -> crc32 of the name: content-based tie-break
        self.comm = np.full(64, -1, np.int64)  # id -> community (-1: not placed yet)
        self.post: dict[int, set[int]] = {}  # entity id -> rows
        self.adj: dict[int, dict[int, int]] = {}  # entity id -> neighbour -> co-occurrences
        self.post_arr: dict[int, np.ndarray] = {}  # caches, dropped when the entity changes
        self.adj_arr: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.mask_arr: dict[int, np.ndarray] = {}
        self.unplaced: set[int] = set()
        self.next_comm = 0
        self.changes = 0  # memory writes since the last Louvain run
        self.fingerprint = 0  # XOR of the memories' hashes: equal graphs, equal prints
        self.version = next(_CLOCK)

    # -- writes ---------------------------------------------------------------------------

    def _intern(self, name: str) -> int:
        e = self.eid.get(name)
        if e is not None:
            return e
        if self.free_eids:
            e = self.free_eids.pop()
            self.names[e] = name
        else:
            e = len(self.names)
            self.names.append(name)
            self.counts.append(0)
            if e == len(self._df):
                self._df = np.concatenate([self._df, np.zeros(e, np.int64)])
                self.tie = np.concatenate([self.tie, np.zeros(e, np.int64)])
                self.comm = np.concatenate([self.comm, np.full(e, -1, np.int64)])
        self.eid[name] = e
        self.tie[e] = zlib.crc32(name.encode("utf-8", "surrogatepass"))
        self.post[e] = set()
        self.adj[e] = {}
        self.unplaced.add(e)
        return e

    def add(self, memory_id: str, entities: Sequence[str]) -> None:
        if memory_id in self.slot:
            self.remove(memory_id)
        names = tuple(dict.fromkeys(e for e in entities if e))
        ents = tuple(self._intern(e) for e in names)
        row = self.free_rows.pop() if self.free_rows else len(self.ids)
        if row == len(self.ids):
            self.ids.append(memory_id)
            self.ents.append(ents)
            if row == len(self.row_tie):
                self.row_tie = np.concatenate([self.row_tie, np.zeros(row, np.int64)])
        else:
            self.ids[row], self.ents[row] = memory_id, ents
        self.row_tie[row] = zlib.crc32(memory_id.encode("utf-8", "surrogatepass"))
        self.slot[memory_id] = row
        counts, stale = self.counts, self._stale
        for e in ents:
            self.post[e].add(row)
            counts[e] += 1
            stale.add(e)
            self.post_arr.pop(e, None)
            self.mask_arr.pop(e, None)
        self._link(ents, +1)
        self.fingerprint ^= _memory_hash(memory_id, names)
        self._changed()

    def remove(self, memory_id: str) -> bool:
        row = self.slot.pop(memory_id, None)
        if row is None:
            return False
        ents = self.ents[row]
        self.fingerprint ^= _memory_hash(memory_id, [self.names[e] for e in ents])
        self.ids[row], self.ents[row] = None, ()
        self.free_rows.append(row)
        self._link(ents, -1)
        for e in ents:
            self.post[e].discard(row)
            self.counts[e] -= 1
            self._stale.add(e)
            self.post_arr.pop(e, None)
            self.mask_arr.pop(e, None)
            if not self.post[e]:
                del self.post[e], self.adj[e], self.eid[self.names[e]]
                self.adj_arr.pop(e, None)
                self.unplaced.discard(e)
                self.names[e] = ""
                self.comm[e] = -1
                self.free_eids.append(e)
        self._changed()
        return True

    def _link(self, ents: tuple[int, ...], delta: int) -> None:
        adj = self.adj
        linked = ents[:MAX_EDGE_ENTITIES]
        for a, b in combinations(linked, 2):
            w = adj[a].get(b, 0) + delta
            if w:
                adj[a][b] = adj[b][a] = w
            else:
                del adj[a][b], adj[b][a]
        if len(linked) > 1:
            for e in linked:
                self.adj_arr.pop(e, None)

    def _changed(self) -> None:
        self.changes += 1
        self.version = next(_CLOCK)

    # -- reads ----------------------------------------------------------------------------

    @property
    def df(self) -> np.ndarray:
        """Memories per entity id, as an array (0 for free ids)."""
        if self._stale:
            idx = np.fromiter(self._stale, np.int64, len(self._stale))
            self._df[idx] = [self.counts[e] for e in idx.tolist()]
            self._stale.clear()
        return self._df

    def rows_of(self, e: int) -> np.ndarray:
        arr = self.post_arr.get(e)
        if arr is None:
            arr = np.fromiter(self.post[e], np.int64, len(self.post[e]))
            self.post_arr[e] = arr
        return arr

    def mask_of(self, e: int) -> np.ndarray:
        """Row membership of entity ``e`` as a boolean array (for hubs: cheap to probe)."""
        mask = self.mask_arr.get(e)
        if mask is None or len(mask) != len(self.ids):
            mask = np.zeros(len(self.ids), bool)
            mask[self.rows_of(e)] = True
            self.mask_arr[e] = mask
        return mask

    def neighbours(self, e: int) -> tuple[np.ndarray, np.ndarray]:
        arrs = self.adj_arr.get(e)
        if arrs is None:
            nbrs = self.adj[e]
            arrs = (
                np.fromiter(nbrs.keys(), np.int64, len(nbrs)),
                np.fromiter(nbrs.values(), np.float64, len(nbrs)),
            )
            self.adj_arr[e] = arrs
        return arrs

    def communities(self) -> dict[str, int]:
        return {self.names[e]: int(self.comm[e]) for e in self.post}

    # -- communities ----------------------------------------------------------------------

    def place(self) -> None:
        """Put unplaced entities, in name order, in their strongest neighbour's community."""
        if not self.unplaced:
            return
        for e in sorted(self.unplaced, key=self.names.__getitem__):
            pull: dict[int, int] = {}
            for nb, w in self.adj[e].items():
                c = int(self.comm[nb])
                if c >= 0:
                    pull[c] = pull.get(c, 0) + w
            if pull:
                self.comm[e] = min(pull, key=lambda c: (-pull[c], c))
            else:
                self.comm[e] = self.next_comm
                self.next_comm += 1
        self.unplaced.clear()
        self.version = next(_CLOCK)

    def set_communities(self, groups: Iterable[Iterable[str]]) -> None:
        ordered = sorted((sorted(g) for g in groups), key=lambda g: (-len(g), g[:1]))
        self.comm[:] = -1
        self.unplaced = set(self.post)
        for cid, group in enumerate(ordered):
            for name in group:
                e = self.eid.get(name)
                if e is not None:
                    self.comm[e] = cid
                    self.unplaced.discard(e)
        self.next_comm = len(ordered)
        self.place()
        self.version = next(_CLOCK)

    def louvain(self, seed: int, max_edges: int) -> None:
        pairs = [(u, v, w) for u, nbrs in self.adj.items() for v, w in nbrs.items() if u < v]
        a = np.fromiter((p[0] for p in pairs), np.int64, len(pairs))
        b = np.fromiter((p[1] for p in pairs), np.int64, len(pairs))
        wt = np.fromiter((p[2] for p in pairs), np.float64, len(pairs))
        if len(wt) > max_edges:  # the heaviest edges; ties broken by content, not history
            lo, hi = np.minimum(self.tie[a], self.tie[b]), np.maximum(self.tie[a], self.tie[b])
            kept = np.lexsort((hi, lo, -wt))[:max_edges]
            a, b, wt = a[kept], b[kept], wt[kept]
        names = self.names
        edges = sorted(
            (min(names[x], names[y]), max(names[x], names[y]), c)
            for x, y, c in zip(a.tolist(), b.tolist(), wt.tolist(), strict=True)
        )
        g = nx.Graph()
        g.add_nodes_from(sorted({name for edge in edges for name in edge[:2]}))
        g.add_weighted_edges_from(edges)
        self.set_communities(nx.community.louvain_communities(g, weight="weight", seed=seed))
        self.changes = 0


class EntityGraph:
    """Per-namespace entity co-occurrence graphs with an inverted index and communities.

    Args:
        refresh_fraction: Rerun Louvain for a namespace once its memory writes since the last
            run exceed this fraction of its memories (see the module docstring).
        louvain_max_edges: Louvain runs on at most this many of the heaviest edges.
        seed: Louvain's random seed.
    """

    def __init__(
        self,
        *,
        refresh_fraction: float = 0.1,
        louvain_max_edges: int = 10_000,
        seed: int = LOUVAIN_SEED,
    ) -> None:
        if refresh_fraction < 0:
            raise ValueError(f"refresh_fraction must be >= 0, got {refresh_fraction}")
        if louvain_max_edges < 1:
            raise ValueError(f"louvain_max_edges must be >= 1, got {louvain_max_edges}")
        self.refresh_fraction = refresh_fraction
        self.louvain_max_edges = louvain_max_edges
        self.seed = seed
        self._spaces: dict[str, _Space] = {}
        self._pending: dict[str, dict[str, Any]] = {}

    # -- writes ---------------------------------------------------------------------------

    def add(self, namespace: str, memory_id: str, entities: Sequence[str]) -> None:
        """Index one memory's entities, replacing the memory if its id exists.

        Raises:
            TypeError: If ``entities`` is a string or holds a non-string.
        """
        if isinstance(entities, str) or not all(isinstance(e, str) for e in entities):
            raise TypeError("entities must be a sequence of strings")
        space = self._spaces.get(namespace)
        if space is None:
            space = self._spaces[namespace] = _Space()
        space.add(memory_id, entities)

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
        """A memory's entities, in their stored order (empty if unknown)."""
        space = self._spaces.get(namespace)
        row = space.slot.get(memory_id) if space else None
        if space is None or row is None:
            return ()
        return tuple(space.names[e] for e in space.ents[row])

    def graph(self, namespace: str) -> nx.Graph:
        """A copy of the namespace's graph.

        Nodes carry ``count`` (memories mentioning the entity) and ``community``; edges carry
        ``weight`` (memories mentioning both ends).
        """
        space = self._space(namespace)
        g = nx.Graph()
        if space is None:
            return g
        for e in sorted(space.post, key=space.names.__getitem__):
            g.add_node(space.names[e], count=space.counts[e], community=int(space.comm[e]))
        for a, nbrs in space.adj.items():
            g.add_weighted_edges_from(
                (space.names[a], space.names[b], w) for b, w in nbrs.items() if a < b
            )
        return g

    def communities(self, namespace: str) -> dict[str, int]:
        """Entity -> community id for ``namespace`` (brought up to date first)."""
        space = self._space(namespace)
        return space.communities() if space else {}

    def refresh(self, namespace: str) -> None:
        """Rerun Louvain for ``namespace`` now, for example after a bulk load."""
        space = self._spaces.get(namespace)
        if space is not None:
            space.louvain(self.seed, self.louvain_max_edges)

    def _space(self, namespace: str) -> _Space | None:
        """The namespace's space with up-to-date communities; ``None`` if empty."""
        space = self._spaces.get(namespace)
        if space is None:
            return None
        saved = self._pending.pop(namespace, None)
        if saved is not None and saved.get("fingerprint") == f"{space.fingerprint:016x}":
            try:
                space.set_communities(saved["communities"])
                space.changes = int(saved.get("changes", 0))
            except (TypeError, ValueError):
                space.changes = len(space.slot) + 1  # unreadable: recompute
        if space.changes > self.refresh_fraction * len(space.slot):
            space.louvain(self.seed, self.louvain_max_edges)
        space.place()
        return space

    # -- persistence ----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The communities of every namespace, JSON-serialisable.

        Each namespace is saved with the fingerprint of the graph they belong to, so that
        :meth:`load_state_dict` reuses them only for that same graph.
        """
        out: dict[str, Any] = {}
        for ns, space in self._spaces.items():
            space.place()
            groups: dict[int, list[str]] = {}
            for e in space.post:
                groups.setdefault(int(space.comm[e]), []).append(space.names[e])
            out[ns] = {
                "fingerprint": f"{space.fingerprint:016x}",
                "changes": space.changes,
                "communities": [sorted(g) for _, g in sorted(groups.items())],
            }
        return {"version": STATE_VERSION, "namespaces": out}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Adopt saved communities for the namespaces whose graph is unchanged.

        May be called before or after the graph is rebuilt: the fingerprint is checked at the
        namespace's next read, and a namespace whose graph differs is recomputed as usual.

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
    dangling = out_strength == 0
    p = np.asarray(personalization, np.float64)
    x = p.copy()
    for _ in range(max_iter):
        prev = x
        walk = np.bincount(dst, weights=share * prev[src], minlength=n)
        x = damping * (walk + prev[dangling].sum() * p) + (1 - damping) * p
        if np.abs(x - prev).sum() < n * tol:
            break
    return x


@dataclass(frozen=True)
class _Tables:
    """One query's entity weights, from which every memory score is summed."""

    ents: np.ndarray  # entity ids: the seeds first, then the rest of the neighbourhood
    direct: np.ndarray  # per entity: ν(q) / |S| if a seed, else 0
    log_peer: np.ndarray  # per entity: log(1 - c(e)), 0 if not a peer
    log_near: np.ndarray  # per entity: log(1 - r(e)), seeds included
    hub: np.ndarray  # per entity: a hub (only seeds can be)
    index: dict[int, int]  # entity id -> position in the arrays
    n_seeds: int

    def lists(self) -> tuple[list[float], list[float], list[float]]:
        return self.direct.tolist(), self.log_peer.tolist(), self.log_near.tolist()


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

    Candidates for :meth:`top` are the memories of ``L``'s entities, read from the inverted
    index; a hub seed's memories are read only when the others cannot fill the ``n`` places
    above the most such a memory can score.

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

    # -- the Signal protocol --------------------------------------------------------------

    def top(self, query: Query, n: int) -> dict[str, float]:
        """Up to ``n`` best memories of ``query.namespace``, best first."""
        space, t = self._prepare(query)
        if space is None or t is None or n <= 0:
            return {}
        cand, parts = self._admitted(query, space, *self._sums(space, t, np.flatnonzero(~t.hub)))
        if t.hub.any():
            hubs = np.flatnonzero(t.hub)
            for k in hubs.tolist():
                has = space.mask_of(int(t.ents[k]))[cand]
                parts[0] += has * t.direct[k]
                parts[2] += has * t.log_near[k]
            # A memory outside ``cand`` holds hub seeds only: it scores at most ``ceiling``.
            ceiling = self._combine(t.direct[hubs].sum(), 0.0, t.log_near[hubs].sum())
            if np.count_nonzero(self._combine(*parts) >= ceiling) < n:
                everything = np.arange(len(t.ents))
                cand, parts = self._admitted(query, space, *self._sums(space, t, everything))
        total = self._combine(*parts)
        positive = total > 0
        cand, total = cand[positive], total[positive]
        if len(cand) > n:  # the n best; ties at the cut by a hash of the id, not by history
            kth = np.partition(total, len(total) - n)[len(total) - n]
            above, tied = np.flatnonzero(total > kth), np.flatnonzero(total == kth)
            need = n - len(above)
            if len(tied) > need:
                tied = tied[np.argpartition(space.row_tie[cand[tied]], need - 1)[:need]]
            best = np.concatenate([above, tied])
            cand, total = cand[best], total[best]
        ids = [space.ids[r] or "" for r in cand.tolist()]
        ranked = sorted(zip((-total).tolist(), ids, strict=True))
        return {mid: min(-neg, 1.0) for neg, mid in ranked}

    def score(self, query: Query, ids: Sequence[str]) -> dict[str, float]:
        """The score of each of ``ids`` that ``query.allowed`` admits (0.0 if not indexed)."""
        space, t = self._prepare(query)
        admitted = [i for i in ids if query.allowed is None or i in query.allowed]
        if space is None or t is None:
            return dict.fromkeys(admitted, 0.0)
        direct, log_peer, log_near = t.lists()
        wd, wc, wp = self._w
        out: dict[str, float] = {}
        for mid in admitted:
            row = space.slot.get(mid)
            d = lc = lp = 0.0
            if row is not None:
                for e in space.ents[row]:
                    k = t.index.get(e)
                    if k is not None:
                        d += direct[k]
                        lc += log_peer[k]
                        lp += log_near[k]
            out[mid] = min(wd * d - wc * math.expm1(lc) - wp * math.expm1(lp), 1.0)
        return out

    def explain(self, query: Query, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """For each admitted id, the entities behind its score.

        Query entities the memory shares come first, in query order; then its community
        peers and nearby entities, strongest contribution first.
        """
        space, t = self._prepare(query)
        admitted = [i for i in ids if query.allowed is None or i in query.allowed]
        if space is None or t is None:
            return dict.fromkeys(admitted, ())
        _, log_peer, log_near = t.lists()
        _, wc, wp = self._w
        out: dict[str, tuple[str, ...]] = {}
        for mid in admitted:
            row = space.slot.get(mid)
            hits = [
                t.index[e] for e in (space.ents[row] if row is not None else ()) if e in t.index
            ]
            pull = {k: -wc * math.expm1(log_peer[k]) - wp * math.expm1(log_near[k]) for k in hits}
            shared = sorted(k for k in hits if k < t.n_seeds)
            near = sorted(
                (k for k in hits if k >= t.n_seeds and pull[k] > 0), key=lambda k: -pull[k]
            )
            out[mid] = tuple(space.names[int(t.ents[k])] for k in shared + near)
        return out

    # -- internals ------------------------------------------------------------------------

    def _sums(
        self, space: _Space, t: _Tables, positions: np.ndarray
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Rows holding the entities at ``positions`` of ``t``, with their partial sums.

        The sums, over those entities only, are ``D``, ``log(1 - C)`` and ``log(1 - P)``.
        """
        rows = [space.rows_of(int(e)) for e in t.ents[positions]]
        if not rows:
            return np.zeros(0, np.int64), [np.zeros(0), np.zeros(0), np.zeros(0)]
        lengths = [len(r) for r in rows]
        flat = np.concatenate(rows)
        size = len(space.ids)
        cand = np.flatnonzero(np.bincount(flat, minlength=size))
        parts = [
            np.bincount(flat, weights=np.repeat(col[positions], lengths), minlength=size)[cand]
            for col in (t.direct, t.log_peer, t.log_near)
        ]
        return cand, parts

    def _combine(self, d: Any, log_c: Any, log_p: Any) -> Any:
        """``w_d D + w_c C + w_p P`` from ``D`` and the noisy-ORs' log complements."""
        wd, wc, wp = self._w
        return wd * d - wc * np.expm1(log_c) - wp * np.expm1(log_p)

    @staticmethod
    def _admitted(
        query: Query, space: _Space, cand: np.ndarray, parts: list[np.ndarray]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        if query.allowed is None or not len(cand):
            return cand, parts
        if len(query.allowed) < len(cand):
            allowed = [space.slot[i] for i in query.allowed if i in space.slot]
            keep = np.isin(cand, np.array(allowed, np.int64))
        else:
            keep = np.array([space.ids[r] in query.allowed for r in cand.tolist()], bool)
        return cand[keep], [p[keep] for p in parts]

    def _prepare(self, query: Query) -> tuple[_Space | None, _Tables | None]:
        space = self.graph._space(query.namespace)
        if space is None:
            return None, None
        key = (query.namespace, tuple(query.entities), space.version)
        if key not in self._cache:
            if len(self._cache) >= 8:
                del self._cache[next(iter(self._cache))]
            self._cache[key] = self._tables(space, query.entities)
        return space, self._cache[key]

    def _tables(self, space: _Space, entities: Sequence[str]) -> _Tables | None:
        cfg = self.config
        n = len(space.slot)
        seeds = list(dict.fromkeys(space.eid[q] for q in entities if q in space.eid))
        if not seeds:
            return None
        s = len(seeds)
        hub_df = max(cfg.hub_fraction * n, cfg.min_hub_df)
        dfs = space.df

        def best(e: int, k: int) -> list[int]:
            if k <= 0 or dfs[e] > hub_df:
                return []
            nb, w = space.neighbours(e)
            ok = dfs[nb] <= hub_df
            nb, w = nb[ok], w[ok]
            score = w * _idf(dfs[nb], n)
            if len(score) > k:  # the k best and every tie at the boundary, then order those
                keep = score >= np.partition(score, len(score) - k)[len(score) - k]
                nb, score = nb[keep], score[keep]
            return nb[np.lexsort((space.tie[nb], -score))[:k]].tolist()

        local = dict.fromkeys(seeds)
        for q in seeds:
            first = best(q, cfg.neighbours)
            local.update(dict.fromkeys(first))
            for u in first[: cfg.second_hop]:
                local.update(dict.fromkeys(best(u, cfg.second_hop)))
        ents = np.fromiter(local, np.int64, len(local))
        m = len(ents)
        index = {int(e): k for k, e in enumerate(ents)}
        df = dfs[ents].astype(np.float64)
        idf = _idf(df, n)
        nu = idf / _idf(1.0, n)
        direct = np.zeros(m)
        direct[:s] = nu[:s] / s
        hub = np.zeros(m, bool)
        hub[:s] = df[:s] > hub_df
        if m == s:
            return _Tables(ents, direct, np.zeros(m), np.zeros(m), hub, index, s)
        pos = np.full(len(dfs), -1, np.int64)
        pos[ents] = np.arange(m)
        src, dst, wts = [], [], []
        for k, u in enumerate(ents.tolist()):
            nb, w = space.neighbours(u)
            j = pos[nb]
            inside = j >= 0
            src.append(np.full(int(inside.sum()), k))
            dst.append(j[inside])
            wts.append(w[inside])
        restart = np.zeros(m)
        restart[:s] = idf[:s] / idf[:s].sum()
        pi = personalized_pagerank(
            m,
            np.concatenate(src),
            np.concatenate(dst),
            np.concatenate(wts),
            restart,
            damping=cfg.damping,
            max_iter=cfg.max_iter,
            tol=cfg.tol,
        )
        rel = pi * nu
        near = np.minimum(rel / rel.max(), _MAX_P) if rel.max() > 0 else np.zeros(m)
        comm = space.comm[ents].tolist()
        share: dict[int, float] = {}
        for c, v in zip(comm[:s], restart[:s].tolist(), strict=True):
            share[c] = share.get(c, 0.0) + v
        peer = np.array([share.get(c, 0.0) for c in comm]) * nu
        peer[:s] = 0.0
        peer = np.minimum(peer, _MAX_P)
        return _Tables(ents, direct, np.log1p(-peer), np.log1p(-near), hub, index, s)
