"""Every result explains itself: the query's plan and what each ranking stage contributed.

Through every entry point (``NoraxMemory.search``, the LangChain retriever, the LlamaIndex
retriever and postprocessor, the LangGraph store and ``norax search --json``), with a real
persistent Chroma and the real local models.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from norax_core import Explanation, NamedPeriod, NoraxMemory, QueryInfo, SearchResult, Weights
from norax_core.cli import main as cli_main
from norax_langchain import NoraxRetriever as LangChainRetriever
from norax_langgraph import NoraxStore
from norax_llamaindex import NoraxPostprocessor
from norax_llamaindex import NoraxRetriever as LlamaIndexRetriever

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)  # a Sunday
T0 = NOW - timedelta(days=10)
# A session (question, answer, chatter) plus two facts about one deadline, a week apart.
TEXTS = {
    "q": "Did you walk the dog this morning?",
    "a": "Yes, on Tuesday.",
    "t": "I like green tea with breakfast.",
    "old": "Colby said the launch deadline is Monday.",
    "new": "Colby said the launch deadline moved to Friday.",
    "w": "Colby set up the team wallet on Base.",
}
TIMES = {
    "q": T0,
    "a": T0 + timedelta(seconds=5),
    "t": T0 + timedelta(seconds=10),
    "old": T0 - timedelta(days=7),
    "new": T0 + timedelta(days=1),
    "w": T0 - timedelta(days=3),
}
# Every stage on: fusion, context propagation and latest wins.
STAGES = Weights(
    0.5,
    0.3,
    0.1,
    0.1,
    params={
        "context_window": 1,
        "context_weight": 0.5,
        "latest_wins_weight": 1.5,
        "latest_wins_shared": 1,
    },
)
PLAN_KEYS = {"intent", "periods", "entities", "weights_intent"}
STAGE_KEYS = {
    "fused",
    "context",
    "bridges",
    "period",
    "latest_wins",
    "supersede",
    "turns",
    "exchange",
    "lane",
}


@pytest.fixture
def store(tmp_path: Path, embedder: Any, extractor: Any) -> Iterator[NoraxMemory]:
    with NoraxMemory(tmp_path / "store", embedder=embedder, extractor=extractor) as mem:
        mem.add(list(TEXTS.values()), ids=list(TEXTS), created_at=list(TIMES.values()))
        yield mem


def _check_result_dict(plan: dict[str, Any], stages: dict[str, float], score: float) -> None:
    """A result's JSON-ready plan and stages: the documented keys, stages summing to score."""
    assert set(plan) == PLAN_KEYS and set(stages) == STAGE_KEYS
    assert isinstance(plan["intent"], str) and isinstance(plan["periods"], list)
    assert sum(stages.values()) == pytest.approx(score, abs=1e-9)
    json.dumps({"query_plan": plan, "explanation": stages})  # serialisable


def test_search_results_carry_the_plan_and_stages_that_sum_to_the_score(
    store: NoraxMemory,
) -> None:
    results = store.search("When did Colby set the launch deadline?", k=6, now=NOW, weights=STAGES)
    assert len(results) == 6
    for r in results:
        assert r.query_plan == QueryInfo("temporal", (), ("Colby",))
        assert r.explanation is not None
        e = r.explanation
        assert abs(sum(e.to_dict().values()) - r.score) <= 1e-9
        assert r.to_dict()["explanation"] == e.to_dict()
        plan = {"intent": "temporal", "periods": [], "entities": ["Colby"], "weights_intent": None}
        assert r.to_dict()["query_plan"] == plan
    assert any(r.explanation and r.explanation.context != 0 for r in results)
    by_id = {r.id: r.explanation for r in results}
    new, old = by_id["new"], by_id["old"]
    assert new is not None and old is not None
    assert new.latest_wins > 0 and old.latest_wins == 0.0  # the newer deadline closes the gap


def test_a_last_week_query_reports_its_period_as_iso_dates(store: NoraxMemory) -> None:
    (top, *_) = store.search("What did Colby say last week?", k=3, now=NOW)
    assert top.query_plan is not None
    # NOW is Sunday 29 November: last week runs from Monday 16 to Monday 23 (exclusive)
    assert top.query_plan.periods == (
        NamedPeriod("2026-11-16T00:00:00+00:00", "2026-11-23T00:00:00+00:00", "last week"),
    )
    assert top.to_dict()["query_plan"]["periods"] == [
        {
            "start": "2026-11-16T00:00:00+00:00",
            "end": "2026-11-23T00:00:00+00:00",
            "text": "last week",
        }
    ]


