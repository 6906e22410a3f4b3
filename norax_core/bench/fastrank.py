"""Recall@k over many pools at once under many settings: the inner loop of weight fitting.

:class:`PoolBatch` packs pools into one :class:`~norax_core.ranking.Table` and ranks it with
:func:`norax_core.ranking.rank`, the function ``search`` calls (there is no second copy of
the ranking here). What it adds is caching across the thousands of settings a fit tries: the
temporal scores per set of decay constants, the BM25 scores per ``(k1, b)`` and each signal's
proposal order are computed once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from norax_core.bench.pools import Pool, pool_bm25, pool_table
from norax_core.config import NoraxConfig
from norax_core.models import SIGNALS
from norax_core.ranking import Plan, Ranking, Table, rank, signal_ranks
from norax_core.signals.temporal import decay
from norax_core.weights import Weights

__all__ = ["PoolBatch", "Setting"]

_B, _T = SIGNALS.index("bm25"), SIGNALS.index("temporal")


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
        latest_wins_weight: ``NoraxConfig.latest_wins_weight`` (at most 1: off).
        latest_wins_depth: ``NoraxConfig.latest_wins_depth``.
        extra: Other query-time ``NoraxConfig`` parameters, ``(name, value)`` pairs sorted by
            name: the ranking stages' own (the fitter's ``STAGE_GRID``).
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
    latest_wins_depth: int = 10
    extra: tuple[tuple[str, Any], ...] = ()

    def plan(self, config: NoraxConfig) -> Plan:
        """The :class:`~norax_core.ranking.Plan` of this setting under ``config``.

        Made by :meth:`Plan.of <norax_core.ranking.Plan.of>`, as a search makes its plan, so
        every stage parameter reaches the ranking the same way.
        """
        cfg = config.with_params(
            {
                "pool_min": self.pool_min,
                "recency_candidates": self.recency_candidates,
                "context_window": self.context_window,
                "context_weight": self.context_weight,
                "latest_wins_weight": self.latest_wins_weight,
                "latest_wins_depth": self.latest_wins_depth,
                **dict(self.extra),
            }
        )
        return Plan.of(Weights(*self.weights), cfg)

    def params(self, base: NoraxConfig | None = None) -> dict[str, Any]:
        """The ``Weights.params`` that carry this setting's engine parameters.

        Without ``base``, the stages that are off are left out (a lean weights file); with
        it, every parameter is explicit (BM25's own from ``base`` when the setting keeps the
        pools'), as a per-intent override merged over other params needs.
        """
        explicit = base is not None
        out: dict[str, Any] = {
            "pool_min": self.pool_min,
            "recency_candidates": self.recency_candidates,
        }
        if self.decay_days:
            out["decay_days"] = dict(self.decay_days)
        k1 = self.bm25_k1 if base is None or self.bm25_k1 is not None else base.bm25_k1
        b = self.bm25_b if base is None or self.bm25_b is not None else base.bm25_b
        if k1 is not None:
            out["bm25_k1"] = k1
        if b is not None:
            out["bm25_b"] = b
        if explicit or (self.context_window > 0 and self.context_weight > 0):
            out["context_window"] = self.context_window
            out["context_weight"] = self.context_weight
        if explicit or self.latest_wins_weight > 0:
            out["latest_wins_weight"] = self.latest_wins_weight
            out["latest_wins_depth"] = self.latest_wins_depth
        defaults = NoraxConfig()
        for name, value in self.extra:
            if explicit or value != getattr(defaults, name):
                out[name] = value
        return out


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
        self.table = pool_table(self.pools, self.config)
        q, n = self.table.valid.shape
        g = max(max(len(p.request.relevant) for p in pools), 1)
        self.valid = self.table.valid
        self.age = np.zeros((q, n))
        self.kind_names = sorted({k for p in pools for k in p.kinds})
        code = {k: i for i, k in enumerate(self.kind_names)}
        self.kind = np.zeros((q, n), dtype=np.int32)
        self.gold = np.full((q, g), -1, dtype=np.int64)
        self.n_relevant = np.zeros(q)
        self.size = self.table.size
        for i, p in enumerate(pools):
            m = len(p.ids)
            self.age[i, :m] = p.age_days
            self.kind[i, :m] = [code[k] for k in p.kinds]
            rel = list(dict.fromkeys(p.request.relevant))
            self.n_relevant[i] = len(rel)
            idx = [j for j in (p.index(r) for r in rel) if j is not None]
            self.gold[i, : len(idx)] = idx
        self._pairs = np.nonzero(self.gold >= 0)
        """Every (pool, gold slot) pair that holds a candidate: the only ranks needed."""
        self._temporal_cache: dict[tuple[float, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._bm25_cache: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}
        self._tables: dict[tuple[Any, ...], Table] = {}
        self.full = all(len(p.ids) >= p.size for p in pools)
        """Whether every pool holds its whole namespace (needed for context propagation)."""
        self.has_words = self.table.statements is not None
        """Whether every pool carries its words (latest wins' attribute rule needs them)."""

    def __len__(self) -> int:
        return len(self.pools)

    def _taus(self, decay_days: Mapping[str, float]) -> tuple[float, ...]:
        cfg = self.config
        return tuple(float(decay_days.get(k, cfg.tau_days(k))) for k in self.kind_names) or (
            cfg.default_decay_days,
        )

    def temporal(self, decay_days: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
        """Temporal scores and recency proposal order under ``decay_days`` (cached)."""
        taus = self._taus(decay_days)
        hit = self._temporal_cache.get(taus)
        if hit is None:
            tau = np.asarray(taus)[self.kind]
            scores = np.where(self.valid, decay(self.age, tau), 0.0)
            hit = (scores, signal_ranks(scores, self.valid, None, "temporal"))
            if len(self._temporal_cache) > 64:
                self._temporal_cache.clear()
            self._temporal_cache[taus] = hit
        return hit

    def bm25_variants(self) -> list[tuple[float, float]]:
        """The ``(k1, b)`` pairs every pool has BM25 scores for, the pools' own first."""
        own = (self.config.bm25_k1, self.config.bm25_b)
        shared = set.intersection(*(set(p.bm25_rows) for p in self.pools))
        return [own, *sorted(shared - {own})]

    def bm25(self, k1: float | None, b: float | None) -> tuple[np.ndarray, np.ndarray]:
        """BM25 scores and proposal order under ``k1`` and ``b`` (``None``: the pools' own)."""
        key = (self.config.bm25_k1 if k1 is None else k1, self.config.bm25_b if b is None else b)
        hit = self._bm25_cache.get(key)
        if hit is None:
            if key == (self.config.bm25_k1, self.config.bm25_b):
                scores = self.table.scores[_B]
            else:
                scores = np.zeros_like(self.valid, dtype=np.float64)
                for i, p in enumerate(self.pools):
                    scores[i, : len(p.ids)] = pool_bm25(
                        p, self.config.with_params({"bm25_k1": key[0], "bm25_b": key[1]})
                    )
            hit = self._bm25_cache[key] = (scores, signal_ranks(scores, self.valid, None, "bm25"))
        return hit

    def ranking(self, setting: Setting, k: int) -> Ranking:
        """:func:`~norax_core.ranking.rank` of every pool under ``setting``, top ``k``."""
        w = setting.weights
        if min(w) < 0 or sum(w) <= 0:
            raise ValueError(f"weights must be >= 0 with a positive sum, got {w}")
        if setting.context_window > 0 and setting.context_weight > 0 and not self.full:
            raise ValueError("context propagation needs pools that hold the whole namespace")
        # a fit moves one coordinate at a time: most settings share the decay and BM25 of
        # the last ones, so the table built for them is kept (a few of them, by key)
        key = (self._taus(setting.decay_days), setting.bm25_k1, setting.bm25_b)
        table = self._tables.get(key)
        if table is None:
            t_scores, t_rank = self.temporal(setting.decay_days)
            b_scores, b_rank = self.bm25(setting.bm25_k1, setting.bm25_b)
            scores = self.table.scores.copy()
            proposed = self.table.proposed.copy()
            scores[_T], proposed[_T] = t_scores, t_rank
            scores[_B], proposed[_B] = b_scores, b_rank
            table = replace(self.table, scores=scores, proposed=proposed)
            if len(self._tables) >= 4:
                self._tables.pop(next(iter(self._tables)))
            self._tables[key] = table
        return rank(table, setting.plan(self.config), k)

    def fused(self, setting: Setting, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Final scores ``(q, n)`` and the candidate mask of a search for top ``k``."""
        r = self.ranking(setting, k)
        return r.score, r.candidates

    def positions(self, setting: Setting, k: int) -> np.ndarray:
        """Rank (from 0) of each gold memory in the search's ranking, ``(q, g)``.

        Padding and gold memories outside the candidate pool get a huge rank.
        """
        r = self.ranking(setting, k)
        q_of, g_at = self._pairs
        out = np.full(self.gold.shape, np.iinfo(np.int32).max, dtype=np.int64)
        out[q_of, g_at] = r.positions(q_of, self.gold[q_of, g_at])
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
