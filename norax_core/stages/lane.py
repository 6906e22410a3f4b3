"""The lane: standing instructions and preferences that apply to a request get places in the top k.

An agent searches its memory with the user's new request ("Could you show me how to
implement a login feature?"), and what must come back includes the rule the user set long
ago ("Always format code snippets with syntax highlighting when I ask about implementation
details") or the preference they stated ("I prefer minimal dependencies"). Those share few
words with the request and lose to the many messages about the same topic, so fusion alone
buries them. Yet they are few (about 5 % of a chat's user messages) and marked at write time
(:mod:`norax_core.kinds`), so the ranking can afford to look at each of them.

For each query, the standing memories whose match with the query (the dense signal: clipped
cosine with the query) reaches ``threshold``, or clearly beats the namespace's other
standing memories' (a lead of ``margin`` over the runner-up, above a low ``floor``), are the
lane's, the best ``slots`` of them by that match. With ``place`` 0 those not already in the
top ``k`` are lifted to just above the first result they push out, i.e. into the last places
of the top ``k``, and one already in it keeps its place. With ``place`` ``p`` (the shipped
default: 1) they take the places from ``p`` on, best match first, one already in the top
``k`` below ``p`` moving up too: with ``k = 3`` the rule an agent must follow comes first,
not third. Nothing else moves: results the lane does not displace keep their order and
score, a query that matches none is untouched, and the lane takes at most ``k - 1`` places
(a search for one result is left alone: at ``k = 1`` the lane cost LoCoMo's recall@1 0.333
-> 0.216).

References:
    Reserved slots for a class of results, the way blended search reserves places for a
    vertical: Arguello, Diaz, Callan and Crespo, "Sources of evidence for vertical
    selection", SIGIR 2009.
"""

from __future__ import annotations

import numpy as np

__all__ = ["lane_picks", "pickable", "reserve"]


def lane_picks(
    match: np.ndarray, threshold: float, slots: int, margin: float = 0.0, floor: float = 0.0
) -> np.ndarray:
    """``(q, n)`` the lane's memories: per query the best ``slots`` that apply.

    A standing memory applies when its match reaches the absolute bar ``threshold``, or
    (with ``margin > 0``) when it reaches ``floor`` and leads, by at least ``margin``, the
    best standing memory past the ``slots`` (the runner-up, with one slot; 0 when there is
    none). The second way is the relative rule: a request resembles the rule that applies
    to it only a little ("Write me a Python function..." vs "Always add type hints...":
    cosine 0.12), yet that rule is usually the namespace's best-matching standing memory,
    and clearly so, while a request no rule applies to matches several about equally.

    Args:
        match: ``(q, n)`` each row's match with the query; 0 for a row that is not a
            standing memory.
        threshold: The absolute bar (a zero match never counts).
        slots: At most this many per query.
        margin: The least lead over the runner-up of the relative rule (0: off).
        floor: The least match the relative rule accepts.

    Examples:
        >>> lane_picks(np.array([[0.0, 0.5, 0.2, 0.6]]), 0.3, 1).tolist()
        [[False, False, False, True]]
        >>> lane_picks(np.array([[0.0, 0.25, 0.05, 0.1]]), 0.4, 1, 0.1, 0.1).tolist()
        [[False, True, False, False]]
        >>> lane_picks(np.array([[0.0, 0.25, 0.2, 0.1]]), 0.4, 1, 0.1, 0.1).tolist()
        [[False, False, False, False]]
    """
    ok = (match > 0) & (match >= threshold)
    if margin > 0:
        # the best standing memory past the slots (the runner-up): 0 when there is none
        ranked = -np.sort(-np.maximum(match, 0.0), axis=1)
        runner = ranked[:, slots] if match.shape[1] > slots else np.zeros(match.shape[0])
        ok |= (match > 0) & (match >= floor) & (match - runner[:, None] >= margin)
    if slots <= 0 or not ok.any():
        return np.zeros(match.shape, dtype=bool)
    keyed = np.where(ok, match, -np.inf)
    best = np.argsort(-keyed, axis=1, kind="stable")[:, :slots]
    out = np.zeros(match.shape, dtype=bool)
    qi = np.arange(match.shape[0])[:, None]
    out[qi, best] = ok[qi, best]  # put/take_along_axis, without their overhead
    return out


