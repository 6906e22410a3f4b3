"""The exchange: a user's message and the reply it got, retrieved as one unit.

Summary, ordering and multi-session questions ("summarize how my budget tracker went", "in
what order did I bring up ...") are answered by what the user said *and* what the assistant
answered: BEAM's gold for them is mostly such pairs. Ranked one by one, a user message is
found by its words and its reply, which restates the topic in other words, sits far below it
(or the other way round). The exchange stage makes the pair the unit: when a memory is among
the best ``depth`` candidates, its **partner** (the reply to a user message, or the user
message a reply answers) joins right after it, at ``weight`` times its score.

Partners are read from the session timeline: two memories are one exchange when they are
neighbours in the same session (:mod:`norax_core.signals.context`), the earlier one has
``role`` metadata ``"user"`` and the later one does not. Chat turns between two people
without roles (LoCoMo) have no partners, and the stage leaves them alone. Only candidates move
(the context stage makes the neighbours of the best first-pass candidates candidates), so a
search's table needs no rows the benchmark's lacks.

:func:`exchange_slots` is what :func:`norax_core.ranking.rank` runs over a whole batch
(:func:`exchange_arrays` over :func:`partner_rows`); :func:`exchange` is its plain reference
(``tests/unit/test_exchange_stage.py`` checks them equal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["exchange", "exchange_arrays", "exchange_slots", "partner_rows"]

_FEW = 256
"""Up to this many anchors (best candidates), :func:`exchange_slots` reads them one by one."""


def partner_rows(slots: Sequence[np.ndarray], position: np.ndarray, user: np.ndarray) -> np.ndarray:
    """Each row's exchange partner, ``(q, n)`` (``n``: none).

    Args:
        slots: Neighbour slots of window 1 (:data:`~norax_core.ranking.Neighbours`): per
            slot a ``(q, n)`` array of a same-session neighbour's row, ``n`` where none.
        position: ``(q, n)`` each row's position in its session (:data:`Positions`).
        user: ``(q, n)`` whether each row is the user's.

    Returns:
        For a user's row, the next memory of its session if that is not the user's; for any
        other row, the previous one if that is the user's; else ``n``.
    """
    q, n = user.shape
    pos = np.concatenate([position, np.full((q, 1), -2, dtype=position.dtype)], axis=1)
    usr = np.concatenate([user.astype(bool), np.zeros((q, 1), dtype=bool)], axis=1)
    out = np.full((q, n), n, dtype=np.int64)
    qi = np.arange(q)[:, None]
    for nb in slots:
        their_pos, their_user = pos[qi, nb], usr[qi, nb]  # take_along_axis, without its overhead
        reply = user & ~their_user & (their_pos == position + 1)
        answered = ~user & their_user & (their_pos == position - 1) & (position >= 1)
        out = np.where((reply | answered) & (nb < n), nb, out)
    return out


def exchange(
    score: Mapping[str, float],
    top: Sequence[str],
    partner: Mapping[str, str],
    weight: float,
) -> dict[str, float]:
    r"""Lift the exchange partners of the best candidates to just below them.

    .. math::

        s'(p) = \max\Bigl(s(p),\ w \max_{a \in T,\ p = P(a)} s(a)\Bigr)

    for every candidate ``p`` that is the partner ``P(a)`` of one of the best candidates
    ``T``; every other score is unchanged. One step: the maximum is over the scores before the
    lift, so a lifted partner does not bring its own partner.

    Args:
        score: Score of every candidate.
        top: ``T``: the best candidates (the stage's depth).
        partner: Each memory's exchange partner (memories without one left out).
        weight: ``w`` in [0, 1]; 0 returns the scores unchanged.

    Returns:
        The new score of every candidate.
    """
    out = dict(score)
    if weight <= 0:
        return out
    for a in top:
        p = partner.get(a)
        if p is not None and p in score:
            out[p] = max(out[p], weight * score[a])
    return out


def exchange_arrays(
    score: np.ndarray,
    cand: np.ndarray,
    top: np.ndarray,
    partner: np.ndarray,
    weight: float,
) -> np.ndarray:
    """:func:`exchange` over ``(q, n)`` arrays.

    Args:
        score: ``(q, n)`` scores of every row.
        cand: ``(q, n)`` candidate mask (only candidates are lifted).
        top: ``(q, n)`` mask of the best candidates (``T``).
        partner: ``(q, n)`` each row's partner row (:func:`partner_rows`; ``n``: none).
        weight: ``w``.

    Returns:
        The new scores.
    """
    q, n = score.shape
    if weight <= 0:
        return score
    best = np.full((q, n + 1), -np.inf)
    qi = np.broadcast_to(np.arange(q)[:, None], (q, n))
    np.maximum.at(best, (qi, partner), np.where(top & cand, weight * score, -np.inf))
    lift = best[:, :n]
    return np.where(cand & (lift > score), lift, score)  # type: ignore[no-any-return]


def exchange_slots(
    score: np.ndarray,
    cand: np.ndarray,
    top: np.ndarray,
    slots: Sequence[np.ndarray],
    position: np.ndarray,
    user: np.ndarray,
    weight: float,
) -> np.ndarray:
    """:func:`exchange_arrays` over :func:`partner_rows`, reading only the anchors' partners.

    Only a partner of one of the best candidates (``top & cand``: the anchors) is lifted, and
    a search has a handful of anchors in a table of a few dozen rows: up to :data:`_FEW`
    anchors, each one's partner is read alone (numpy's per-call cost over whole ``(q, n)``
    arrays was most of the stage); beyond, the whole-array form. Both give equal floats (one
    product and maxima of the same values).

    Args:
        score: ``(q, n)`` scores of every row.
        cand: ``(q, n)`` candidate mask.
        top: ``(q, n)`` mask of the best candidates.
        slots: See :func:`partner_rows`.
        position: See :func:`partner_rows`.
        user: See :func:`partner_rows`.
        weight: ``w``.

    Returns:
        The new scores.
    """
    if weight <= 0:
        return score
    qs, rs = np.nonzero(top & cand)
    if qs.size > _FEW:
        return exchange_arrays(score, cand, top, partner_rows(slots, position, user), weight)
    n = score.shape[1]
    lift: dict[tuple[int, int], float] = {}
    for q, a in zip(qs.tolist(), rs.tolist(), strict=True):
        at, mine = position[q, a], bool(user[q, a])
        p = n
        for nb in slots:  # as partner_rows: the last matching slot wins
            b = int(nb[q, a])
            if b >= n:
                continue
            theirs, step = bool(user[q, b]), position[q, b] - at
            reply = mine and not theirs and step == 1
            if reply or (not mine and theirs and step == -1 and at >= 1):
                p = b
        if p < n:
            v = weight * float(score[q, a])
            if v > lift.get((q, p), -np.inf):
                lift[q, p] = v
    out = score
    for (q, p), v in lift.items():
        if cand[q, p] and v > score[q, p]:
            if out is score:
                out = score.copy()
            out[q, p] = v
    return out
