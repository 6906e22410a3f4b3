r"""Query-adaptive mix: each query's BM25 weight scaled by how much the embedding backs it.

A weighted sum trusts BM25 as much for "where do we keep credentials" (its best matches share
only generic words with the query) as for "when did Melanie paint a sunset" (they share the
rare ones). This stage estimates, per query and from the signals' own scores only, how far
BM25 can be trusted: the **agreement** of the embedding with BM25's picks, the mean dense
score of BM25's best ``j`` memories (``j`` up to :data:`MIX_DEPTH`, fewer where fewer share a
word with the query) over the mean dense score of the embedding's own best ``j``. Where BM25's picks look unrelated in meaning to the query
(agreement low) its weight shrinks; where they are the memories the embedding would pick
anyway it grows:

.. math::

    w_{\mathrm{bm25}}(q) = w_{\mathrm{bm25}} \cdot
        2^{\operatorname{clip}(\alpha\,(a(q) - c),\ -3,\ 2)}

with two global parameters, ``alpha`` (``mix_strength``, 0: off) and ``c``
(``mix_center``); the other weights are unchanged (the fused score is still divided by the
sum of the query's weights). Both features come from the rows each signal proposes first, so
a search's table (candidates only) and the benchmark's (whole namespaces) give the same
weights.

Measured (``benchmarks/mix_cv.py``, leave one conversation out over LoCoMo dev and BEAM 100K):
no setting of ``(alpha, c)`` beats the fixed mix on held-out conversations by more than the
noise, and the per-query oracle over BM25 weights (x1/8 .. x4) is only 0.637 on BEAM 100K
(fixed 0.595): the BEAM gap to the embedding alone is not in the mix. Off in every shipped
preset.

References:
    J. A. Aslam and V. Pavlu, "Query hardness estimation using Jensen-Shannon divergence
    among multiple scoring functions", ECIR 2007 (agreement between rankers predicts query
    performance). A. Shtok, O. Kurland, D. Carmel, F. Raiber and G. Markovits, "Predicting
    query performance by query-drift estimation", ACM TOIS 30(2), 2012 (score-distribution
    predictors).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MIX_DEPTH", "agreement", "mixed_weights"]

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


def mixed_weights(
    weights: np.ndarray, agree: np.ndarray, strength: float, center: float, bm25: int = 0
) -> np.ndarray:
    """Each query's weights: BM25's scaled by ``2 ** clip(strength * (agree - center))``.

    Args:
        weights: ``(s,)`` the plan's fixed weights.
        agree: ``(q,)`` :func:`agreement` (NaN: the query keeps the fixed weights).
        strength: ``alpha``, how far the agreement moves the BM25 weight (0: not at all).
        center: ``c``, the agreement at which the BM25 weight keeps its fixed value.
        bm25: BM25's index among the signals.

    Returns:
        ``(q, s)`` weights.

    Examples:
        >>> w = np.array([0.3, 0.6, 0.0, 0.1])
        >>> mixed_weights(w, np.array([0.5, 0.9, np.nan]), 2.0, 0.9)[:, 0].round(3)
        array([0.172, 0.3  , 0.3  ])
    """
    log2 = np.clip(strength * (agree - center), _LOW, _HIGH)
    scale = np.where(np.isnan(agree), 1.0, np.exp2(np.nan_to_num(log2)))
    out = np.tile(np.asarray(weights, dtype=np.float64), (agree.shape[0], 1))
    out[:, bm25] *= scale
    return out
