"""The lane through ``NoraxMemory.search``: a standing rule that applies to a request leads it.

A store written as a new user writes it (text, role and times: no kinds), real persistent
Chroma, the real ONNX embedder and spaCy. The request shares few words with the rule that
applies to it; the shipped ``default`` puts that rule first (``lane_place`` 1) and says why in
``explanation['lane']``; with ``lane_place`` 0 (the rule before) it took the last place.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from norax_core import NoraxMemory
from norax_core.presets import get_preset

pytestmark = pytest.mark.integration

NOW = datetime(2026, 5, 20, 17, 40, tzinfo=timezone.utc)
RULE = "Whenever you write SQL for me, use uppercase keywords and CTEs instead of subqueries."
MEMORIES = [
    (RULE, "user", 120),
    ("The orders table has an index on created_at now.", "user", 30),
    (
        "The query I sent earlier joined the orders table twice; it can be simplified.",
        "assistant",
        29,
    ),
    ("Amara asked whether we can list late orders in the dashboard.", "user", 12),
    ("Our analytics warehouse is BigQuery.", "user", 5),
    ("Never schedule meetings for me before 10am.", "user", 90),
    ("I prefer short bullet points over long paragraphs in summaries.", "user", 70),
]
REQUEST = "Can you write the query that lists orders that shipped late in March?"


@pytest.fixture(scope="module")
def store(
    embedder: Any, extractor: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NoraxMemory]:
    path: Path = tmp_path_factory.mktemp("lane-search")
    with NoraxMemory(path, embedder=embedder, extractor=extractor) as mem:
        mem.add(
            [t for t, _, _ in MEMORIES],
            ids=[f"m{i}" for i in range(len(MEMORIES))],
            created_at=[NOW - timedelta(days=d) for _, _, d in MEMORIES],
            metadata=[{"role": r} for _, r, _ in MEMORIES],
        )
        yield mem


def test_the_applicable_rule_leads_the_request_and_says_why(store: NoraxMemory) -> None:
    got = store.search(REQUEST, k=3, now=NOW)
    assert got[0].text == RULE
    assert got[0].inferred_kind == "instruction"  # no kind was given: inferred
    assert got[0].explanation is not None and got[0].explanation.lane > 0
    assert all(r.explanation is not None and r.explanation.lane == 0 for r in got[1:])
    # the stages still sum to the score
    e = got[0].explanation
    assert abs(sum(e.to_dict().values()) - got[0].score) <= 1e-9


def test_without_the_place_the_rule_took_the_last_place(store: NoraxMemory) -> None:
    default = get_preset("default")
    last = default.with_params(lane_place=0)
    got = store.search(REQUEST, k=3, now=NOW, weights=last)
    assert [r.text for r in got].index(RULE) == 2
    off = default.with_params(lane_slots=0)
    assert RULE not in [r.text for r in store.search(REQUEST, k=3, now=NOW, weights=off)]
