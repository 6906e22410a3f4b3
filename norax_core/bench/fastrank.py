"""Vectorised recall@k over many pools at once: the inner loop of weight fitting.

:class:`PoolBatch` packs pools into padded arrays and scores a weighting (fusion weights plus
decay constants, pool size and recency candidates) over all of them in a few numpy passes.
It reproduces :func:`~norax_core.bench.pools.rank_pool` exactly, ties included (fused scores
are summed in the same order as :func:`norax_core.fusion.weighted_sum`, and ties go to the
smaller id); a test checks the two against each other. Weighted-sum fusion only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from norax_core.bench.pools import Pool, pool_bm25, timeline
from norax_core.config import NoraxConfig
from norax_core.latest import pair_cosines
from norax_core.models import SIGNALS
from norax_core.retrieval import CONTEXT_SEEDS
from norax_core.signals.context import neighbour_map
from norax_core.signals.temporal import decay

__all__ = ["PoolBatch", "Setting"]

_B, _D, _T, _G = (SIGNALS.index(s) for s in ("bm25", "dense", "temporal", "graph"))
_NEVER = np.iinfo(np.int32).max
_CHUNK = 512


@dataclass(frozen=True)
class Setting:
    """What fitting varies: fusion weights and the query-time engine parameters.

    Attributes:
        weights: Weight per signal, in :data:`~norax_core.SIGNALS` order.
        decay_days: tau per memory kind (kinds not listed keep the pools' values).
        pool_min: ``NoraxConfig.pool_min``.
        recency_candidates: ``NoraxConfig.recency_candidates``.
        context_window: ``NoraxConfig.context_window``.
        context_weight: ``NoraxConfig.context_weight``.
        bm25_k1: ``NoraxConfig.bm25_k1`` (``None``: the pools' own).
        bm25_b: ``NoraxConfig.bm25_b`` (``None``: the pools' own).
        latest_wins_weight: ``NoraxConfig.latest_wins_weight`` (0: off).
        latest_wins_similarity: ``NoraxConfig.latest_wins_similarity``.
        latest_wins_depth: ``NoraxConfig.latest_wins_depth``.
    """

    weights: tuple[float, float, float, float]
    decay_days: Mapping[str, float] = field(default_factory=dict)
    pool_min: int = 50
    recency_candidates: int = 5
    context_window: int = 0
    context_weight: float = 0.0
    bm25_k1: float | None = None
    bm25_b: float | None = None
    latest_wins_weight: float = 0.0
    latest_wins_similarity: float = 0.5
    latest_wins_depth: int = 10

    def params(self) -> dict[str, object]:
        """The ``Weights.params`` that carry this setting's engine parameters."""
        out: dict[str, object] = {
            "pool_min": self.pool_min,
            "recency_candidates": self.recency_candidates,
        }
        if self.decay_days:
            out["decay_days"] = dict(self.decay_days)
        if self.bm25_k1 is not None:
            out["bm25_k1"] = self.bm25_k1
        if self.bm25_b is not None:
            out["bm25_b"] = self.bm25_b
        if self.context_window > 0 and self.context_weight > 0:
            out["context_window"] = self.context_window
            out["context_weight"] = self.context_weight
        if self.latest_wins_weight > 0:
            out["latest_wins_weight"] = self.latest_wins_weight
            out["latest_wins_similarity"] = self.latest_wins_similarity
            out["latest_wins_depth"] = self.latest_wins_depth
        return out


def _ranks(scores: np.ndarray, valid: np.ndarray, positive_only: bool) -> np.ndarray:
    """Each candidate's position in its signal's own ranking (ties by index); never if unranked."""
    q, n = scores.shape
    key = np.where(valid, -scores, np.inf)
    order = np.argsort(key, axis=1, kind="stable")
    ranks = np.empty((q, n), dtype=np.int32)
    np.put_along_axis(ranks, order, np.arange(n, dtype=np.int32)[None, :].repeat(q, 0), axis=1)
    # Positives sort before the rest, so a positive's rank already counts positives only.
    blocked = (~valid | (scores <= 0)) if positive_only else ~valid
    return np.where(blocked, _NEVER, ranks)


def _vector_table(pools: Sequence[Pool], n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Pools' vectors stacked once (pools of a namespace share theirs), and each slot's row."""
    if not pools or any(p.vectors is None or len(p.vectors) != len(p.ids) for p in pools):
        return np.zeros((1, 1)), None
    parts: list[np.ndarray] = []
    start: dict[int, int] = {}
    offset = 0
    row = np.zeros((len(pools), n), dtype=np.int64)
    for i, p in enumerate(pools):
        vec = p.vectors
        if vec is None:  # excluded above; narrows the type
            continue
        if id(vec) not in start:
            start[id(vec)] = offset
            parts.append(vec)
            offset += len(vec)
        row[i, : len(p.ids)] = start[id(vec)] + np.arange(len(p.ids))
    return np.concatenate(parts) if offset else np.zeros((1, 1)), row


class PoolBatch:
    """Pools packed for fast evaluation.

    Args:
        pools: Pools built with every signal on.
        config: The base engine configuration (default: the pools' own).
    """

    def __init__(self, pools: Sequence[Pool], config: NoraxConfig | None = None) -> None:
        if not pools:
            raise ValueError("no pools to evaluate")
        self.pools = list(pools)
        self.config = config or pools[0].config
        q = len(pools)
        n = max(max(len(p.ids) for p in pools), 1)
        g = max(max(len(p.request.relevant) for p in pools), 1)
        self.scores = np.zeros((len(SIGNALS), q, n))
        self.valid = np.zeros((q, n), dtype=bool)
        self.age = np.zeros((q, n))
        self.created = np.zeros((q, n))
        self.kind_names = sorted({k for p in pools for k in p.kinds})
        code = {k: i for i, k in enumerate(self.kind_names)}
        self.kind = np.zeros((q, n), dtype=np.int32)
        self.gold = np.full((q, g), -1, dtype=np.int64)
        self.n_relevant = np.zeros(q)
        self.size = np.zeros(q, dtype=np.int64)
        for i, p in enumerate(pools):
            m = len(p.ids)
            self.scores[:, i, :m] = p.scores
            self.valid[i, :m] = True
            self.age[i, :m] = p.age_days
            self.created[i, :m] = p.created_at
            self.kind[i, :m] = [code[k] for k in p.kinds]
            rel = list(dict.fromkeys(p.request.relevant))
            self.n_relevant[i] = len(rel)
            idx = [j for j in (p.index(r) for r in rel) if j is not None]
            self.gold[i, : len(idx)] = idx
            self.size[i] = p.size
        q_of, g_at = np.nonzero(self.gold >= 0)
        self._pairs = (q_of, g_at)
        """Every (pool, gold slot) pair that holds a candidate: the only ranks needed."""
        self.rank = {
            s: _ranks(self.scores[j], self.valid, s in ("bm25", "graph"))
            for j, s in enumerate(SIGNALS)
            if s != "temporal"
        }
        self._temporal_cache: dict[tuple[float, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._neighbour_cache: dict[int, list[np.ndarray]] = {}
        self._bm25_cache: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}
        self.full = all(len(p.ids) >= p.size for p in pools)
        """Whether every pool holds its whole namespace (needed for context propagation)."""
        self.vectors, self.vector_row = _vector_table(pools, n)
        """Every distinct stored vector once, and each candidate's row in it (latest wins)."""

    def __len__(self) -> int:
        return len(self.pools)

    def _taus(self, decay_days: Mapping[str, float]) -> tuple[float, ...]:
        cfg = self.config
        return tuple(float(decay_days.get(k, cfg.tau_days(k))) for k in self.kind_names) or (
            cfg.default_decay_days,
        )

    def temporal(self, decay_days: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
        """Temporal scores and recency ranks under ``decay_days`` (cached)."""
        taus = self._taus(decay_days)
        hit = self._temporal_cache.get(taus)
        if hit is None:
            tau = np.asarray(taus)[self.kind]
            scores = np.where(self.valid, decay(self.age, tau), 0.0)
            hit = (scores, _ranks(scores, self.valid, False))
            if len(self._temporal_cache) > 64:
                self._temporal_cache.clear()
            self._temporal_cache[taus] = hit
        return hit

    def fused(self, setting: Setting, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Fused scores ``(q, n)`` and the candidate mask of a search for top ``k``."""
        w = setting.weights
        if min(w) < 0 or sum(w) <= 0:
            raise ValueError(f"weights must be >= 0 with a positive sum, got {w}")
        t_scores, t_rank = self.temporal(setting.decay_days)
        n_pool = max(setting.pool_min, self.config.pool_factor * k)
        bm25, bm25_rank = self.bm25(setting.bm25_k1, setting.bm25_b)
        cand = np.zeros_like(self.valid)
        for s, r in self.rank.items():
            if w[SIGNALS.index(s)] > 0:
                cand |= (bm25_rank if s == "bm25" else r) < n_pool
        recency_only = w[_T] > 0 and w[_B] == w[_D] == w[_G] == 0
        n_recent = n_pool if recency_only else setting.recency_candidates
        if w[_T] > 0 and n_recent > 0:
            cand |= t_rank < n_recent
        cand &= self.valid
        sc = self.scores
        # the same operations, in the same order, as fusion.weighted_sum
        fused = (0.0 + w[_B] * bm25 + w[_D] * sc[_D] + w[_T] * t_scores + w[_G] * sc[_G]) / sum(w)
        if setting.context_window > 0 and setting.context_weight > 0:
            fused, cand = self._context(fused, cand, setting, k)
        if setting.latest_wins_weight > 0:
            fused = self._latest(fused, cand, setting)
        return fused, cand

    def _latest(self, fused: np.ndarray, cand: np.ndarray, setting: Setting) -> np.ndarray:
        """:func:`~norax_core.bench.pools.rank_pool`'s latest-wins step, for all pools."""
        if self.vector_row is None:
            raise ValueError("latest wins needs pools with their vectors (build_pools keeps them)")
        q, n = fused.shape
        m = min(setting.latest_wins_depth, n)
        masked = np.where(cand, fused, -np.inf)
        top = np.argsort(-masked, axis=1, kind="stable")[:, :m]  # ties to the smaller id
        live = np.take_along_axis(cand, top, axis=1)
        score = np.take_along_axis(fused, top, axis=1)
        times = np.take_along_axis(self.created, top, axis=1)
        rows = np.take_along_axis(self.vector_row, top, axis=1)
        lifted = score.copy()
        lam, theta = setting.latest_wins_weight, setting.latest_wins_similarity
        for a in range(0, q, 64):  # (chunk, m, m, dim) products: bound the memory
            b = slice(a, a + 64)
            sim = pair_cosines(self.vectors[rows[b]])
            older = times[b][:, :, None] < times[b][:, None, :]  # [o, j]: o older than j
            ok = older & (sim >= theta) & live[b][:, :, None] & live[b][:, None, :]
            best = np.where(ok, score[b][:, :, None], -np.inf).max(axis=1)
            lifted[b] = score[b] + lam * np.maximum(0.0, best - score[b])
        out = fused.copy()
        np.put_along_axis(out, top, np.where(live, lifted, score), axis=1)
        return out

    def bm25_variants(self) -> list[tuple[float, float]]:
        """The ``(k1, b)`` pairs every pool has BM25 scores for, the pools' own first."""
        own = (self.config.bm25_k1, self.config.bm25_b)
        shared = set.intersection(*(set(p.bm25_rows) for p in self.pools))
        return [own, *sorted(shared - {own})]

    def bm25(self, k1: float | None, b: float | None) -> tuple[np.ndarray, np.ndarray]:
        """BM25 scores and ranks under ``k1`` and ``b`` (``None``: the pools' own)."""
        key = (self.config.bm25_k1 if k1 is None else k1, self.config.bm25_b if b is None else b)
        hit = self._bm25_cache.get(key)
        if hit is None:
            if key == (self.config.bm25_k1, self.config.bm25_b):
                scores = self.scores[_B]
            else:
                scores = np.zeros_like(self.valid, dtype=np.float64)
                for i, p in enumerate(self.pools):
                    scores[i, : len(p.ids)] = pool_bm25(
                        p, self.config.with_params({"bm25_k1": key[0], "bm25_b": key[1]})
                    )
            hit = self._bm25_cache[key] = (scores, _ranks(scores, self.valid, True))
        return hit

    def neighbours(self, window: int) -> list[np.ndarray]:
        """Per neighbour slot, the ``(q, n)`` column of that neighbour; ``n`` where none.

        Column ``n`` is one past the last memory: a padding column that always scores 0.
        """
        hit = self._neighbour_cache.get(window)
        if hit is not None:
            return hit
        if not self.full:
            raise ValueError("context propagation needs pools that hold the whole namespace")
        gap = self.config.context_gap_seconds
        q, n = self.valid.shape
        out = np.full((2 * window, q, n), n, dtype=np.int64)
        for i, p in enumerate(self.pools):
            ordered, times = timeline(p)
            row = p.index_of
            for m, near in neighbour_map(ordered, times, window, gap).items():
                out[: len(near), i, row[m]] = [row[x] for x in near]
        slots = list(out)
        self._neighbour_cache[window] = slots
        return slots

    def _seeds(self, fused: np.ndarray, cand: np.ndarray, k: int) -> np.ndarray:
        """Mask of each pool's best ``CONTEXT_SEEDS * k`` candidates (ties to the smaller id)."""
        masked = np.where(cand, fused, -np.inf)
        want = CONTEXT_SEEDS * np.minimum(k, self.size)
        seeds = np.zeros_like(cand)
        for m in np.unique(want):
            rows = np.flatnonzero(want == m)
            sub = masked[rows]
            m = int(min(m, sub.shape[1]))
            if m == 0:
                continue
            kth = -np.partition(-sub, m - 1, axis=1)[:, m - 1 : m]
            above = sub > kth
            tied = sub == kth
            room = m - above.sum(axis=1, keepdims=True)
            seeds[rows] = (above | (tied & (np.cumsum(tied, axis=1) <= room))) & cand[rows]
        return seeds

    def _context(
        self, fused: np.ndarray, cand: np.ndarray, setting: Setting, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~norax_core.bench.pools.rank_pool`'s context step, for all pools at once."""
        slots = self.neighbours(setting.context_window)
        q, n = fused.shape
        rows, cols = np.nonzero(self._seeds(fused, cand, k))
        known = np.zeros((q, n + 1), dtype=bool)
        known[:, :n] = cand
        for nb in slots:
            known[rows, nb[rows, cols]] = True
        known = known[:, :n]
        sent = np.zeros((q, n + 1))
        sent[:, :n] = np.where(known, fused, 0.0)
        best = np.zeros_like(fused)
        for nb in slots:
            np.maximum(best, np.take_along_axis(sent, nb, axis=1), out=best)
        lam = setting.context_weight
        return (fused + lam * best) / (1.0 + lam), known

    def positions(self, setting: Setting, k: int) -> np.ndarray:
        """Rank (from 0) of each gold memory in the search's fused ranking, ``(q, g)``.

        Padding and gold memories outside the candidate pool get a huge rank.
        """
        fused, cand = self.fused(setting, k)
        masked = np.where(cand, fused, -np.inf)
        q_of, g_at = self._pairs
        out = np.full(self.gold.shape, _NEVER, dtype=np.int64)
        idx = np.arange(masked.shape[1])[None, :]
        for a in range(0, q_of.size, _CHUNK):
            qs, gs = q_of[a : a + _CHUNK], self.gold[q_of[a : a + _CHUNK], g_at[a : a + _CHUNK]]
            rows = masked[qs]
            own = rows[np.arange(qs.size), gs][:, None]
            ahead = (rows > own) | ((rows == own) & (idx < gs[:, None]))
            rank = ahead.sum(axis=1)
            out[qs, g_at[a : a + _CHUNK]] = np.where(cand[qs, gs], rank, _NEVER)
        return out

    def recall(self, setting: Setting, k: int) -> np.ndarray:
        """Recall@k of each pool under ``setting``."""
        pos = self.positions(setting, k)
        kmax = np.minimum(k, self.size)[:, None]
        hits = (pos < kmax).sum(axis=1)
        return np.where(self.n_relevant > 0, hits / np.maximum(self.n_relevant, 1), 1.0)

    def mean_recall(self, setting: Setting, k: int, subset: np.ndarray | None = None) -> float:
        """Mean recall@k over all pools, or over the ``subset`` of pool indices."""
        r = self.recall(setting, k)
        return float(r.mean() if subset is None else r[subset].mean())
