"""The neighbourhoods :class:`~norax_core.signals.graph.GraphSignal` scores, kept per seed.

A query's neighbourhood ``L`` is the union, over its seed entities, of each seed's own
neighbourhood (its best neighbours and the best of theirs). That part, and the edges of its
entities, depend on the namespace's version and on one seed only, so :class:`Hoods` builds them
once per seed and version (:meth:`~norax_core.signals.entity_graph.NamespaceGraph.memo`); a
query then only unites its seeds' blocks (:meth:`Hoods.union`) and keeps the edges inside the
union (:meth:`Hoods.edges`). A one-seed query's edges are its seed's, kept too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from norax_core.signals.bm25 import lucene_idf
from norax_core.signals.entity_graph import NamespaceGraph

__all__ = ["Hoods", "SeedBlock"]


@dataclass(frozen=True)
class SeedBlock:
    """A seed, its neighbourhood and every edge of their entities (read only)."""

    own: np.ndarray  # the seed, then its neighbourhood (first hop, then each second), each once
    tail: list[int]  # ``own[1:]``, and as an array
    tail_arr: np.ndarray
    tail_lengths: np.ndarray  # neighbours of each entity of the tail
    edges: tuple[np.ndarray, np.ndarray, np.ndarray]  # ``froms -> tos`` of weight ``wts``: each
    seed_edges: tuple[np.ndarray, np.ndarray, np.ndarray]  # entity of ``own``'s neighbours in
    tail_edges: tuple[np.ndarray, np.ndarray, np.ndarray]  # turn; the seed's, the tail's


class Hoods:
    """What the graph signal reads of one version of a namespace besides its entity graph.

    Parameters
    ----------
    space : NamespaceGraph
        The namespace, at the version this is kept for.
    neighbours, second_hop, hub_df : int, int, float
        First-hop neighbours kept per seed, second-hop expansions (and neighbours kept for
        each), and the document frequency above which an entity is a hub (never expanded nor
        reached).
    """

    def __init__(self, space: NamespaceGraph, neighbours: int, second_hop: int, hub_df: float):
        self.space = space
        self.n = n = len(space.slot)
        self.df = space.df
        self.idf = lucene_idf(n, self.df)  # BM25's, per entity id (free ids too)
        self.open_idf = np.where(self.df <= hub_df, self.idf, 0.0)  # 0 for hubs
        self.idf1 = float(lucene_idf(n, 1.0))  # the largest IDF (df = 1)
        self.neighbours, self.second_hop, self.hub_df = neighbours, second_hop, hub_df
        self._best: dict[tuple[int, int], list[int]] = {}
        self._blocks: dict[int, SeedBlock] = {}
        self._alone: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def best(self, e: int, k: int) -> list[int]:
        """``e``'s ``k`` best non-hub neighbours: co-occurrence weight times IDF, ties by name."""
        if k <= 0 or self.df[e] > self.hub_df:
            return []
        got = self._best.get((e, k))
        if got is None:
            nb, w = self.space.neighbours(e)
            score = w * self.open_idf[nb]  # weights are >= 1 and IDFs > 0: 0 for hubs only
            ok = score > 0
            nb, score = nb[ok], score[ok]
            got = self._best[e, k] = nb[np.lexsort((self.space.tie[nb], -score))[:k]].tolist()
        return got

    def block(self, q: int) -> SeedBlock:
        """Seed ``q``'s block, built at its first use.

        ``q``, its ``neighbours`` best neighbours and the ``second_hop`` best of each of the
        first ``second_hop`` of those, each once, with every edge of those entities.
        """
        got = self._blocks.get(q)
        if got is None:
            first = self.best(q, self.neighbours)
            hood = [q, *first]
            for u in first[: self.second_hop]:
                hood += self.best(u, self.second_hop)
            own_list = list(dict.fromkeys(hood))
            own = np.array(own_list, np.int64)
            lengths, nbs, ws = self.space.neighbours_of(own_list)
            edges = (own.repeat(lengths), nbs, ws)
            cut = int(lengths[0])
            got = self._blocks[q] = SeedBlock(
                own,
                own_list[1:],
                own[1:],
                lengths[1:],
                edges,
                tuple(a[:cut] for a in edges),  # type: ignore[arg-type]
                tuple(a[cut:] for a in edges),  # type: ignore[arg-type]
            )
        return got

    def union(self, seeds: Sequence[int]) -> tuple[list[SeedBlock], np.ndarray, list[int]]:
        """The seeds' blocks, ``L``, and where in ``L`` each block's new entities start.

        ``L`` is the seeds, then each block's entities not in ``L`` yet, in turn.
        """
        blocks = [self.block(q) for q in seeds]
        if len(blocks) == 1:
            return blocks, blocks[0].own, [1]
        local = dict.fromkeys(seeds)
        starts = []
        for b in blocks:
            starts.append(len(local))
            local.update(dict.fromkeys(b.tail))
        return blocks, np.fromiter(local, np.int64, len(local)), starts

    def edges(
        self, blocks: Sequence[SeedBlock], ents: np.ndarray, starts: Sequence[int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The edges inside ``L`` (:meth:`union`) as positions in ``L``, and their weights.

        Each entity's neighbours once, in the order of ``L``: the seeds' first, then each
        block's new entities' in turn. A one-seed neighbourhood's are kept.
        """
        if len(blocks) == 1:
            q = int(ents[0])
            got = self._alone.get(q)
            if got is None:
                got = self._alone[q] = self._inside(ents, *blocks[0].edges)
            return got
        pos = np.full(len(self.df), -1, np.int64)
        pos[ents] = np.arange(len(ents))
        tails = []
        for b, start in zip(blocks, starts, strict=True):
            first = pos[b.tail_arr] >= start  # entities no seed nor earlier block brought
            if np.count_nonzero(first) == len(first):
                tails.append(b.tail_edges)
            else:
                keep = first.repeat(b.tail_lengths)
                tails.append(tuple(a[keep] for a in b.tail_edges))  # type: ignore[arg-type]
        seeds = [b.seed_edges for b in blocks]
        froms, tos, wts = map(np.concatenate, zip(*seeds, *tails, strict=True))
        return self._inside(ents, froms, tos, wts, pos)

    def _inside(
        self,
        ents: np.ndarray,
        froms: np.ndarray,
        tos: np.ndarray,
        wts: np.ndarray,
        pos: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if pos is None:
            pos = np.full(len(self.df), -1, np.int64)
            pos[ents] = np.arange(len(ents))
        j = pos[tos]
        inside = j >= 0
        return pos[froms[inside]], j[inside], wts[inside]
