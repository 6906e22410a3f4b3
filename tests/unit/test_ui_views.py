"""The inspector's pure views: signal shares, the ``why`` sentences, the graph picture."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

import networkx as nx
import pytest

from norax_core.models import Explanation, Memory, QueryInfo, SearchResult
from norax_core.ui.views import contributions, explain_results, graph_picture, memory_json
from norax_core.weights import FusionMethod, Weights

T = datetime(2026, 11, 1, tzinfo=timezone.utc)
W = Weights(bm25=0.25, dense=0.35, temporal=0.2, graph=0.2)


def result(mid: str, signals: dict[str, float], **stages: float) -> SearchResult:
    fused = sum(W.as_dict()[s] * v for s, v in signals.items())
    expl = Explanation(fused=fused, **stages)
    return SearchResult(
        id=mid,
        text=f"text of {mid}",
        kind="episodic",
        created_at=T,
        namespace="ns",
        score=sum(expl.to_dict().values()),
        signals=signals,
        query_plan=QueryInfo(intent="factual"),
        explanation=expl,
    )


def test_shares_are_the_weighted_signals_when_they_sum_to_the_fused_score() -> None:
    sig = {"bm25": 0.8, "dense": 0.5, "temporal": 0.0, "graph": 1.0}
    shares = contributions(sig, 0.25 * 0.8 + 0.35 * 0.5 + 0.2, W)
    assert shares == pytest.approx({"bm25": 0.2, "dense": 0.175, "temporal": 0.0, "graph": 0.2})
    assert contributions(sig, 0.9, W) == {}  # fused some other way: no shares claimed
    rrf = dataclasses.replace(W, method=FusionMethod.RRF)
    assert contributions(sig, sum(shares.values()), rrf) == {}


def test_why_names_the_place_the_stages_and_the_gap_to_the_neighbours() -> None:
    rows = explain_results(
        [
            result("a", {"bm25": 1.0, "dense": 0.9, "temporal": 0.1, "graph": 0.0}, context=0.05),
            result("b", {"bm25": 0.2, "dense": 0.9, "temporal": 0.9, "graph": 0.0}),
            result("c", {"bm25": 0.0, "dense": 0.1, "temporal": 0.2, "graph": 0.0}, turns=-0.01),
        ],
        W,
    )
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    first, middle, last = (r["why"] for r in rows)
    assert first[0] == f"#1 of 3 with {rows[0]['score']:.3f}, 0.090 ahead of #2."
    assert "Stages: context +0.050." in first
    assert any(s.startswith("Against #2: gains on bm25 +0.200") for s in first)
    assert (
        middle[0].startswith("#2 of 3") and "behind #1" in middle[0] and "ahead of #3" in middle[0]
    )
    assert "No ranking stage moved it." in middle
    assert "Stages: turns -0.010." in last
    assert rows[0]["contributions"]["bm25"] == pytest.approx(0.25)


@dataclasses.dataclass(frozen=True)
class FutureResult(SearchResult):
    """A result whose explanation carries a stage this code has never heard of."""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["explanation"] = {"fused": out["explanation"]["fused"], "lane": 0.3}
        out["score"] = out["explanation"]["fused"] + 0.3
        out["inferred_kind"] = "semantic"
        return out


def test_why_is_generic_over_the_explanation_keys() -> None:
    base = result("a", {"bm25": 1.0, "dense": 0.0, "temporal": 0.0, "graph": 0.0})
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    rows = explain_results([FutureResult(**fields)], W)
    assert "Stages: lane +0.300." in rows[0]["why"]
    assert rows[0]["inferred_kind"] == "semantic"


def test_memory_json_carries_every_field() -> None:
    m = Memory("m1", "hi", "semantic", T, "ns", {"a": 1}, ("x", "y"))
    assert memory_json(m) == {
        "id": "m1",
        "text": "hi",
        "kind": "semantic",
        "created_at": "2026-11-01T00:00:00+00:00",
        "namespace": "ns",
        "metadata": {"a": 1},
        "entities": ["x", "y"],
        "inferred_kind": "",
    }


def test_graph_picture_is_deterministic_and_inside_the_frame() -> None:
    m = Memory("m1", "colby set up the wallet", "episodic", T, "ns", {}, ("colby", "wallet"))
    g = nx.Graph()
    g.add_node("colby", count=3, community=0, seed=True)
    g.add_node("wallet", count=1, community=0, seed=True)
    g.add_node("base", count=3, community=1, seed=False)
    g.add_edge("colby", "wallet", weight=1)
    g.add_edge("colby", "base", weight=2)
    shared = {"colby": ["m2", "m3", "m4"], "wallet": []}
    pic = graph_picture(m, g, shared, listed=2)
    assert pic == graph_picture(m, g, shared, listed=2)
    keys = {n["key"] for n in pic["nodes"]}
    assert keys == {"memory:m1", "entity:colby", "entity:wallet", "entity:base"}
    assert all(0.0 <= n["x"] <= 1.0 and 0.0 <= n["y"] <= 1.0 for n in pic["nodes"])
    edges = {frozenset((e["source"], e["target"])) for e in pic["edges"]}
    assert frozenset(("memory:m1", "entity:colby")) in edges
    assert frozenset(("memory:m1", "entity:base")) not in edges  # a neighbour, not its entity
    assert frozenset(("entity:colby", "entity:base")) in edges
    assert pic["shared"] == {
        "colby": {"ids": ["m2", "m3"], "total": 3},
        "wallet": {"ids": [], "total": 0},
    }


def test_a_memory_without_entities_is_a_single_node() -> None:
    m = Memory("m1", "ok", "episodic", T, "ns")
    pic = graph_picture(m, nx.Graph(), {})
    assert [n["key"] for n in pic["nodes"]] == ["memory:m1"]
    assert pic["edges"] == []
