"""Learning fusion weights and query-time engine parameters from relevance feedback.

The method is coordinate ascent on mean recall@k over precomputed candidate pools: each
query is run once with every signal on (:func:`~norax_core.bench.pools.build_pools`), then
thousands of settings are scored in numpy (:class:`~norax_core.bench.fastrank.PoolBatch`)
without touching the store. One coordinate at a time moves over a grid (a signal's share of
the weight on the simplex, tau per memory kind, the candidate pool size, the number of
recency candidates) and a move is kept only if it strictly improves the objective
(recall@k, ties broken by the gold memories' mean reciprocal rank). Several starts (the
current weights, equal weights and random points of the simplex) guard against local optima.
:func:`cross_validate` reports held-out numbers (leave one group, e.g. one conversation, out).

Examples:
    >>> from norax_core.bench.fit import Feedback, fit_weights  # doctest: +SKIP
    >>> result = fit_weights(memory, [Feedback("where did I park?", ["m-17"], now=now)])
    >>> result.save("weights.json")
    >>> NoraxMemory("store", weights=load_weights("weights.json"))
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from norax_core import validation as check
from norax_core.bench.fastrank import PoolBatch, Setting
from norax_core.bench.pools import Pool, PoolRequest, build_pools, check_store_params
from norax_core.config import NoraxConfig
from norax_core.engine import NoraxMemory
from norax_core.errors import InvalidInputError
from norax_core.models import SIGNALS
from norax_core.weights import Weights, save_weights

__all__ = [
    "B_GRID",
    "K1_GRID",
    "POOL_GRID",
    "RECENCY_GRID",
    "SHARE_GRID",
    "TAU_GRID",
    "CVResult",
    "Feedback",
    "FitResult",
    "cross_validate",
    "fit_pools",
    "fit_weights",
]

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
LATEST_WEIGHT_GRID = (0.0, 0.5, 1.05, 1.5)
"""``latest_wins_weight`` values tried (pools must carry their vectors)."""
LATEST_SIMILARITY_GRID = (0.5, 0.6, 0.7, 0.8)
"""``latest_wins_similarity`` values tried with each weight."""
STAGE_GRID: dict[str, tuple[Any, ...]] = {
    # one line per ranking stage: its NoraxConfig parameter -> the values tried (off first)
}
"""The ranking stages' own parameters the fitter moves, one coordinate each (globally and per
intent). A stage gated by a new ``NoraxConfig`` field is fitted by adding one line here;
names that are not ``NoraxConfig`` fields are skipped."""


def stage_params() -> dict[str, tuple[Any, ...]]:
    """The :data:`STAGE_GRID` entries this engine knows (``NoraxConfig`` fields)."""
    fields = NoraxConfig.__dataclass_fields__
    return {name: values for name, values in STAGE_GRID.items() if name in fields}


@dataclass(frozen=True)
class Feedback:
    """One judged query: what was asked, and which memories answered it.

    Attributes:
        query: The query text.
        relevant_ids: Ids of the memories that were relevant.
        namespace: The namespace searched (``None``: the default one).
        now: When it was asked (datetime, ISO string or epoch seconds; ``None``: now).
    """

    query: str
    relevant_ids: Sequence[str]
    namespace: str | None = None
    now: Any = None


@dataclass(frozen=True)
class FitResult:
    """Learned weights and how well they did on the data they were fitted on.

    Attributes:
        weights: The learned :class:`Weights` (engine parameters in ``params``).
        score: Mean recall@k of ``weights`` on the fitting data.
        baseline: Mean recall@k of the starting weights on the same data.
        k: The cut-off optimised.
        n_queries: Judged queries used.
        evaluations: Settings scored during the search.
        seconds: Wall time of the search.
        global_score: Mean recall@k of the global weights alone (without per-intent
            overrides) on the fitting data.
        intents: Per intent: training questions, and recall@k of the global weights and of
            its own on them (:class:`~norax_core.bench.intentfit.IntentFit`), when fitted
            per intent.
    """

    weights: Weights
    score: float
    baseline: float
    k: int
    n_queries: int
    evaluations: int = 0
    seconds: float = 0.0
    global_score: float | None = None
    intents: dict[str, dict[str, Any]] = field(default_factory=dict)

    def save(self, path: str | Path, **info: Any) -> None:
        """Write the weights as a versioned weights file, with the fit's figures."""
        fit: dict[str, Any] = {
            f"train_recall@{self.k}": round(self.score, 4),
            f"baseline_recall@{self.k}": round(self.baseline, 4),
            "n_queries": self.n_queries,
            "method": "coordinate ascent on recall@k over candidate pools",
        }
        if self.intents:
            fit[f"train_recall@{self.k} (global weights only)"] = round(
                self.global_score if self.global_score is not None else self.score, 4
            )
            fit["intents"] = self.intents
        save_weights(self.weights, path, fit={**fit, **info})


