"""Entity extraction and the graph signal with the real en_core_web_sm pipeline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from norax_core.entities import EntityExtractor, SpacyExtractor, load_extractor
from norax_core.signals.base import Query
from norax_core.signals.graph import EntityGraph, GraphSignal

pytestmark = pytest.mark.integration

DEFAULT_MODEL = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "en_core_web_sm-3.8.0"
)


def model_location() -> str:
    return os.environ.get("NORAX_SPACY_MODEL") or str(DEFAULT_MODEL)


@pytest.fixture(scope="module")
def extractor() -> EntityExtractor:
    model = model_location()
    if ("/" in model or os.sep in model) and not Path(model).exists():
        pytest.skip(f"spaCy model folder {model} is absent (set NORAX_SPACY_MODEL)")
    return load_extractor(model)


def test_loads_the_real_pipeline(extractor: EntityExtractor) -> None:
    assert isinstance(extractor, SpacyExtractor)
    assert extractor.name.startswith("spacy:en_core_web_sm")
    assert extractor.name.endswith("-3.8.0")
    assert "parser" not in extractor.nlp.pipe_names  # excluded at load: POS-tag noun heads


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Sam Altman spoke at the OpenAI conference in San Francisco.",
            ["sam altman", "sam", "altman", "openai", "conference", "san francisco"],
        ),
        (
            "Jordan prefers PostgreSQL over MongoDB for the analytics warehouse.",
            ["jordan", "postgresql", "mongodb", "warehouse"],
        ),
        (
            "Priya migrated the billing service from TypeORM to Prisma last week.",
            ["priya", "service", "typeorm", "prisma"],
        ),
        (
            "We renamed user_id to account_id and call os.path.join everywhere.",
            ["user_id", "account_id", "os.path.join"],
        ),
        (
            "Send the refund to 0xAbC123 and ping @treasury_bot about #payments.",
            ["refund", "0xabc123", "@treasury_bot", "#payments"],
        ),
        (
            "Maria's daughter started violin lessons at Juilliard on 3 May 2023.",
            ["maria", "daughter", "lesson", "juilliard"],
        ),
        ("I bought new running shoes for the Berlin marathon.", ["shoe", "berlin", "marathon"]),
    ],
)
def test_extracts_names_products_identifiers_and_nouns(
    extractor: EntityExtractor, text: str, expected: list[str]
) -> None:
    got = extractor.extract_query(text)
    assert [e for e in got if e in expected] == expected  # all present, in text order
    assert not {"2023", "may", "3", "we", "i", "the"} & set(got)


def test_normalisation_meets(extractor: EntityExtractor) -> None:
    texts = ["Where is the wallet?", "Wallet found.", "I lost two wallets", "Colby's wallet"]
    out = extractor.extract(texts)
    assert all("wallet" in ents for ents in out)
    assert "colby" in out[3]


def test_batches_and_queries_agree(extractor: EntityExtractor) -> None:
    texts = [f"Colby moved {n} wallets to Base" for n in range(10)] + ["", "ok"]
    batched = extractor.extract(texts, batch_size=4)
    assert batched == [extractor.extract_query(t) for t in texts]


def test_never_raises_on_odd_input(extractor: EntityExtractor) -> None:
    odd = [
        "\x00\x00 wallet \x07\x1b[31m red",
        "lone \udc80 surrogate",
        "\u202e\u200b🎉 ünïcödé Zürich",
        "wallet " * 150_000,  # ~1 MB: capped at MAX_CHARS before spaCy
    ]
    out = extractor.extract(odd)
    assert "wallet" in out[0] and out[3] == ["wallet"]


def test_parser_mode_finds_similar_heads() -> None:
    model = model_location()
    if ("/" in model or os.sep in model) and not Path(model).exists():
        pytest.skip(f"spaCy model folder {model} is absent")
    parser = load_extractor(model, noun_mode="parser")
    assert "parser" in parser.nlp.pipe_names  # type: ignore[attr-defined]
    got = parser.extract_query("Colby decided to use Base chain for all payments")
    assert {"colby", "base", "payment"} <= set(got)


# -- the graph built from real extraction -----------------------------------------------------

DISTRACTORS = [
    "Melanie painted a sunset over the lake last weekend.",
    "Caroline joined a pottery class at the community center.",
    "The new espresso machine in the kitchen makes great coffee.",
    "Jordan is training for the Boston marathon in April.",
    "Our cat knocked the plant off the windowsill again.",
    "I finished reading Dune and started the sequel.",
    "The kids built a treehouse in the backyard.",
    "We booked flights to Lisbon for the summer vacation.",
    "My guitar needs new strings before the concert.",
    "The dentist appointment got moved to Thursday.",
    "Grandma's lasagna recipe needs more basil.",
]

# (memories: the direct hit first, then memories related only through the graph; query)
CASES = {
    "seed": (
        [
            "Colby set up the team wallet on Base",
            "Colby decided to use Base chain for all payments",
            "Base fees are low enough for micro-payments",
        ],
        "What did we decide about the wallet?",
    ),
    "code": (
        [
            "Priya migrated the billing service from TypeORM to Prisma.",
            "The Prisma schema now names columns in snake_case like account_id.",
            "We renamed user_id to account_id in the billing service.",
        ],
        "Who touched TypeORM?",
    ),
    "address": (
        [
            "Send the refund to 0xabc123 and ping @treasury_bot when done.",
            "The @treasury_bot posts every multisig transaction to the finance channel.",
        ],
        "Where does 0xabc123 get reported?",
    ),
    "people": (
        [
            "Juilliard recitals are held in the spring at Lincoln Center.",
            "Maria's daughter Sofia started violin lessons at Juilliard.",
        ],
        "When are the recitals?",
    ),
}


def build(extractor: EntityExtractor, texts: list[str], namespace: str = "a") -> EntityGraph:
    g = EntityGraph()
    g.add_many(
        namespace, zip([f"t{i}" for i in range(len(texts))], extractor.extract(texts), strict=True)
    )
    return g


def query(extractor: EntityExtractor, text: str, namespace: str = "a") -> Query:
    return Query(
        text=text, namespace=namespace, now=0.0, entities=tuple(extractor.extract_query(text))
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_graph_signal_reaches_related_memories(extractor: EntityExtractor, case: str) -> None:
    memories, text = CASES[case]
    g = build(extractor, memories + DISTRACTORS)
    sig = GraphSignal(g)
    q = query(extractor, text)
    ids = g.ids("a")
    scores = sig.score(q, ids)
    related = [f"t{i}" for i in range(len(memories))]
    distractors = [i for i in ids if i not in related]
    assert scores["t0"] > 0.5  # shares the query's entity
    for mid in related[1:]:  # reached through the graph only: clearly positive
        assert scores[mid] > 0.1, (mid, scores)
        assert sig.explain(q, [mid])[mid]  # and it can say through which entities
    assert all(scores[d] < 0.02 for d in distractors), scores
    top = sig.top(q, 5)
    assert list(top)[0] == "t0"
    assert set(top) == {m for m in related if scores[m] > 0}


def test_seed_example_decision_memory(extractor: EntityExtractor) -> None:
    memories, text = CASES["seed"]
    g = build(extractor, memories + DISTRACTORS)
    q = query(extractor, text)
    assert q.entities == ("wallet",)
    sig = GraphSignal(g)
    decision = "t1"
    assert sig.score(q, [decision])[decision] > 0.15
    assert {"colby", "base"} <= set(sig.explain(q, [decision])[decision])


def test_graph_after_adds_and_deletes(extractor: EntityExtractor) -> None:
    memories = CASES["seed"][0]
    g = build(extractor, memories + DISTRACTORS[:3])
    nxg = g.graph("a")
    assert nxg.nodes["base"]["count"] == 3
    assert nxg.nodes["colby"]["count"] == 2
    assert nxg.edges["colby", "base"]["weight"] == 2
    assert nxg.edges["wallet", "colby"]["weight"] == 1
    comm = g.communities("a")
    assert comm["wallet"] == comm["colby"] == comm["base"]
    assert comm["wallet"] != comm["sunset"]
    g.remove("a", "t1")  # "Colby decided to use Base chain for all payments"
    nxg = g.graph("a")
    assert nxg.nodes["colby"]["count"] == 1
    assert nxg.edges["colby", "base"]["weight"] == 1
    assert "chain" not in nxg
    assert g.count("a") == len(memories) + 2


def test_namespace_isolation(extractor: EntityExtractor) -> None:
    memories, text = CASES["seed"]
    g = build(extractor, memories + DISTRACTORS)
    sig = GraphSignal(g)
    q = query(extractor, text)
    ids = g.ids("a")
    before = (sig.top(q, 10), sig.score(q, ids), g.communities("a"))
    # Namespace B repeats the ids and piles the same entities together.
    other = [f"The wallet, Base and Colby again, version {i}" for i in range(40)]
    other += ["Colby keeps the wallet next to the espresso machine and the guitar"]
    names = ids + [f"b{i}" for i in range(len(other) - len(ids))]  # A's ids, reused
    g.add_many("b", zip(names, extractor.extract(other), strict=True))
    g.communities("b")
    assert GraphSignal(g).top(query(extractor, text, "b"), 3)
    assert (sig.top(q, 10), sig.score(q, ids), g.communities("a")) == before
