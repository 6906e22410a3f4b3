"""Period boost: memories created inside a period the query names rank higher.

"What did Melanie paint in June?" names a period (:attr:`norax_core.query.QueryPlan.periods`,
resolved against the search's ``now``). Memories created inside it gain a share of their own
score. It is a boost,
not a filter: every candidate stays a candidate with a score at least its own, so a period
read wrongly ("in May" meant the month, not a past one) can reorder results but never empty
them.

Both functions are pure; :func:`norax_core.ranking.rank` calls :func:`inside` and
:func:`boost` on every query of a table at once, :func:`boost_one` is the plain reference the
unit tests compare them with.

With ``default`` and a boost of 0.5: LoCoMo dev recall@10 0.747 -> 0.769 (its 203 questions
that name a period 0.646 -> 0.795), BEAM 100K and 500K unchanged (their questions rarely name
one). Larger boosts do no better; a margin outside the period over which the boost faded
(``period_margin``) did not help, shipped off in every preset and was removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["boost", "boost_one", "inside", "inside_one", "period_bounds"]


def period_bounds(named: Iterable[Sequence[tuple[float, float]]]) -> tuple[np.ndarray, ...]:
    """``(starts, ends)``, each ``(q, p)`` NaN-padded, from each query's ``(start, end)`` list."""
    rows = [list(p) for p in named]
    out = np.full((2, len(rows), max((len(r) for r in rows), default=0)), np.nan)
    for i, periods in enumerate(rows):
        for j, (start, end) in enumerate(periods):
            out[:, i, j] = start, end
    return out[0], out[1]


def inside(created: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each memory was created inside one of its query's named periods, as 1.0 / 0.0.

    Args:
        created: ``(q, n)`` creation times, epoch seconds (NaN: unknown, never inside).
        starts: ``(q, p)`` period starts per query, NaN where a query names fewer periods.
        ends: ``(q, p)`` period ends (exclusive), aligned with ``starts``.

    Returns:
        ``(q, n)`` weights in ``{0, 1}``; 0 for a query that names no period.
    """
    out = np.zeros(created.shape, dtype=np.float64)
    for p in range(starts.shape[1]):
        s, e = starts[:, p : p + 1], ends[:, p : p + 1]
        within = ~np.isnan(s) & (created >= s) & (created < e)  # NaN compares False
        out[within] = 1.0
    return out


def boost(score: np.ndarray, weights: np.ndarray, strength: float) -> np.ndarray:
    r"""Scores after the boost: :math:`s' = s\,(1 + \beta\,u)`.

    Multiplicative, so it means the same under weighted-sum and reciprocal-rank fusion, and a
    candidate nothing else found (score 0) gains nothing. Only ever raises a score.

    Args:
        score: ``(q, n)`` scores (after context propagation), >= 0.
        weights: ``(q, n)`` :func:`inside` weights.
        strength: ``beta >= 0``; 0 returns ``score`` unchanged.
    """
    if strength <= 0:
        return score
    return score * (1.0 + strength * weights)


def inside_one(t: float, periods: Sequence[tuple[float, float]]) -> float:
    """:func:`inside` for one memory time and a list of ``(start, end)`` periods."""
    return 1.0 if any(s <= t < e for s, e in periods) else 0.0


def boost_one(
    scores: Mapping[str, float],
    times: Mapping[str, float],
    periods: Sequence[tuple[float, float]],
    strength: float,
) -> dict[str, float]:
    """Plain reference of the stage for one query: ``{id: boosted score}``.

    References:
        The time-aware query expansion of LongMemEval (Wu et al., ICLR 2025) narrows the
        search to the time range a question names; here the range is a soft boost instead.
    """
    return {m: s * (1.0 + strength * inside_one(times[m], periods)) for m, s in scores.items()}
