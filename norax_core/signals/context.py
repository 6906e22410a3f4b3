"""Conversation context: a memory borrows relevance from its neighbours in time.

In a conversation the memory that answers a question often does not repeat the question's
words: "Yes, last Tuesday, with my sister!" answers the turn before it, which holds the
words. With context propagation each memory's fused score gains a share of its best
neighbour's: the ``window`` memories just before and after it in the same namespace, in
time order, not separated by more than ``gap`` seconds (a session boundary).

Both functions are pure; the engine and the benchmark harness call the same ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ["neighbour_map", "propagate"]


def neighbour_map(
    ordered: Sequence[str],
    times: Sequence[float],
    window: int,
    gap: float,
    wanted: Iterable[str] | None = None,
    pos: Mapping[str, int] | None = None,
) -> dict[str, tuple[str, ...]]:
    """Each memory's neighbours: up to ``window`` on each side within the same session.

    Args:
        ordered: A namespace's memory ids in time order (ties by id).
        times: Their creation times, epoch seconds, aligned with ``ordered``.
        window: Neighbours on each side.
        gap: Consecutive memories further apart than this many seconds belong to different
            sessions and are never neighbours.
        wanted: Only map these ids (default: all).
        pos: ``{id: index in ordered}``, if the caller keeps one.

    Returns:
        ``{id: (neighbour ids, nearest first, before then after)}``.
    """
    if pos is None:
        pos = {m: i for i, m in enumerate(ordered)}
    todo = ordered if wanted is None else [m for m in wanted if m in pos]
    out: dict[str, tuple[str, ...]] = {}
    n = len(ordered)
    for m in todo:
        i = pos[m]
        found: list[str] = []
        j = i
        while j > 0 and i - j < window and times[j] - times[j - 1] <= gap:
            j -= 1
            found.append(ordered[j])
        j = i
        while j < n - 1 and j - i < window and times[j + 1] - times[j] <= gap:
            j += 1
            found.append(ordered[j])
        out[m] = tuple(found)
    return out


def propagate(
    fused: Mapping[str, float], neighbours: Mapping[str, Sequence[str]], weight: float
) -> dict[str, float]:
    r"""Add to each score a share of its best-scoring neighbour's.

    .. math::

        s'(m) = \frac{s(m) + \lambda \max_{n \in N(m)} s(n)}{1 + \lambda}

    Only neighbours present in ``fused`` count (others score 0); the maximum is taken over
    the scores before propagation, so context spreads one step and never echoes back.
    Scores in [0, 1] stay in [0, 1].

    References:
        Smoothing a passage's retrieval score with its neighbours' is the idea behind
        passage-level evidence in document retrieval (Callan, "Passage-level evidence in
        document retrieval", SIGIR 1994) and of "sentence window" retrieval in RAG tooling.
    """
    norm = 1.0 + weight
    return {
        m: (s + weight * max((fused.get(n, 0.0) for n in neighbours.get(m, ())), default=0.0))
        / norm
        for m, s in fused.items()
    }
