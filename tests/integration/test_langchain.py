"""norax_langchain with the real local models: standard suite, LCEL chain, ingestion, convert."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_tests.integration_tests import RetrieversIntegrationTests

from norax_core import Explanation, NamedPeriod, NoraxMemory, QueryInfo, SearchResult, Weights
from norax_core.errors import DuplicateIdError, InvalidInputError, WeightsError
from norax_langchain import LangChainEmbedder, NoraxRetriever, add_documents
from norax_langchain._convert import (
    _document_to_memory,
    _result_to_document,
    _storable_metadata,
)

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)

DOCS = [
    Document(
        id="m1",
        page_content="The backend uses TypeORM with a Postgres database.",
        metadata={"topic": "backend", "kind": "semantic", "created_at": NOW - timedelta(days=40)},
    ),
    Document(
        id="m2",
        page_content="Colby decided to use Base chain for all payments.",
        metadata={"topic": "payments", "created_at": (NOW - timedelta(days=50)).isoformat()},
    ),
    Document(
        id="m3",
        page_content="Colby set up the team wallet on Base.",
        metadata={"topic": "payments", "created_at": (NOW - timedelta(days=2)).timestamp()},
    ),
    Document(
        id="m4",
        page_content="Priya prefers short status updates in bullet points.",
        metadata={"topic": "people", "kind": "semantic", "created_at": NOW - timedelta(days=100)},
    ),
    Document(
        id="m5",
        page_content="Deploys go through GitHub Actions after review.",
        metadata={"topic": "ops", "kind": "procedural", "created_at": NOW - timedelta(days=200)},
    ),
    Document(
        id="m6",
        page_content="We rejected Solana because nobody on the team writes Rust.",
        metadata={"topic": "payments", "created_at": NOW - timedelta(days=52)},
    ),
    Document(
        id="m7",
        page_content="The weekly sync moved from Monday to Tuesday morning.",
        metadata={"topic": "people", "created_at": NOW - timedelta(days=3)},
    ),
    Document(
        id="m8",
        page_content="Error E4711 means the licence server rejected the token.",
        metadata={"topic": "ops", "kind": "semantic", "created_at": NOW - timedelta(days=300)},
    ),
]


@pytest.fixture(scope="module")
def store(embedder, extractor) -> Iterator[NoraxMemory]:  # type: ignore[no-untyped-def]
    mem = NoraxMemory(embedder=embedder, extractor=extractor, weights="seed")
    add_documents(mem, DOCS, namespace="team")
    yield mem
    mem.close()


# -- the standard LangChain retriever suite -------------------------------------------------


class TestNoraxRetrieverStandard(RetrieversIntegrationTests):
    """langchain_tests' retriever suite, unmodified, over the 8-memory store."""

    memory: NoraxMemory

    @pytest.fixture(autouse=True)
    def _bind_store(self, store: NoraxMemory) -> None:
        self.memory = store

    @property
    def retriever_constructor(self) -> type[NoraxRetriever]:
        return NoraxRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": self.memory, "namespace": "team", "now": NOW}

    @property
    def retriever_query_example(self) -> str:
        return "Which chain does Colby use for payments?"


# -- behaviour -------------------------------------------------------------------------------


@pytest.fixture
def retriever(store: NoraxMemory) -> NoraxRetriever:
    return NoraxRetriever(memory=store, namespace="team", now=NOW, k=3)


def test_documents_carry_id_text_and_explanation(retriever: NoraxRetriever) -> None:
    docs = retriever.invoke("Who set up the team wallet?")
    assert [d.id for d in docs][0] == "m3"
    top = docs[0]
    assert top.page_content == "Colby set up the team wallet on Base."
    meta = top.metadata
    assert meta["topic"] == "payments"  # the memory's own metadata
    assert meta["kind"] == "episodic" and meta["namespace"] == "team"
    assert datetime.fromisoformat(meta["created_at"]) == NOW - timedelta(days=2)
    assert set(meta["signals"]) == {"bm25", "dense", "temporal", "graph"}
    assert meta["signals"]["temporal"] == pytest.approx(math.exp(-2 / 30))
    assert "colby" in meta["matched_entities"] or "wallet" in meta["matched_entities"]
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    # the fused score is the seed formula over the signals it reports
    expected = (
        0.25 * meta["signals"]["bm25"]
        + 0.35 * meta["signals"]["dense"]
        + 0.20 * meta["signals"]["temporal"]
        + 0.20 * meta["signals"]["graph"]
    )
    assert meta["score"] == pytest.approx(expected)


def test_search_options_override_per_call(retriever: NoraxRetriever, store: NoraxMemory) -> None:
    assert len(retriever.invoke("payments", k=1)) == 1
    assert retriever.invoke("payments", namespace="nobody") == []
    only_ops = retriever.invoke("what happened?", where={"topic": "ops"}, k=5)
    assert {d.id for d in only_ops} == {"m5", "m8"}
    recent = retriever.invoke("anything", weights="temporal", k=2)
    assert [d.id for d in recent] == ["m3", "m7"]
    later = retriever.invoke("anything", weights="temporal", k=1, now=NOW + timedelta(days=400))
    assert later[0].metadata["signals"]["temporal"] < recent[0].metadata["signals"]["temporal"]
    # what the retriever returns is what the store ranks
    direct = store.search("payments", k=3, namespace="team", now=NOW)
    assert [d.id for d in retriever.invoke("payments")] == [r.id for r in direct]


