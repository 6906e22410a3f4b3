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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from norax_core import validation as check
from norax_core.bench.ascent import (
    B_GRID,
    K1_GRID,
    POOL_GRID,
    RECENCY_GRID,
    SHARE_GRID,
    TAU_GRID,
    Objective,
    ascend,
    setting_from,
    usable_stages,
)
from norax_core.bench.fastrank import PoolBatch, Setting
from norax_core.bench.intentfit import (
    fit_intents,
    intent_report,
    intents_of,
    override_of,
    recall_by_intent,
)
from norax_core.bench.pools import Pool, PoolRequest, build_pools
from norax_core.engine import NoraxMemory
from norax_core.errors import InvalidInputError
from norax_core.models import SIGNALS
from norax_core.weights import Weights, save_weights, shares

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
    obj = Objective(batch, k, None if sample_weight is None else np.asarray(sample_weight))
    from norax_core.presets import get_preset

    first = setting_from(start or get_preset("seed"), batch)
    if first.context_window and not batch.full:
        raise InvalidInputError(
            "the starting weights use context propagation, which needs pools holding the "
            "whole namespace: build them with depth=None"
        )
    if first.latest_wins_weight > 1 and not batch.has_words:
        raise InvalidInputError(
            "the starting weights use latest wins, which needs pools with their words "
            "(build_pools keeps them)"
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
    options: dict[str, Any] = {
        "params": fit_params,
        "max_sweeps": max_sweeps,
        "pool_cap": max(depth, 1),
        "recency_cap": max(depth, 1),
        "context": fit_params and batch.full,
        "latest": fit_params and batch.has_words,
        "bm25": [
            v
            for i, v in enumerate(batch.bm25_variants())
            if i == 0 or (v[0] in K1_GRID and v[1] in B_GRID)
        ]
        if fit_params
        else (),
    }
    if fit_params:
        options["stages"] = usable_stages(obj, first)
    for s in starts:
        found, val = ascend(obj, s, batch.kind_names, **options)
        if val > best_val:
            best, best_val = found, val
    w = dict(zip(SIGNALS, best.weights, strict=True))
    params = best.params() if fit_params else {}
    if batch.config.embed_context:  # add-time: the weights only hold for stores built so
        params["embed_context"] = batch.config.embed_context
    weights = Weights.from_mapping(w, params=params, name=name)
    score, calls, report = best_val[0], obj.calls, {}
    if per_intent:
        fits = fit_intents(
            pools,
            best,
            k=k,
            sample_weight=obj.sw,
            min_questions=min_intent_questions,
            config=batch.config,
            **options,
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
    parts = zip(SIGNALS, shares(list(weights.as_dict().values())), strict=True)
    line = " ".join(f"{s}={_finite(v):.2f}" for s, v in parts)
    params = ", ".join(f"{k}={v}" for k, v in dict(weights.params).items())
    return line + (f" ({params})" if params else "")
