"""Supersession: a memory that supersedes a candidate joins the candidates and passes it.

The links come from the write path (:mod:`norax_core.supersession`): a newer memory that
restates an attribute of the same things as an older one ("the deadline moved to Friday"
after "the deadline is Monday"). At query time, every candidate's superseding memories become
candidates too (the newer statement is found even when only the older one matched the
query), and each of them closes a share ``weight`` of the gap to the best candidate it
supersedes (above 1: passes it), so the current statement ranks above the stale one.

:func:`supersede_arrays` is what :func:`norax_core.ranking.rank` runs over a whole batch;
:func:`supersede` is its plain reference (``tests/unit/test_supersede_stage.py`` checks them
equal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["link_slots", "supersede", "supersede_arrays"]


def supersede(
    score: Mapping[str, float],
    candidates: Sequence[str],
    top: Sequence[str],
    newer: Mapping[str, Sequence[str]],
    weight: float,
    *,
    pull: bool = True,
) -> tuple[list[str], dict[str, float]]:
    r"""Lift the memories that supersede the best candidates towards (or past) them.

    .. math::

        s'(j) = s(j) + \lambda \max\Bigl(0, \max_{o \in C,\ j \in N(o)} s(o) - s(j)\Bigr)

    for every memory ``j`` that supersedes some memory ``o`` of ``C``, the best candidates
    (``N(o)``: the memories that supersede ``o``); every other score is unchanged. One step:
    the maximum is taken over the scores before the lift, and only direct links count. Only
    the best candidates lift: a stale statement far down the ranking is no reason to promote
    what replaced it. With ``pull``, ``j`` may come from outside ``C`` (even outside the
    candidates: it joins them); without, it must be in ``C`` too, so the stage only reorders
    ``C``.

    Args:
        score: Score of every memory that may be ranked (the candidates and the memories
            that supersede them).
        candidates: The candidates before the stage.
        top: ``C``: the best of them (the stage's depth).
        newer: ``N``: the memories that supersede each memory.
        weight: ``lambda`` >= 0; 0 returns the candidates and scores unchanged.
        pull: Whether memories outside ``C`` are lifted (and join the candidates).

    Returns:
        The candidates after the stage (the pulled ones appended, in order of first
        appearance) and the new score of each of them.
    """
    out = {m: score[m] for m in candidates}
    if weight <= 0:
        return list(candidates), out
    best: dict[str, float] = {}
    inside = set(top)
    for o in top:
        for j in newer.get(o, ()):
            if pull or j in inside:
                best[j] = max(best.get(j, -np.inf), score[o])
    cand = list(candidates) + [j for j in best if j not in out]
    for j, b in best.items():
        s = score[j]
        out[j] = s + weight * max(0.0, b - s)
    return cand, out


def supersede_arrays(
    score: np.ndarray,
    cand: np.ndarray,
    top: np.ndarray,
    newer: np.ndarray | None,
    weight: float,
    pull: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`supersede` over ``(q, n)`` arrays.

    Args:
        score: ``(q, n)`` scores of every row.
        cand: ``(q, n)`` candidate mask.
        top: ``(q, n)`` mask of the best candidates (``C``).
        newer: ``(s, q, n)``: per slot, the row that supersedes each row (``n``: none);
            ``None`` for a table without them.
        weight: ``lambda``.
        pull: Whether rows outside ``C`` are lifted.

    Returns:
        The new candidate mask and scores.

    Raises:
        ValueError: ``newer`` is ``None`` (the table holds no links).
    """
    if newer is None:
        raise ValueError("supersession needs the table's superseding rows")
    q, n = score.shape
    if weight <= 0 or newer.shape[0] == 0:
        return cand, score
    top = top & cand
    pad_score = np.concatenate([score, np.full((q, 1), -np.inf)], axis=1)
    pad_top = np.concatenate([top, np.zeros((q, 1), dtype=bool)], axis=1)
    best = np.full((q, n + 1), -np.inf)
    qi = np.broadcast_to(np.arange(q)[:, None], (q, n))
    rows = np.arange(q)[:, None]
    for slot in newer:
        ok = top & np.isfinite(pad_score[rows, slot])  # take_along_axis, without its overhead
        if not pull:
            ok &= pad_top[rows, slot]
        np.maximum.at(best, (qi, slot), np.where(ok, score, -np.inf))
    best = best[:, :n]
    pulled = np.isfinite(best)
    lifted = score + weight * np.maximum(0.0, np.where(pulled, best, score) - score)
    return cand | pulled, np.where(pulled, lifted, score)


def link_slots(
    rows: Sequence[Mapping[str, int]], newer: Sequence[Mapping[str, Sequence[str]]], n: int
) -> np.ndarray:
    """A ranking table's ``newer`` field (:class:`norax_core.ranking.Table`).

    Args:
        rows: Per query, the row of each id in its table.
        newer: Per query, the memories that supersede each id
            (:meth:`~norax_core.supersession.SupersessionIndex.newer`).
        n: The table's width (the padding row).

    Returns:
        ``(s, q, n)``: per slot, the row of a memory that supersedes each row, ``n`` where
        there is none (or it is not in the table).
    """
    depth = max((len(v) for links in newer for v in links.values()), default=0)
    out = np.full((depth, len(rows), n), n, dtype=np.int64)
    for q, (row, links) in enumerate(zip(rows, newer, strict=True)):
        for mid, later in links.items():
            have = [row[x] for x in later if x in row]
            if mid in row and have:
                out[: len(have), q, row[mid]] = have
    return out
