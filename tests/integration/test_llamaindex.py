"""norax_llamaindex with the real local models: retriever, query engine, reranking, convert."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import (
    Document,
    ImageNode,
    MetadataMode,
    NodeWithScore,
    QueryBundle,
    TextNode,
)

from norax_core import Embedder, Explanation, NoraxMemory, QueryInfo, SearchResult, Weights
from norax_core.errors import DuplicateIdError, InvalidInputError, WeightsError
from norax_llamaindex import LlamaIndexEmbedder, NoraxPostprocessor, NoraxRetriever, add_nodes
from norax_llamaindex._convert import (
    _node_to_memory,
    _reranked,
    _result_to_node,
    _storable_metadata,
)

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


class MiniLM(BaseEmbedding):
    """A LlamaIndex embedding model around Norax's local all-MiniLM-L6-v2."""

    _inner: Any = PrivateAttr()

    def __init__(self, inner: Embedder) -> None:
        super().__init__(model_name=inner.name)
        self._inner = inner

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._inner.embed([query])[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return (await self._inner.aembed([query]))[0].tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._inner.embed([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._inner.embed(texts).tolist()


@pytest.fixture
def minilm(embedder: Embedder) -> MiniLM:
    return MiniLM(embedder)


@pytest.fixture(autouse=True)
def offline_settings(monkeypatch: pytest.MonkeyPatch, minilm: MiniLM) -> None:
    """Nothing may reach for OpenAI: a mock LLM and the local embedding model."""
    monkeypatch.setattr(Settings, "_llm", MockLLM())
    monkeypatch.setattr(Settings, "_embed_model", minilm)


def dated(node_id: str, text: str, days: float, **metadata: Any) -> TextNode:
    when = (NOW - timedelta(days=days)).isoformat()
    return TextNode(id_=node_id, text=text, metadata={"created_at": when, **metadata})


TEAM = [
    dated("m1", "The backend uses TypeORM with a Postgres database.", 40, kind="semantic"),
    dated("m2", "Colby decided to use Base chain for all payments.", 50, topic="payments"),
    dated("m3", "Colby set up the team wallet on Base.", 2, topic="payments"),
    dated("m4", "Priya prefers short status updates in bullet points.", 100, kind="semantic"),
    dated("m5", "Deploys go through GitHub Actions after review.", 200, kind="procedural"),
    dated("m6", "The weekly sync moved from Monday to Tuesday morning.", 3),
]


@pytest.fixture(scope="module")
def store(embedder, extractor) -> Iterator[NoraxMemory]:  # type: ignore[no-untyped-def]
    mem = NoraxMemory(embedder=embedder, extractor=extractor, weights="seed")
    add_nodes(mem, TEAM, namespace="team")
    yield mem
    mem.close()


# -- the retriever ---------------------------------------------------------------------------


def test_retriever_returns_memories_as_scored_text_nodes(store: NoraxMemory) -> None:
    retriever = NoraxRetriever(store, similarity_top_k=3, namespace="team", now=NOW)
    got = retriever.retrieve("Who set up the team wallet?")
    assert len(got) == 3 and got[0].node.node_id == "m3"
    top = got[0]
    assert isinstance(top.node, TextNode)
    assert top.node.get_content() == "Colby set up the team wallet on Base."
    meta = top.node.metadata
    assert top.score == meta["score"]
    assert meta["topic"] == "payments" and meta["namespace"] == "team"
    assert meta["signals"]["temporal"] == pytest.approx(math.exp(-2 / 30))
    # the LLM sees the text with kind and date, not the search internals
    llm_text = top.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "created_at: 2026-11-27" in llm_text and "signals" not in llm_text
    assert [n.score for n in got] == sorted((n.score or 0.0 for n in got), reverse=True)
    direct = store.search("Who set up the team wallet?", k=3, namespace="team", now=NOW)
    assert [n.node.node_id for n in got] == [r.id for r in direct]


async def test_retriever_async_matches_sync(store: NoraxMemory) -> None:
    retriever = NoraxRetriever(store, similarity_top_k=4, namespace="team", now=NOW)
    sync = retriever.retrieve("payments on Base")
    asyn = await retriever.aretrieve(QueryBundle("payments on Base"))
    assert [(n.node.node_id, n.score) for n in asyn] == [(n.node.node_id, n.score) for n in sync]


def test_retriever_options(store: NoraxMemory) -> None:
    recent = NoraxRetriever(
        store, similarity_top_k=2, namespace="team", weights="temporal", now=NOW
    )
    assert [n.node.node_id for n in recent.retrieve("anything")] == ["m3", "m6"]
    only = NoraxRetriever(store, namespace="team", where={"topic": "payments"}, now=NOW)
    assert {n.node.node_id for n in only.retrieve("what happened")} == {"m2", "m3"}
    assert NoraxRetriever(store, namespace="nobody").retrieve("x") == []
    with pytest.raises(InvalidInputError):
        NoraxRetriever(store, similarity_top_k=0)
    with pytest.raises(WeightsError):
        NoraxRetriever(store, weights="nope")


def test_retriever_in_a_query_engine(store: NoraxMemory) -> None:
    retriever = NoraxRetriever(store, similarity_top_k=2, namespace="team", now=NOW)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("Who set up the team wallet?")
    # MockLLM answers with the prompt it got: the memory reached it
    assert "Colby set up the team wallet on Base." in str(response)
    assert response.source_nodes[0].node.node_id == "m3"


async def test_retriever_in_a_query_engine_async(store: NoraxMemory) -> None:
    retriever = NoraxRetriever(store, similarity_top_k=2, namespace="team", now=NOW)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = await engine.aquery("When is the weekly sync?")
    assert "The weekly sync moved from Monday to Tuesday morning." in str(response)


# -- the postprocessor over a VectorStoreIndex -----------------------------------------------


ERRORS = [
    dated("timeout", "The checkout service keeps failing with a timeout error.", 30),
    dated("catalogue", "When the app shows an error code, look it up in the error catalogue.", 40),
    dated("db", "Database errors during the nightly migration were caused by a missing index.", 50),
    dated("login", "Users see an authentication error if their session cookie has expired.", 60),
    dated("e4711", "E4711 is raised by the licence checker.", 200),
    dated("lunch", "Lunch for the offsite: twelve vegetarian wraps.", 5),
]
E4711_QUERY = "What does error code E4711 mean?"

STANDUP = [
    dated("old", "The team standup is at 9:00 every Monday in room 4.", 700),
    dated("new", "Standup moved to 10:30.", 2),
    dated("review", "The design review happens on Thursdays.", 20),
    dated("lunch", "Lunch for the offsite: twelve vegetarian wraps.", 5),
    dated("planning", "The quarterly planning meeting is in March.", 90),
]
STANDUP_QUERY = "When is the team standup?"
RECENCY = Weights(bm25=0.0, dense=0.5, temporal=0.5, graph=0.0)


def vector_hits(nodes: list[TextNode], query: str, k: int) -> list[NodeWithScore]:
    return VectorStoreIndex(nodes).as_retriever(similarity_top_k=k).retrieve(query)


@pytest.fixture(scope="module")
def e4711_hits(embedder) -> list[NodeWithScore]:  # type: ignore[no-untyped-def]
    previous, Settings._embed_model = Settings._embed_model, MiniLM(embedder)
    try:
        return vector_hits(ERRORS, E4711_QUERY, 5)
    finally:
        Settings._embed_model = previous


def test_keyword_only_node_rises_to_the_top(e4711_hits: list[NodeWithScore], extractor) -> None:  # type: ignore[no-untyped-def]
    ids = [n.node.node_id for n in e4711_hits]
    assert "e4711" in ids and ids[0] != "e4711"  # the embedding model alone misses it
    post = NoraxPostprocessor(top_n=3, weights="seed", now=NOW, extractor=extractor)
    got = post.postprocess_nodes(e4711_hits, query_str=E4711_QUERY)
    assert len(got) == 3 and got[0].node.node_id == "e4711"
    assert got[0].node.metadata["signals"]["bm25"] > 0.9  # "error code" twice scores 1.0
    assert [n.score for n in got] == sorted((n.score or 0.0 for n in got), reverse=True)


async def test_keyword_only_node_rises_async(e4711_hits: list[NodeWithScore], extractor) -> None:  # type: ignore[no-untyped-def]
    post = NoraxPostprocessor(top_n=3, weights="seed", now=NOW, extractor=extractor)
    sync = post.postprocess_nodes(e4711_hits, query_str=E4711_QUERY)
    asyn = await post.apostprocess_nodes(e4711_hits, query_str=E4711_QUERY)
    assert [(n.node.node_id, n.score) for n in asyn] == [(n.node.node_id, n.score) for n in sync]
    assert asyn[0].node.node_id == "e4711"


def test_recent_node_rises_to_the_top(minilm: MiniLM, extractor) -> None:  # type: ignore[no-untyped-def]
    hits = vector_hits(STANDUP, STANDUP_QUERY, 4)
    assert hits[0].node.node_id == "old"
    post = NoraxPostprocessor(top_n=2, weights=RECENCY, now=NOW, extractor=extractor)
    got = post.postprocess_nodes(hits, query_str=STANDUP_QUERY)
    assert got[0].node.node_id == "new"
    assert got[0].node.metadata["signals"]["temporal"] == pytest.approx(math.exp(-2 / 30))


def test_postprocessor_in_a_query_engine(minilm: MiniLM, extractor) -> None:  # type: ignore[no-untyped-def]
    index = VectorStoreIndex(STANDUP)
    post = NoraxPostprocessor(top_n=1, weights=RECENCY, now=NOW, extractor=extractor)
    engine = index.as_query_engine(similarity_top_k=4, node_postprocessors=[post], llm=MockLLM())
    response = engine.query(STANDUP_QUERY)
    assert [n.node.node_id for n in response.source_nodes] == ["new"]
    assert "Standup moved to 10:30." in str(response)


def test_input_nodes_are_not_changed(e4711_hits: list[NodeWithScore], extractor) -> None:  # type: ignore[no-untyped-def]
    before = [
        (n.score, dict(n.node.metadata), list(n.node.excluded_llm_metadata_keys))
        for n in e4711_hits
    ]
    NoraxPostprocessor(top_n=5, now=NOW, extractor=extractor).postprocess_nodes(
        e4711_hits, query_str=E4711_QUERY
    )
    after = [
        (n.score, dict(n.node.metadata), list(n.node.excluded_llm_metadata_keys))
        for n in e4711_hits
    ]
    assert after == before


def test_missing_time_scores_zero_and_bad_time_raises(extractor) -> None:  # type: ignore[no-untyped-def]
    nodes = [
        NodeWithScore(node=TextNode(id_="a", text="Standup moved to 10:30."), score=0.5),
        NodeWithScore(node=dated("b", "Standup is at 9:00.", 1), score=0.4),
        NodeWithScore(node=dated("c", "Standup is in room 4.", 1), score=0.3),
    ]
    post = NoraxPostprocessor(top_n=3, now=NOW, extractor=extractor)
    got = {
        n.node.node_id: n.node.metadata["signals"]
        for n in post.postprocess_nodes(nodes, query_str="standup")
    }
    assert got["a"]["temporal"] == 0.0 and got["b"]["temporal"] > 0.9
    bad = [NodeWithScore(node=TextNode(id_="x", text="t", metadata={"created_at": "soon"}))]
    with pytest.raises(InvalidInputError, match="time of 'x'"):
        post.postprocess_nodes(bad, query_str="standup")


def test_time_key_kind_key_and_epoch_times(extractor) -> None:  # type: ignore[no-untyped-def]
    ten_days = (NOW - timedelta(days=10)).timestamp()
    nodes = [
        NodeWithScore(
            node=TextNode(id_="p", text="a", metadata={"ts": ten_days, "type": "procedural"})
        ),
        NodeWithScore(node=TextNode(id_="e", text="b", metadata={"ts": ten_days})),
        NodeWithScore(node=TextNode(id_="d", text="c", metadata={"ts": date(2026, 11, 19)})),
    ]
    post = NoraxPostprocessor(
        top_n=3,
        time_key="ts",
        kind_key="type",
        default_kind="semantic",
        now=NOW,
        extractor=extractor,
    )
    got = {
        n.node.node_id: n.node.metadata["signals"]["temporal"]
        for n in post.postprocess_nodes(nodes, query_str="x")
    }
    assert got["p"] == pytest.approx(math.exp(-10 / 365))
    assert got["e"] == pytest.approx(math.exp(-10 / 180))
    assert got["d"] == pytest.approx(math.exp(-10.5 / 180))


def test_duplicates_empty_input_and_missing_query(extractor) -> None:  # type: ignore[no-untyped-def]
    post = NoraxPostprocessor(top_n=5, now=NOW, extractor=extractor)
    node = dated("a", "Standup moved to 10:30.", 1)
    twice = [NodeWithScore(node=node, score=0.9), NodeWithScore(node=node, score=0.1)]
    assert [n.node.node_id for n in post.postprocess_nodes(twice, query_str="standup")] == ["a"]
    assert post.postprocess_nodes([], query_str="standup") == []
    with pytest.raises(ValueError, match="needs the query"):
        post.postprocess_nodes(twice)


def test_nodes_without_text_score_zero_on_text_signals(extractor) -> None:  # type: ignore[no-untyped-def]
    nodes = [
        NodeWithScore(node=ImageNode(id_="img", image_url="http://127.0.0.1/x.png")),
        NodeWithScore(node=dated("t", "Standup moved to 10:30.", 1)),
    ]
    got = NoraxPostprocessor(top_n=2, now=NOW, extractor=extractor).postprocess_nodes(
        nodes, query_str="standup"
    )
    by_id = {n.node.node_id: n.node.metadata["signals"] for n in got}
    assert by_id["img"] == {"bm25": 0.0, "dense": 0.0, "temporal": 0.0, "graph": 0.0}
    assert [n.node.node_id for n in got] == ["t", "img"]


def test_memory_nodes_get_the_store_scores(store: NoraxMemory, minilm: MiniLM) -> None:
    # The same nodes in a vector index and in the store (same ids), plus one outsider.
    outsider = dated("outsider", "Colby bought a coffee for the team.", 1)
    hits = vector_hits([*TEAM, outsider], "What did Colby do?", 5)
    assert "outsider" in {n.node.node_id for n in hits}
    post = NoraxPostprocessor(top_n=5, memory=store, namespace="team", now=NOW)
    got = post.postprocess_nodes(hits, query_str="What did Colby do?")
    from_store = {
        r.id: dict(r.signals)
        for r in store.search("What did Colby do?", k=6, namespace="team", now=NOW)
    }
    for n in got:
        if n.node.node_id in from_store:
            assert n.node.metadata["signals"] == pytest.approx(from_store[n.node.node_id])
    outsider_signals = next(n for n in got if n.node.node_id == "outsider").node.metadata["signals"]
    assert outsider_signals["temporal"] == pytest.approx(math.exp(-1 / 30))
    assert outsider_signals["dense"] > 0


async def test_memory_nodes_async_matches_sync(store: NoraxMemory) -> None:
    retriever = NoraxRetriever(store, similarity_top_k=4, namespace="team", now=NOW)
    hits = retriever.retrieve("payments on Base")
    post = NoraxPostprocessor(top_n=2, memory=store, namespace="team", weights="bm25", now=NOW)
    sync = post.postprocess_nodes(hits, query_str="payments on Base")
    asyn = await post.apostprocess_nodes(hits, query_str="payments on Base")
    assert [(n.node.node_id, n.score) for n in asyn] == [(n.node.node_id, n.score) for n in sync]
    assert sync[0].node.metadata["signals"]["bm25"] == 1.0


def _signals(post: NoraxPostprocessor, nodes: list[TextNode], query: str) -> dict[str, Any]:
    got = post.postprocess_nodes([NodeWithScore(node=n) for n in nodes], query_str=query)
    return {n.node.node_id: (n.score, n.node.metadata["signals"]) for n in got}


def _renamed(nodes: list[TextNode], ids: dict[str, str]) -> list[TextNode]:
    return [n.model_copy(update={"id_": ids.get(n.node_id, n.node_id)}) for n in nodes]


def test_only_the_memory_itself_takes_the_store_scores(embedder, extractor) -> None:  # type: ignore[no-untyped-def]
    """A node that reuses a memory's id, with another text or from another namespace, is a
    foreign node: scored exactly as it would be under an id the store has never seen."""
    mem = NoraxMemory(embedder=embedder, extractor=extractor, weights="seed")
    wallet = "Colby set up the team wallet on Base."
    secret = "Alice's salary is 91k; Colby pays it from the Base wallet."
    mem.add([wallet, "Priya prefers short status updates."], ids=["w", "p"], created_at=NOW)
    mem.add(secret, ids="secret", namespace="alice", created_at=NOW)
    query = "Who set up the wallet on Base?"
    nodes = [
        dated("w", wallet, 0),  # the memory itself
        dated("p", "Colby moved the wallet to Base last month.", 30),  # its id, another text
        dated("secret", secret, 60),  # another tenant's memory, text and all
        dated("web", "The Base wallet belongs to Colby.", 5),
    ]
    try:
        post = NoraxPostprocessor(top_n=4, memory=mem, now=NOW)  # namespace None: "default"
        got = _signals(post, nodes, query)
        ref = _signals(post, _renamed(nodes, {"p": "new-p", "secret": "new-s"}), query)
        assert got["p"] == ref["new-p"] and got["secret"] == ref["new-s"]
        assert got["web"] == ref["web"] and got["w"] == ref["w"]
        (own,) = mem.search(query, k=1, now=NOW)
        assert own.id == "w" and got["w"][1] == pytest.approx(dict(own.signals))

        # Scoped to alice, her memory takes the store's scores and "w" is foreign.
        alice = NoraxPostprocessor(top_n=4, memory=mem, namespace="alice", now=NOW)
        got = _signals(alice, nodes, query)
        ref = _signals(alice, _renamed(nodes, {"w": "new-w"}), query)
        assert got["w"] == ref["new-w"] and got["p"] == ref["p"]
        (hers,) = mem.search(query, k=1, namespace="alice", now=NOW)
        assert got["secret"][1] == pytest.approx(dict(hers.signals))
        assert got["secret"][1]["temporal"] == 1.0  # the stored time, not the node's
    finally:
        mem.close()


def test_postprocessor_fields_and_engines(store: NoraxMemory, minilm: MiniLM) -> None:
    post = NoraxPostprocessor(memory=store, embedder=minilm, extractor=False)
    assert NoraxPostprocessor.class_name() == "NoraxPostprocessor"
    own = {"top_n", "weights", "time_key", "kind_key", "default_kind", "now", "namespace"}
    fields = NoraxPostprocessor.model_fields
    assert own <= set(fields) and all(fields[name].description for name in own)
    assert post.top_n == 3 and post.time_key == "created_at"
    assert post.to_dict()["top_n"] == 3  # serialisable: engines are private
    assert isinstance(post._embedder, LlamaIndexEmbedder) and post._extractor is None
    assert post._fusion_weights() == store.weights
    post.weights = "bm25"  # fields are read at every call
    assert post._fusion_weights().name == "bm25"
    with pytest.raises(WeightsError):
        NoraxPostprocessor(weights="nope", extractor=False)
    with pytest.raises(ValueError):
        NoraxPostprocessor(top_n=0, extractor=False)
    with pytest.raises(InvalidInputError):
        NoraxPostprocessor(namespace=" ", extractor=False)


# -- ingestion and the embedder wrapper ------------------------------------------------------


def test_add_nodes_keeps_ids_times_and_metadata(embedder, extractor) -> None:  # type: ignore[no-untyped-def]
    with NoraxMemory(embedder=embedder, extractor=extractor) as mem:
        doc = Document(
            text="Alpha release shipped.",
            id_="doc-1",
            metadata={
                "created_at": "2026-01-02T03:04:05Z",
                "tags": ["x"],
                "n": 3,
                "kind": "semantic",
            },
        )
        node = TextNode(id_="node-1", text="Beta is planned.", metadata={"when": 1.7e9})
        assert add_nodes(mem, [doc], namespace="ns") == ["doc-1"]
        assert add_nodes(mem, [node], time_key="when", kind="procedural") == ["node-1"]
        d, n = mem.get(["doc-1", "node-1"])
        assert (d.text, d.kind, d.namespace, dict(d.metadata)) == (
            "Alpha release shipped.",
            "semantic",
            "ns",
            {"n": 3},
        )
        assert d.created_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        assert (n.kind, n.created_at.timestamp()) == ("procedural", 1.7e9)
        with pytest.raises(DuplicateIdError):
            add_nodes(mem, [doc], namespace="ns")
        assert add_nodes(mem, [doc], namespace="ns", upsert=True) == ["doc-1"]
        assert add_nodes(mem, []) == []


def test_retrieved_nodes_reingest_as_the_same_memories(
    store: NoraxMemory, embedder, extractor
) -> None:  # type: ignore[no-untyped-def]
    got = NoraxRetriever(store, similarity_top_k=3, namespace="team", now=NOW).retrieve("payments")
    with NoraxMemory(embedder=embedder, extractor=extractor) as copy:
        add_nodes(copy, [n.node for n in got], namespace="team")
        for n in got:
            a, b = store.get(n.node.node_id)[0], copy.get(n.node.node_id)[0]
            assert (a.text, a.kind, a.created_at, dict(a.metadata)) == (
                b.text,
                b.kind,
                b.created_at,
                dict(b.metadata),
            )


async def test_llamaindex_embedding_as_norax_embedder(minilm: MiniLM, embedder, extractor) -> None:  # type: ignore[no-untyped-def]
    wrapped = LlamaIndexEmbedder(minilm)
    assert (wrapped.name, wrapped.dim) == ("llamaindex:onnx:all-MiniLM-L6-v2", 384)
    texts = ["Colby set up the team wallet.", "Lunch wraps."]
    np.testing.assert_allclose(wrapped.embed(texts), embedder.embed(texts), atol=1e-5)
    np.testing.assert_allclose(await wrapped.aembed(texts), embedder.embed(texts), atol=1e-5)
    mock = LlamaIndexEmbedder(MockEmbedding(embed_dim=8), name="mock")
    assert (mock.name, mock.dim) == ("mock", 8)
    with NoraxMemory(embedder=wrapped, extractor=extractor) as mem:
        add_nodes(mem, TEAM)
        got = NoraxRetriever(mem, similarity_top_k=1, now=NOW).retrieve("Which CI runs deploys?")
        assert got[0].node.node_id == "m5"


# -- conversion functions --------------------------------------------------------------------


def make_result() -> SearchResult:
    return SearchResult(
        id="m1",
        text="Colby set up the wallet.",
        kind="episodic",
        created_at=datetime(2026, 1, 2, tzinfo=timezone.utc),
        namespace="team",
        metadata={"topic": "payments"},
        entities=("colby", "wallet"),
        score=0.5,
        signals={"bm25": 0.1, "dense": 0.2, "temporal": 0.3, "graph": 0.4},
        matched_entities=("colby",),
        query_plan=QueryInfo("lookup", (), ("Colby",)),
        explanation=Explanation(0.5, 0.0, 0.0),
    )


def test_result_to_node() -> None:
    got = _result_to_node(make_result())
    assert got.score == 0.5 and got.node.node_id == "m1"
    assert got.node.get_content() == "Colby set up the wallet."
    assert got.node.metadata == {
        "topic": "payments",
        "kind": "episodic",
        "created_at": "2026-01-02T00:00:00+00:00",
        "namespace": "team",
        "inferred_kind": "",
        "score": 0.5,
        "signals": {"bm25": 0.1, "dense": 0.2, "temporal": 0.3, "graph": 0.4},
        "matched_entities": ["colby"],
        "query_plan": {
            "intent": "lookup",
            "periods": [],
            "entities": ["Colby"],
            "weights_intent": None,
        },
        "explanation": {
            "fused": 0.5,
            "context": 0.0,
            "bridges": 0.0,
            "period": 0.0,
            "latest_wins": 0.0,
            "supersede": 0.0,
            "turns": 0.0,
            "exchange": 0.0,
            "lane": 0.0,
        },
    }
    hidden = {
        "namespace",
        "score",
        "signals",
        "matched_entities",
        "query_plan",
        "explanation",
        "inferred_kind",
    }
    assert set(got.node.excluded_llm_metadata_keys) == hidden
    assert set(got.node.excluded_embed_metadata_keys) == hidden


def test_reranked_copies_the_node() -> None:
    node = TextNode(id_="a", text="t", metadata={"x": 1}, excluded_llm_metadata_keys=["x"])
    signals = {"bm25": {"a": 1.0}, "dense": {}, "temporal": {"a": 0.5}, "graph": {}}
    got = _reranked(node, 0.7, signals, QueryInfo("lookup"))
    assert got.score == 0.7 and got.node is not node and got.node.node_id == "a"
    assert got.node.metadata == {
        "x": 1,
        "score": 0.7,
        "signals": {"bm25": 1.0, "dense": 0.0, "temporal": 0.5, "graph": 0.0},
        "query_plan": {"intent": "lookup", "periods": [], "entities": [], "weights_intent": None},
        "explanation": {
            "fused": 0.7,
            "context": 0.0,
            "bridges": 0.0,
            "period": 0.0,
            "latest_wins": 0.0,
            "supersede": 0.0,
            "turns": 0.0,
            "exchange": 0.0,
            "lane": 0.0,
        },
    }
    assert got.node.excluded_llm_metadata_keys == [
        "x",
        "score",
        "signals",
        "query_plan",
        "explanation",
    ]
    assert node.metadata == {"x": 1} and node.excluded_llm_metadata_keys == ["x"]


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("text", "text"),
        (False, False),
        (-3, -3),
        (0.25, 0.25),
        (-(2**63) - 1, None),
        (float("nan"), None),
        (None, None),
        (["a"], None),
        (datetime(2026, 1, 2, tzinfo=timezone.utc), "2026-01-02T00:00:00+00:00"),
        (date(2026, 1, 2), "2026-01-02"),
    ],
)
def test_storable_metadata(value: object, kept: object) -> None:
    assert _storable_metadata({"k": value}) == ({} if kept is None else {"k": kept})
    assert _storable_metadata({"norax_x": 1, "skip": 2}, skip=("skip",)) == {}


def test_node_to_memory() -> None:
    node = TextNode(
        id_="n", text="body", metadata={"t": "2026-01-01", "kind": "semantic", "score": 1.0, "a": 1}
    )
    assert _node_to_memory(node, "t") == ("n", "body", "2026-01-01", "semantic", {"a": 1})
    # the text is the node's own content, never its metadata
    doc = Document(id_="d", text="only this", metadata={"title": "T"})
    assert _node_to_memory(doc, "created_at") == ("d", "only this", None, None, {"title": "T"})
