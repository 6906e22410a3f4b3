"""How a search finds its query's entities: matched against the graph, or extracted."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from norax_core import NoraxConfig, NoraxMemory
from norax_core.embedders import CallableEmbedder
from norax_core.entities import RuleBasedExtractor
from norax_core.errors import InvalidInputError
from norax_core.signals.entity_graph import EntityGraph, singular_forms

T0 = 1_700_000_000.0


class Counting(RuleBasedExtractor):
    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def extract_query(self, text: str) -> list[str]:
        self.queries.append(text)
        return super().extract_query(text)


def _embed(texts: Sequence[str]) -> np.ndarray:
    out = np.ones((len(texts), 4), dtype=np.float32)
    out[:, 1] = [len(t) for t in texts]
    return out


def _memory(ext: Counting, **config: object) -> NoraxMemory:
    emb = CallableEmbedder(_embed, name="len", dim=4)
    return NoraxMemory(embedder=emb, extractor=ext, config=NoraxConfig(**config))  # type: ignore[arg-type]


def test_default_matches_the_graph_without_the_extractor() -> None:
    ext = Counting()
    with _memory(ext) as mem:
        mem.add(["Colby picked TypeORM", "lunch was fine"], created_at=[T0, T0 + 1])
        (hit, *_) = mem.search("TypeORM for Colby?", weights={"bm25": 1.0, "graph": 1.0})
        assert ext.queries == []
        assert hit.signals["graph"] > 0 and hit.matched_entities == ("typeorm", "colby")


def test_extract_mode_runs_the_extractor_only_when_the_graph_counts() -> None:
    ext = Counting()
    with _memory(ext, query_entities="extract") as mem:
        mem.add(["Colby picked TypeORM", "lunch was fine"], created_at=[T0, T0 + 1])
        (hit, *_) = mem.search("TypeORM for Colby", weights={"bm25": 1.0, "dense": 1.0})
        assert ext.queries == [] and hit.signals["graph"] == 0.0
        assert hit.matched_entities == ()
        (hit, *_) = mem.search("TypeORM for Colby", weights={"bm25": 1.0, "graph": 1.0})
        assert ext.queries == ["TypeORM for Colby"]
        assert hit.signals["graph"] > 0 and "typeorm" in hit.matched_entities
        mem.candidates("TypeORM", weights={"dense": 1.0}, ids=[hit.id])  # a reranker's call
        assert ext.queries[-1] == "TypeORM"


def test_zero_graph_weight_matches_nothing() -> None:
    with _memory(Counting()) as mem:
        mem.add(["Colby picked TypeORM"], created_at=T0)
        (hit,) = mem.search("TypeORM for Colby", weights={"bm25": 1.0, "dense": 1.0})
        assert hit.signals["graph"] == 0.0 and hit.matched_entities == ()


def test_bad_mode_raises() -> None:
    with pytest.raises(InvalidInputError, match="query_entities"):
        NoraxConfig(query_entities="spacy")


# -- the matcher, on a small deterministic graph ---------------------------------------------

GRAPH = {
    "m0": ["colby smith", "colby", "smith", "wallet", "base"],
    "m1": ["new york", "marathon"],
    "m2": ["york", "minster"],
    "m3": ["visual studio code", "typeorm", "os.path.join", "@priya"],
    "m4": ["battery", "glass", "e-commerce", "commerce", "child", "hoodie"],
    "m5": ["team wallet", "payment", "list", "column", "security", "feature", "deadline"],
    "m6": ["turtles", "turtle", "ways"],
}


def matcher() -> EntityGraph:
    g = EntityGraph()
    g.add_many("ns", GRAPH.items())
    return g


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did we decide about the wallet?", ["wallet"]),
        ("Where are the wallets?", ["wallet"]),  # plural query word, lemmatised node
        ("Which batteries, glasses and hoodies?", ["battery", "glass", "hoodie"]),
        ("How are the children?", ["child"]),  # an irregular plural
        ("the turtles", ["turtle"]),  # the lemma wins over a plural node, as spaCy's would
        ("in many ways", []),  # the plural of a stop word
        ("Is the Team Wallet funded?", ["team wallet"]),  # a capitalised name: whole
        ("is the team wallet funded?", ["wallet"]),  # a lowercase compound: its head
        ("Did Colby Smith pay?", ["colby smith", "colby", "smith"]),  # parts linked to it
        ("Did Colby pay?", ["colby"]),
        ("Who ran in New York?", ["new york"]),  # "york" is not linked to "new york"
        ("York Minster", ["york", "minster"]),
        ("Set up Visual Studio Code with TypeORM", ["visual studio code", "typeorm"]),
        ("call os.path.join, ask @Priya", ["os.path.join", "@priya"]),
        ("any wallet-related e-commerce news", ["wallet", "e-commerce"]),
        ("Colby's wallet", ["colby", "wallet"]),
        ("Can you list the security features?", ["feature"]),  # a verb, then a modifier
        ("the list of features", ["list", "feature"]),  # "list" as a noun counts
        ("the updated deadline", ["deadline"]),  # a participle
        ("the weather in Paris", []),  # nothing in the graph: nothing matched
        ("", []),
    ],
)
def test_matcher_finds_graph_nodes(query: str, expected: list[str]) -> None:
    assert matcher().match_query("ns", query) == expected


def test_matcher_reads_only_its_namespace_and_follows_deletes() -> None:
    g = matcher()
    assert g.match_query("other", "the wallet") == []
    g.add("other", "x", ["sunset"])
    assert g.match_query("ns", "a sunset") == []
    assert g.match_query("other", "a sunset") == ["sunset"]
    g.remove("ns", "m5")
    assert g.match_query("ns", "the Team Wallet") == ["wallet"]
    g.remove("ns", "m0")
    assert g.match_query("ns", "the Team Wallet") == []
    space = g.space("ns")
    assert space is not None and space.max_words() == 3  # "visual studio code"
    g.remove("ns", "m3")
    assert space.max_words() == 2 and g.match_query("ns", "Visual Studio Code") == []


def test_every_node_names_itself() -> None:
    g = matcher()
    for ents in GRAPH.values():
        for name in ents:
            if name not in ("ways", "turtles"):  # a stop word's plural; a plural node
                assert name in g.match_query("ns", name.title()), name


def test_singular_forms() -> None:
    assert singular_forms("wallets") == ["wallet"]
    assert singular_forms("boss") == singular_forms("analysis") == singular_forms("cat") == []
    assert singular_forms("boxes") == ["boxe", "box"]
    assert singular_forms("people") == ["person"]
