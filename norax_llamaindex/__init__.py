"""LlamaIndex adapters for Norax: retriever, postprocessor, agent memory block, ingestion."""

from norax_llamaindex.embeddings import LlamaIndexEmbedder
from norax_llamaindex.ingest import aadd_chat_messages, add_chat_messages, add_nodes
from norax_llamaindex.memory_block import NoraxMemoryBlock
from norax_llamaindex.postprocessor import NoraxPostprocessor
from norax_llamaindex.retriever import NoraxRetriever

__all__ = [
    "LlamaIndexEmbedder",
    "NoraxMemoryBlock",
    "NoraxPostprocessor",
    "NoraxRetriever",
    "aadd_chat_messages",
    "add_chat_messages",
    "add_nodes",
]
