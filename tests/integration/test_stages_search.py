"""The period boost and coverage stages through ``NoraxMemory.search``.

A persistent store (embedded Chroma), the real ONNX embedding model and spaCy pipeline: each
stage moves a ranking, and the results' explanations name the stage that moved them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from norax_core import NoraxMemory, Weights

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
JUNE = datetime(2026, 6, 14, 18, 0, tzinfo=timezone.utc)
SEPTEMBER = datetime(2026, 9, 20, 18, 0, tzinfo=timezone.utc)
BASE = Weights(0.3, 0.7, 0.0, 0.0, name="bm25+dense")


def _with(**params: float) -> Weights:
    return Weights(0.3, 0.7, 0.0, 0.0, params=params, name="staged")


@pytest.fixture
def store(tmp_path: Path, embedder: Any, extractor: Any) -> Iterator[NoraxMemory]:
    with NoraxMemory(tmp_path / "store", embedder=embedder, extractor=extractor) as mem:
        yield mem


def test_the_period_boost_lifts_the_memory_from_the_named_month(store: NoraxMemory) -> None:
    store.add(
        [
            "Melanie took the kids camping in the mountains, in a tent.",
            "Melanie went camping again; she goes camping by the lake every year.",
            "Melanie painted a sunrise over the lake.",
        ],
        ids=["june", "september", "paint"],
        created_at=[JUNE, SEPTEMBER, JUNE],
    )
    query = "When did Melanie go camping in June?"
    plain = store.search(query, k=3, now=NOW, weights=BASE)
    assert [r.id for r in plain][:2] == ["september", "june"]  # more words in common
    boosted = store.search(query, k=3, now=NOW, weights=_with(period_boost=0.5))
    assert [r.id for r in boosted][:2] == ["june", "september"]
    by_id = {r.id: r for r in boosted}
    assert by_id["june"].query_plan is not None
    assert by_id["june"].query_plan.periods[0].text == "in june"
    june = by_id["june"].explanation
    assert june is not None and june.period == pytest.approx(0.5 * june.fused)
    assert by_id["september"].explanation is not None
    assert by_id["september"].explanation.period == 0.0
    for r in boosted:
        assert r.explanation is not None
        assert sum(r.explanation.to_dict().values()) == pytest.approx(r.score, abs=1e-9)


def test_a_period_no_memory_falls_in_changes_nothing(store: NoraxMemory) -> None:
    store.add(
        ["Melanie went camping with the kids.", "Melanie painted a sunrise."],
        created_at=[JUNE, SEPTEMBER],
    )
    query = "What did Melanie do in February?"  # no memory from February
    plain = store.search(query, k=5, now=NOW, weights=BASE)
    boosted = store.search(query, k=5, now=NOW, weights=_with(period_boost=3.0))
    assert [(r.id, r.score) for r in boosted] == [(r.id, r.score) for r in plain]
    assert len(boosted) == 2


# Three sessions about the budget tracker: the first holds four near-copies that match the
# query best, the two later ones one memory each.
SESSIONS = {
    datetime(2026, 9, 1, 10, 0, tzinfo=timezone.utc): [
        "I started my budget tracker project in Flask with a login page.",
        "The budget tracker project now has a login page in Flask.",
        "For the budget tracker project I styled the Flask login page.",
        "I fixed a bug in the budget tracker project's Flask login page.",
    ],
    datetime(2026, 10, 1, 10, 0, tzinfo=timezone.utc): [
        "The tracker got charts of monthly spending this week.",
    ],
    datetime(2026, 11, 1, 10, 0, tzinfo=timezone.utc): [
        "I deployed the tracker to Render with Gunicorn.",
    ],
}


def test_coverage_spreads_the_results_over_the_sessions(store: NoraxMemory) -> None:
    for start, texts in SESSIONS.items():
        store.add(
            texts,
            ids=[f"{start:%m}-{i}" for i in range(len(texts))],
            created_at=[start + timedelta(minutes=i) for i in range(len(texts))],
        )
    query = "Summarize how my budget tracker project progressed across our conversations"
    plain = store.search(query, k=3, now=NOW, weights=BASE)
    assert {r.id[:2] for r in plain} == {"09"}  # three near-copies from the first session
    spread = store.search(query, k=3, now=NOW, weights=_with(coverage_weight=0.5))
    assert {r.id[:2] for r in spread} == {"09", "10", "11"}
    assert spread[0].id == plain[0].id  # the best memory stays first
    moved = [r for r in spread if r.id[:2] != "09"]
    for r in moved:
        assert r.explanation is not None and r.explanation.coverage > 0
    for r in spread:
        assert r.explanation is not None
        assert sum(r.explanation.to_dict().values()) == pytest.approx(r.score, abs=1e-9)
    # the two later sessions' memories were candidates before, further down
    ranked = [r.id for r in store.search(query, k=6, now=NOW, weights=BASE)]
    assert all(r.id in ranked for r in moved)


def test_coverage_leaves_a_single_session_alone(store: NoraxMemory) -> None:
    start = datetime(2026, 9, 1, 10, 0, tzinfo=timezone.utc)
    texts = SESSIONS[start]
    store.add(texts, created_at=[start + timedelta(minutes=i) for i in range(len(texts))])
    query = "Summarize how my budget tracker project progressed"
    plain = store.search(query, k=4, now=NOW, weights=BASE)
    spread = store.search(query, k=4, now=NOW, weights=_with(coverage_weight=1.0))
    assert [(r.id, r.score) for r in spread] == [(r.id, r.score) for r in plain]
    assert all(r.explanation is not None and r.explanation.coverage == 0 for r in spread)


def test_freshness_scales_only_the_kinds_it_lists(store: NoraxMemory) -> None:
    # a months-old conversation turn, a months-old scratch note and this morning's one
    store.add(
        [
            "We talked about the orders table migration plan with Colby.",
            "Scratch: orders table migration not started, first write the plan.",
            "Scratch: orders table migration paused after step 3, backfill half done.",
        ],
        ids=["turn", "stale", "fresh"],
        kind=["episodic", "scratchpad", "scratchpad"],
        created_at=[NOW - timedelta(days=90), NOW - timedelta(days=90), NOW - timedelta(hours=3)],
    )
    query = "Where did I leave off with the orders table migration?"
    plain = {r.id: r for r in store.search(query, k=3, now=NOW, weights=BASE)}
    staged = {
        r.id: r for r in store.search(query, k=3, now=NOW, weights=_with(freshness_weight=0.5))
    }
    assert set(staged) == set(plain) == {"turn", "stale", "fresh"}
    for mid, r in staged.items():
        assert r.explanation is not None and r.kind == plain[mid].kind
        assert sum(r.explanation.to_dict().values()) == pytest.approx(r.score, abs=1e-9)
    turn = staged["turn"].explanation
    assert turn is not None and turn.freshness == 0.0  # an episodic memory keeps its score
    assert staged["turn"].score == pytest.approx(plain["turn"].score, abs=1e-12)
    stale = staged["stale"].explanation
    assert stale is not None  # the 90-day-old scratch note (tau 1 day) loses half its score
    assert stale.freshness == pytest.approx(-0.5 * plain["stale"].score, rel=1e-6)
    assert staged["fresh"].score > staged["stale"].score
    # with every kind listed, the old turn is scaled too
    every = _with(freshness_weight=0.5)
    every = Weights(
        **{**vars(every), "params": {**every.params, "freshness_kinds": ["episodic", "scratchpad"]}}
    )
    turned = {r.id: r for r in store.search(query, k=3, now=NOW, weights=every)}
    assert turned["turn"].explanation is not None and turned["turn"].explanation.freshness < 0