@dataclass
class CVResult:
    """Held-out evaluation: each group's weights fitted on all the other groups.

    Attributes:
        folds: Per held-out group: its learned weights and train / test recall@k.
        test_recall: Held-out recall@k of each pool, in input order.
        weights_of: Held-out group -> the weights it was evaluated with.
        test_recall_global: Held-out recall@k of each pool under the same fold's global
            weights alone (equal to ``test_recall`` without per-intent fitting).
        global_of: Held-out group -> that fold's global weights (no overrides).
    """

    folds: list[dict[str, Any]]
    test_recall: np.ndarray
    weights_of: dict[str, Weights] = field(default_factory=dict)
    test_recall_global: np.ndarray | None = None
    global_of: dict[str, Weights] = field(default_factory=dict)

    @property
    def mean(self) -> float:
        """Held-out mean recall@k over all pools."""
        return float(self.test_recall.mean()) if self.test_recall.size else 0.0


def _setting_from(weights: Weights, batch: PoolBatch) -> Setting:
    cfg = weights.applied(batch.config)
    check_store_params(batch.config, cfg)
    w = weights.as_dict()
    total = sum(w.values())
    return Setting(
        weights=tuple(w[s] / total for s in SIGNALS),  # type: ignore[arg-type]
        decay_days={k: cfg.tau_days(k) for k in batch.kind_names},
        pool_min=cfg.pool_min,
        recency_candidates=cfg.recency_candidates,
        context_window=cfg.context_window if cfg.context_on else 0,
        context_weight=cfg.context_weight if cfg.context_on else 0.0,
        bm25_k1=None if cfg.bm25_k1 == batch.config.bm25_k1 else cfg.bm25_k1,
        bm25_b=None if cfg.bm25_b == batch.config.bm25_b else cfg.bm25_b,
        latest_wins_weight=cfg.latest_wins_weight,
        latest_wins_similarity=cfg.latest_wins_similarity,
        latest_wins_depth=cfg.latest_wins_depth,
        extra=tuple((name, getattr(cfg, name)) for name in sorted(stage_params())),
    )


def _with_extra(s: Setting, name: str, value: Any) -> Setting:
    return replace(s, extra=tuple(sorted({**dict(s.extra), name: value}.items())))


def _with_share(w: Sequence[float], i: int, share: float) -> tuple[float, float, float, float]:
    rest = sum(w) - w[i]
    out = [
        share if j == i else ((v / rest) * (1 - share) if rest > 0 else (1 - share) / 3)
        for j, v in enumerate(w)
    ]
    return tuple(round(v, 6) for v in out)  # type: ignore[return-value]


class _Objective:
    """Weighted mean recall@k, ties broken by the gold memories' mean reciprocal rank."""

    def __init__(self, batch: PoolBatch, k: int, sample_weight: np.ndarray | None) -> None:
        self.batch = batch
        self.k = k
        sw = np.ones(len(batch)) if sample_weight is None else np.asarray(sample_weight, float)
        self.sw = sw / sw.sum()
        self.calls = 0
        self._memo: dict[tuple[Any, ...], tuple[float, float]] = {}

    def __call__(self, s: Setting) -> tuple[float, float]:
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
            s.latest_wins_similarity,
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


def _neighbours(
    s: Setting,
    kinds: Sequence[str],
    params: bool,
    pool_cap: int,
    recency_cap: int,
    context: bool = False,
    bm25: Sequence[tuple[float, float]] = (),
    latest: bool = False,
) -> Iterator[Setting]:
    """Every setting one coordinate move away from ``s``."""
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
    if latest:  # the threshold matters only with a weight: move them together
        for lam in LATEST_WEIGHT_GRID:
            for theta in LATEST_SIMILARITY_GRID:
                yield replace(s, latest_wins_weight=lam, latest_wins_similarity=theta)
    for name, values in stage_params().items():
        for value in values:
            yield _with_extra(s, name, value)


def _ascend(
    obj: _Objective,
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
) -> tuple[Setting, tuple[float, float]]:
    """Coordinate ascent from ``start``: keep any strictly better move, stop at a fixpoint."""
    best, best_val = start, obj(start)
    for sweep in range(max_sweeps):
        improved = False
        moves = _neighbours(best, kinds, params, pool_cap, recency_cap, context, bm25, latest)
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


