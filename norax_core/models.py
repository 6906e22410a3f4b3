"""The memory model: what is stored and what a search returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any, TypeAlias, TypeVar

MetadataValue: TypeAlias = str | int | float | bool
"""Flat metadata values that Chroma can store and filter on."""

DEFAULT_NAMESPACE = "default"
RESERVED_PREFIX = "norax_"
"""Metadata keys starting with this prefix belong to Norax and are rejected from users."""
INFERRED_KIND_KEY = "norax_inferred_kind"
"""Chroma metadata key of a memory's inferred kind (:mod:`norax_core.kinds`); the one
reserved key a ``where`` filter may name."""

SIGNALS: tuple[str, ...] = ("bm25", "dense", "temporal", "graph")
"""The four signals, in the order used by weights, JSON output and tables."""


class Kind(str, Enum):
    """Built-in memory kinds. Any other string is accepted as a custom kind."""

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    SCRATCHPAD = "scratchpad"


@dataclass(frozen=True)
class Memory:
    """One stored memory.

    Attributes:
        id: Stable identifier, given by the caller or generated.
        text: The memory's text.
        kind: ``episodic``, ``semantic``, ``procedural``, ``scratchpad`` or a custom string.
        created_at: Timezone-aware creation time (UTC).
        namespace: The user, agent or conversation the memory belongs to.
        metadata: Flat user metadata.
        entities: Normalised entities found in the text (filled by the entity extractor).
        inferred_kind: What the memory is, as the store read it at write time
            (:func:`norax_core.kinds.infer_kind`: ``instruction``, ``preference``, ``fact``,
            ``event`` or ``scratchpad``); ``kind`` stays as the caller gave it.
    """

    id: str
    text: str
    kind: str
    created_at: datetime
    namespace: str
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)
    entities: tuple[str, ...] = ()
    inferred_kind: str = ""


SEARCH_KEYS = (
    "kind",
    "inferred_kind",
    "created_at",
    "namespace",
    "score",
    "signals",
    "matched_entities",
    "query_plan",
    "explanation",
)
"""Metadata keys an adapter's retrieved document or node gets from the search
(:meth:`SearchResult.framework_metadata`); they replace same-named user keys."""


@dataclass(frozen=True)
class Explanation:
    """Which ranking stage moved a result; the values sum to its ``score``.

    The stages run in the order ``context``, ``bridges``, ``period``, ``latest_wins``,
    ``supersede``, ``turns``, ``exchange``, ``lane`` (:func:`norax_core.ranking.rank`); a stage
    that is off adds 0.

    Attributes:
        fused: The fused signal score (weighted sum or reciprocal rank fusion).
        context: What context propagation changed (borrowing from the best neighbour in the
            session; negative when the neighbours score lower); 0 when it is off.
        latest_wins: What latest wins added (a newer memory restating an older, better
            one); 0 when it is off or did not apply.
        period: What the period boost added (the memory was created in or near a period the
            query names); 0 when it is off or the query names none.
        turns: What the turns stage added (the memory opens its session, or is the user's
            own when the query asks what the user said); 0 when it is off.
        bridges: What the bridge step added (the result shares entities with the best
            first-pass results or the query's, in the entity graph); 0 when it is off.
        exchange: What the exchange stage added (the memory is the reply to, or the message
            answered by, a better-ranked one, and joined right after it); 0 when it is off.
        supersede: What supersession added (a memory linked at write time as superseding
            a better-scored candidate); 0 when it is off or did not apply.
        lane: What the lane added (:mod:`norax_core.stages.lane`: a standing instruction or
            preference that matches the query lifted into a reserved place of the top k);
            0 when it is off or the memory did not need lifting.
    """

    fused: float
    context: float = 0.0
    latest_wins: float = 0.0
    period: float = 0.0
    bridges: float = 0.0
    supersede: float = 0.0
    turns: float = 0.0
    exchange: float = 0.0
    lane: float = 0.0

    def to_dict(self) -> dict[str, float]:
        """Every stage's contribution by name, in stage order, JSON-ready."""
        return {
            "fused": self.fused,
            "context": self.context,
            "bridges": self.bridges,
            "period": self.period,
            "latest_wins": self.latest_wins,
            "supersede": self.supersede,
            "turns": self.turns,
            "exchange": self.exchange,
            "lane": self.lane,
        }


@dataclass(frozen=True)
class NamedPeriod:
    """A period a query names, resolved against the search's ``now``.

    Attributes:
        start: ISO 8601 UTC time, inclusive.
        end: ISO 8601 UTC time, exclusive.
        text: The phrase it was read from (lowercased), e.g. ``"last week"``.
    """

    start: str
    end: str
    text: str


@dataclass(frozen=True)
class QueryInfo:
    """The search's reading of its query (:func:`norax_core.plan_query`), as results report it.

    The period boost (:mod:`norax_core.stages.period`) ranks by the periods.

    Attributes:
        intent: The query's intent (an :class:`norax_core.Intent` value, e.g. ``"temporal"``).
        periods: The periods the query names, in text order.
        entities: Candidate entity strings as written in the query.
        weights_intent: The intent whose per-intent weights ranked the results (the search's
            weights hold an override for the query's intent), ``None`` when their global
            weights did.
    """

    intent: str
    periods: tuple[NamedPeriod, ...] = ()
    entities: tuple[str, ...] = ()
    weights_intent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"intent", "periods": [{"start", "end", "text"}], "entities", "weights_intent"}``."""
        return {
            "intent": self.intent,
            "periods": [{"start": p.start, "end": p.end, "text": p.text} for p in self.periods],
            "entities": list(self.entities),
            "weights_intent": self.weights_intent,
        }


@dataclass(frozen=True)
class SearchResult(Memory):
    """A memory returned by a search, with the reason it ranks where it does.

    Attributes:
        score: The fused score; higher is better.
        signals: Each signal's normalised score in [0, 1], keyed by signal name.
        matched_entities: Query entities (or their community peers) that this memory shares.
        query_plan: The search's reading of the query (the same for every result of it).
        explanation: Which ranking stage moved this result (stages sum to ``score``).
    """

    score: float = 0.0
    signals: Mapping[str, float] = field(default_factory=dict)
    matched_entities: tuple[str, ...] = ()
    query_plan: QueryInfo | None = None
    explanation: Explanation | None = None

    def _explained(self) -> dict[str, Any]:
        return {
            "query_plan": None if self.query_plan is None else self.query_plan.to_dict(),
            "explanation": None if self.explanation is None else self.explanation.to_dict(),
        }

    def framework_metadata(self) -> dict[str, Any]:
        """User metadata plus the search's explanation, for a framework's document or node.

        The keys of :data:`SEARCH_KEYS` replace user metadata keys of the same name.
        """
        return {
            **self.metadata,
            "kind": self.kind,
            "inferred_kind": self.inferred_kind,
            "created_at": self.created_at.isoformat(),
            "namespace": self.namespace,
            "score": self.score,
            "signals": dict(self.signals),
            "matched_entities": list(self.matched_entities),
            **self._explained(),
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready representation (the CLI's ``--json`` result shape)."""
        return {
            "id": self.id,
            "text": self.text,
            "score": self.score,
            "signals": dict(self.signals),
            "kind": self.kind,
            "inferred_kind": self.inferred_kind,
            "created_at": self.created_at.isoformat(),
            "namespace": self.namespace,
            "metadata": dict(self.metadata),
            "matched_entities": list(self.matched_entities),
            **self._explained(),
        }


