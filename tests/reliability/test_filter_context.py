"""Filters and context propagation: a memory a ``where`` filter excludes never counts.

With context propagation a memory borrows from its neighbours in time. The neighbours must
be taken among the memories the filter allows, so that an excluded memory neither takes a
neighbour slot nor changes any score: a filtered search must score exactly as a search over
a store holding only the allowed memories. Real Chroma, the real embedding model.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta, timezone

import pytest

from norax_core import NoraxMemory, Weights
from norax_core.query import plan_query

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
START = datetime(2026, 11, 20, 18, 0, tzinfo=timezone.utc)

# One session, a minute apart; "drop" turns sit between the turns a filter keeps.
SESSION = [
    ("q", "Which flight did Maria book for the Lisbon conference?", "keep"),
    ("x1", "Hold on, my coffee machine is beeping again.", "drop"),
    ("a", "The early one on Friday, with her sister.", "keep"),
    ("x2", "Did anyone water the office plants this week?", "drop"),
    ("x3", "The plants look fine, someone watered them Monday.", "drop"),
    ("b", "She also reserved a hotel near the venue.", "keep"),
]

# Dense and recency only: their scores do not depend on the rest of the namespace, so the
# comparison below isolates context propagation (BM25's IDF and the entity graph are
# namespace statistics by design).
CONTEXT = Weights(
    bm25=0.0,
    dense=0.8,
    temporal=0.2,
    graph=0.0,
    params={"context_window": 1, "context_weight": 1.0},
    name="context-test",
)


def _store(embedder, rows) -> NoraxMemory:  # type: ignore[no-untyped-def]
    mem = NoraxMemory(embedder=embedder, extractor=False, weights=CONTEXT)
    mem.add(
        [t for _, t, _ in rows],
        ids=[i for i, _, _ in rows],
        created_at=[START + timedelta(minutes=i) for i, _ in enumerate(rows)],
        namespace="trip",
        metadata=[{"topic": topic} for *_, topic in rows],
    )
    return mem


@pytest.mark.parametrize("window", [1, 2])
def test_an_excluded_memory_never_takes_a_neighbour_slot(embedder, window):
    weights = dataclasses.replace(CONTEXT, params={**CONTEXT.params, "context_window": window})
    full = _store(embedder, SESSION)
    # The reference: the allowed memories alone, at the same times.
    kept = [(i, t, topic) for i, t, topic in SESSION if topic == "keep"]
    only = NoraxMemory(embedder=embedder, extractor=False, weights=weights)
    only.add(
        [t for _, t, _ in kept],
        ids=[i for i, _, _ in kept],
        created_at=[START + timedelta(minutes=[m for m, *_ in SESSION].index(i)) for i, *_ in kept],
        namespace="trip",
        metadata=[{"topic": "keep"} for _ in kept],
    )
    try:
        query = "What flight did Maria book to Lisbon?"
        got = full.search(
            query, k=3, namespace="trip", where={"topic": "keep"}, now=NOW, weights=weights
        )
        want = only.search(query, k=3, namespace="trip", now=NOW, weights=weights)
        assert [r.id for r in got] == [r.id for r in want]
        for g, w in zip(got, want, strict=True):
            assert g.score == pytest.approx(w.score, abs=1e-6), g.id
        # The answer borrows from the question across the excluded turn between them.
        by_id = {r.id: r for r in got}
        own = 0.8 * by_id["a"].signals["dense"] + 0.2 * by_id["a"].signals["temporal"]
        assert by_id["a"].score > own / 2 + 0.1
    finally:
        full.close()
        only.close()


def test_the_filtered_search_ignores_what_excluded_memories_say(embedder):
    """Rewriting an excluded memory's text changes no allowed memory's score."""
    changed = [
        (i, "Maria booked the Lisbon flight on Friday morning." if topic == "drop" else t, topic)
        for i, t, topic in SESSION
    ]
    one, two = _store(embedder, SESSION), _store(embedder, changed)
    try:
        query = "What flight did Maria book to Lisbon?"
        a = one.search(query, k=3, namespace="trip", where={"topic": "keep"}, now=NOW)
        b = two.search(query, k=3, namespace="trip", where={"topic": "keep"}, now=NOW)
        assert [r.id for r in a] == [r.id for r in b]
        assert [r.score for r in a] == pytest.approx([r.score for r in b], abs=1e-6)
    finally:
        one.close()
        two.close()


# The period boost and the turns stage's openers on: sessions split the timeline at the gap,
# among the memories the filter allows. "x" (excluded) sits between "a" and "b", each a gap
# of 120 s from it: with x, one session; without it, "b" is 240 s after "a", a session of its
# own, so "b" opens its session only without "x".
STAGED = Weights(
    bm25=0.0,
    dense=0.8,
    temporal=0.2,
    graph=0.0,
    params={
        "context_window": 1,
        "context_weight": 1.0,
        "context_gap_seconds": 150.0,
        "period_boost": 0.5,
        "opener_boost": 0.5,
        "opener_span": 1.0,
        "session_spread": 0.5,  # order questions only
    },
    name="stages-test",
)
SPLIT = [
    ("q", "Which flight did Maria book for the Lisbon conference?", "keep", 0),
    ("a", "The early one on Friday, with her sister.", "keep", 1),
    ("x", "Maria booked the Lisbon flight for Friday morning.", "drop", 3),
    ("b", "She also reserved a hotel near the venue.", "keep", 5),
]


def _staged_store(embedder, rows) -> NoraxMemory:  # type: ignore[no-untyped-def]
    mem = NoraxMemory(embedder=embedder, extractor=False, weights=STAGED)
    mem.add(
        [t for _, t, _, _ in rows],
        ids=[i for i, *_ in rows],
        created_at=[START + timedelta(minutes=m) for *_, m in rows],
        namespace="trip",
        metadata=[{"topic": topic} for _, _, topic, _ in rows],
    )
    return mem


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_with_period_boost_and_openers_a_filtered_search_is_the_allowed_memories_search(
    embedder, k
):
    full = _staged_store(embedder, SPLIT)
    only = _staged_store(embedder, [r for r in SPLIT if r[2] == "keep"])
    try:
        query = "What flight did Maria book to Lisbon last week?"  # START is in last week
        got = full.search(query, k=k, namespace="trip", where={"topic": "keep"}, now=NOW)
        want = only.search(query, k=k, namespace="trip", now=NOW)
        assert [r.id for r in got] == [r.id for r in want]
        assert "x" not in {r.id for r in got}  # context never pulls an excluded memory in
        for g, w in zip(got, want, strict=True):
            assert g.score == pytest.approx(w.score, abs=1e-6), g.id
            assert g.explanation is not None and w.explanation is not None
            for stage, value in g.explanation.to_dict().items():
                assert value == pytest.approx(getattr(w.explanation, stage), abs=1e-6)
            assert g.explanation.period > 0  # every memory is from last week
        opener = {r.id: r for r in got}.get("b")
        if opener is not None:  # "b" opens its session among the allowed memories
            assert opener.explanation is not None and opener.explanation.turns > 0
    finally:
        full.close()
        only.close()


@pytest.mark.parametrize("k", [2, 3])
def test_an_order_question_spreads_over_the_sessions_of_the_allowed_memories(embedder, k):
    # with "x", "a" and "b" share a session and "b" loses to the spread; without it (filtered
    # out), "b" is the best of a session of its own and keeps its score
    full = _staged_store(embedder, SPLIT)
    only = _staged_store(embedder, [r for r in SPLIT if r[2] == "keep"])
    try:
        query = "In what order did I bring up the flight and the hotel for Lisbon?"
        got = full.search(query, k=k, namespace="trip", where={"topic": "keep"}, now=NOW)
        want = only.search(query, k=k, namespace="trip", now=NOW)
        assert plan_query(query, 0.0).ordering  # an order question: the spread applies
        assert [r.id for r in got] == [r.id for r in want]
        for g, w in zip(got, want, strict=True):
            assert g.score == pytest.approx(w.score, abs=1e-6), g.id
            assert g.explanation is not None and w.explanation is not None
            assert g.explanation.turns == pytest.approx(w.explanation.turns, abs=1e-6)
        turns = {r.id: r.explanation.turns for r in got if r.explanation is not None}
        if "a" in turns:  # "a" shares "q"'s session and ranks below it: the spread took a share
            assert turns["a"] < 0
    finally:
        full.close()
        only.close()


# Maria's trip: the flight turn is found by meaning; the bridge step walks from its entities.
# The dropped turns share those entities (Lisbon, Maria, the conference): were they walked
# through or brought in, the filtered search would differ from the store without them.
TRIP = [
    ("f", "Maria booked the early flight to Lisbon for the conference.", "keep"),
    ("h", "The hotel near the Lisbon venue has a rooftop pool.", "keep"),
    ("d1", "Maria's sister lives in Lisbon and will host the dinner.", "drop"),
    ("d2", "The conference badge pickup opens at eight.", "drop"),
    ("s", "The venue shuttle leaves from the hotel at nine.", "keep"),
    ("o", "The printer on the second floor is out of toner.", "keep"),
]
BRIDGES = Weights(
    bm25=0.0,
    dense=0.8,
    temporal=0.2,
    graph=0.0,
    params={
        "context_window": 1,
        "context_weight": 0.5,
        "bridge_weight": 0.5,
        "bridge_seeds": 1,
        "bridge_candidates": 5,
        "pool_min": 2,
        "pool_factor": 1,
        "recency_candidates": 0,
    },
    name="bridges-test",
)


def _trip(embedder, extractor, turns):
    mem = NoraxMemory(embedder=embedder, extractor=extractor, weights=BRIDGES)
    hour = {i: 3 * j for j, (i, _, _) in enumerate(TRIP)}  # each its own session: no context
    for i, text, topic in turns:
        mem.add(
            text,
            ids=i,
            namespace="trip",
            created_at=START + timedelta(hours=hour[i]),
            metadata={"topic": topic},
        )
    return mem


def test_an_excluded_memory_is_never_walked_through_nor_brought_in(embedder, extractor):
    full = _trip(embedder, extractor, TRIP)
    only = _trip(embedder, extractor, [t for t in TRIP if t[2] == "keep"])
    try:
        query = "Which flight did Maria book?"
        got = full.search(query, k=3, namespace="trip", where={"topic": "keep"}, now=NOW)
        want = only.search(query, k=3, namespace="trip", now=NOW)
        assert [r.id for r in got] == [r.id for r in want]
        assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-9)
        assert all(r.metadata["topic"] == "keep" for r in got)
        # the step acted: the hotel (Lisbon, via the flight) came in and rose
        hotel = next(r for r in got if r.id == "h")
        assert "f" in [r.id for r in got] and hotel.explanation.bridges > 0
        unfiltered = full.search(query, k=3, namespace="trip", now=NOW)
        assert {"d1", "d2"} & {r.id for r in unfiltered}  # without the filter they bridge
    finally:
        full.close()
        only.close()


# -- every stage x every filter shape ------------------------------------------------------

STAGES = {
    "none": {},
    "context": {"context_window": 2, "context_weight": 1.0},
    "latest_wins": {"latest_wins_weight": 2.0, "latest_wins_shared": 1},
    "bridges": {"bridge_weight": 1.0, "bridge_seeds": 5, "bridge_candidates": 20},
    "period": {"period_boost": 3.0},
    "turns": {"opener_boost": 1.0, "speaker_boost": 1.0, "session_spread": 0.5},
    "supersede": {"supersede_weight": 1.0, "supersede_depth": 5},
    "all": {
        "context_window": 2,
        "context_weight": 1.0,
        "latest_wins_weight": 2.0,
        "latest_wins_shared": 1,
        "bridge_weight": 1.0,
        "period_boost": 3.0,
        "opener_boost": 1.0,
        "speaker_boost": 1.0,
        "session_spread": 0.5,
        "supersede_weight": 1.0,
    },
}
FILTERS = {
    "eq": ({"topic": "keep"}, lambda m: m["topic"] == "keep"),
    "ne": ({"topic": {"$ne": "drop"}}, lambda m: m["topic"] != "drop"),
    "in": ({"n": {"$in": [0, 2, 5]}}, lambda m: m["n"] in (0, 2, 5)),
    "range": ({"n": {"$gte": 2}}, lambda m: m["n"] >= 2),
    "or": (
        {"$or": [{"n": {"$lt": 1}}, {"topic": "keep"}]},
        lambda m: m["n"] < 1 or m["topic"] == "keep",
    ),
    "and": (
        {"$and": [{"role": "user"}, {"n": {"$lte": 4}}]},
        lambda m: m["role"] == "user" and m["n"] <= 4,
    ),
}
# Two sessions a week apart; Maria's trip facts change (supersession, latest wins), speakers
# alternate (turns), entities repeat (bridges), "last week" names a period.
LONG = [
    ("Maria booked the early flight to Lisbon for the conference.", "keep", "user"),
    ("My coffee machine is beeping again, Maria.", "drop", "assistant"),
    ("Maria reserved a hotel near the Lisbon venue.", "keep", "user"),
    ("The office plants need water; Maria forgot them.", "drop", "assistant"),
    ("Maria changed her flight to the late one on Friday.", "drop", "user"),
    ("Maria now stays at her sister's flat in Lisbon instead of the hotel.", "keep", "assistant"),
    ("Lisbon conference slides are due Thursday, Maria says.", "drop", "user"),
    ("Maria moved the hotel booking to the Alfama district.", "keep", "assistant"),
]


@pytest.fixture(scope="module")
def long_store(embedder, extractor):  # type: ignore[no-untyped-def]
    mem = NoraxMemory(embedder=embedder, extractor=extractor)
    mem.add(
        [t for t, *_ in LONG],
        ids=[f"m{i}" for i in range(len(LONG))],
        created_at=[NOW - timedelta(days=14 - (7 * (i >= 4)), minutes=-i) for i in range(8)],
        kind=["episodic", "semantic"] * 4,
        namespace="trip",
        metadata=[{"topic": t, "role": r, "n": i} for i, (_, t, r) in enumerate(LONG)],
    )
    mem.add("Maria's flight to Lisbon is the early one.", ids="other", namespace="elsewhere")
    yield mem
    mem.close()


@pytest.mark.parametrize("flt", list(FILTERS))
@pytest.mark.parametrize("stage", list(STAGES))
def test_no_stage_returns_or_pulls_in_a_filtered_out_memory(long_store, stage, flt):
    where, passes = FILTERS[flt]
    weights = Weights(0.3, 0.4, 0.1, 0.2, params=STAGES[stage], name=stage)
    allowed = {m.id for m in long_store.get([f"m{i}" for i in range(8)]) if passes(m.metadata)}
    for query in [
        "Where is Maria staying in Lisbon now?",
        "What did Maria book last week?",
        "In what order did I bring up Maria's Lisbon plans?",  # the session spread
    ]:
        res = long_store.search(query, k=8, namespace="trip", where=where, now=NOW, weights=weights)
        got = [r.id for r in res]
        assert set(got) <= allowed, (stage, flt, query, got)
        assert len(got) == len(allowed) and len(set(got)) == len(got)
        assert all(r.namespace == "trip" and passes(r.metadata) for r in res)
        assert all(math.isfinite(r.score) for r in res)
