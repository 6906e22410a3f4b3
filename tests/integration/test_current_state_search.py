"""Current state beats stale state through search, with the real spaCy and MiniLM models.

Latest wins' attribute rule (:func:`norax_core.latest.state_wins`) in the shipped ``default``:
a current-state question gets the newer statement of what it asks about first, though the
signals rank the older, fuller one first and the two share no supersession link ("Kenji
moved to Sapporo" vs "Kenji lives in Osaka", "commits merged into main have grown to 165"
vs "the main branch has 150 commits merged"); unrelated newer memories, assistants' replies
and other namespaces do not move.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from norax_core import NoraxMemory

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
MEMORIES: list[tuple[str, str, int, str]] = [
    ("kenji-old", "Kenji lives in Osaka and works at a robotics startup.", 200, "user"),
    ("kenji-hike", "Kenji likes hiking in the mountains on weekends.", 150, "user"),
    ("mia", "Mia lives in Kyoto.", 120, "user"),
    ("commits-old", "The main branch of my Git repository has 150 commits merged.", 90, "user"),
    (
        "commits-reply",
        "Great, 150 commits merged into the main branch is a solid first release.",
        89,
        "assistant",
    ),
    ("kenji-new", "Kenji moved to Sapporo last spring for a new job.", 60, "user"),
    (
        "commits-new",
        "I'm adding login rate limits this week; meanwhile commits merged into main have grown "
        "to 165.",
        30,
        "user",
    ),
]


@pytest.fixture(scope="module")
def memory(
    tmp_path_factory: pytest.TempPathFactory, embedder: Any, extractor: Any
) -> Iterator[NoraxMemory]:
    path: Path = tmp_path_factory.mktemp("current") / "store"
    with NoraxMemory(path, embedder=embedder, extractor=extractor) as mem:
        for ns in ("a", "b"):
            mem.add(
                [t for _, t, _, _ in MEMORIES],
                ids=[f"{ns}-{m}" for m, _, _, _ in MEMORIES],
                created_at=[NOW - timedelta(days=d) for _, _, d, _ in MEMORIES],
                metadata=[{"role": r} for _, _, _, r in MEMORIES],
                namespace=ns,
            )
        yield mem


@pytest.mark.parametrize(
    ("query", "new", "old"),
    [
        ("Where does Kenji live now?", "kenji-new", "kenji-old"),
        ("How many commits have been merged into the main branch?", "commits-new", "commits-old"),
    ],
)
def test_the_newer_statement_ranks_first_and_says_why(
    memory: NoraxMemory, query: str, new: str, old: str
) -> None:
    got = memory.search(query, k=5, namespace="a", now=NOW)
    ids = [r.id for r in got]
    assert got[0].query_plan.intent == "current_state"
    assert ids.index(f"a-{new}") < ids.index(f"a-{old}"), ids
    lifted = got[ids.index(f"a-{new}")]
    assert lifted.explanation.latest_wins > 0
    # without the stage the signals put the older statement first: the stage did it
    plain = memory.search(query, k=5, namespace="a", now=NOW, weights="seed")
    assert [r.id for r in plain].index(f"a-{old}") < [r.id for r in plain].index(f"a-{new}")
    # nothing else was lifted (the assistant's reply neither), and no other namespace joins
    assert all(r.explanation.latest_wins == 0 for r in got if r is not lifted)
    assert all(r.namespace == "a" for r in got)


def test_a_reply_or_an_unrelated_newer_memory_does_not_pass(memory: NoraxMemory) -> None:
    got = memory.search("Where does Mia live now?", k=5, namespace="b", now=NOW)
    assert got[0].id == "b-mia" and got[0].explanation.latest_wins == 0
    reply = memory.search("How many commits were merged at v1.0.0?", k=7, namespace="b", now=NOW)
    assert all(r.explanation.latest_wins == 0 for r in reply if r.id == "b-commits-reply")
