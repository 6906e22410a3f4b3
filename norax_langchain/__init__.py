"""LangChain adapters for Norax: a retriever, document and conversation ingestion, an embedder."""

from norax_langchain.embeddings import LangChainEmbedder
from norax_langchain.ingest import add_documents, add_messages
from norax_langchain.retriever import NoraxRetriever

__all__ = ["LangChainEmbedder", "NoraxRetriever", "add_documents", "add_messages"]
