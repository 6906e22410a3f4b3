"""LangChain adapters for Norax: a retriever, document ingestion and an embedder wrapper."""

from norax_langchain.embeddings import LangChainEmbedder
from norax_langchain.ingest import add_documents
from norax_langchain.retriever import NoraxRetriever

__all__ = ["LangChainEmbedder", "NoraxRetriever", "add_documents"]
