"""LlamaIndex adapters for Norax: a retriever, a reranking postprocessor, ingestion, embedder."""

from norax_llamaindex.embeddings import LlamaIndexEmbedder
from norax_llamaindex.ingest import add_nodes
from norax_llamaindex.postprocessor import NoraxPostprocessor
from norax_llamaindex.retriever import NoraxRetriever

__all__ = ["LlamaIndexEmbedder", "NoraxPostprocessor", "NoraxRetriever", "add_nodes"]
