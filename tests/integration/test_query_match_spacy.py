"""Query entities matched against a graph that the real spaCy pipeline built at write time."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from norax_core import NoraxConfig, NoraxMemory

pytestmark = pytest.mark.integration

NS = "team"
MEMORIES = [
    "Colby set up the team wallet on Base.",
    "Base fees are low enough for micro-payments.",
    "Colby decided to use Base chain for all payments.",
    "The backend uses TypeORM with Postgres.",
    "Priya Natarajan moved the launch review to Friday.",
    "We keep the API keys in HashiCorp Vault.",
]
QUERIES = {
    "What did we decide about the wallet?": {"wallet"},
    "Which wallets did Colby set up?": {"wallet", "colby"},  # a plural query word
    "Does TypeORM talk to Postgres?": {"typeorm", "postgres"},
    "When is Priya Natarajan's launch review?": {"priya natarajan", "priya", "natarajan"},
    "Where do we keep the API keys?": {"api", "key"},
}


@pytest.fixture
def stores(embedder, extractor):  # type: ignore[no-untyped-def]
    made = [
        NoraxMemory(embedder=embedder, extractor=extractor, config=NoraxConfig(query_entities=m))
        for m in ("match", "extract")
    ]
    for mem in made:
        mem.add(MEMORIES, namespace=NS, created_at=datetime(2026, 10, 3, tzinfo=timezone.utc))
    yield made
    for mem in made:
        mem.close()


def graph_nodes(mem: NoraxMemory) -> set[str]:
    return {e for m in mem.get(mem._indexes.graph.ids(NS)) for e in m.entities}


def matched(mem: NoraxMemory, query: str) -> set[str]:
    cands = mem.candidates(query, k=6, namespace=NS, weights="graph")
    return set(cands.query.entities)


@pytest.mark.parametrize("query", list(QUERIES))
def test_a_query_naming_a_graph_entity_gets_it_matched(stores, extractor, query: str) -> None:  # type: ignore[no-untyped-def]
    match, extract = stores
    nodes = graph_nodes(match)
    expected = QUERIES[query]
    assert expected <= nodes  # spaCy put them in the graph at write time
    got = matched(match, query)
    assert expected <= got and got <= nodes
    # Every entity spaCy finds in the query that the graph holds, the matcher finds too.
    assert set(extractor.extract_query(query)) & nodes <= got
    assert matched(extract, query) == set(extractor.extract_query(query))
    hits = match.search(query, k=3, namespace=NS, weights="graph")
    assert hits and set(hits[0].matched_entities) & expected