_Frozen = TypeVar("_Frozen")


def assembled(cls: type[_Frozen], values: Mapping[str, Any]) -> _Frozen:
    """What ``cls(**values)`` makes, for a frozen dataclass given every one of its fields.

    Without the frozen ``__init__``, which sets each field through ``object.__setattr__``:
    a search builds ten results and their explanations (23 fields each), and that was most
    of what building them cost (8.6 -> 2.9 us a result). Only for :class:`SearchResult`,
    :class:`Explanation` and :class:`Memory` (each record a search reads), which have no
    ``__post_init__`` (pinned by tests).
    """
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj  # type: ignore[no-any-return]


def varied(obj: _Frozen, **changes: Any) -> _Frozen:
    """What ``dataclasses.replace(obj, **changes)`` makes, without the frozen ``__init__``.

    As :func:`assembled`: for the frozen dataclasses a search copies with one field changed
    (:class:`~norax_core.signals.base.Query`, :class:`~norax_core.retrieval.Candidates`,
    :class:`QueryInfo`, each result's :class:`Memory`), which have no ``__post_init__``
    (pinned by a test); ``changes`` must name fields of ``obj``. ``replace`` looks up the
    fields and sets each through ``object.__setattr__``: 4-6 us a copy.
    """
    new = object.__new__(type(obj))
    fields = new.__dict__
    fields.update(obj.__dict__)
    fields.update(changes)
    return new


def utc_from_timestamp(ts: float) -> datetime:
    """Turn epoch seconds into an aware UTC datetime."""
    return datetime.fromtimestamp(ts, tz=timezone.utc)
