"""A query's plan: its intent, the periods it names and its candidate entities, without an LLM.

:func:`plan_query` reads only the query text (and ``now``); it costs well under a millisecond
(``benchmarks/query_plan.py`` prints p50/p95 over every dev question). The plan says what the
query asks for; how ranking reacts to it is the ranking's business.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from norax_core import validation
from norax_core.entities import find_code_identifiers
from norax_core.errors import InvalidInputError
from norax_core.models import NamedPeriod, QueryInfo
from norax_core.query.cues import asks_order, asks_own_words
from norax_core.query.intents import (
    Intent,
    features,
    load_intent_model,
    rule_intent,
    with_cues,
)
from norax_core.query.periods import Period, find_periods
from norax_core.tokenize import ENGLISH_STOP_WORDS

__all__ = ["MAX_QUERY_CHARS", "QueryPlan", "plan_query"]

MAX_QUERY_CHARS = 2000
"""Only the first this many characters are analysed: a plan's cost is bounded by it."""

_CAPS = re.compile(r"[A-Z][\w\u2019'&.-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w\u2019'&.-]*)*")
_TOKEN = re.compile(r"\S+")
_QUOTED = re.compile(
    r"\"([^\"\n]{1,80})\"|\u201c([^\u201d\n]{1,80})\u201d|`([^`\n]{1,80})`|"
    r"(?<!\w)'([^'\n]{1,80})'(?!\w)|\u2018([^\u2019\n]{1,80})\u2019(?!\w)"
)
_NOT_ENTITIES = (
    frozenset(
        w.lower()
        for w in str.split(
            """
    I January February March April May June July August September October November December
    Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday
    Can Could Please Tell List Summarize Summarise Give Show Describe Explain Remind
    Considering Based Given According Help Walk Provide Compare Recall Remember Name Find
    Hey Hi Hello Also Ok Okay Thanks Yes Let Lets Let's Would Should Will Shall Might Must
    Did Does Do Is Are Was Were Has Have Had What When Where Who Whom Whose Which Why How
    In On At Since During After Before Between From For Of To And But So If Or The A An
    """
        )
    )
    | ENGLISH_STOP_WORDS
)


