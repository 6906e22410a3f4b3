"""The lane: standing instructions and preferences that apply to a request get places in the top k.

An agent searches its memory with the user's new request ("Could you show me how to
implement a login feature?"), and what must come back includes the rule the user set long
ago ("Always format code snippets with syntax highlighting when I ask about implementation
details") or the preference they stated ("I prefer minimal dependencies"). Those share few
words with the request and lose to the many messages about the same topic, so fusion alone
buries them. Yet they are few (about 5 % of a chat's user messages) and marked at write time
(:mod:`norax_core.kinds`), so the ranking can afford to look at each of them.

For each query, the standing memories whose match with the query (the dense signal: clipped
cosine with the query) reaches ``threshold`` are the lane's; the best ``slots`` of them by
that match that are not already in the top ``k`` are lifted to just above the first result
they push out, i.e. into the last places of the top ``k``. Nothing else moves: results the
lane does not displace keep their order and score, a standing memory already in the top ``k``
keeps its place, a query that matches none is untouched, and a search for ``k <= slots``
results is left alone (the lane would take every place: at ``k = 1`` it cost LoCoMo's
recall@1 0.333 -> 0.216).

References:
    Reserved slots for a class of results, the way blended search reserves places for a
    vertical: Arguello, Diaz, Callan and Crespo, "Sources of evidence for vertical
    selection", SIGIR 2009.
"""

from __future__ import annotations

import numpy as np

__all__ = ["lane_picks", "reserve"]


def lane_picks(match: np.ndarray, threshold: float, slots: int) -> np.ndarray:
    """``(q, n)`` the lane's memories: per query the best ``slots`` with ``match >= threshold``.

    Args:
        match: ``(q, n)`` each row's match with the query; 0 for a row that is not a
            standing memory.
        threshold: The least match that counts (a zero match never does).
        slots: At most this many per query.

    Examples:
        >>> lane_picks(np.array([[0.0, 0.5, 0.2, 0.6]]), 0.3, 1).tolist()
        [[False, False, False, True]]
    """
    ok = (match > 0) & (match >= threshold)
    if slots <= 0 or not ok.any():
        return np.zeros(match.shape, dtype=bool)
    keyed = np.where(ok, match, -np.inf)
    best = np.argsort(-keyed, axis=1, kind="stable")[:, :slots]
    out = np.zeros(match.shape, dtype=bool)
    np.put_along_axis(out, best, np.take_along_axis(ok, best, axis=1), axis=1)
    return out


def reserve(
    score: np.ndarray,
    cand: np.ndarray,
    tie: np.ndarray | None,
    k: np.ndarray,
    match: np.ndarray,
    threshold: float,
    slots: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Lift the lane's memories into the last places of each query's top ``k``.

    Args:
        score: ``(q, n)`` scores after the earlier stages.
        cand: ``(q, n)`` the candidates (a lifted memory joins them).
        tie: ``(q, n)`` tie order (smaller first), or ``None`` for row order.
        k: ``(q,)`` results per query.
        match: ``(q, n)`` see :func:`lane_picks`.
        threshold: See :func:`lane_picks`.
        slots: See :func:`lane_picks`.

    Returns:
        ``(candidates, scores)``: new arrays; a lifted memory's score is the score of the
        result it displaces, plus the smallest step that ranks it above that one.
    """
    picks = lane_picks(match, threshold, slots)
    out, joined = score.copy(), cand | picks
    for q in np.flatnonzero(picks.any(axis=1)).tolist():
        kq = int(k[q])
        if kq <= slots:  # the lane never takes every place: a top-1 search keeps its best
            continue
        live = np.flatnonzero(joined[q])
        key = -score[q, live]
        t = live if tie is None else tie[q, live]
        ranked = live[np.lexsort((t, key))]
        chosen = picks[q, ranked]
        missing = ranked[chosen][np.isin(ranked[chosen], ranked[:kq], invert=True)]
        if missing.size == 0:
            continue
        room = kq - int(np.count_nonzero(chosen[:kq]))  # places not held by the lane's own
        # the lane's memories in the lane's order (best match first), as many as fit
        missing = missing[np.argsort(-match[q, missing], kind="stable")][:room]
        others = ranked[~chosen]
        kept = room - missing.size
        if missing.size == 0 or kept >= others.size:  # room for all: nothing to pass
            continue
        floor = score[q, others[kept]]
        lifted = floor
        for r in missing[::-1]:  # the best match ends highest
            lifted = np.nextafter(lifted, np.inf)
            out[q, r] = max(score[q, r], lifted)
    return joined, out
