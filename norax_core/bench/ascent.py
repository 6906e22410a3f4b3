"""The coordinate ascent that fitting runs: its grids, objective and moves.

:func:`~norax_core.bench.fit.fit_pools` (the global weights) and
:func:`~norax_core.bench.intentfit.fit_intents` (each intent's own) both climb with
:func:`ascend` over the grids here: one coordinate at a time (a signal's share of the weight,
tau per memory kind, the pool sizes, BM25's ``(k1, b)`` with its share, the context window with
its share, latest wins' weight, and every :data:`STAGE_GRID` parameter),
keeping the best strictly better move of each sweep, scored by :class:`Objective` (recall@k,
ties broken by the gold memories' mean reciprocal rank) through
:class:`~norax_core.bench.fastrank.PoolBatch`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from norax_core.bench.fastrank import PoolBatch, Setting
from norax_core.bench.pools import check_store_params
from norax_core.config import NoraxConfig
from norax_core.models import SIGNALS
from norax_core.weights import Weights, shares

logger = logging.getLogger("norax")

SHARE_GRID = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
"""Shares of the total weight tried for one signal (the others keep their ratios)."""
TAU_GRID = (0.5, 1.0, 2.0, 4.0, 7.0, 14.0, 30.0, 60.0, 120.0, 240.0, 480.0, 1000.0, 3650.0)
"""Decay constants (days) tried per memory kind."""
POOL_GRID = (10, 20, 30, 50, 75, 100, 150, 200)
"""``pool_min`` values tried (each signal proposes at least this many candidates)."""
RECENCY_GRID = (0, 5, 10, 20, 50)
"""``recency_candidates`` values tried."""
K1_GRID = (1.2, 2.0)
"""``bm25_k1`` values tried (when the pools carry BM25 scores for them)."""
B_GRID = (0.3, 0.5, 0.75, 1.0)
"""``bm25_b`` values tried (when the pools carry BM25 scores for them)."""
PAIR_SHARE_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5)
"""BM25 shares tried together with each ``(k1, b)`` pair."""
CONTEXT_WINDOW_GRID = (0, 1, 2, 3)
"""``context_window`` values tried (pools must hold whole namespaces)."""
CONTEXT_WEIGHT_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
"""``context_weight`` values tried."""
LATEST_WEIGHT_GRID = (0.0, 1.05, 1.5)
"""``latest_wins_weight`` values tried (pools must carry their words)."""
STAGE_GRID: dict[str, tuple[Any, ...]] = {
    # one line per ranking stage: its NoraxConfig parameter -> the values tried (off first)
    "period_boost": (0.0, 0.25, 0.5, 1.0),
    "bridge_weight": (0.0, 0.05, 0.1, 0.2),
}
"""The ranking stages' own parameters the fitter moves, one coordinate each (globally and per
intent). A stage gated by a new ``NoraxConfig`` field is fitted by adding one line here;
names that are not ``NoraxConfig`` fields are skipped."""


def usable_stages(obj: Objective, start: Setting) -> dict[str, tuple[Any, ...]]:
    """The :data:`STAGE_GRID` entries these pools can rank with.

    A stage whose inputs the pools lack (the bridge step without the entity graph's view, for
    example) raises ``ValueError`` when tried; it is left out of the fit.
    """
    out = {}
    for name, values in stage_params().items():
        try:
            obj(with_extra(start, name, values[-1]))
        except ValueError:
            logger.info("norax fit: %s left out: the pools cannot rank with it", name)
            continue
        out[name] = values
    return out


def stage_params() -> dict[str, tuple[Any, ...]]:
    """The :data:`STAGE_GRID` entries this engine knows (``NoraxConfig`` fields)."""
    fields = NoraxConfig.__dataclass_fields__
    return {name: values for name, values in STAGE_GRID.items() if name in fields}


def setting_from(weights: Weights, batch: PoolBatch) -> Setting:
    """The :class:`Setting` of ``weights`` (global ones: select an intent's first)."""
    cfg = weights.applied(batch.config)
    check_store_params(batch.config, cfg)
    return Setting(
        weights=shares(list(weights.as_dict().values())),  # type: ignore[arg-type]
        decay_days={k: cfg.tau_days(k) for k in batch.kind_names},
        pool_min=cfg.pool_min,
        recency_candidates=cfg.recency_candidates,
        context_window=cfg.context_window if cfg.context_on else 0,
        context_weight=cfg.context_weight if cfg.context_on else 0.0,
        bm25_k1=None if cfg.bm25_k1 == batch.config.bm25_k1 else cfg.bm25_k1,
        bm25_b=None if cfg.bm25_b == batch.config.bm25_b else cfg.bm25_b,
        latest_wins_weight=cfg.latest_wins_weight,
        latest_wins_depth=cfg.latest_wins_depth,
        extra=tuple((name, getattr(cfg, name)) for name in sorted(stage_params())),
    )


def with_extra(s: Setting, name: str, value: Any) -> Setting:
    """``s`` with the stage parameter ``name`` set to ``value``."""
    return replace(s, extra=tuple(sorted({**dict(s.extra), name: value}.items())))


def _with_share(w: Sequence[float], i: int, share: float) -> tuple[float, float, float, float]:
    rest = sum(w) - w[i]
    out = [
        share if j == i else ((v / rest) * (1 - share) if rest > 0 else (1 - share) / 3)
        for j, v in enumerate(w)
    ]
    return tuple(round(v, 6) for v in out)  # type: ignore[return-value]


class Objective:
    """Weighted mean recall@k, ties broken by the gold memories' mean reciprocal rank."""

    def __init__(self, batch: PoolBatch, k: int, sample_weight: np.ndarray | None) -> None:
        self.batch = batch
        self.k = k
        sw = np.ones(len(batch)) if sample_weight is None else np.asarray(sample_weight, float)
        self.sw = sw / sw.sum()
        self.calls = 0
        self._memo: dict[tuple[Any, ...], tuple[float, float]] = {}

    def __call__(self, s: Setting) -> tuple[float, float]:
        """``(recall@k, mean reciprocal rank)`` of ``s``, weighted (memoised)."""
        key = (
            s.weights,
            tuple(sorted(s.decay_days.items())),
            s.pool_min,
            s.recency_candidates,
            s.context_window,
            s.context_weight,
            s.bm25_k1,
            s.bm25_b,
            s.latest_wins_weight,
            s.latest_wins_depth,
            s.extra,
        )
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        self.calls += 1
        b = self.batch
        pos = b.positions(s, self.k)
        kmax = np.minimum(self.k, b.size)[:, None]
        n_rel = np.maximum(b.n_relevant, 1)
        recall = np.where(b.n_relevant > 0, (pos < kmax).sum(axis=1) / n_rel, 1.0)
        rr = np.where(b.gold >= 0, 1.0 / (1.0 + pos), 0.0).sum(axis=1) / n_rel
        out = (float(self.sw @ recall), float(self.sw @ rr))
        self._memo[key] = out
        return out


def neighbours(
    s: Setting,
    kinds: Sequence[str],
    params: bool,
    pool_cap: int,
    recency_cap: int,
    context: bool = False,
    bm25: Sequence[tuple[float, float]] = (),
    latest: bool = False,
    stages: Mapping[str, tuple[Any, ...]] | None = None,
) -> Iterator[Setting]:
    """Every setting one coordinate move away from ``s`` (``stages``: default all known)."""
    for i in range(len(SIGNALS)):
        for v in SHARE_GRID:
            yield replace(s, weights=_with_share(s.weights, i, v))
    if not params:
        return
    for kind in kinds:
        for t in TAU_GRID:
            yield replace(s, decay_days={**s.decay_days, kind: t})
    for p in POOL_GRID:
        if p <= pool_cap:
            yield replace(s, pool_min=p)
    for r in RECENCY_GRID:
        if r <= recency_cap:
            yield replace(s, recency_candidates=r)
    # BM25's parameters only matter with its weight: move the pair and the share together.
    for i, (k1, b) in enumerate(bm25):  # the first pair is the pools' own: None
        for v in PAIR_SHARE_GRID:
            yield replace(
                s,
                weights=_with_share(s.weights, 0, v),
                bm25_k1=k1 if i else None,
                bm25_b=b if i else None,
            )
    if context:  # window and weight together, for the same reason
        for win in CONTEXT_WINDOW_GRID:
            for lam in CONTEXT_WEIGHT_GRID:
                yield replace(s, context_window=win, context_weight=lam)
    if latest:
        for lam in LATEST_WEIGHT_GRID:
            yield replace(s, latest_wins_weight=lam)
    for name, values in (stage_params() if stages is None else stages).items():
        for value in values:
            yield with_extra(s, name, value)


def ascend(
    obj: Objective,
    start: Setting,
    kinds: Sequence[str],
    *,
    params: bool,
    max_sweeps: int,
    pool_cap: int,
    recency_cap: int,
    context: bool = False,
    bm25: Sequence[tuple[float, float]] = (),
    latest: bool = False,
    stages: Mapping[str, tuple[Any, ...]] | None = None,
) -> tuple[Setting, tuple[float, float]]:
    """Coordinate ascent from ``start``: keep any strictly better move, stop at a fixpoint."""
    best, best_val = start, obj(start)
    for sweep in range(max_sweeps):
        improved = False
        moves = neighbours(
            best, kinds, params, pool_cap, recency_cap, context, bm25, latest, stages
        )
        for cand in list(moves):
            if sum(cand.weights) <= 0:
                continue
            val = obj(cand)
            if val > best_val:
                best, best_val, improved = cand, val, True
        logger.debug(
            "norax fit: sweep %d: %.4f (%d settings scored)", sweep, best_val[0], obj.calls
        )
        if not improved:
            break
    return best, best_val
