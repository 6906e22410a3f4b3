"""Conversions between Norax results and LlamaIndex nodes (pure functions, unit-tested)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, TextNode

from norax_core.ingest import MemoryRecord, memory_record
from norax_core.models import SEARCH_KEYS, SIGNALS, SearchResult
from norax_core.validation import storable_metadata as _storable_metadata  # noqa: F401 - the tests use it

logger = logging.getLogger("norax")


HIDDEN_KEYS = ("namespace", "score", "signals", "matched_entities")
"""Search keys kept out of the text LLMs and embedders see (``excluded_*_metadata_keys``);
``kind`` and ``created_at`` stay visible, as the date of a memory helps answer questions."""

RERANK_KEYS = ("score", "signals")
"""Metadata keys :class:`~norax_llamaindex.NoraxPostprocessor` sets on the node copies."""


def _hide(node: BaseNode, keys: tuple[str, ...]) -> dict[str, list[str]]:
    return {
        "excluded_llm_metadata_keys": list(
            dict.fromkeys([*node.excluded_llm_metadata_keys, *keys])
        ),
        "excluded_embed_metadata_keys": list(
            dict.fromkeys([*node.excluded_embed_metadata_keys, *keys])
        ),
    }


def _result_to_node(result: SearchResult) -> NodeWithScore:
    """A search result as ``NodeWithScore(TextNode(id_=memory id), score=fused score)``."""
    metadata = result.framework_metadata()
    node = TextNode(
        id_=result.id,
        text=result.text,
        metadata=metadata,
        excluded_llm_metadata_keys=list(HIDDEN_KEYS),
        excluded_embed_metadata_keys=list(HIDDEN_KEYS),
    )
    return NodeWithScore(node=node, score=result.score)


def _reranked(
    node: BaseNode, score: float, signals: Mapping[str, Mapping[str, float]]
) -> NodeWithScore:
    """A copy of ``node`` carrying its fused ``score`` and ``signals``; ``node`` is unchanged."""
    breakdown = {s: signals[s].get(node.node_id, 0.0) for s in SIGNALS}
    copy = node.model_copy(
        update={
            "metadata": {**node.metadata, "score": score, "signals": breakdown},
            **_hide(node, RERANK_KEYS),
        }
    )
    return NodeWithScore(node=copy, score=score)


def _node_text(node: BaseNode) -> str:
    """The node's own text, without metadata."""
    return node.get_content(metadata_mode=MetadataMode.NONE)


def _node_to_memory(node: BaseNode, time_key: str) -> MemoryRecord:
    """``(id, text, created_at, kind, metadata)`` of a node to ingest.

    ``created_at`` is ``metadata[time_key]`` (``None`` when absent), ``kind`` the ``kind``
    metadata value when it is a string. Keys a search writes (:data:`SEARCH_KEYS`) are not
    stored, so a retrieved node re-ingests as the memory it came from.
    """
    return memory_record(
        node.node_id, _node_text(node), node.metadata, time_key=time_key, skip=SEARCH_KEYS
    )
