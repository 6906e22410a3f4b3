"""Coverage: spread the top of a ranking over the sessions the query's topic occurs in.

"In what order did I bring up the parts of my budget app?" or "Summarize how the project
went" need one memory from each session that touched the topic, not ten near-copies from the
session that matches best. Among the best ``depth`` candidates, results are picked greedily
(maximal marginal relevance with the session as the redundancy): each pick is the candidate
with the highest score minus a penalty for every result already picked from its session.
The candidates' own sessions are the topic's stretch of time: a session no candidate comes
from is never asked for.

The greedy order is written back as scores: the best ``depth`` scores, in their order, go to
the picks in theirs. The best ``depth`` candidates stay the best ``depth`` (only their order
changes, so recall at ``depth`` and beyond is unchanged), and when every candidate comes from
one session the penalty is the same for all and nothing moves.

:func:`greedy_order` works on every query of a table at once (what
:func:`norax_core.ranking.rank` calls); :func:`spread_one` is its plain reference for one
query, which the unit tests compare it with.

Off by default, because it does not generalise: with ``default``, weight 0.2 and depth 30 for
BEAM's ``coverage`` questions, event ordering rises on BEAM 100K (recall@10 0.099 -> 0.172)
but summarization falls (0.191 -> 0.163), and on BEAM 500K both fall (0.029 -> 0.013,
0.047 -> 0.034); for every other kind of question it costs recall (LoCoMo 0.747 -> 0.584). Most of
those questions' evidence is not among the best 30 at all: :mod:`norax_core.stages.turns`
lifts it by its place in the conversation instead. ``coverage_order_weight`` spreads only the
questions that ask for an order (:attr:`QueryPlan.ordering
<norax_core.query.QueryPlan.ordering>`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["greedy_order", "spread", "spread_one"]


def greedy_order(
    score: np.ndarray, session: np.ndarray, live: np.ndarray, weight: float | np.ndarray
) -> np.ndarray:
    r"""The order in which coverage picks each query's best candidates.

    At each step the pick is

    .. math::

        \arg\max_{j \notin S} \; s_j - \lambda\, s_1\, |\{i \in S : \sigma_i = \sigma_j\}|

    where ``S`` holds the picks so far, ``sigma`` is a memory's session, ``s_1`` the query's
    best score (so ``lambda`` is a share of it, whatever the fusion's scale) and ties go to
    the better-ranked candidate.

    Args:
        score: ``(q, m)`` scores of each query's best ``m`` candidates, best first.
        session: ``(q, m)`` their session numbers (any integers; equal means same session).
        live: ``(q, m)`` real candidates; the others (padding, at the end) keep their place.
        weight: ``lambda >= 0``, one for all queries or ``(q,)`` one per query.

    Returns:
        ``(q, m)`` column indices into ``score``, in pick order.

    References:
        Carbonell and Goldstein, "The use of MMR, diversity-based reranking for reordering
        documents and producing summaries", SIGIR 1998.
    """
    q, m = score.shape
    best = np.where(live[:, :1], score[:, :1], 0.0)
    lam = np.broadcast_to(np.asarray(weight, dtype=np.float64), (q,))[:, None]
    same = np.zeros((q, m))
    chosen = np.zeros((q, m), dtype=bool)
    out = np.empty((q, m), dtype=np.int64)
    at = np.arange(q)
    for p in range(m):
        value = np.where(live, score - lam * best * same, -np.finfo(np.float64).max)
        value = np.where(chosen, -np.inf, value)
        pick = np.argmax(value, axis=1)
        out[:, p] = pick
        chosen[at, pick] = True
        same += session == session[at, pick][:, None]
    return out


def spread(
    score: np.ndarray,
    top: np.ndarray,
    live: np.ndarray,
    session: np.ndarray,
    weight: float | np.ndarray,
) -> np.ndarray:
    """Scores after coverage: the ``top`` rows' scores handed out in :func:`greedy_order`.

    Args:
        score: ``(q, n)`` scores before the stage.
        top: ``(q, m)`` each query's best ``m`` rows, best first.
        live: ``(q, m)`` which of them are candidates.
        session: ``(q, n)`` every row's session number.
        weight: ``lambda`` of :func:`greedy_order` (one, or ``(q,)`` one per query).

    Returns:
        ``(q, n)`` scores; rows outside ``top`` keep theirs.
    """
    s = np.take_along_axis(score, top, axis=1)
    picks = greedy_order(s, np.take_along_axis(session, top, axis=1), live, weight)
    out = score.copy()
    np.put_along_axis(out, np.take_along_axis(top, picks, axis=1), s, axis=1)
    return out


def spread_one(
    scores: Mapping[str, float], sessions: Mapping[str, int], depth: int, weight: float
) -> dict[str, float]:
    """Plain reference of the stage for one query: ``{id: score after coverage}``.

    Candidates rank by score, ties to the smaller id; the best ``depth`` are picked greedily
    as in :func:`greedy_order` and take the best ``depth`` scores in pick order.
    """
    ranked = sorted(scores, key=lambda m: (-scores[m], m))[:depth]
    out = dict(scores)
    if not ranked:
        return out
    s1 = scores[ranked[0]]
    left, picks = list(ranked), list[str]()
    while left:

        def value(m: str) -> float:
            return scores[m] - weight * s1 * sum(sessions[p] == sessions[m] for p in picks)

        pick = max(left, key=lambda m: (value(m), -ranked.index(m)))
        picks.append(pick)
        left.remove(pick)
    for m, s in zip(picks, (scores[r] for r in ranked), strict=True):
        out[m] = s
    return out
