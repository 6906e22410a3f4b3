"""The query-time stages (period boost, ...) through ``NoraxMemory.search``.

A persistent store (embedded Chroma), the real ONNX embedding model and spaCy pipeline: each
stage moves a ranking, and the results' explanations name the stage that moved them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timezone
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


GARDEN = [  # (id, role, day, text): one session per day
    ("beds", "user", 1, "I want to plan my vegetable garden beds for tomatoes and peppers."),
    ("beds-r", "assistant", 1, "Raised beds of four by eight feet suit tomatoes and peppers."),
    ("depth", "user", 1, "How deep should the vegetable garden beds for my tomatoes be?"),
    ("depth-r", "assistant", 1, "Twelve inches of soil is enough for most vegetables."),
    ("soil", "user", 1, "Which soil mix should I use in my vegetable garden beds?"),
    ("soil-r", "assistant", 1, "Mix compost, topsoil and a little perlite."),
    ("water", "user", 40, "I'm setting up drip irrigation for the vegetable garden now."),
    ("water-r", "assistant", 40, "Drip lines on a timer save water and keep leaves dry."),
    ("pests", "user", 80, "Aphids showed up on my vegetable garden plants, what should I do?"),
    ("pests-r", "assistant", 80, "Try neem oil, or release ladybugs."),
]
ORDER_QUERY = (
    "Can you list the order in which I brought up different aspects of my vegetable garden "
    "throughout our conversations?"
)


def test_an_order_question_gets_each_sessions_best_first(store: NoraxMemory) -> None:
    from datetime import timedelta

    from norax_core.presets import get_preset

    start = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
    store.add(
        [t for _, _, _, t in GARDEN],
        ids=[i for i, _, _, _ in GARDEN],
        created_at=[start + timedelta(days=d, minutes=n) for n, (_, _, d, _) in enumerate(GARDEN)],
        metadata=[{"role": r} for _, r, _, _ in GARDEN],
    )
    shipped = get_preset("default")
    cover = shipped.intents["coverage"]
    assert cover.params["session_spread"] > 0
    unspread = dataclasses.replace(
        shipped,
        intents={
            **shipped.intents,
            "coverage": dataclasses.replace(
                cover, params={k: v for k, v in cover.params.items() if k != "session_spread"}
            ),
        },
    )
    plain = store.search(ORDER_QUERY, k=4, now=NOW, weights=unspread)
    got = store.search(ORDER_QUERY, k=4, now=NOW)  # the shipped default
    assert got[0].query_plan is not None and got[0].query_plan.weights_intent == "coverage"
    assert [r.id for r in plain] == ["beds", "depth", "soil", "water"]  # the first session's
    assert [r.id for r in got] == ["beds", "water", "depth", "pests"]  # all three sessions
    # the first session's second keeps (1 - spread) of its score; each session's best all of it
    before, after = ({r.id: r.score for r in rs} for rs in (plain, got))
    keep = 1.0 - cover.params["session_spread"]
    assert after["depth"] == pytest.approx(keep * before["depth"])
    assert after["beds"] == pytest.approx(before["beds"])
    assert after["water"] == pytest.approx(before["water"])
    for r in got:
        assert r.explanation is not None
        assert sum(r.explanation.to_dict().values()) == pytest.approx(r.score, abs=1e-9)
