"""Fusing per-signal scores into one ranking.

Pure functions over ``{signal: {memory_id: score}}``; the caller's mappings are never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from norax_core.models import SIGNALS
from norax_core.weights import FusionMethod, Weights, shares

SignalScores = Mapping[str, Mapping[str, float]]


def weighted_sum(
    scores: SignalScores, candidates: Sequence[str], weights: Weights
) -> dict[str, float]:
    """Weighted sum of normalised scores, divided by the sum of weights (so it stays in [0, 1]).

    A candidate missing from a signal's mapping scores 0 in it. The weights are taken as
    shares (:func:`~norax_core.weights.shares`), so any finite scale stays finite.
    """
    w = dict(zip(SIGNALS, shares(list(weights.as_dict().values())), strict=True))
    total = sum(w.values())  # 1 up to rounding; divided as the ranking divides
    return {
        cid: sum(w[s] * scores.get(s, {}).get(cid, 0.0) for s in SIGNALS) / total
        for cid in candidates
    }


def reciprocal_rank(
    scores: SignalScores, candidates: Sequence[str], weights: Weights
) -> dict[str, float]:
    """Weighted reciprocal rank fusion over the candidate set.

    ``score(d) = sum_s w_s / (k + rank_s(d))`` over the signals in which ``d`` scores above
    zero, ranks starting at 1 and ties broken by id; divided by ``sum_s w_s / (k + 1)`` so the
    result lies in [0, 1]. The weights are taken as shares, as in :func:`weighted_sum`.

    References:
        Cormack, Clarke and Buettcher, "Reciprocal rank fusion outperforms Condorcet and
        individual rank learning methods", SIGIR 2009.
    """
    w = dict(zip(SIGNALS, shares(list(weights.as_dict().values())), strict=True))
    k = weights.rrf_k
    fused = dict.fromkeys(candidates, 0.0)
    for s in SIGNALS:
        if w[s] <= 0:
            continue
        sig = scores.get(s, {})
        ranked = sorted((c for c in candidates if sig.get(c, 0.0) > 0), key=lambda c: (-sig[c], c))
        for rank, cid in enumerate(ranked, start=1):
            fused[cid] += w[s] / (k + rank)
    norm = sum(w.values()) / (k + 1)
    return {cid: v / norm for cid, v in fused.items()}


def fuse(scores: SignalScores, candidates: Sequence[str], weights: Weights) -> dict[str, float]:
    """Fuse with the method the weights name."""
    if weights.method is FusionMethod.RRF:
        return reciprocal_rank(scores, candidates, weights)
    return weighted_sum(scores, candidates, weights)


def rank(fused: Mapping[str, float], k: int) -> list[str]:
    """Best ``k`` ids, highest score first, ties broken by id for determinism."""
    return sorted(fused, key=lambda c: (-fused[c], c))[:k]