def fit_pools(
    pools: Sequence[Pool],
    *,
    k: int = 10,
    start: Weights | None = None,
    restarts: int = 4,
    fit_params: bool = True,
    sample_weight: Sequence[float] | np.ndarray | None = None,
    seed: int = 0,
    max_sweeps: int = 8,
    name: str = "fitted",
    batch: PoolBatch | None = None,
    per_intent: bool = False,
    min_intent_questions: int = 30,
) -> FitResult:
    """Fit weighted-sum weights (and engine parameters) on scored pools.

    Args:
        pools: Pools from :func:`build_pools` with every signal on.
        k: The recall cut-off to maximise.
        start: First starting point (default: the ``seed`` preset).
        restarts: Random starting points on the simplex, in addition to ``start`` and equal
            weights.
        fit_params: Also fit tau per memory kind, ``pool_min`` and ``recency_candidates``.
        sample_weight: Weight of each pool in the mean (e.g. to balance datasets).
        seed: Seed of the random starts.
        max_sweeps: Coordinate sweeps per start at most.
        name: Name of the learned weights.
        batch: A prebuilt :class:`PoolBatch` of ``pools`` (saves packing them again).
        per_intent: Then fit each intent's own weights and parameters, starting from the
            global fit (:func:`~norax_core.bench.intentfit.fit_intents`), as per-intent
            overrides of the result.
        min_intent_questions: An intent with fewer questions keeps the global weights.

    Returns:
        The best setting found, as :class:`FitResult`.
    """
    if not pools:
        raise InvalidInputError("no judged queries to fit on")
    t0 = time.perf_counter()
    batch = batch or PoolBatch(pools)
    obj = _Objective(batch, k, None if sample_weight is None else np.asarray(sample_weight))
    from norax_core.presets import get_preset

    first = _setting_from(start or get_preset("seed"), batch)
    if first.context_window and not batch.full:
        raise InvalidInputError(
            "the starting weights use context propagation, which needs pools holding the "
            "whole namespace: build them with depth=None"
        )
    if first.latest_wins_weight > 0 and batch.vector_row is None:
        raise InvalidInputError(
            "the starting weights use latest wins, which needs pools with their stored "
            "vectors (build_pools keeps them)"
        )
    rng = random.Random(seed)
    starts = [
        first,
        Setting(
            (0.25, 0.25, 0.25, 0.25), first.decay_days, first.pool_min, first.recency_candidates
        ),
    ]
    for _ in range(restarts):
        raw = [rng.expovariate(1.0) for _ in SIGNALS]
        total = sum(raw)
        starts.append(
            Setting(
                tuple(round(v / total, 6) for v in raw),  # type: ignore[arg-type]
                first.decay_days,
                first.pool_min,
                first.recency_candidates,
            )
        )
    depth = min(len(p.ids) for p in pools)
    best, best_val = first, obj(first)
    baseline = best_val[0]
    ascend: dict[str, Any] = {
        "params": fit_params,
        "max_sweeps": max_sweeps,
        "pool_cap": max(depth, 1),
        "recency_cap": max(depth, 1),
        "context": fit_params and batch.full,
        "latest": fit_params and batch.vector_row is not None,
        "bm25": [
            v
            for i, v in enumerate(batch.bm25_variants())
            if i == 0 or (v[0] in K1_GRID and v[1] in B_GRID)
        ]
        if fit_params
        else (),
    }
    for s in starts:
        found, val = _ascend(obj, s, batch.kind_names, **ascend)
        if val > best_val:
            best, best_val = found, val
    w = dict(zip(SIGNALS, best.weights, strict=True))
    params = best.params() if fit_params else {}
    if batch.config.embed_context:  # add-time: the weights only hold for stores built so
        params["embed_context"] = batch.config.embed_context
    weights = Weights.from_mapping(w, params=params, name=name)
    score, calls, report = best_val[0], obj.calls, {}
    if per_intent:
        from norax_core.bench.intentfit import fit_intents, intent_report, override_of

        fits = fit_intents(
            pools,
            best,
            k=k,
            sample_weight=obj.sw,
            min_questions=min_intent_questions,
            config=batch.config,
            **ascend,
        )
        overrides = {
            i: override_of(f.setting, best, batch.config)
            for i, f in fits.items()
            if f.setting is not None
        }
        weights = replace(weights, intents=overrides)
        score = _combined(obj.sw, pools, fits, best_val[0])
        report = intent_report(fits)
    return FitResult(
        weights,
        score,
        baseline,
        k,
        len(pools),
        calls,
        time.perf_counter() - t0,
        global_score=best_val[0],
        intents=report,
    )


def _combined(sw: np.ndarray, pools: Sequence[Pool], fits: Any, global_score: float) -> float:
    """The objective with every intent's own setting.

    The global one plus each intent's gain on its questions, weighted by their share (the
    objective is a weighted mean).
    """
    from norax_core.bench.intentfit import intents_of

    out = global_score
    for intent, idx in intents_of(pools).items():
        f = fits[intent]
        if f.setting is not None:
            out += float(sw[idx].sum()) * (f.score - f.global_score)
    return out


