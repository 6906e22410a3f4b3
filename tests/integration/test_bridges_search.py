"""The bridge step through ``NoraxMemory.search``: real ONNX embedder, spaCy, embedded Chroma.

A question names the wallet; the memory that answers it names only Base, the chain the
wallet was set up on. The first pass finds the wallet memory; the bridge step walks from its
entities to the decision, which enters the top 2 only with the step on and says so in its
explanation. The walk never leaves the namespace, and never brings in a memory the ``where``
filter excludes.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from norax_core import NoraxMemory, Weights

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
QUERY = "What did we decide about the wallet?"
TEXTS = {
    "wallet": "Colby set up the team wallet on Base.",
    "bridge": "Priya moved all vendor payments to Base for good.",
    "pizza": "We decided to order pizza for the offsite.",
    "standup": "We decided the standup moves to ten in the morning.",
    "repo": "We decided to rename the repository next sprint.",
    "laptops": "We decided that new hires get their laptops on day one.",
    **{
        f"chore{i}": f"We decided {task}."
        for i, task in enumerate(
            [
                "to water the office plants on Mondays",
                "that the kitchen closes at six",
                "to move the printer upstairs",
                "to buy a second coffee machine",
                "that interns share the corner desk",
                "to paint the meeting room blue",
                "to keep the blinds down in summer",
                "to recycle the old monitors",
                "that visitors sign in at reception",
                "to book the rooftop for the party",
                "to keep the petty cash box in the safe",
                "that expense reports are due every month",
                "to open a savings account for the team fund",
                "that receipts go into the shared folder",
                "to cap travel budgets per trip",
                "that credit cards stay with the office manager",
            ]
        )
    },
}
# keywords and meaning only: the graph signal proposes nothing, so the decision is not even
# a candidate until the bridge step brings it in (through the search table's extend)
OFF = Weights(0.3, 0.7, 0.0, 0.0, params={"pool_min": 5}, name="off")
ON = Weights(
    0.3,
    0.7,
    0.0,
    0.0,
    params={"pool_min": 5, "bridge_weight": 0.3, "bridge_seeds": 1, "bridge_candidates": 5},
    name="bridges",
)


@pytest.fixture
def store(embedder, extractor, tmp_path: Path) -> Iterator[NoraxMemory]:  # type: ignore[no-untyped-def]
    mem = NoraxMemory(tmp_path / "store", embedder=embedder, extractor=extractor)
    ids = list(TEXTS)
    # an hour apart: every memory is its own session, so context propagation lends nothing
    for i, m in enumerate(ids):
        mem.add(
            TEXTS[m],
            ids=f"team:{m}",
            namespace="team",
            created_at=NOW - timedelta(days=3, hours=2 * i),
            metadata={"room": "finance" if m == "bridge" else "general"},
        )
    # another tenant's memory about Base: the walk must never reach it
    mem.add(
        "Priya says Base fees dropped again this week.",
        ids="other:base",
        namespace="other",
        created_at=NOW - timedelta(days=1),
    )
    yield mem
    mem.close()


def _ids(results: list) -> list[str]:  # type: ignore[type-arg]
    return [r.id for r in results]


def test_the_bridge_memory_enters_the_top_k_only_with_the_step_on(store: NoraxMemory) -> None:
    first = store.candidates(QUERY, k=2, namespace="team", now=NOW, weights=ON)
    assert "team:bridge" not in first.ids  # no signal proposes it
    off = store.search(QUERY, k=2, namespace="team", now=NOW, weights=OFF)
    on = store.search(QUERY, k=2, namespace="team", now=NOW, weights=ON)
    assert _ids(off)[0] == _ids(on)[0] == "team:wallet"
    assert "team:bridge" not in _ids(off)
    assert "team:bridge" in _ids(on)
    bridge = next(r for r in on if r.id == "team:bridge")
    assert bridge.explanation.bridges > 0
    assert all(r.explanation.bridges == 0 for r in off)
    parts = bridge.explanation.to_dict()
    assert {"fused", "context", "bridges", "latest_wins"} <= set(parts)
    assert sum(parts.values()) == pytest.approx(bridge.score)
    # the first-pass seed is what the walk starts from: it gains nothing itself
    assert on[0].explanation.bridges == 0.0


def test_the_walk_stays_in_the_namespace_and_the_filter(store: NoraxMemory) -> None:
    on = store.search(QUERY, k=6, namespace="team", now=NOW, weights=ON)
    assert all(r.namespace == "team" for r in on)
    assert "other:base" not in _ids(on)
    both = {"room": {"$in": ["general", "finance"]}}
    got = store.search(QUERY, k=2, namespace="team", where=both, now=NOW, weights=ON)
    assert "team:bridge" in _ids(got)  # the filter admits it: the walk brings it in
    general = {"room": "general"}
    got = store.search(QUERY, k=2, namespace="team", where=general, now=NOW, weights=ON)
    assert _ids(got)[0] == "team:wallet" and "team:bridge" not in _ids(got)
    assert all(r.metadata["room"] == "general" for r in got)


def _without_decision_bridges() -> Weights:
    """The shipped ``default`` with its ``decision`` override (the bridge step) taken out."""
    from dataclasses import replace

    from norax_core.presets import get_preset

    base = get_preset("default")
    assert base.intents["decision"].params["bridge_weight"] > 0  # what the test measures
    rest = {k: v for k, v in base.intents.items() if k != "decision"}
    return replace(base, intents=rest, name="default-decision")


def test_decision_questions_reach_the_decision_through_the_graph(
    embedder, extractor, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from norax_core.bench.scenarios import generate, indexes, load, passes, ranked

    scenarios = generate(8, seed=13, families=("graph",))
    mem = NoraxMemory(tmp_path / "graph", embedder=embedder, extractor=extractor)
    try:
        load(mem, scenarios)
        off = _without_decision_bridges()
        before = [passes(s, indexes(ranked(mem, s, off))) for s in scenarios]
        results = [ranked(mem, s) for s in scenarios]  # the shipped default
        after = [passes(s, indexes(r)) for s, r in zip(scenarios, results, strict=True)]
    finally:
        mem.close()
    assert all(r[0].query_plan is not None for r in results)
    assert {r[0].query_plan.intent for r in results} == {"decision"}  # type: ignore[union-attr]
    assert sum(after) >= 6 and sum(after) > sum(before) + 3, (before, after)
    # what moved them is the bridge step, and only the targets' rows say so
    moved = [r for s, r in zip(scenarios, results, strict=True) if passes(s, indexes(r))]
    assert all(any(x.explanation.bridges > 0 for x in r[:3]) for r in moved)
