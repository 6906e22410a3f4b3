"""The adapters keep ids and namespaces straight (issue 24 item 7).

Two tenants hold the same texts under different ids, and their memories carry user metadata
named like the adapters' own keys (``id``, ``namespace``, ``kind``). Every adapter must return
the memory's real id, the searched namespace only, and never a memory a ``where`` excludes.
Real Chroma (in memory) and the real embedding model.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from norax_core import NoraxMemory
from norax_langchain import NoraxRetriever as LangChainRetriever
from norax_llamaindex import NoraxPostprocessor
from norax_llamaindex import NoraxRetriever as LlamaRetriever

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
TEXTS = [
    "Colby set up the team wallet on Base.",
    "The backend moved from TypeORM to Prisma.",
    "Maria books the early flight to Lisbon.",
]


@pytest.fixture(scope="module")
def memory(embedder):  # type: ignore[no-untyped-def]
    mem = NoraxMemory(embedder=embedder, extractor=False)
    for tenant in ("a", "b"):
        mem.add(
            TEXTS,
            ids=[f"{tenant}-{i}" for i in range(len(TEXTS))],
            namespace=tenant,
            created_at=NOW,
            metadata=[
                {"id": "forged", "namespace": "other", "kind": "fake", "keep": i != 1}
                for i in range(len(TEXTS))
            ],
        )
    yield mem
    mem.close()


@pytest.mark.parametrize("tenant", ["a", "b"])
def test_langchain_retriever_ids_and_namespaces(memory, tenant) -> None:  # type: ignore[no-untyped-def]
    docs = LangChainRetriever(memory=memory, namespace=tenant, now=NOW, k=5).invoke(
        "wallet backend flight", where={"keep": True}
    )
    assert sorted(d.id for d in docs) == [f"{tenant}-0", f"{tenant}-2"]
    for d in docs:
        assert d.metadata["namespace"] == tenant
        assert memory.get(d.id, namespace=tenant)[0].text == d.page_content


@pytest.mark.parametrize("tenant", ["a", "b"])
def test_llamaindex_retriever_ids_and_namespaces(memory, tenant) -> None:  # type: ignore[no-untyped-def]
    nodes = LlamaRetriever(
        memory, similarity_top_k=5, namespace=tenant, where={"keep": True}, now=NOW
    ).retrieve("wallet backend flight")
    assert sorted(n.node.node_id for n in nodes) == [f"{tenant}-0", f"{tenant}-2"]
    for n in nodes:
        assert n.node.metadata["namespace"] == tenant
        assert memory.get(n.node.node_id, namespace=tenant)[0].text == n.node.get_content()


def test_llamaindex_postprocessor_keeps_the_callers_node_ids(memory) -> None:  # type: ignore[no-untyped-def]
    given = [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=t), score=0.1) for i, t in enumerate(TEXTS)
    ]
    post = NoraxPostprocessor(top_n=3, now=NOW)
    out = post.postprocess_nodes(given, query_bundle=QueryBundle("Who set up the wallet?"))
    assert sorted(n.node.node_id for n in out) == ["n0", "n1", "n2"]
    assert out[0].node.node_id == "n0"
    assert [n.score for n in given] == [0.1, 0.1, 0.1]  # the caller's nodes untouched
