"""EntityGraph bookkeeping and GraphSignal scoring, against small references."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from itertools import combinations

import networkx as nx
import numpy as np
import pytest
from networkx.algorithms.link_analysis.pagerank_alg import _pagerank_python

from norax_core.signals import entity_graph as entity_graph_mod
from norax_core.signals import graph as graph_mod
from norax_core.signals.base import Query, Signal
from norax_core.signals.entity_graph import MAX_EDGE_ENTITIES
from norax_core.signals.graph import (
    EntityGraph,
    GraphConfig,
    GraphSignal,
    personalized_pagerank,
)

NS = "ns"


def q(*entities: str, namespace: str = NS, allowed: frozenset[str] | None = None) -> Query:
    return Query(text="", namespace=namespace, now=0.0, allowed=allowed, entities=entities)


def reference_graph(memories: dict[str, list[str]]) -> tuple[Counter[str], Counter[frozenset]]:
    """Node counts and edge weights recomputed from scratch."""
    counts: Counter[str] = Counter()
    edges: Counter[frozenset] = Counter()
    for ents in memories.values():
        ents = list(dict.fromkeys(ents))
        counts.update(ents)
        edges.update(frozenset(p) for p in combinations(ents[:MAX_EDGE_ENTITIES], 2))
    return counts, edges


def assert_matches_reference(g: EntityGraph, memories: dict[str, list[str]]) -> None:
    counts, edges = reference_graph(memories)
    nxg = g.graph(NS)
    assert dict(nxg.nodes(data="count")) == dict(counts)
    assert {frozenset((a, b)): w for a, b, w in nxg.edges(data="weight")} == dict(edges)
    assert sorted(g.ids(NS)) == sorted(memories)
    assert g.count(NS) == len(memories)
    for mid, ents in memories.items():
        assert g.entities_of(NS, mid) == tuple(dict.fromkeys(ents))


CORPUS = {
    "m0": ["colby", "wallet", "base"],
    "m1": ["base", "fee", "payment"],
    "m2": ["colby", "base", "chain", "payment"],
    "d0": ["melanie", "sunset", "lake"],
    "d1": ["caroline", "pottery", "class"],
    "d2": ["espresso", "kitchen", "coffee"],
    "d3": ["jordan", "boston", "marathon"],
    "d4": ["cat", "plant", "windowsill"],
}


def build(memories: dict[str, list[str]] = CORPUS, namespace: str = NS) -> EntityGraph:
    g = EntityGraph()
    g.add_many(namespace, memories.items())
    return g


# -- bookkeeping -----------------------------------------------------------------------------


def test_nodes_edges_and_weights_after_adds_and_deletes() -> None:
    g = build()
    nxg = g.graph(NS)
    assert nxg.nodes["base"]["count"] == 3
    assert nxg.edges["colby", "base"]["weight"] == 2
    assert nxg.edges["base", "payment"]["weight"] == 2
    assert not nxg.has_edge("wallet", "fee")
    assert g.remove(NS, "m2")
    nxg = g.graph(NS)
    assert nxg.nodes["base"]["count"] == 2
    assert nxg.edges["colby", "base"]["weight"] == 1
    assert "chain" not in nxg
    assert not g.remove(NS, "m2")
    assert not g.remove("other", "m0")
    assert_matches_reference(g, {k: v for k, v in CORPUS.items() if k != "m2"})


def test_add_replaces_an_existing_id() -> None:
    g = build()
    g.add(NS, "m0", ["wallet", "ledger"])
    assert g.entities_of(NS, "m0") == ("wallet", "ledger")
    assert g.count(NS) == len(CORPUS)
    assert_matches_reference(g, {**CORPUS, "m0": ["wallet", "ledger"]})


def test_duplicates_and_empty_entities_are_ignored() -> None:
    g = EntityGraph()
    g.add(NS, "a", ["x", "", "y", "x"])
    assert g.entities_of(NS, "a") == ("x", "y")
    assert g.graph(NS).edges["x", "y"]["weight"] == 1


def test_bad_entities_raise() -> None:
    g = EntityGraph()
    with pytest.raises(TypeError):
        g.add(NS, "a", "wallet")
    with pytest.raises(TypeError):
        g.add(NS, "a", ["ok", 3])  # type: ignore[list-item]


def test_empty_namespace_disappears() -> None:
    g = EntityGraph()
    g.add(NS, "a", ["x"])
    g.add("other", "a", ["x"])
    assert g.namespaces() == ["ns", "other"]
    g.remove(NS, "a")
    assert g.namespaces() == ["other"]
    assert g.count(NS) == 0 and g.ids(NS) == [] and g.communities(NS) == {}
    assert g.entities_of(NS, "a") == ()
    assert g.graph(NS).number_of_nodes() == 0


def test_huge_memory_links_only_its_first_entities() -> None:
    g = EntityGraph()
    ents = [f"e{i}" for i in range(MAX_EDGE_ENTITIES + 10)]
    g.add(NS, "big", ents)
    nxg = g.graph(NS)
    assert nxg.number_of_nodes() == len(ents)
    assert nxg.number_of_edges() == MAX_EDGE_ENTITIES * (MAX_EDGE_ENTITIES - 1) // 2


@pytest.mark.parametrize("seed", range(5))
def test_random_writes_match_a_rebuild(seed: int) -> None:
    rng = random.Random(seed)
    vocab = [f"e{i}" for i in range(30)]
    g = EntityGraph()
    live: dict[str, list[str]] = {}
    for step in range(300):
        mid = f"m{rng.randrange(60)}"
        if rng.random() < 0.3:
            assert g.remove(NS, mid) == (live.pop(mid, None) is not None)
        else:
            ents = rng.sample(vocab, rng.randrange(0, 6))
            g.add(NS, mid, ents)
            live[mid] = ents
        if step % 50 == 0 and live:
            assert_matches_reference(g, live)
    if live:
        assert_matches_reference(g, live)
        rebuilt = build(live)
        sig_a, sig_b = GraphSignal(g), GraphSignal(rebuilt)
        for ents in (("e1",), ("e2", "e3"), ("e4", "nope")):
            assert sig_a.score(q(*ents), list(live)) == pytest.approx(
                sig_b.score(q(*ents), list(live))
            )


# -- communities -----------------------------------------------------------------------------


def two_cliques() -> dict[str, list[str]]:
    mems = {f"a{i}": ["apple", "banana", "cherry", "date"] for i in range(3)}
    mems |= {f"b{i}": ["xenon", "yttrium", "zinc", "argon"] for i in range(3)}
    mems["bridge"] = ["date", "xenon"]
    return mems


@pytest.fixture
def louvain_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = entity_graph_mod.louvain_communities

    def spy(g: nx.Graph, seed: int) -> object:
        calls.append(g.number_of_edges())
        return real(g, seed)

    monkeypatch.setattr(entity_graph_mod, "louvain_communities", spy)
    return calls


def test_louvain_finds_the_two_cliques(louvain_calls: list[int]) -> None:
    g = build(two_cliques())
    comm = g.communities(NS)
    assert len(louvain_calls) == 1
    assert len({comm[e] for e in ("apple", "banana", "cherry", "date")}) == 1
    assert len({comm[e] for e in ("xenon", "yttrium", "zinc", "argon")}) == 1
    assert comm["apple"] != comm["zinc"]
    assert g.graph(NS).nodes["apple"]["community"] == comm["apple"]


def test_new_entities_join_their_strongest_neighbour_without_louvain(
    louvain_calls: list[int],
) -> None:
    mems = two_cliques()
    mems |= {f"c{i}": [f"filler{i}", f"other{i}"] for i in range(20)}
    g = build(mems)
    before = g.communities(NS)
    g.add(NS, "new", ["kiwi", "apple", "banana", "zinc"])  # 1 change: below 10 % of 27
    after = g.communities(NS)
    assert len(louvain_calls) == 1
    assert after["kiwi"] == before["apple"]
    g.add(NS, "lonely", ["mango"])
    assert g.communities(NS)["mango"] not in set(before.values())


def test_louvain_reruns_once_changes_pass_the_fraction(louvain_calls: list[int]) -> None:
    mems = {f"m{i}": [f"e{i % 7}", f"e{(i + 1) % 7}"] for i in range(50)}
    g = build(mems)
    g.communities(NS)
    assert len(louvain_calls) == 1
    for i in range(5):  # 5 changes: exactly 10 % of 50, not more
        g.add(NS, f"x{i}", ["e1", "e2"])
    g.communities(NS)
    assert len(louvain_calls) == 1
    g.remove(NS, "x0")
    g.communities(NS)  # 6 changes > 10 % of 54
    assert len(louvain_calls) == 2
    g.communities(NS)
    assert len(louvain_calls) == 2


def test_louvain_runs_on_the_heaviest_edges_only(louvain_calls: list[int]) -> None:
    g = EntityGraph(louvain_max_edges=3)
    g.add_many(NS, two_cliques().items())
    comm = g.communities(NS)
    assert louvain_calls == [3]
    assert set(comm) == set(g.graph(NS).nodes)  # everyone is still placed


def test_refresh_and_config_validation(louvain_calls: list[int]) -> None:
    g = build(two_cliques())
    g.refresh(NS)
    g.refresh("absent")
    assert len(louvain_calls) == 1
    with pytest.raises(ValueError):
        EntityGraph(refresh_fraction=-1)
    with pytest.raises(ValueError):
        EntityGraph(louvain_max_edges=0)


def test_communities_do_not_depend_on_insertion_order() -> None:
    items = list(two_cliques().items())
    a = build(dict(items)).communities(NS)
    b = build(dict(reversed(items))).communities(NS)
    assert a == b


def test_state_dict_round_trip_skips_louvain(louvain_calls: list[int]) -> None:
    g = build(two_cliques())
    g.add(NS, "late", ["kiwi", "apple"])
    comm = g.communities(NS)
    state = json.loads(json.dumps(g.state_dict()))
    assert len(louvain_calls) == 1
    for load_first in (False, True):
        reopened = EntityGraph()
        if load_first:
            reopened.load_state_dict(state)
        reopened.add_many(NS, [*two_cliques().items(), ("late", ["kiwi", "apple"])])
        if not load_first:
            reopened.load_state_dict(state)
        assert reopened.communities(NS) == comm
    assert len(louvain_calls) == 1


def test_state_survives_deletes_and_replaces(louvain_calls: list[int]) -> None:
    live = build({**two_cliques(), "gone": ["kiwi", "apple"], "moved": ["zinc", "lime"]})
    live.remove(NS, "gone")  # "kiwi" disappears with it
    live.add(NS, "moved", ["zinc", "argon"])  # "lime" too
    comm = live.communities(NS)
    state = live.state_dict()
    reopened = build({**two_cliques(), "moved": ["zinc", "argon"]})
    reopened.load_state_dict(state)
    assert reopened.communities(NS) == comm
    assert len(louvain_calls) == 1


def test_state_of_a_changed_graph_is_not_reused(louvain_calls: list[int]) -> None:
    g = build(two_cliques())
    g.communities(NS)
    state = g.state_dict()
    reopened = build({**two_cliques(), "extra": ["apple", "zinc"]})
    reopened.load_state_dict(state)
    reopened.communities(NS)
    assert len(louvain_calls) == 2


def test_bad_state_raises() -> None:
    g = EntityGraph()
    with pytest.raises(ValueError):
        g.load_state_dict({"version": 999, "namespaces": {}})
    with pytest.raises(ValueError):
        g.load_state_dict({"version": 1, "namespaces": []})


# -- personalised PageRank -------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_pagerank_matches_networkx(seed: int, damping: float) -> None:
    rng = random.Random(seed)
    g = nx.gnm_random_graph(25, 50, seed=seed)
    g.add_nodes_from(range(25, 28))  # dangling nodes
    for a, b in g.edges:
        g.edges[a, b]["weight"] = rng.randint(1, 5)
    restart = {v: 0.0 for v in g}
    restart[0], restart[3] = 2.0, 1.0
    total = sum(restart.values())
    expected = _pagerank_python(g, alpha=damping, personalization=restart, tol=1e-12, max_iter=1000)
    src, dst, w = [], [], []
    for a, b, wt in g.edges(data="weight"):
        src += [a, b]
        dst += [b, a]
        w += [wt, wt]
    p = np.array([restart[v] / total for v in range(28)])
    got = personalized_pagerank(
        28, np.array(src), np.array(dst), np.array(w, float), p, damping=damping, tol=1e-12
    )
    assert got == pytest.approx([expected[v] for v in range(28)], abs=1e-6)


# -- the signal ------------------------------------------------------------------------------


def test_docstring_examples() -> None:
    import doctest

    assert doctest.testmod(graph_mod).failed == 0
    assert doctest.testmod(entity_graph_mod).failed == 0


def test_graph_signal_is_a_signal() -> None:
    sig = GraphSignal(build())
    assert isinstance(sig, Signal)
    assert sig.name == "graph"


def test_reference_formula_on_a_small_graph() -> None:
    """Every entity is within two hops, so the neighbourhood is the whole component."""
    g = build()
    sig = GraphSignal(g)
    n = len(CORPUS)
    df = Counter(e for ents in CORPUS.values() for e in ents)

    def idf(e: str) -> float:
        return math.log1p((n - df[e] + 0.5) / (df[e] + 0.5))

    def nu(e: str) -> float:
        return idf(e) / math.log1p((n - 0.5) / 1.5)

    comp = g.graph(NS).subgraph(nx.node_connected_component(g.graph(NS), "wallet"))
    pi = _pagerank_python(
        comp, alpha=0.5, personalization={"wallet": 1.0}, tol=1e-12, max_iter=1000
    )
    rel = {e: pi[e] * nu(e) for e in comp}
    top_rel = max(rel.values())
    comm = g.communities(NS)
    expected = {}
    for mid, ents in CORPUS.items():
        d = nu("wallet") if "wallet" in ents else 0.0
        peers = [nu(e) for e in ents if e in rel and e != "wallet" and comm[e] == comm["wallet"]]
        c = 1 - math.prod(1 - p for p in peers)
        p = 1 - math.prod(1 - rel[e] / top_rel for e in ents if e in rel)
        expected[mid] = 0.6 * d + 0.1 * c + 0.3 * p
    got = sig.score(q("wallet"), list(CORPUS))
    assert got == pytest.approx(expected, abs=1e-5)
    assert got["m2"] > 0.15  # the decision memory, through colby and base
    assert all(got[d] == 0.0 for d in ("d0", "d1", "d2", "d3", "d4"))


def test_unknown_query_entities_give_zero() -> None:
    sig = GraphSignal(build())
    assert sig.top(q("nothing-like-it"), 10) == {}
    assert sig.top(q(), 10) == {}
    assert sig.score(q("nothing-like-it"), ["m0", "zz"]) == {"m0": 0.0, "zz": 0.0}
    assert sig.explain(q("nothing-like-it"), ["m0"]) == {"m0": ()}
    assert sig.top(q("wallet", namespace="absent"), 10) == {}
    assert sig.score(q("wallet", namespace="absent"), ["m0"]) == {"m0": 0.0}


def test_absent_entities_do_not_dilute() -> None:
    sig = GraphSignal(build())
    assert sig.score(q("wallet", "unknown"), ["m0"]) == sig.score(q("wallet"), ["m0"])


def test_rare_entities_count_more_than_hubs() -> None:
    mems = {f"h{i}": ["hub", f"x{i}"] for i in range(20)}
    mems["rare"] = ["gem", "hub"]
    sig = GraphSignal(build(mems))
    s = sig.score(q("gem", "hub"), ["rare", "h0"])
    assert s["rare"] > 2 * s["h0"] > 0


def test_allowed_filter() -> None:
    sig = GraphSignal(build())
    allowed = frozenset({"m2", "d0"})
    top = sig.top(q("wallet", allowed=allowed), 10)
    assert set(top) == {"m2"}
    assert set(sig.score(q("wallet", allowed=allowed), ["m0", "m2", "d0"])) == {"m2", "d0"}
    assert set(sig.explain(q("wallet", allowed=allowed), ["m0", "m2"])) == {"m2"}
    big = frozenset(CORPUS) | {f"z{i}" for i in range(100)}
    assert sig.top(q("wallet", allowed=big), 10) == sig.top(q("wallet"), 10)


def test_explain_lists_shared_then_related() -> None:
    sig = GraphSignal(build())
    ex = sig.explain(q("wallet", "fee"), ["m0", "m2", "d0", "unknown"])
    assert ex["m0"][0] == "wallet"
    assert set(ex["m0"]) == {"wallet", "colby", "base"}
    assert "fee" not in ex["m2"] and {"colby", "base"} <= set(ex["m2"])
    assert ex["d0"] == () and ex["unknown"] == ()


def random_corpus(seed: int, n: int = 400, vocab: int = 120) -> dict[str, list[str]]:
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    return {
        f"m{i}": [f"e{x}" for x in dict.fromkeys(rng.choice(vocab, rng.integers(1, 7), p=p))]
        for i in range(n)
    }


CONFIGS = [
    GraphConfig(),
    GraphConfig(min_hub_df=5, hub_fraction=0.05),  # several hubs: exercises the hub path
    GraphConfig(neighbours=3, second_hop=2, community=0.0),
    GraphConfig(direct=1.0, community=0.0, proximity=0.0),
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("config", CONFIGS)
def test_top_agrees_with_brute_force_score(seed: int, config: GraphConfig) -> None:
    corpus = random_corpus(seed)
    sig = GraphSignal(build(corpus), config)
    rng = random.Random(seed)
    for _ in range(15):
        ents = tuple(rng.sample([f"e{i}" for i in range(130)], rng.randint(1, 3)))
        every = sig.score(q(*ents), list(corpus))
        assert all(0.0 <= v <= 1.0 for v in every.values())
        top = sig.top(q(*ents), 10)
        assert list(top.values()) == sorted(top.values(), reverse=True)
        for mid, v in top.items():
            assert v == pytest.approx(every[mid], abs=1e-9)
        best = sorted((v for v in every.values() if v > 0), reverse=True)[:10]
        assert list(top.values()) == pytest.approx(best, abs=1e-9)


def test_hub_only_query_still_fills_top() -> None:
    mems = {f"m{i}": ["hub", f"x{i}"] for i in range(200)}
    sig = GraphSignal(build(mems), GraphConfig(min_hub_df=10))
    top = sig.top(q("hub"), 5)
    assert len(top) == 5
    assert len(set(top.values())) == 1


def test_namespace_isolation() -> None:
    g = build()
    sig = GraphSignal(g)
    queries = [q("wallet"), q("base", "fee"), q("colby"), q("marathon")]

    def snapshot() -> list[tuple[object, ...]]:
        return [
            (sig.top(x, 20), sig.score(x, list(CORPUS)), sig.explain(x, list(CORPUS)))
            for x in queries
        ]

    before = snapshot()
    comm = g.communities(NS)
    # Namespace B: the same ids, the same and more entities, heavy co-occurrence.
    other = {mid: [*ents, "wallet", "fee", "hub"] for mid, ents in CORPUS.items()}
    other |= {f"x{i}": ["wallet", "colby", "marathon", f"y{i}"] for i in range(300)}
    g.add_many("B", other.items())
    g.communities("B")
    assert snapshot() == before
    assert g.communities(NS) == comm
    assert GraphSignal(g).top(q("wallet", namespace="B"), 3)
    g.remove("B", "m0")
    assert sig.score(q("wallet"), list(CORPUS)) == before[0][1]


def test_scores_follow_writes() -> None:
    g = build()
    sig = GraphSignal(g)
    assert sig.score(q("wallet"), ["d0"])["d0"] == 0.0
    g.add(NS, "d0", ["melanie", "wallet"])
    assert sig.score(q("wallet"), ["d0"])["d0"] > 0.5
    g.remove(NS, "d0")
    assert "d0" not in sig.top(q("wallet"), 10)


def test_results_do_not_depend_on_insertion_order() -> None:
    corpus = random_corpus(7)
    items = list(corpus.items())
    shuffled = items[:]
    random.Random(1).shuffle(shuffled)
    a, b = GraphSignal(build(dict(items))), GraphSignal(build(dict(shuffled)))
    for ents in (("e0",), ("e5", "e9"), ("e30",)):
        assert a.top(q(*ents), 15) == pytest.approx(b.top(q(*ents), 15))


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="direct"):
        GraphConfig(direct=-1)
    with pytest.raises(ValueError, match="> 0"):
        GraphConfig(direct=0, community=0, proximity=0)
    with pytest.raises(ValueError, match="damping"):
        GraphConfig(damping=1.0)
    with pytest.raises(ValueError):
        GraphConfig(neighbours=float("nan"))  # type: ignore[arg-type]
    weights = GraphSignal(EntityGraph(), GraphConfig(direct=2, community=1, proximity=1))._w
    assert weights == pytest.approx((0.5, 0.25, 0.25))
