"""Per-intent fitting: each intent's own weights and stage parameters, from the global fit.

After :func:`~norax_core.bench.fit.fit_pools` has fitted the global weights, every intent
(:class:`~norax_core.query.Intent`, read from each question by
:func:`~norax_core.query.plan_query`, as a search reads it) with at least ``min_questions``
questions gets its own coordinate ascent: it starts from the global setting and maximises the
same objective restricted to that intent's questions, over the same grid (weights, decay,
pool sizes, BM25, context, latest wins and :data:`~norax_core.bench.ascent.STAGE_GRID`). A move
is kept only if it strictly improves the intent's objective, so an intent keeps the global
weights unless its own questions prefer others; intents with fewer questions fall back to
them. The result is one weights file whose ``intents`` hold the overrides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from norax_core.bench.ascent import Objective, ascend, setting_from
from norax_core.bench.fastrank import PoolBatch, Setting
from norax_core.bench.pools import Pool
from norax_core.config import NoraxConfig
from norax_core.models import SIGNALS
from norax_core.weights import Weights

__all__ = ["MIN_INTENT_QUESTIONS", "IntentFit", "fit_intents", "override_of", "recall_by_intent"]

MIN_INTENT_QUESTIONS = 30
"""An intent needs at least this many training questions for its own weights."""


@dataclass(frozen=True)
class IntentFit:
    """One intent's fit.

    Attributes:
        n_questions: Training questions of that intent.
        setting: Its fitted setting, ``None`` when it keeps the global one (too few
            questions, or no move improved on the global setting).
        global_score: The global setting's objective on these questions (recall@k).
        score: The fitted setting's (``global_score`` when none was fitted).
    """

    n_questions: int
    setting: Setting | None
    global_score: float
    score: float

    def to_json(self) -> dict[str, Any]:
        """Figures for a report or a weights file's ``fit`` block."""
        return {
            "n_questions": self.n_questions,
            "own_weights": self.setting is not None,
            "train_global": round(self.global_score, 4),
            "train_own": round(self.score, 4),
        }


def intents_of(pools: Sequence[Pool]) -> dict[str, list[int]]:
    """Pool indices by their question's intent (as a search reads it)."""
    out: dict[str, list[int]] = {}
    for i, p in enumerate(pools):
        out.setdefault(p.plan.intent.value, []).append(i)
    return dict(sorted(out.items()))


def fit_intents(
    pools: Sequence[Pool],
    start: Setting,
    *,
    k: int,
    sample_weight: np.ndarray,
    min_questions: int = MIN_INTENT_QUESTIONS,
    config: NoraxConfig | None = None,
    **options: Any,
) -> dict[str, IntentFit]:
    """Fit each intent with at least ``min_questions`` questions, starting from ``start``.

    Args:
        pools: The training pools.
        start: The global fit's setting.
        k: The recall cut-off.
        sample_weight: Each pool's weight in the objective (e.g. balancing datasets).
        min_questions: Fewer questions keep the global setting.
        config: The pools' configuration (default: their own).
        **options: The coordinate ascent's options (grid switches and caps), as the global
            fit used them.

    Returns:
        Intent -> :class:`IntentFit`, for every intent the pools hold.
    """
    out: dict[str, IntentFit] = {}
    for intent, idx in intents_of(pools).items():
        if len(idx) < min_questions:
            out[intent] = IntentFit(len(idx), None, float("nan"), float("nan"))
            continue
        batch = PoolBatch([pools[i] for i in idx], config)
        obj = Objective(batch, k, np.asarray(sample_weight, dtype=float)[idx])
        base = obj(start)
        found, val = ascend(obj, start, batch.kind_names, **options)
        own = found if val > base else None
        out[intent] = IntentFit(len(idx), own, base[0], val[0])
    return out


def override_of(setting: Setting, start: Setting, config: NoraxConfig) -> Weights:
    """The per-intent override of ``setting``.

    Its weights, and the params that differ from ``start``'s (the global setting's), so that
    merged over the global params they give ``setting``.
    """
    mine, base = setting.params(config), start.params(config)
    params = {key: value for key, value in mine.items() if base.get(key) != value}
    if "decay_days" in params:  # merged kind by kind: keep only the kinds that changed
        old = base.get("decay_days", {})
        params["decay_days"] = {
            kind: tau for kind, tau in mine["decay_days"].items() if old.get(kind) != tau
        }
    return Weights.from_mapping(dict(zip(SIGNALS, setting.weights, strict=True)), params=params)


def recall_by_intent(
    pools: Sequence[Pool], weights: Weights, k: int, config: NoraxConfig | None = None
) -> np.ndarray:
    """Recall@k of each pool under the weights its question's intent selects."""
    out = np.zeros(len(pools))
    groups: dict[str | None, list[int]] = {}
    for intent, idx in intents_of(pools).items():
        groups.setdefault(intent if intent in weights.intents else None, []).extend(idx)
    for key, idx in groups.items():
        batch = PoolBatch([pools[i] for i in idx], config)
        out[idx] = batch.recall(setting_from(weights.for_intent(key), batch), k)
    return out


def intent_report(fits: Mapping[str, IntentFit]) -> dict[str, dict[str, Any]]:
    """Every intent's figures, JSON-ready."""
    return {intent: f.to_json() for intent, f in fits.items()}
