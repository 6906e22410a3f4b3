"""Supersession through search, with the real spaCy pipeline and MiniLM embedder.

A project's memories restate a fact twice (the launch deadline, the API latency), among
distractors that share the query's words. The links come from the real entity extraction;
search with the supersession stage must put the newer statement above the older one (which
the signals alone rank first), say so in ``explanation``, and never let it cross a namespace
or a ``where`` filter.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from norax_core import NoraxMemory, Weights

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
MEMORIES = [
    ("old-deadline", "Per the kickoff memo, the Apollo launch deadline is Monday, March 3.", 30),
    ("old-latency", "The Apollo dashboard API answers in 400 ms on average.", 28),
    ("d1", "The Apollo launch party will be at the rooftop bar.", 25),
    ("d2", "Dana reviewed the kickoff memo for the Zephyr project.", 22),
    ("d3", "We picked Postgres for the Apollo billing service.", 20),
    (
        "new-latency",
        "After the caching work, the Apollo dashboard API latency dropped to 250 ms.",
        12,
    ),
    ("new-deadline", "Heads up: the Apollo launch deadline moved to Friday, March 7.", 10),
]
ON = Weights(0.3, 0.7, 0.0, 0.0, params={"supersede_weight": 1.1})
OFF = Weights(0.3, 0.7, 0.0, 0.0)


@pytest.fixture
def store(tmp_path: Path, embedder: Any, extractor: Any) -> Iterator[NoraxMemory]:
    with NoraxMemory(tmp_path / "s", embedder=embedder, extractor=extractor) as mem:
        for ns in ("team", "other"):
            mem.add(
                [t for _, t, _ in MEMORIES],
                ids=[f"{ns}-{m}" for m, _, _ in MEMORIES],
                created_at=[NOW - timedelta(days=d) for _, _, d in MEMORIES],
                namespace=ns,
                metadata=[{"stale": m.startswith("old")} for m, _, _ in MEMORIES],
            )
        yield mem


def test_real_entities_link_each_restatement_to_what_it_replaces(store: NoraxMemory) -> None:
    with store.store.lock:  # namespaces load lazily
        store.store.indexes.ensure("team")
        links = store.store.indexes.supersede.links("team")
    assert "team-old-deadline" in links.get("team-new-deadline", ())
    assert "team-old-latency" in links.get("team-new-latency", ())
    # nothing is superseded by a distractor, and nothing points into another namespace
    assert all(m.startswith("team-new") for m in links)
    assert all(o.startswith("team-") for older in links.values() for o in older)


@pytest.mark.parametrize(
    ("query", "old", "new"),
    [
        (
            "What deadline did the kickoff memo set for the Apollo launch?",
            "old-deadline",
            "new-deadline",
        ),
        ("How fast is the Apollo dashboard API, 400 ms?", "old-latency", "new-latency"),
    ],
)
def test_search_ranks_the_newer_statement_first(
    store: NoraxMemory, query: str, old: str, new: str
) -> None:
    plain = [r.id for r in store.search(query, k=3, namespace="team", now=NOW, weights=OFF)]
    assert (
        plain.index(f"team-{old}") < plain.index(f"team-{new}") if f"team-{new}" in plain else True
    )
    got = store.search(query, k=3, namespace="team", now=NOW, weights=ON)
    ids = [r.id for r in got]
    assert ids.index(f"team-{new}") < ids.index(f"team-{old}")
    by_id = {r.id: r for r in got}
    moved = by_id[f"team-{new}"].explanation
    assert moved is not None and moved.supersede > 0
    assert by_id[f"team-{old}"].explanation.supersede == 0.0  # type: ignore[union-attr]
    for r in got:
        e = r.explanation
        assert e is not None
        assert e.fused + e.context + e.latest_wins + e.supersede == pytest.approx(r.score)
        assert r.namespace == "team"


def test_a_filter_that_excludes_the_newer_statement_keeps_it_out(store: NoraxMemory) -> None:
    query = "What deadline did the kickoff memo set for the Apollo launch?"
    got = store.search(query, k=7, namespace="team", where={"stale": True}, now=NOW, weights=ON)
    assert {r.id for r in got} == {"team-old-deadline", "team-old-latency"}


def test_a_newer_statement_no_signal_proposed_is_pulled_in_with_context_on(
    store: NoraxMemory,
) -> None:
    # each signal proposes one memory (the old deadline); with context propagation on, the
    # table's first growth joins what supersedes its rows, so the stage can still lift it
    query = "What deadline did the kickoff memo set for the Apollo launch?"
    params = {"supersede_weight": 1.1, "pool_min": 1, "pool_factor": 1}
    context = {"context_window": 1, "context_weight": 0.3}
    lean = Weights(0.3, 0.7, 0.0, 0.0, params={**params, **context})
    cands = store.candidates(query, k=1, namespace="team", now=NOW, weights=lean)
    assert cands.ids == ["team-old-deadline"]
    got = store.search(query, k=1, namespace="team", now=NOW, weights=lean)
    assert [r.id for r in got] == ["team-new-deadline"]
    assert got[0].explanation is not None and got[0].explanation.supersede > 0
