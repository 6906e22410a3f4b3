"""EntityGraph.neighbourhood and mentions (the inspector's picture) against the full graph."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from norax_core.signals.graph import EntityGraph

NS = "ns"
WORDS = [f"e{i}" for i in range(30)]


def reference(full: nx.Graph, entities: list[str], limit: int) -> nx.Graph:
    """The subgraph induced by the entities and each one's ``limit`` heaviest neighbours."""
    keep = {e for e in entities if e in full}
    for e in list(keep):
        nbrs = sorted(full[e].items(), key=lambda bw: (-bw[1]["weight"], bw[0]))
        keep.update(b for b, _ in nbrs[:limit])
    return full.subgraph(keep)


def build(seed: int) -> tuple[EntityGraph, dict[str, list[str]]]:
    rng = random.Random(seed)
    memories = {f"m{i}": rng.sample(WORDS, rng.randint(0, 5)) for i in range(60)}
    g = EntityGraph()
    for mid, ents in memories.items():
        g.add(NS, mid, ents)
    for mid in rng.sample(sorted(memories), 10):  # deletes leave free rows and ids behind
        g.remove(NS, mid)
        del memories[mid]
    return g, memories


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("limit", [1, 3, 50])
def test_neighbourhood_is_the_induced_subgraph_of_the_strongest_neighbours(
    seed: int, limit: int
) -> None:
    g, memories = build(seed)
    full = g.graph(NS)
    mid = next(m for m, ents in memories.items() if ents)
    entities = [*g.entities_of(NS, mid), "not-an-entity"]
    got = g.neighbourhood(NS, entities, limit)
    want = reference(full, entities, limit)
    assert sorted(got.nodes) == sorted(want.nodes)
    assert {frozenset(e) for e in got.edges} == {frozenset(e) for e in want.edges}
    for a, b, w in want.edges(data="weight"):
        assert got[a][b]["weight"] == w
    for node, data in got.nodes(data=True):
        assert data["count"] == full.nodes[node]["count"]
        assert data["community"] == full.nodes[node]["community"]
        assert data["seed"] == (node in entities)


@pytest.mark.parametrize("seed", range(3))
def test_mentions_lists_the_memories_of_an_entity(seed: int) -> None:
    g, memories = build(seed)
    for e in WORDS:
        assert g.mentions(NS, e) == sorted(m for m, ents in memories.items() if e in ents)
    assert g.mentions(NS, "nope") == []
    assert g.mentions("other", "e1") == []


def test_an_empty_namespace_has_no_neighbourhood() -> None:
    g = EntityGraph()
    assert len(g.neighbourhood(NS, ["a"])) == 0
    g.add(NS, "m", ["a", "b"])
    assert len(g.neighbourhood("other", ["a"])) == 0
    assert sorted(g.neighbourhood(NS, ["a"]).nodes) == ["a", "b"]
