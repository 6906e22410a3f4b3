"""Conversation context: a memory borrows relevance from its neighbours in time.

In a conversation the memory that answers a question often does not repeat the question's
words: "Yes, last Tuesday, with my sister!" answers the turn before it, which holds the
words. With context propagation each memory's fused score gains a share of its best
neighbour's: the ``window`` memories just before and after it in the same namespace, in
time order, not separated by more than ``gap`` seconds (a session boundary).

Both functions are pure. :func:`norax_core.ranking.rank` (what search, the benchmarks and the
fitter call) propagates on arrays of many queries at once; :func:`propagate` is its plain
reference (``tests/unit/test_ranking.py`` checks them equal).

The same idea at add time: with ``embed_context`` a memory is embedded together with the
memories just before it (:func:`preceding`, :func:`embedding_text`), so a short reply carries
its context into the dense signal too.

"In time order" is conversation order: memories that share a creation time (a session's
turns added in one call with one time) follow the order they were written in, their write
sequence number ``seq``, then their ids.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "batch_preceding",
    "embedding_text",
    "following",
    "neighbour_map",
    "preceding",
    "propagate",
    "session_numbers",
    "session_positions",
    "session_split",
]

CONTEXT_SEPARATOR = "\n"
"""Joins a memory's text and its context in the embedded text."""


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
        ordered: A namespace's memory ids in conversation order.
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


def session_numbers(times: Sequence[float], gap: float) -> list[int]:
    """Each memory's session, from 0: a new one starts after a pause of more than ``gap``.

    ``times`` are a timeline's creation times in conversation order; two memories share a
    session exactly when :func:`neighbour_map` could link them through their neighbours.
    """
    if not len(times):
        return []
    breaks = np.diff(np.asarray(times, dtype=np.float64)) > gap
    return [0, *np.cumsum(breaks).tolist()]


def session_split(times: Sequence[float], gap: float) -> tuple[list[int], list[int]]:
    """:func:`session_numbers` and :func:`session_positions` of ``times``, in one pass."""
    if not len(times):
        return [], []
    numbers, positions = session_arrays(times, gap)
    return numbers.tolist(), positions.tolist()