def fit_weights(
    memory: NoraxMemory,
    feedback: Sequence[Feedback],
    *,
    k: int = 10,
    restarts: int = 4,
    fit_params: bool = True,
    depth: int | None = None,
    seed: int = 0,
) -> FitResult:
    """Learn fusion weights for ``memory`` from judged queries.

    Each query is searched once with every signal on (candidates ``depth`` deep per signal);
    weights, tau per memory kind, ``pool_min`` and ``recency_candidates`` are then fitted to
    maximise mean recall@k, starting from the store's current weights.

    Args:
        memory: The store the feedback refers to.
        feedback: Queries with the ids of the memories that were relevant.
        k: The recall cut-off to maximise.
        restarts: Random starts besides the current and equal weights.
        fit_params: Also fit the query-time engine parameters.
        depth: Candidates each signal proposes per query (default: the whole namespace,
            needed to evaluate context propagation exactly; give a number for big stores
            whose weights do not use context propagation).
        seed: Seed of the random starts.

    Returns:
        :class:`FitResult`; ``result.weights`` can be passed to ``NoraxMemory(weights=...)``
        or saved with ``result.save(path)``.

    Raises:
        InvalidInputError: No feedback, or feedback with a bad query, namespace or time.
    """
    if not feedback:
        raise InvalidInputError("no feedback to fit on")
    now = time.time()
    requests = []
    for i, fb in enumerate(feedback):
        if isinstance(fb.relevant_ids, str):
            raise InvalidInputError(f"feedback #{i}: relevant_ids must be a list of ids")
        requests.append(
            PoolRequest(
                query=check.query(fb.query),
                namespace=check.namespace(fb.namespace),
                now=now if fb.now is None else check.timestamp(fb.now, "now"),
                relevant=tuple(check.memory_id(m) for m in fb.relevant_ids),
                qid=str(i),
            )
        )
    pools = build_pools(memory, requests, depth=depth, recency_depth=max(RECENCY_GRID))
    return fit_pools(
        pools, k=k, start=memory.weights, restarts=restarts, fit_params=fit_params, seed=seed
    )


def cross_validate(
    pools: Sequence[Pool],
    groups: Sequence[str],
    *,
    k: int = 10,
    sample_weight: Sequence[float] | np.ndarray | None = None,
    progress: Callable[[int], None] | None = None,
    **fit_kwargs: Any,
) -> CVResult:
    """Leave-one-group-out evaluation of :func:`fit_pools`.

    For each distinct group, weights are fitted on every other group's pools and scored on
    the held-out group's pools only, so the reported mean never sees its own answers.
    """
    if len(groups) != len(pools):
        raise InvalidInputError("groups must give one group per pool")
    names = list(dict.fromkeys(groups))
    if len(names) < 2:
        raise InvalidInputError("cross-validation needs at least two groups")
    sw = np.ones(len(pools)) if sample_weight is None else np.asarray(sample_weight, float)
    test = np.zeros(len(pools))
    test_global = np.zeros(len(pools))
    folds: list[dict[str, Any]] = []
    weights_of: dict[str, Weights] = {}
    global_of: dict[str, Weights] = {}
    for g in names:
        held = [i for i, x in enumerate(groups) if x == g]
        train = [i for i, x in enumerate(groups) if x != g]
        fit = fit_pools(
            [pools[i] for i in train], k=k, sample_weight=sw[train], name=f"cv-{g}", **fit_kwargs
        )
        from norax_core.bench.intentfit import recall_by_intent

        held_pools = [pools[i] for i in held]
        r = recall_by_intent(held_pools, fit.weights, k)
        plain = replace(fit.weights, intents={})
        r_global = r if not fit.weights.intents else recall_by_intent(held_pools, plain, k)
        test[held], test_global[held] = r, r_global
        weights_of[g], global_of[g] = fit.weights, plain
        folds.append(
            {
                "held_out": g,
                "n_test": len(held),
                f"train_recall@{k}": fit.score,
                f"test_recall@{k}": float(r.mean()),
                f"test_recall@{k} (global weights only)": float(r_global.mean()),
                "weights": fit.weights.as_dict(),
                "params": dict(fit.weights.params),
                "intents": fit.weights.to_file_dict().get("intents", {}),
            }
        )
        logger.info("norax: CV fold %s: train %.4f test %.4f", g, fit.score, float(r.mean()))
        if progress:
            progress(1)
    return CVResult(folds, test, weights_of, test_global, global_of)


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def summarize_weights(weights: Weights) -> str:
    """One line: the shares and the parameters."""
    w = weights.as_dict()
    total = sum(w.values()) or 1.0
    shares = " ".join(f"{s}={_finite(w[s] / total):.2f}" for s in SIGNALS)
    params = ", ".join(f"{k}={v}" for k, v in dict(weights.params).items())
    return f"{shares}" + (f" ({params})" if params else "")
