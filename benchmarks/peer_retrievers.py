"""The peers' retrievers, built one way for :mod:`peers` (recall) and :mod:`scale` (speed).

* :func:`langchain_ensembles`: per namespace, LangChain's ``EnsembleRetriever`` (weights
  0.5/0.5, weighted reciprocal rank) over ``BM25Retriever`` (rank_bm25) and a
  ``langchain_chroma.Chroma`` retriever filtered on the namespace, k each.
* :func:`llamaindex_fusions`: per namespace, LlamaIndex's ``QueryFusionRetriever``
  (``num_queries=1``: no LLM rewrites, reciprocal rerank) over the bm25s ``BM25Retriever``
  and a ``VectorStoreIndex`` on ``ChromaVectorStore`` filtered on the namespace.

One Chroma collection for every tenant, one BM25 retriever per namespace (neither library's
can be restricted to a tenant). Both embed through ``emb`` (anything with
``embed(texts) -> (n, dim) array`` and ``name``), so every system embeds the same strings.
Needs ``pip install -e '.[scale]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def by_namespace(namespaces: Sequence[str]) -> dict[str, list[int]]:
    """Each namespace's positions in ``namespaces``, in order of first appearance."""
    out: dict[str, list[int]] = {}
    for i, ns in enumerate(namespaces):
        out.setdefault(ns, []).append(i)
    return out


def langchain_store(emb: Any, client: Any) -> Any:
    """An empty ``langchain_chroma.Chroma`` store (cosine) on ``client``, embedding with ``emb``."""
    from langchain_chroma import Chroma
    from langchain_core.embeddings import Embeddings

    class LCEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return emb.embed(texts).tolist()  # type: ignore[no-any-return]

        def embed_query(self, text: str) -> list[float]:
            return emb.embed([text])[0].tolist()  # type: ignore[no-any-return]

    return Chroma(
        collection_name="langchain",
        embedding_function=LCEmbeddings(),
        client=client,
        collection_metadata={"hnsw:space": "cosine"},
    )


def langchain_ensembles(
    store: Any,
    ids: Sequence[str],
    texts: Sequence[str],
    metas: Sequence[dict[str, Any]],
    k: int,
    batch: int,
) -> dict[str, Any]:
    """Add the documents to ``store`` (:func:`langchain_store`) in batches, then one
    ``EnsembleRetriever`` per namespace (``metas[i]["namespace"]``)."""
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever

    for s in range(0, len(ids), batch):
        store.add_texts(
            list(texts[s : s + batch]), metadatas=list(metas[s : s + batch]), ids=ids[s : s + batch]
        )
    ensembles = {}
    for ns, rows in by_namespace([m["namespace"] for m in metas]).items():
        bm25 = BM25Retriever.from_texts(
            [texts[i] for i in rows],
            metadatas=[metas[i] for i in rows],
            ids=[ids[i] for i in rows],
            k=k,
        )
        dense = store.as_retriever(search_kwargs={"k": k, "filter": {"namespace": ns}})
        ensembles[ns] = EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])
    return ensembles


def llamaindex_nodes(
    ids: Sequence[str], texts: Sequence[str], metas: Sequence[dict[str, Any]]
) -> list[Any]:
    """``TextNode``s whose metadata stays out of the embedded and LLM text (LlamaIndex
    prepends it by default), so that every system embeds exactly the same strings."""
    from llama_index.core.schema import TextNode

    return [
        TextNode(
            id_=i,
            text=t,
            metadata=m,
            excluded_embed_metadata_keys=list(m),
            excluded_llm_metadata_keys=list(m),
        )
        for i, t, m in zip(ids, texts, metas, strict=True)
    ]


def llamaindex_fusions(
    emb: Any, collection: Any, nodes: Sequence[Any], k: int, batch: int
) -> dict[str, Any]:
    """Index ``nodes`` (:func:`llamaindex_nodes`) in the Chroma ``collection``, then one
    ``QueryFusionRetriever`` per namespace (``node.metadata["namespace"]``)."""
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
    from llama_index.retrievers.bm25 import BM25Retriever
    from llama_index.vector_stores.chroma import ChromaVectorStore

    class LIEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return emb.embed([query])[0].tolist()  # type: ignore[no-any-return]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return emb.embed([text])[0].tolist()  # type: ignore[no-any-return]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return emb.embed(texts).tolist()  # type: ignore[no-any-return]

    storage = StorageContext.from_defaults(
        vector_store=ChromaVectorStore(chroma_collection=collection)
    )
    index = VectorStoreIndex(
        list(nodes),
        storage_context=storage,
        embed_model=LIEmbedding(model_name=emb.name, embed_batch_size=64),
        insert_batch_size=batch,
    )
    fusions = {}
    for ns, rows in by_namespace([n.metadata["namespace"] for n in nodes]).items():
        ns_nodes = [nodes[i] for i in rows]
        bm25 = BM25Retriever.from_defaults(nodes=ns_nodes, similarity_top_k=min(k, len(ns_nodes)))
        dense = index.as_retriever(
            similarity_top_k=k,
            filters=MetadataFilters(filters=[MetadataFilter(key="namespace", value=ns)]),
        )
        fusions[ns] = QueryFusionRetriever(
            [dense, bm25],
            llm=MockLLM(),
            mode=FUSION_MODES.RECIPROCAL_RANK,
            similarity_top_k=k,
            num_queries=1,
            use_async=False,
        )
    return fusions
