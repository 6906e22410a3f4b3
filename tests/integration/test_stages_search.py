"""The query-time stages (period boost, ...) through ``NoraxMemory.search``.

A persistent store (embedded Chroma), the real ONNX embedding model and spaCy pipeline: each
stage moves a ranking, and the results' explanations name the stage that moved them.
"""

from __future__ import annotations

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