def pickable(match: np.ndarray, threshold: float, slots: int) -> np.ndarray:
    """``(n,)`` the standing memories :func:`lane_picks` could pick, with those that decide it.

    Of one query's standing memories (``match``, each one's clipped query cosine), those
    that reach ``threshold``, and the best ``slots + 1``: the relative rule picks among the
    best ``slots`` only, measured against the next one (the runner-up). Any other standing
    memory is never picked and changes no pick, so a search's table can leave it out.
    """
    keep = match >= threshold
    keep[np.argsort(-match, kind="stable")[: slots + 1]] = True
    return keep  # type: ignore[no-any-return]


def reserve(
    score: np.ndarray,
    cand: np.ndarray,
    tie: np.ndarray | None,
    k: np.ndarray,
    match: np.ndarray,
    threshold: float,
    slots: int,
    margin: float = 0.0,
    floor: float = 0.0,
    place: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Lift the lane's memories into each query's top ``k`` (its last places, or from ``place``).

    Args:
        score: ``(q, n)`` scores after the earlier stages.
        cand: ``(q, n)`` the candidates (a lifted memory joins them).
        tie: ``(q, n)`` tie order (smaller first), or ``None`` for row order.
        k: ``(q,)`` results per query.
        match: ``(q, n)`` see :func:`lane_picks`.
        threshold: See :func:`lane_picks`.
        slots: See :func:`lane_picks`.
        margin: See :func:`lane_picks`.
        floor: See :func:`lane_picks`.
        place: 0: the lane's memories take the last places of the top ``k`` (one already
            in it stays where it is). ``p >= 1``: they take the places from ``p`` on (the
            best match at ``p``), whether they were in the top ``k`` or not; the results
            from place ``p`` on move down (the last ones out of the top ``k``).

    Returns:
        ``(candidates, scores)``: new arrays; a lifted memory's score is the score of the
        result it displaces, plus the smallest step that ranks it above that one.
    """
    picks = _within(lane_picks(match, threshold, slots, margin, floor), match, k)
    out, joined = score.copy(), cand | picks
    for q in np.flatnonzero(picks.any(axis=1)).tolist():
        kq = int(k[q])
        live = np.flatnonzero(joined[q])
        key = -score[q, live]
        t = live if tie is None else tie[q, live]
        ranked = live[np.lexsort((t, key))]
        chosen = picks[q, ranked]
        if place > 0:
            _place(out[q], score[q], ranked, chosen, match[q], min(place, kq))
            continue
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


def _within(picks: np.ndarray, match: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``picks`` with at most ``k - 1`` per query, the best matches.

    The lane never takes every place: a top-1 search keeps its best result (at ``k = 1`` the
    lane cost LoCoMo's recall@1 0.333 -> 0.216) and a top-3 search with three slots keeps one.
    """
    room = np.maximum(np.asarray(k, dtype=np.int64) - 1, 0)
    over = np.flatnonzero(picks.sum(axis=1) > room)
    if over.size == 0:
        return picks
    out = picks.copy()
    for q in over.tolist():
        rows = np.flatnonzero(picks[q])
        out[q, rows[np.argsort(-match[q, rows], kind="stable")][int(room[q]) :]] = False
    return out


def _place(
    out: np.ndarray,
    score: np.ndarray,
    ranked: np.ndarray,
    chosen: np.ndarray,
    match: np.ndarray,
    place: int,
) -> None:
    """Lift one query's lane memories (``chosen`` along ``ranked``) to places ``place`` on.

    Each one ranked below ``place`` gets the score of the result at ``place`` (among the
    others) plus the smallest steps that rank it, best match first, just above that result;
    one already at or above ``place`` keeps its score.
    """
    others = ranked[~chosen]
    at = place - 1 - int(np.count_nonzero(chosen[:place]))  # the other result at the place
    lane_rows = ranked[chosen]
    below = lane_rows[np.isin(lane_rows, ranked[:place], invert=True)]
    if below.size == 0 or at >= others.size:
        return
    below = below[np.argsort(-match[below], kind="stable")]
    lifted = score[others[at]]
    for r in below[::-1]:  # the best match ends highest
        lifted = np.nextafter(lifted, np.inf)
        out[r] = max(score[r], lifted)
