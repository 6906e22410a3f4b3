r"""Query-adaptive mix: each query's BM25 weight scaled by how much the embedding backs it.

A weighted sum trusts BM25 as much for "where do we keep credentials" (its best matches share
only generic words with the query) as for "when did Melanie paint a sunset" (they share the
rare ones). This stage estimates, per query and from the signals' own scores only, how far
BM25 can be trusted, from two query-performance predictors:

- the **agreement** ``a`` of the embedding with BM25's picks: the mean dense score of BM25's
  best ``j`` memories (``j`` up to :data:`MIX_DEPTH`, fewer where fewer share a word with the
  query) over the mean dense score of the embedding's own best ``j``. Low when BM25's picks
  look unrelated in meaning to the query;
- the **peakedness** ``p`` of BM25's scores: how far its best match stands out from its next
  ones. Low when they all score alike (common words every long message holds).

.. math::

    w_{\mathrm{bm25}}(q) = w_{\mathrm{bm25}} \cdot
        2^{\operatorname{clip}(\alpha\,(a(q) - c) + \beta\,(p(q) - c_p),\ -3,\ 2)}

with four global parameters: ``alpha`` (``mix_strength``, 0: off), ``c`` (``mix_center``),
``beta`` (``mix_peak_strength``), ``c_p`` (``mix_peak_center``). The other weights are
unchanged (the fused score is still divided by the sum of the query's weights). Both features
come from the rows each signal proposes first, so a search's table (candidates only) and the
benchmark's (whole namespaces) give the same weights.

Measured (``python benchmarks/mix_cv.py --data ../shared/data``; ``default`` plus the mix,
parameters chosen by leave-one-conversation-out CV over LoCoMo dev and BEAM 100K, recall@10
held out vs the fixed mix): LoCoMo 0.767 vs 0.769, BEAM 100K 0.592 vs 0.595, and with the
point chosen on all dev data (``2, 0.85, 4, 0.25``) BEAM 500K 0.441 vs 0.445 (preference
following 0.463 vs 0.522). The per-query oracle over the grid is 0.788 / 0.624 / 0.468: even
a perfect choice of the BM25 weight per query would leave BEAM far below its targets. So the
mix is off in every preset; the BEAM loss against the embedding alone comes from elsewhere
(long assistant messages that hold many of the query's common words top BM25, which is
divided by its best score while cosines stay in a narrow band; context propagation).

References:
    J. A. Aslam and V. Pavlu, "Query hardness estimation using Jensen-Shannon divergence
    among multiple scoring functions", ECIR 2007 (agreement between rankers predicts query
    performance). A. Shtok, O. Kurland, D. Carmel, F. Raiber and G. Markovits, "Predicting
    query performance by query-drift estimation", ACM TOIS 30(2), 2012 (score-distribution
    predictors).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MIX_DEPTH", "agreement", "mixed_weights", "peakedness"]

MIX_DEPTH = 10
"""How many of each signal's best memories the agreement compares (at most the smallest
candidate pool, ``pool_min``'s default, so a search's table always holds them)."""
_LOW, _HIGH = -3.0, 2.0
"""The BM25 weight moves between 1/8 and 4 times its fixed value."""


def agreement(
    dense: np.ndarray,
    bm25_rank: np.ndarray,
    dense_rank: np.ndarray,
    valid: np.ndarray,
    depth: int = MIX_DEPTH,
) -> np.ndarray:
    """How much the embedding backs BM25's picks, per query, in ``[0, 1]``; NaN if unknown.

    Args:
        dense: ``(q, n)`` dense scores (clipped cosine) of the rows.
        bm25_rank: ``(q, n)`` each row's position in BM25's own ranking (a huge one where
            BM25 did not propose it).
        dense_rank: ``(q, n)`` the same for the dense signal.
        valid: ``(q, n)`` real rows.
        depth: How many of each signal's best rows to compare.

    Returns:
        ``(q,)`` mean dense score of BM25's best ``j`` rows over that of dense's best ``j``
        (capped at 1), ``j`` the number BM25 proposes up to ``depth``; NaN where either signal
        proposed nothing or the embedding scores its own best 0.
    """
    picked_b = valid & (bm25_rank < depth)
    nb = picked_b.sum(axis=1)
    # as many of dense's best as BM25 picked: in a small store, or for a query with few
    # matching words, a fixed depth would compare BM25's few picks with the whole store
    picked_d = valid & (dense_rank < nb[:, None])
    nd = picked_d.sum(axis=1)
    mean_b = np.where(picked_b, dense, 0.0).sum(axis=1) / np.maximum(nb, 1)
    mean_d = np.where(picked_d, dense, 0.0).sum(axis=1) / np.maximum(nd, 1)
    ok = (nb > 0) & (nd > 0) & (mean_d > 0)
    return np.where(ok, np.minimum(mean_b / np.where(ok, mean_d, 1.0), 1.0), np.nan)


def peakedness(
    bm25: np.ndarray, bm25_rank: np.ndarray, valid: np.ndarray, depth: int = MIX_DEPTH
) -> np.ndarray:
    """How far BM25's best match stands out, per query, in ``[0, 1]``; NaN if unknown.

    ``1 - mean(s_2 .. s_j) / s_1`` over BM25's best ``j <= depth`` scores: near 0 when its
    best matches all score alike (the query's words are common ones every long message
    holds), near 1 when one match stands out (a rare word). NaN with fewer than two matches.
    """
    picked = valid & (bm25_rank < depth)
    n = picked.sum(axis=1)
    best = np.where(picked, bm25, -np.inf).max(axis=1, initial=-np.inf)
    total = np.where(picked, bm25, 0.0).sum(axis=1)
    ok = (n > 1) & (best > 0)
    rest = (total - np.where(ok, best, 0.0)) / np.maximum(n - 1, 1)
    return np.where(ok, 1.0 - rest / np.where(ok, best, 1.0), np.nan)


def mixed_weights(
    weights: np.ndarray,
    agree: np.ndarray,
    strength: float,
    center: float,
    peak: np.ndarray | None = None,
    peak_strength: float = 0.0,
    peak_center: float = 0.0,
    bm25: int = 0,
) -> np.ndarray:
    """Each query's weights: BM25's scaled by ``2 ** clip(alpha (a - c) + beta (p - c_p))``.

    Args:
        weights: ``(s,)`` the plan's fixed weights.
        agree: ``(q,)`` :func:`agreement` (NaN: the query keeps the fixed weights).
        strength: ``alpha``, how far the agreement moves the BM25 weight (0: not at all).
        center: ``c``, the agreement at which it keeps its fixed value.
        peak: ``(q,)`` :func:`peakedness` (NaN: no part in that query's scale).
        peak_strength: ``beta``, how far the peakedness moves the BM25 weight.
        peak_center: ``c_p``, the peakedness at which it keeps its fixed value.
        bm25: BM25's index among the signals.

    Returns:
        ``(q, s)`` weights.

    Examples:
        >>> w = np.array([0.3, 0.6, 0.0, 0.1])
        >>> mixed_weights(w, np.array([0.5, 0.9, np.nan]), 2.0, 0.9)[:, 0].round(3)
        array([0.172, 0.3  , 0.3  ])
    """
    log2 = strength * (agree - center)
    if peak is not None and peak_strength:
        log2 = log2 + np.nan_to_num(peak_strength * (peak - peak_center))
    log2 = np.clip(log2, _LOW, _HIGH)
    scale = np.where(np.isnan(agree), 1.0, np.exp2(np.nan_to_num(log2)))
    out = np.tile(np.asarray(weights, dtype=np.float64), (agree.shape[0], 1))
    out[:, bm25] *= scale
    return out
