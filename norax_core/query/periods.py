"""The dates and relative periods a query names, resolved against ``now``.

Rules, no dependency: each phrase below becomes a half-open period ``[start, end)`` in epoch
seconds (UTC calendar). A phrase that could mean something else ("may", "fall", "5/8/2023",
"2000 words", "a few weeks ago") gives nothing: the consumer boosts memories inside a period,
so a wrong period costs more than a missing one.

=================================  ====================================================
phrase                             period (``now`` = Wed 29 Nov 2026)
=================================  ====================================================
yesterday, last night              that day
today, tonight, this morning       today
last week / month / year           the previous calendar unit (weeks start on Monday)
this / next week / month / year    the current / next calendar unit
the past 2 weeks, the last month   a rolling window ending at ``now``
two months ago, 3 days ago         the calendar unit that holds ``now`` minus that
last Monday, on Monday             the most recent Monday before today / up to today
in May, since March, early June    the most recent May that has begun (May 2026; from
                                   March 2026 it is May 2025)
May 2023, in 2023, summer of 2023  that month, year, season
on 8 May, May 8th, 2023-05-08      that day (without a year: its most recent one)
last summer / this winter          the most recent season that has ended / this year's
since X, after X                   from the start (``since``) or end (``after``) of X to now
the week before X                  the unit that ends where X starts (``after``: begins)
=================================  ====================================================

Seasons are meteorological and northern (summer = June to August; winter starts in
December). Explicit years outside 1900-2100 are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

__all__ = ["Period", "find_periods"]

_UTC = timezone.utc
Span = tuple[datetime, datetime]
_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            "january jan",
            "february feb",
            "march mar",
            "april apr",
            "may",
            "june jun",
            "july jul",
            "august aug",
            "september sep sept",
            "october oct",
            "november nov",
            "december dec",
        ],
        start=1,
    )
    for name in names.split()
}
_FULL_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
)
_ANY_MONTH = _FULL_MONTHS + "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_NUMBERS = {
    w: i
    for i, w in enumerate(
        str.split("zero one two three four five six seven eight nine ten eleven twelve")
    )
} | {"a": 1, "an": 1, "a couple of": 2, "couple of": 2, "fifteen": 15, "twenty": 20}
_NUM = (
    r"(?P<n>\d{1,3}|a couple of|couple of|an|a|"
    + "|".join(w for w in _NUMBERS if " " not in w and len(w) > 1)
    + ")"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"
_PREP = (
    r"(?:in|during|since|by|until|till|before|after|from|through|throughout|of|early|late|mid|"
    r"around|over)"
)
_YEAR_PREP = (
    r"in|during|since|until|till|before|after|from|through|throughout|early|late|mid|"
    r"(?:end|start|beginning|middle|rest|half) of|the year|in the year|year"
)
_YEAR = r"(?P<year>(?:19|20)\d\d|2100)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"

# Order matters: longer phrases first; a matched span is claimed and not parsed again.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        k,
        re.compile(p),
    )
    for k, p in [
        ("iso", r"\b(?P<year>\d{4})-(?P<month>\d\d)-(?P<day>\d\d)\b"),
        (
            "day_month",
            rf"\b{_DAY}(?: of)? (?P<month>{_ANY_MONTH})\.?(?:,? {_YEAR})?\b(?![-/]\d)",
        ),
        (
            "month_day",
            rf"\b(?P<month>{_ANY_MONTH})\.? {_DAY}\b(?!:)(?:,? {_YEAR}\b)?(?![-/]\d)",
        ),
        ("month_year", rf"\b(?P<month>{_FULL_MONTHS}|{_ANY_MONTH})\.?,? (?:of )?{_YEAR}\b"),
        (
            "season_year",
            r"\b(?P<season>spring|summer|autumn|fall|winter)(?: of)?,? " + _YEAR + r"\b",
        ),
        ("day_before", r"\b(?:the )?day before yesterday\b"),
        ("day_after", r"\b(?:the )?day after tomorrow\b"),
        ("yesterday", r"\b(?:yesterday|last night)\b"),
        ("today", r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b"),
        ("tomorrow", r"\btomorrow\b"),
        ("rolling", rf"\b(?:(?:the )(?:past|last|previous)|past) (?:{_NUM} )?{_UNIT}\b"),
        ("ago", rf"\b{_NUM} {_UNIT} ago\b"),
        ("weekend", r"\b(?P<rel>last|this|next) weekend\b"),
        ("relative", rf"\b(?P<rel>last|this|next|previous|earlier this) {_UNIT}\b"),
        (
            "weekday",
            r"\b(?P<rel>last|on|this past) (?P<wd>" + "|".join(_WEEKDAYS) + r")\b",
        ),
        (
            "season",
            r"\b(?P<rel>last|this|next|in|during|in the|during the|over the|since)"
            r" (?P<season>spring|summer|autumn|fall|winter)\b",
        ),
        (
            "month",
            rf"\b(?P<rel>{_PREP}|last|this|next|in early|in late|in mid)[ -]"
            rf"(?P<month>{_FULL_MONTHS})\b",
        ),
        # "over 2000 words", "a total of 2000 users": a count, so not after "over" or "of",
        # nor before a plural
        ("year", rf"\b(?:{_YEAR_PREP})[ -]{_YEAR}\b(?![-']?\d)(?!\s+[a-z]+s\b)"),
    ]
]
_SINCE = re.compile(r"\b(?P<w>since|after|from)\s+(?:the\s+)?$")
_UNIT_BEFORE = re.compile(r"\bthe (?P<unit>day|week|month|year) (?P<w>before|after)\s+$")


@dataclass(frozen=True)
class Period:
    """A span of time a query names.

    Attributes:
        start: Epoch seconds, inclusive.
        end: Epoch seconds, exclusive; always greater than ``start``.
        text: The phrase it was read from (lowercased).
    """

    start: float
    end: float
    text: str

    def contains(self, t: float) -> bool:
        """Whether epoch second ``t`` falls in ``[start, end)``."""
        return self.start <= t < self.end


def _day(dt: datetime) -> datetime:
    return dt.replace(hour=0, minute=0, second=0, microsecond=0)


def _month(year: int, month: int, delta: int = 0) -> datetime:
    i = year * 12 + month - 1 + delta
    return datetime(i // 12, i % 12 + 1, 1, tzinfo=_UTC)


def _unit_span(dt: datetime, unit: str) -> tuple[datetime, datetime]:
    """The calendar ``unit`` (day, week from Monday, month, year) that holds ``dt``."""
    if unit == "day":
        start = _day(dt)
        return start, start + timedelta(days=1)
    if unit == "week":
        start = _day(dt) - timedelta(days=dt.weekday())
        return start, start + timedelta(days=7)
    if unit == "month":
        return _month(dt.year, dt.month), _month(dt.year, dt.month, 1)
    return datetime(dt.year, 1, 1, tzinfo=_UTC), datetime(dt.year + 1, 1, 1, tzinfo=_UTC)


def _shift(dt: datetime, unit: str, n: int) -> datetime:
    """``dt`` moved by ``n`` units (months and years keep the day, clipped to the month)."""
    if unit == "day":
        return dt + timedelta(days=n)
    if unit == "week":
        return dt + timedelta(weeks=n)
    months = n * (12 if unit == "year" else 1)
    first = _month(dt.year, dt.month, months)
    last_day = (_month(first.year, first.month, 1) - timedelta(days=1)).day
    return first.replace(day=min(dt.day, last_day), hour=dt.hour, minute=dt.minute)


def _season(year: int, first_month: int) -> tuple[datetime, datetime]:
    start = datetime(year, first_month, 1, tzinfo=_UTC)
    return start, _month(year, first_month, 3)


def _latest_started(now: datetime, make: Callable[[int], Span]) -> Span | None:
    """The most recent ``make(year)`` that has begun by ``now`` (this year's, else earlier)."""
    for year in range(now.year, now.year - 9, -1):  # 8 years back: every 29 February
        try:
            span = make(year)
        except ValueError:
            continue
        if span[0] <= now:
            return span
    return None


def _number(text: str | None) -> int:
    if text is None:
        return 1
    return int(text) if text.isdigit() else _NUMBERS[text]


def _resolve(kind: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    g = m.groupdict()
    if kind == "iso":
        start = datetime(int(g["year"]), int(g["month"]), int(g["day"]), tzinfo=_UTC)
        return start, start + timedelta(days=1)
    if kind in ("day_month", "month_day"):
        month, day = _MONTHS[g["month"]], int(g["day"])
        if day == 0:
            return None
        if g.get("year"):
            start = datetime(int(g["year"]), month, day, tzinfo=_UTC)
            return start, start + timedelta(days=1)
        return _latest_started(
            now, lambda y: (d := datetime(y, month, day, tzinfo=_UTC), d + timedelta(days=1))
        )
    if kind == "month_year":
        return _month(int(g["year"]), _MONTHS[g["month"]]), _month(
            int(g["year"]), _MONTHS[g["month"]], 1
        )
    if kind == "season_year":
        return _season(int(g["year"]), _SEASONS[g["season"]])
    if kind in ("day_before", "yesterday", "today", "tomorrow", "day_after"):
        offset = {"day_before": -2, "yesterday": -1, "today": 0, "tomorrow": 1, "day_after": 2}
        return _unit_span(now + timedelta(days=offset[kind]), "day")
    if kind == "rolling":
        return _shift(now, g["unit"], -_number(g["n"])), now
    if kind == "ago":
        return _unit_span(_shift(now, g["unit"], -_number(g["n"])), g["unit"])
    if kind == "weekend":
        saturday = _day(now) + timedelta(days=5 - now.weekday())
        shift = {"last": -7, "this": 0, "next": 7}[g["rel"]]
        if g["rel"] == "last" and now.weekday() == 6:  # on Sunday "last weekend" is last week's
            shift = -7
        start = saturday + timedelta(days=shift)
        return start, start + timedelta(days=2)
    if kind == "relative":
        rel, unit = g["rel"], g["unit"]
        delta = {"last": -1, "previous": -1, "this": 0, "earlier this": 0, "next": 1}[rel]
        start, end = _unit_span(_shift(now, unit, delta), unit)
        return (start, now) if rel == "earlier this" else (start, end)
    if kind == "weekday":
        wd = _WEEKDAYS.index(g["wd"])
        back = (now.weekday() - wd) % 7
        if g["rel"] != "on" and back == 0:
            back = 7  # "last Monday" on a Monday is a week ago
        return _unit_span(now - timedelta(days=back), "day")
    if kind == "season":
        first = _SEASONS[g["season"]]
        if g["rel"] == "next":
            return _season(now.year + 1 if now.month >= first else now.year, first)
        if g["rel"] == "this":
            return _season(now.year - (1 if first == 12 and now.month < 3 else 0), first)
        span = _latest_started(now, lambda y: _season(y, first))
        if span is not None and g["rel"] == "last" and span[1] > now:
            span = _season(span[0].year - 1, first)  # still under way: the one before
        return span
    if kind == "month":
        rel, month = g["rel"], _MONTHS[g["month"]]
        if rel in ("last", "next", "this"):
            year = now.year + {"last": -1, "this": 0, "next": 1}[rel]
            if rel == "last" and month < now.month:
                year = now.year
            if rel == "next" and month > now.month:
                year = now.year
            return _month(year, month), _month(year, month, 1)
        return _latest_started(now, lambda y: (_month(y, month), _month(y, month, 1)))
    if kind == "year":
        year = int(g["year"])
        return datetime(year, 1, 1, tzinfo=_UTC), datetime(year + 1, 1, 1, tzinfo=_UTC)
    raise AssertionError(kind)  # pragma: no cover - every pattern kind is handled above


def _widen(
    lower: str, m: re.Match[str], span: tuple[datetime, datetime], now: datetime
) -> tuple[int, tuple[datetime, datetime] | None]:
    """Apply a preceding "since / after / the week before" to a parsed span."""
    head = lower[max(0, m.start() - 24) : m.start()]
    lead = m.group().split(" ", 1)[0]
    if lead in ("since", "after", "before"):  # the pattern's own preposition
        head, start_at = lead + " ", m.start() + len(lead) + 1
    else:
        start_at = m.start()
    if head.endswith("before ") and not _UNIT_BEFORE.search(head):
        return m.start(), None  # open-ended into the past: too vague to boost
    unit = _UNIT_BEFORE.search(head)
    if unit is not None:
        start, end = span
        size = {"day": 1, "week": 7, "month": 30, "year": 365}[unit["unit"]]
        if unit["w"] == "before":
            return m.start() - len(unit.group()), (start - timedelta(days=size), start)
        return m.start() - len(unit.group()), (end, end + timedelta(days=size))
    since = _SINCE.search(head)
    if since is not None and since["w"] != "from":
        edge = span[0] if since["w"] == "since" else span[1]
        return start_at - len(since.group()), ((edge, now) if edge < now else None)
    return m.start(), span


def find_periods(text: str, now: datetime) -> list[Period]:
    """Every period ``text`` names, in text order, resolved against ``now`` (UTC).

    Args:
        text: The query.
        now: The time the query is asked (timezone-aware).

    Returns:
        The periods, each with ``start < end``; phrases that do not resolve to a valid date
        (30 February, years outside 1900-2100) are skipped.
    """
    lower = text.lower().replace("\u2019", "'")
    if not any(map(str.isdigit, lower)) and not _HINT.search(lower):
        return []  # the common case: nothing date-like, skip every pattern
    claimed = bytearray(len(lower))
    found: list[tuple[int, Period]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(lower):
            if claimed.find(1, m.start(), m.end()) != -1:
                continue
            try:
                span = _resolve(kind, m, now)
                begin = m.start()
                if span is not None:
                    begin, span = _widen(lower, m, span, now)
            except (ValueError, OverflowError):  # 31 April, 29 February 2023
                span = None  # a wrong date: claimed, so "February 2023" is not read from it
            claimed[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
            if span is None or not span[0] < span[1]:
                continue
            phrase = lower[begin : m.end()]
            found.append((begin, Period(span[0].timestamp(), span[1].timestamp(), phrase)))
    return [p for _, p in sorted(found, key=lambda f: f[0])]


_HINT = re.compile(
    r"yesterday|today|tonight|tomorrow|morning|afternoon|evening|night|week|month|year|ago|"
    r"day|spring|summer|autumn|fall|winter|" + _ANY_MONTH
)