def test_a_memory_lifted_by_its_context_shows_a_positive_context_contribution(
    store: NoraxMemory,
) -> None:
    """'Yes, on Tuesday.' shares no word with the query: its question turn lifts it."""
    keywords = Weights(1.0, 0.0, 0.0, 0.0, params={"context_window": 1, "context_weight": 0.5})
    got = {r.id: r for r in store.search("walk the dog", k=3, now=NOW, weights=keywords)}
    answer = got["a"].explanation
    assert answer is not None
    assert answer.fused == 0.0 and answer.context > 0 and answer.latest_wins == 0.0
    assert got["a"].score == pytest.approx(answer.context, abs=1e-12)
    question = got["q"].explanation
    assert question is not None and question.fused > 0


def test_without_context_and_latest_wins_the_stages_add_nothing(store: NoraxMemory) -> None:
    for r in store.search("launch deadline", k=4, now=NOW, weights=Weights(1.0, 1.0, 0.0, 0.0)):
        assert r.explanation == Explanation(r.score, 0.0, 0.0)


def test_langchain_documents_carry_plan_and_explanation(store: NoraxMemory) -> None:
    retriever = LangChainRetriever(memory=store, k=3, now=NOW, weights=STAGES)
    docs = retriever.invoke("When did Colby set the launch deadline?")
    assert len(docs) == 3
    for doc in docs:
        meta = doc.metadata
        assert meta["query_plan"]["intent"] == "temporal"
        _check_result_dict(meta["query_plan"], meta["explanation"], meta["score"])


def test_llamaindex_retriever_nodes_carry_plan_and_explanation(store: NoraxMemory) -> None:
    retriever = LlamaIndexRetriever(memory=store, similarity_top_k=3, now=NOW, weights=STAGES)
    nodes = retriever.retrieve("What did Colby say last week?")
    assert len(nodes) == 3
    for n in nodes:
        meta = n.node.metadata
        assert meta["query_plan"]["periods"][0]["text"] == "last week"
        assert meta["query_plan"]["periods"][0]["start"] == "2026-11-16T00:00:00+00:00"
        _check_result_dict(meta["query_plan"], meta["explanation"], n.score or 0.0)
        assert {"query_plan", "explanation"} <= set(n.node.excluded_llm_metadata_keys)


def test_llamaindex_postprocessor_reports_the_plan_and_fusion_only(store: NoraxMemory) -> None:
    """Reranking has only the fusion stage: the whole score is ``fused``."""
    nodes = [
        NodeWithScore(node=TextNode(id_=i, text=TEXTS[i]), score=0.0) for i in ("old", "new", "w")
    ]
    post = NoraxPostprocessor(memory=store, top_n=2, now=NOW)
    out = post.postprocess_nodes(nodes, query_str="When did Colby move the deadline?")
    assert len(out) == 2
    for n in out:
        meta = n.node.metadata
        assert meta["query_plan"]["intent"] == "temporal"
        assert meta["explanation"] == Explanation(n.score or 0.0).to_dict()
        assert set(meta["explanation"].values()) <= {n.score, 0.0}
        _check_result_dict(meta["query_plan"], meta["explanation"], n.score or 0.0)
    assert all("query_plan" not in n.node.metadata for n in nodes)  # inputs unchanged


def test_langgraph_items_carry_plan_and_explanation(store: NoraxMemory) -> None:
    lg = NoraxStore(store)
    lg.put(("team",), "deadline", {"text": "The launch deadline moved to Friday."})
    lg.put(("team",), "tea", {"text": "I like green tea."})
    items = lg.search(("team",), query="When did we set the launch deadline?")
    assert items and items[0].key == "deadline"
    for item in items:
        assert item.query_plan is not None and item.explanation is not None
        assert item.query_plan["intent"] == "temporal"
        assert item.score is not None
        _check_result_dict(item.query_plan, item.explanation, item.score)
        assert item.dict()["query_plan"] == item.query_plan
        assert item.dict()["explanation"] == item.explanation
        json.dumps(item.dict(), default=str)


def test_cli_search_json_carries_plan_and_explanation(
    store: NoraxMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    path = store.path
    store.close()
    argv = ["--store", str(path), "search", "What did Colby say last week?", "--k", "3"]
    assert cli_main([*argv, "--now", NOW.isoformat(), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert len(results) == 3
    for r in results:
        assert set(r) == {
            "id",
            "text",
            "score",
            "signals",
            "kind",
            "inferred_kind",
            "created_at",
            "namespace",
            "metadata",
            "matched_entities",
            "query_plan",
            "explanation",
        }
        assert r["query_plan"]["periods"][0]["end"] == "2026-11-23T00:00:00+00:00"
        _check_result_dict(r["query_plan"], r["explanation"], r["score"])


def test_a_result_built_by_hand_reports_no_plan() -> None:
    r = SearchResult(id="m", text="t", kind="episodic", created_at=NOW, namespace="default")
    assert r.to_dict()["query_plan"] is None and r.to_dict()["explanation"] is None