@dataclass(frozen=True)
class QueryPlan:
    """What a query asks for, read from its text.

    Attributes:
        text: The query analysed (at most :data:`MAX_QUERY_CHARS` characters of it).
        now: When it is asked, epoch seconds (UTC).
        intent: The most likely intent.
        scores: Every intent's probability, best first (the rules alone give 1.0 to one;
            a current-state cue takes half of the model's mass, see
            :func:`~norax_core.query.intents.with_cues`).
        periods: The periods the query names, in text order.
        entities: Candidate entity strings as written: capitalised spans, quoted terms and
            code identifiers, in text order, without repeats.
        source: ``"model"`` (the shipped classifier) or ``"rules"`` (no weights file).
        ordering: The query asks for a sequence ("in what order", "chronological"; see
            :func:`~norax_core.query.cues.asks_order`).
        own_words: The query asks what the user said ("I brought up", "did I ask"; see
            :func:`~norax_core.query.cues.asks_own_words`).
    """

    text: str
    now: float
    intent: Intent
    scores: tuple[tuple[Intent, float], ...]
    periods: tuple[Period, ...] = ()
    entities: tuple[str, ...] = ()
    source: str = "model"
    ordering: bool = False
    own_words: bool = False

    def score(self, intent: Intent) -> float:
        """The probability of ``intent`` (0 when it is not scored)."""
        return next((s for i, s in self.scores if i is intent), 0.0)

    @property
    def secondary(self) -> Intent | None:
        """The runner-up intent when it is at least half as likely as the best, else ``None``."""
        if len(self.scores) < 2:
            return None
        (_, best), (second, s2) = self.scores[0], self.scores[1]
        return second if s2 >= 0.5 * best else None

    @property
    def period(self) -> Period | None:
        """The span from the earliest period's start to the latest one's end, if any."""
        if not self.periods:
            return None
        start = min(p.start for p in self.periods)
        end = max(p.end for p in self.periods)
        return Period(start, end, " / ".join(p.text for p in self.periods))

    def info(self) -> QueryInfo:
        """What a search result reports of the plan: intent, periods (ISO 8601 UTC), entities."""
        return QueryInfo(
            self.intent.value,
            tuple(NamedPeriod(_iso(p.start), _iso(p.end), p.text) for p in self.periods),
            self.entities,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (what a search's explanation will carry)."""
        return {
            "intent": self.intent.value,
            "scores": {i.value: round(s, 4) for i, s in self.scores},
            "periods": [{"start": p.start, "end": p.end, "text": p.text} for p in self.periods],
            "entities": list(self.entities),
            "source": self.source,
            "ordering": self.ordering,
            "own_words": self.own_words,
        }


def plan_query(text: str, now: datetime | float | str | None = None) -> QueryPlan:
    """Read a query's intent, named periods and candidate entities.

    Args:
        text: The query: a non-blank string.
        now: When it is asked: an aware datetime (naive is read as UTC), an ISO 8601 string
            or epoch seconds; ``None`` is the current time. Relative phrases ("last week",
            "in May") resolve against it.

    Returns:
        The :class:`QueryPlan`.

    Raises:
        InvalidInputError: ``text`` is not a non-blank string, holds a lone surrogate, or
            ``now`` is not a valid time.

    Examples:
        >>> plan = plan_query("What did Colby decide last week?", "2026-11-29T12:00:00Z")
        >>> plan.entities, plan.periods[0].text
        (('Colby',), 'last week')
    """
    query = validation.query(text)[:MAX_QUERY_CHARS]
    ts = time.time() if now is None else validation.timestamp(now, "now")
    try:
        when = datetime.fromtimestamp(ts, tz=timezone.utc)
    except (OverflowError, OSError, ValueError) as exc:  # pragma: no cover - checked above
        raise InvalidInputError(f"now {now!r} cannot be represented: {exc}") from None
    periods = tuple(find_periods(query, when))
    model = load_intent_model()
    if model is None:
        intent = rule_intent(query)
        scores: tuple[tuple[Intent, float], ...] = ((intent, 1.0),)
        source = "rules"
    else:
        probs = with_cues(query, model.scores(features(query, bool(periods))))
        scores = tuple(sorted(probs.items(), key=lambda p: -p[1]))
        intent, source = scores[0][0], "model"
    return QueryPlan(
        query,
        ts,
        intent,
        scores,
        periods,
        tuple(_entities(query)),
        source,
        ordering=asks_order(query),
        own_words=asks_own_words(query),
    )


def _entities(text: str) -> list[str]:
    """Candidate entity strings: quoted terms, code identifiers, capitalised spans."""
    found: list[tuple[int, str]] = []
    claimed = bytearray(len(text))
    for m in _QUOTED.finditer(text):
        inner = next(g for g in m.groups() if g is not None).strip()
        if inner:
            found.append((m.start(), inner))
            claimed[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
    for start, end, _ in find_code_identifiers(text):
        if claimed.find(1, start, end) == -1:
            found.append((start, text[start:end]))
            claimed[start:end] = b"\x01" * (end - start)
    for m in _CAPS.finditer(text):
        if claimed.find(1, m.start(), m.end()) != -1:
            continue
        words = [(w.start(), w.end()) for w in _TOKEN.finditer(text, m.start(), m.end())]
        while words and _plain(text[slice(*words[0])]) in _NOT_ENTITIES:
            words.pop(0)
        while words and _plain(text[slice(*words[-1])]) in _NOT_ENTITIES:
            words.pop()
        if not words:
            continue
        span = _strip_possessive(text[words[0][0] : words[-1][1]].strip(".-&"))
        if len(span) >= 2 and any(c.isalpha() for c in span):
            found.append((words[0][0], span))
    seen: set[str] = set()
    out = []
    for _, e in sorted(found, key=lambda f: f[0]):
        if e.lower() not in seen:
            seen.add(e.lower())
            out.append(e)
    return out


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


def _plain(word: str) -> str:
    return _strip_possessive(word).strip(".-&").lower()


def _strip_possessive(word: str) -> str:
    for tail in ("'s", "\u2019s", "'", "\u2019"):
        if word.endswith(tail):
            return word[: -len(tail)]
    return word
