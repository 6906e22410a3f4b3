"""The one interface every signal implements: ids in, scores in [0, 1] out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from norax_core.query import QueryPlan


@dataclass(frozen=True)
class Query:
    """Everything a signal may need to score one query, computed once per search.

    Attributes:
        text: The raw query text.
        namespace: The only namespace whose memories may be scored.
        now: The clock for temporal scoring, epoch seconds (UTC).
        allowed: Ids that pass the metadata filter, or ``None`` when there is no filter.
            Signals must never return an id outside it: filters apply before ranking.
        tokens: The query's BM25 tokens (same tokenizer as the index).
        embedding: The query embedding (L2-normalised), or ``None`` when dense is off.
        entities: The query's normalised entities.
        where: The user's Chroma metadata filter (already reflected in ``allowed``); the
            dense signal hands it to Chroma directly.
        plan: The query's reading (:func:`~norax_core.plan_query`): intent, named periods,
            entities; ``None`` where nothing computed it.
    """

    text: str
    namespace: str
    now: float
    allowed: frozenset[str] | None = None
    tokens: tuple[str, ...] = ()
    embedding: np.ndarray | None = None
    entities: tuple[str, ...] = ()
    where: Mapping[str, Any] | None = None
    plan: QueryPlan | None = None


@runtime_checkable
class Signal(Protocol):
    """A retrieval signal.

    ``top`` proposes candidates (its own best hits); ``score`` scores any candidate, so that
    a memory proposed by one signal still gets every other signal's real score.
    Both return scores normalised to [0, 1], keyed by memory id, restricted to
    ``query.namespace`` and ``query.allowed``.
    """

    name: str

    def top(self, query: Query, n: int) -> dict[str, float]:
        """Return up to ``n`` best memories for ``query`` with their scores."""
        ...

    def score(self, query: Query, ids: Sequence[str]) -> dict[str, float]:
        """Return a score for each of ``ids`` (0.0 for an id the signal finds nothing in)."""
        ...