def test_keyword_only_memory_is_found(retriever: NoraxRetriever) -> None:
    docs = retriever.invoke("E4711", weights=Weights(1, 0, 0, 0), k=1)
    assert docs[0].id == "m8"


def test_unknown_option_and_bad_weights_raise(
    retriever: NoraxRetriever, store: NoraxMemory
) -> None:
    with pytest.raises(TypeError, match="top_k"):
        retriever.invoke("payments", top_k=2)
    with pytest.raises(ValueError, match="unknown preset"):
        NoraxRetriever(memory=store, weights="nope")
    with pytest.raises(ValueError):
        NoraxRetriever(memory=store, k=0)


async def test_async_matches_sync(retriever: NoraxRetriever) -> None:
    sync = retriever.invoke("Colby payments", k=3)
    asyn = await retriever.ainvoke("Colby payments", k=3)
    assert [(d.id, d.metadata) for d in asyn] == [(d.id, d.metadata) for d in sync]


def test_batch_runs_several_queries(retriever: NoraxRetriever) -> None:
    out = retriever.batch(["wallet", "deploys"], k=1)
    assert [docs[0].id for docs in out] == ["m3", "m5"]


# -- the retriever in an LCEL chain ----------------------------------------------------------


class PromptCapture(BaseCallbackHandler):
    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.prompts.extend(str(m.content) for batch in messages for m in batch)


def format_docs(docs: list[Document]) -> str:
    return "\n".join(f"- [{d.metadata['created_at'][:10]}] {d.page_content}" for d in docs)


PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer from these memories:\n{context}"), ("human", "Answer the question.")]
)


def test_retriever_in_an_lcel_chain(retriever: NoraxRetriever) -> None:
    capture = PromptCapture()
    model = FakeListChatModel(responses=["Colby set it up."])
    chain = retriever | format_docs | PROMPT | model | StrOutputParser()
    answer = chain.invoke("Who set up the team wallet?", config={"callbacks": [capture]})
    assert answer == "Colby set it up."
    (system, _human) = capture.prompts
    assert "- [2026-11-27] Colby set up the team wallet on Base." in system


async def test_retriever_in_an_lcel_chain_async(retriever: NoraxRetriever) -> None:
    capture = PromptCapture()
    model = FakeListChatModel(responses=["Tuesday."])
    chain = retriever | format_docs | PROMPT | model | StrOutputParser()
    answer = await chain.ainvoke("When is the weekly sync?", config={"callbacks": [capture]})
    assert answer == "Tuesday."
    assert "The weekly sync moved from Monday to Tuesday morning." in capture.prompts[0]


# -- ingestion and the embedder wrapper ------------------------------------------------------


def test_add_documents_keeps_ids_times_kinds_and_storable_metadata(embedder, extractor) -> None:  # type: ignore[no-untyped-def]
    with NoraxMemory(embedder=embedder, extractor=extractor) as mem:
        docs = [
            Document(
                id="a",
                page_content="Alpha release shipped.",
                metadata={
                    "created_at": "2026-01-02T03:04:05+00:00",
                    "tags": ["x", "y"],  # a list: not storable
                    "score": 0.9,  # a search artefact: not stored
                    "norax_secret": "x",  # reserved prefix: not stored
                    "day": date(2026, 1, 2),
                    "n": 3,
                },
            ),
            Document(page_content="No id here.", metadata={"kind": "scratchpad"}),
        ]
        ids = add_documents(mem, docs, namespace="ns")
        assert ids[0] == "a" and len(ids[1]) == 32
        a, b = mem.get(ids)
        assert a.created_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        assert dict(a.metadata) == {"day": "2026-01-02", "n": 3}
        assert (a.kind, b.kind, a.namespace) == ("episodic", "scratchpad", "ns")
        assert add_documents(mem, [], namespace="ns") == []
        with pytest.raises(DuplicateIdError):
            add_documents(mem, docs[:1], namespace="ns")
        add_documents(
            mem, [Document(id="a", page_content="Alpha v2.")], namespace="ns", upsert=True
        )
        assert mem.get("a")[0].text == "Alpha v2."
        assert add_documents(mem, docs[:1], namespace="ns", kind="semantic", upsert=True) == ["a"]
        assert mem.get("a")[0].kind == "semantic"
        with pytest.raises(InvalidInputError, match="another namespace"):
            add_documents(mem, docs[:1], upsert=True)  # no moving a memory between tenants


