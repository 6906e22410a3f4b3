"""Freshness: each memory's relevance scaled by how fresh its kind's decay says it is.

The temporal signal *adds* recency to the fused score, so with a recency weight a recent but
unrelated memory rises too; the learned ``default`` gives it no weight, and the decay per kind
(a scratchpad note's tau is one day, a procedure's a year) then never counts: a months-old
scratch note ranks like a fresh one. Freshness instead *multiplies* the score by a prior on
the memory's age, as time-based language models multiply the query likelihood by an
exponential prior on the document's age, so it reorders memories that are about the query
and cannot lift one that is not.

Only the kinds listed in ``freshness_kinds`` (by default ``scratchpad``) are scaled: a
conversation turn or a fact keeps its score however old it is. Scaling every kind, even with
a decay of ~1, reorders near-ties: with an episodic tau of 100 years, a 126-day-old BEAM 500K
message at rank 10 lost 0.07 % of its score, and a same-day message 0.003 % behind it passed
it (one preference-following question out of the top ten).
"""

from __future__ import annotations

import numpy as np

__all__ = ["freshness", "kind_freshness"]


def freshness(score: np.ndarray, fresh: np.ndarray, weight: float) -> np.ndarray:
    r"""Scale scores by a mixture of 1 and each memory's freshness.

    .. math::

        s'(m) = s(m) \, \bigl((1 - w) + w \, f(m)\bigr), \qquad
        f(m) = e^{-\mathrm{age}(m) / \tau_{\mathrm{kind}(m)}}

    where :math:`f` is the temporal signal's score (in [0, 1]). With ``weight`` 0 the scores
    are unchanged; with 1 a memory's score is its relevance times its freshness. Scores stay
    non-negative and a memory fresher than another gains relative to it, never past a memory
    whose score is more than ``1 / (1 - w)`` times its own.

    Parameters
    ----------
    score : numpy.ndarray
        Scores after the earlier stages, any shape.
    fresh : numpy.ndarray
        Each row's freshness :math:`f` in [0, 1], the same shape.
    weight : float
        :math:`w` in [0, 1].

    Returns
    -------
    numpy.ndarray
        The scaled scores.

    Examples
    --------
    >>> freshness(np.array([0.8, 0.7]), np.array([0.0, 0.9]), 0.3)
    array([0.56 , 0.679])

    References
    ----------
    .. [1] X. Li and W. B. Croft, "Time-based language models", CIKM 2003: a document prior
       that decays exponentially with age, multiplied with the query likelihood.
    """  # noqa: D416 - NumPy sections on purpose: this is the formula docstring (STYLE.md)
    # written as 1 - w (1 - f): a row with f = 1 (a kind freshness leaves alone) keeps its
    # score to the last bit
    return score * (1.0 - weight * (1.0 - fresh))


def kind_freshness(decay: np.ndarray, kinds: np.ndarray, scaled: tuple[str, ...]) -> np.ndarray:
    """Each row's freshness: its decay if its kind is one of ``scaled``, else 1.

    Args:
        decay: The temporal signal's scores, ``exp(-age / tau_kind)``.
        kinds: Each row's memory kind, the same shape (``""`` for padding).
        scaled: The kinds freshness applies to.

    Returns:
        The freshness :math:`f` that :func:`freshness` multiplies in.

    Examples:
        >>> kind_freshness(np.array([0.1, 0.2]), np.array(["scratchpad", "episodic"]),
        ...                ("scratchpad",))
        array([0.1, 1. ])
    """
    return np.where(np.isin(kinds, scaled), decay, 1.0)
