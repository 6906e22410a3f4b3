"""A current fact beats its stale one through search, on phrasings that share few words.

The agent asks "what holds now?" ("these days", "at the moment"), and the current fact says
the change in its own words ("migrated", "took over", "sold ... bought", "after the reorg
... reports to"): latest wins' attribute rule in the shipped ``default`` must still pair it
with the stale fact (the same subject, and the attribute in the question's words or in a
word the two share) and rank it first. Real spaCy and MiniLM; text, role and times only, as
a new user writes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from norax_core import NoraxMemory, Weights
from norax_core.presets import get_preset

pytestmark = pytest.mark.integration

NOW = datetime(2026, 5, 20, 17, 40, tzinfo=timezone.utc)
# (query, current fact, stale fact, own chatter...); each in its own namespace with CHATTER
CASES: dict[str, tuple[str, ...]] = {
    "staging": (
        "Where does staging run these days?",
        "We migrated staging to Fly.io last week.",
        "Staging runs on staging-1 in our own rack.",
    ),
    "on-call": (
        "Who is currently on call for payments?",
        "Jonas took over the payments on-call rotation from Rosa.",
        "Rosa is on call for payments.",
    ),
    "car": (
        "What car does Dmitri drive these days?",
        "Dmitri sold the Corolla and bought a used Tesla.",
        "Dmitri drives an old Corolla.",
    ),
    "kenji": (
        "Which city is Kenji living in these days?",
        "Kenji moved to Sapporo last spring for a new job.",
        "Kenji lives in Osaka and works at a robotics startup.",
    ),
    "manager": (
        "Who is Aiko's manager at the moment?",
        "After the reorg Aiko reports to Rosa.",
        "Aiko reports to Farah.",
    ),
    "database": (
        "What database does the orders service use now?",
        "The orders service was switched over to Postgres.",
        "The orders service stores everything in MySQL.",
        "The orders service handles about 200 requests a second.",
        "A: Database backups run nightly at 2am.",
    ),
}
CHATTER = (
    "Production runs on Kubernetes.",
    "Aiko leads the payments squad.",
    "A: Staging deploys take about four minutes.",
    "Dmitri loves hiking on weekends.",
)


def _without_latest_wins() -> Weights:
    """The shipped ``default`` with latest wins off for every intent."""
    w = get_preset("default")
    off = {
        name: replace(over, params={**over.params, "latest_wins_weight": 0.0})
        for name, over in w.intents.items()
    }
    return replace(w, intents=off)


@pytest.fixture(scope="module")
def memory(
    tmp_path_factory: pytest.TempPathFactory, embedder: Any, extractor: Any
) -> Iterator[NoraxMemory]:
    path: Path = tmp_path_factory.mktemp("stale") / "store"
    with NoraxMemory(path, embedder=embedder, extractor=extractor) as mem:
        for ns, (_, new, old, *own) in CASES.items():
            chatter = [*CHATTER, *own]
            texts = [old, *chatter, new]
            ages = [120, *range(90, 90 - 10 * len(chatter), -10), 5]  # stale first, current last
            mem.add(
                [t.removeprefix("A: ") for t in texts],
                ids=[f"{ns}-old", *(f"{ns}-c{i}" for i in range(len(chatter))), f"{ns}-new"],
                created_at=[NOW - timedelta(days=d) for d in ages],
                metadata=[{"role": "assistant" if t.startswith("A: ") else "user"} for t in texts],
                namespace=ns,
            )
        yield mem


@pytest.mark.parametrize("ns", sorted(CASES))
def test_the_current_fact_ranks_above_the_stale_one(memory: NoraxMemory, ns: str) -> None:
    query = CASES[ns][0]
    got = memory.search(query, k=3, namespace=ns, now=NOW)
    ids = [r.id for r in got]
    assert got[0].query_plan is not None and got[0].query_plan.intent == "current_state"
    assert f"{ns}-new" in ids, ids
    assert f"{ns}-old" not in ids or ids.index(f"{ns}-new") < ids.index(f"{ns}-old"), ids
    # the stage did it: without it the stale fact comes first, and the result says so
    off = _without_latest_wins()
    plain = [r.id for r in memory.search(query, k=7, namespace=ns, now=NOW, weights=off)]
    assert plain.index(f"{ns}-old") < plain.index(f"{ns}-new"), plain
    new = got[ids.index(f"{ns}-new")]
    assert new.explanation is not None and new.explanation.latest_wins > 0