def test_retrieved_documents_reingest_as_the_same_memories(
    retriever: NoraxRetriever,
    embedder,
    extractor,  # type: ignore[no-untyped-def]
) -> None:
    docs = retriever.invoke("payments", k=3)
    with NoraxMemory(embedder=embedder, extractor=extractor) as copy:
        add_documents(copy, docs, namespace="team")
        for doc, mem in zip(docs, copy.get([d.id for d in docs]), strict=True):
            original = retriever.memory.get(doc.id or "")[0]
            assert (mem.text, mem.kind, mem.created_at) == (
                original.text,
                original.kind,
                original.created_at,
            )
            assert dict(mem.metadata) == dict(original.metadata)


async def test_langchain_embeddings_as_norax_embedder(extractor) -> None:  # type: ignore[no-untyped-def]
    fake = DeterministicFakeEmbedding(size=32)
    emb = LangChainEmbedder(fake)
    assert (emb.name, emb.dim) == ("langchain:DeterministicFakeEmbedding", 32)
    vec = emb.embed(["hello"])
    assert vec.shape == (1, 32)
    assert float((vec**2).sum()) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(await emb.aembed(["hello"]), vec, atol=1e-6)
    with NoraxMemory(embedder=emb, extractor=extractor, weights="dense") as mem:
        add_documents(mem, DOCS[:3])
        # the fake is deterministic per text: the exact text is its own nearest neighbour
        got = NoraxRetriever(memory=mem, k=1).invoke(DOCS[1].page_content)
        assert got[0].id == "m2"
        got = await NoraxRetriever(memory=mem, k=1).ainvoke(DOCS[2].page_content)
        assert got[0].id == "m3"
    assert LangChainEmbedder(fake, name="mine").name == "mine"


# -- conversion functions --------------------------------------------------------------------


def make_result(**overrides: Any) -> SearchResult:
    fields: dict[str, Any] = {
        "id": "m1",
        "text": "Colby set up the wallet.",
        "kind": "episodic",
        "created_at": datetime(2026, 1, 2, tzinfo=timezone.utc),
        "namespace": "team",
        "metadata": {"topic": "payments", "score": "user value"},
        "entities": ("colby", "wallet"),
        "score": 0.5,
        "signals": {"bm25": 0.1, "dense": 0.2, "temporal": 0.3, "graph": 0.4},
        "matched_entities": ("colby",),
        "query_plan": QueryInfo(
            "temporal",
            (NamedPeriod("2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00", "in january"),),
            ("Colby",),
        ),
        "explanation": Explanation(0.4, 0.15, -0.05),
    }
    return SearchResult(**{**fields, **overrides})


def test_result_to_document() -> None:
    doc = _result_to_document(make_result())
    assert doc.id == "m1" and doc.page_content == "Colby set up the wallet."
    assert doc.metadata == {
        "topic": "payments",
        "score": 0.5,  # the search's keys replace same-named user keys
        "kind": "episodic",
        "created_at": "2026-01-02T00:00:00+00:00",
        "namespace": "team",
        "inferred_kind": "",
        "signals": {"bm25": 0.1, "dense": 0.2, "temporal": 0.3, "graph": 0.4},
        "matched_entities": ["colby"],
        "query_plan": {
            "intent": "temporal",
            "periods": [
                {
                    "start": "2026-01-01T00:00:00+00:00",
                    "end": "2026-02-01T00:00:00+00:00",
                    "text": "in january",
                }
            ],
            "entities": ["Colby"],
            "weights_intent": None,
        },
        "explanation": {
            "fused": 0.4,
            "context": 0.15,
            "bridges": 0.0,
            "period": 0.0,
            "latest_wins": -0.05,
            "supersede": 0.0,
            "turns": 0.0,
            "exchange": 0.0,
            "lane": 0.0,
        },
    }


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("text", "text"),
        (True, True),
        (7, 7),
        (2.5, 2.5),
        (2**63, None),
        (float("nan"), None),
        (float("inf"), None),
        (None, None),
        ([1, 2], None),
        ({"a": 1}, None),
        (datetime(2026, 1, 2, 3, 4, tzinfo=timezone.utc), "2026-01-02T03:04:00+00:00"),
        (date(2026, 1, 2), "2026-01-02"),
        (object(), None),
    ],
)
def test_storable_metadata_values(value: object, kept: object) -> None:
    got = _storable_metadata({"key": value})
    assert got == ({} if kept is None else {"key": kept})


def test_storable_metadata_keys() -> None:
    got = _storable_metadata({"ok": 1, "norax_kind": "x", "": 2, 3: 4, "skip": 5}, skip=("skip",))
    assert got == {"ok": 1}


def test_document_to_memory() -> None:
    doc = Document(
        id="d",
        page_content="text",
        metadata={"when": 1.0, "kind": "semantic", "signals": {}, "namespace": "x", "a": "b"},
    )
    assert _document_to_memory(doc, "when") == ("d", "text", 1.0, "semantic", {"a": "b"})
    bare = Document(page_content="t", metadata={"kind": 3})
    assert _document_to_memory(bare, "created_at") == (None, "t", None, None, {})


def test_bad_weights_type_is_rejected(store: NoraxMemory) -> None:
    with pytest.raises(WeightsError):
        NoraxRetriever(memory=store, weights={"bm25": 1.0}).invoke("x", weights={"nope": 1.0})
