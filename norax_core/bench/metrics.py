"""Retrieval metrics of the LoCoMo and BEAM benchmarks, as defined in ``DATA.md``.

Rankings are sequences of memory ids, best first; gold ids are the memories that answer a
question.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

__all__ = ["latest_wins", "mean", "mean_by", "recall_at_k"]


def recall_at_k(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Share of the gold ids found among the first ``k`` of ``ranking``.

    A question without gold ids counts as 1.0 (the LoCoMo paper's rule: nothing to miss).
    Repeated gold ids count once.

    Raises:
        ValueError: ``k`` is below 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    wanted = set(gold)
    if not wanted:
        return 1.0
    return len(wanted.intersection(ranking[:k])) / len(wanted)


def latest_wins(
    ranking: Sequence[str], original: Iterable[str], updated: Iterable[str]
) -> bool | None:
    """Whether the best-ranked updated message ranks above the best-ranked original one.

    The BEAM knowledge-update check. A message missing from ``ranking`` ranks below every
    ranked one, so an updated message that is ranked beats an original that is not; if
    neither group is ranked, or both groups' best is the same message, the update does not win.

    Returns:
        ``None`` when either group is empty (the question is skipped), else the verdict.
    """
    orig, upd = set(original), set(updated)
    if not orig or not upd:
        return None
    position = {mid: i for i, mid in reversed(list(enumerate(ranking)))}
    missing = len(ranking)
    best_upd = min(position.get(m, missing) for m in upd)
    best_orig = min(position.get(m, missing) for m in orig)
    return best_upd < best_orig


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; 0.0 for no values."""
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def mean_by(values: Sequence[float], groups: Sequence[str]) -> dict[str, float]:
    """Mean of ``values`` per group label, groups sorted by name."""
    if len(values) != len(groups):
        raise ValueError("values and groups must have the same length")
    acc: defaultdict[str, list[float]] = defaultdict(list)
    for v, g in zip(values, groups, strict=True):
        acc[g].append(v)
    return {g: mean(acc[g]) for g in sorted(acc)}