def session_arrays(
    times: Sequence[float] | np.ndarray, gap: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`session_split` as int64 arrays (a NaN step, ``inf - inf``, breaks nothing)."""
    n = len(times)
    with np.errstate(invalid="ignore"):
        breaks = np.diff(np.asarray(times, dtype=np.float64)) > gap
    starts = np.flatnonzero(np.r_[True, breaks])  # where each session opens
    lengths = np.diff(np.r_[starts, n])
    numbers = np.repeat(np.arange(len(starts)), lengths)
    return numbers, np.arange(n) - np.repeat(starts, lengths)


def session_positions(times: Sequence[float], gap: float) -> list[int]:
    """Each memory's position in its session (0: it opens it), split as by session_numbers.

    Examples:
        >>> session_positions([0.0, 1.0, 2.0, 5000.0, 5001.0], 3600.0)
        [0, 1, 2, 0, 1]
    """
    return session_split(times, gap)[1]


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


def preceding(
    ordered: Sequence[str], times: Sequence[float], wanted: Iterable[str], before: int, gap: float
) -> dict[str, tuple[str, ...]]:
    """Up to ``before`` memories just before each wanted one, within its session.

    Args:
        ordered: Memory ids in conversation order, the wanted ones among them.
        times: Their creation times, epoch seconds, aligned with ``ordered``.
        wanted: Ids to map (each must be in ``ordered``).
        before: How many predecessors at most.
        gap: A step longer than this many seconds ends the session (as in
            :func:`neighbour_map`).

    Returns:
        ``{id: predecessor ids, oldest first}``.
    """
    near = neighbour_map(ordered, times, before, gap, wanted=wanted)
    pos = {m: i for i, m in enumerate(ordered)}
    return {m: tuple(reversed([n for n in found if pos[n] < pos[m]])) for m, found in near.items()}


def batch_preceding(
    ids: Sequence[str],
    times: Sequence[float],
    spaces: Sequence[str],
    seqs: Sequence[int],
    timeline: Callable[[str], tuple[Sequence[str], Sequence[float], Sequence[int]]],
    before: int,
    gap: float,
) -> dict[str, tuple[str, ...]]:
    """Predecessors of each memory of a batch being added, among stored and batch memories.

    Args:
        ids: The batch's ids (distinct).
        times: Their creation times.
        spaces: Their namespaces.
        seqs: Their write sequence numbers (order among memories sharing a time).
        timeline: A namespace's stored ids in conversation order, their times and seqs.
        before: How many predecessors at most (:func:`preceding`).
        gap: Session gap, seconds.

    Returns:
        ``{id: predecessor ids, oldest first}``; a stored memory the batch replaces (same
        id) counts with the batch's time and seq, not its stored ones.
    """
    batch = set(ids)
    out: dict[str, tuple[str, ...]] = {}
    for ns in dict.fromkeys(spaces):
        mine = [i for i, s in enumerate(spaces) if s == ns]
        ordered, stamps, order = timeline(ns)
        known = {ids[i]: (times[i], seqs[i]) for i in mine}
        for i in mine:
            # the `before` stored memories just before it are enough: any nearer predecessor
            # is in the batch
            j = _after(ordered, stamps, order, times[i], seqs[i], ids[i], inclusive=False)
            taken = 0
            while j > 0 and taken < before:
                j -= 1
                if ordered[j] not in batch:
                    known.setdefault(ordered[j], (stamps[j], order[j]))
                    taken += 1
        merged = sorted(known, key=lambda m: (*known[m], m))
        out.update(
            preceding(merged, [known[m][0] for m in merged], [ids[i] for i in mine], before, gap)
        )
    return out


def _after(
    ordered: Sequence[str],
    stamps: Sequence[float],
    order: Sequence[int],
    t: float,
    seq: int,
    mid: str,
    *,
    inclusive: bool,
) -> int:
    """Index of the first stored memory after ``(t, seq, mid)`` in conversation order.

    With ``inclusive``, the stored memory ``mid`` itself counts as before.
    """
    j = bisect_left(stamps, t)
    while j < len(stamps) and stamps[j] == t:
        key = (order[j], ordered[j])
        if key > (seq, mid) or (key == (seq, mid) and not inclusive):
            break
        j += 1
    return j


def following(
    ids: Sequence[str],
    times: Sequence[float],
    spaces: Sequence[str],
    seqs: Sequence[int],
    timeline: Callable[[str], tuple[Sequence[str], Sequence[float], Sequence[int]]],
    before: int,
    gap: float,
    exclude: Collection[str],
) -> list[str]:
    """Stored memories that may have one of ``ids`` among their ``before`` predecessors.

    When memories are written at ``times`` (or leave those times: an upsert's old version, a
    delete), the memories just after them in their session see a different context. For each
    id this walks the namespace's stored timeline forward from its place, over memories not
    in ``exclude``, and takes up to ``before`` of them while consecutive steps stay within
    ``gap``. A memory it misses (a step across a gap that another written memory bridges) is
    found from that other memory, which is nearer to it; a few found ones may keep their
    context (a gap closed by a memory that left), which only costs an identical re-embedding.

    Args:
        ids: The memories written or removed.
        times: The times they are written at, or leave from.
        spaces: Their namespaces.
        seqs: Their write sequence numbers.
        timeline: A namespace's stored ids in conversation order, their times and seqs.
        before: ``embed_context``.
        gap: Session gap, seconds.
        exclude: Ids that are not followers (the written and removed ones).

    Returns:
        The followers, in the order found.
    """
    out: dict[str, None] = {}
    for ns in dict.fromkeys(spaces):
        ordered, stamps, order = timeline(ns)
        for mid, t, space, seq in zip(ids, times, spaces, seqs, strict=True):
            if space != ns:
                continue
            j = _after(ordered, stamps, order, t, seq, mid, inclusive=True)
            last, taken = t, 0
            while j < len(stamps) and taken < before:
                if ordered[j] not in exclude:
                    if stamps[j] - last > gap:
                        break
                    out[ordered[j]] = None
                    last, taken = stamps[j], taken + 1
                j += 1
    return list(out)


def embedding_text(own: str, context: Sequence[str], limit: int) -> str:
    """The text embedded for a memory: its own text first, then its context, oldest first.

    The own text leads so that a model that truncates its input (MiniLM reads 256 word
    pieces) loses context, never the memory itself. At most ``limit`` characters.

    References:
        Embedding a chunk together with its surrounding context is the idea behind
        "contextual retrieval" (Anthropic, 2024) and late chunking (Guenther et al., "Late
        Chunking: Contextual Chunk Embeddings Using Long-Context Embedding Models", 2024);
        in LoCoMo-style chat a turn's context is the turns before it.
    """
    return CONTEXT_SEPARATOR.join([own, *context])[:limit]
