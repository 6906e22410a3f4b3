"""Conversions between Norax results and LangChain documents (pure functions, unit-tested)."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.documents import Document

from norax_core.models import MetadataValue, SearchResult
from norax_core.validation import storable_metadata as _storable_metadata

logger = logging.getLogger("norax")

SEARCH_KEYS = ("kind", "created_at", "namespace", "score", "signals", "matched_entities")
"""Metadata keys a :class:`~norax_langchain.NoraxRetriever` document gets from the search.

They replace user metadata keys of the same name in the returned document.
"""


def _result_to_document(result: SearchResult) -> Document:
    """A search result as a ``Document``: memory id as ``id``, explanation in ``metadata``."""
    metadata: dict[str, Any] = {
        **result.metadata,
        "kind": result.kind,
        "created_at": result.created_at.isoformat(),
        "namespace": result.namespace,
        "score": result.score,
        "signals": dict(result.signals),
        "matched_entities": list(result.matched_entities),
    }
    return Document(id=result.id, page_content=result.text, metadata=metadata)


def _document_to_memory(
    doc: Document, created_at_key: str
) -> tuple[str | None, str, Any, str | None, dict[str, MetadataValue]]:
    """``(id, text, created_at, kind, metadata)`` of a document to ingest.

    ``created_at`` is the ``created_at_key`` metadata value (``None`` when absent) and
    ``kind`` the ``kind`` metadata value when it is a string. Keys a search writes
    (:data:`SEARCH_KEYS`) are not stored, so a retrieved document re-ingests as the memory it
    came from.
    """
    created_at = doc.metadata.get(created_at_key)
    kind = doc.metadata.get("kind")
    metadata = _storable_metadata(doc.metadata, skip=(created_at_key, *SEARCH_KEYS))
    return (
        doc.id or None,
        doc.page_content,
        created_at,
        kind if isinstance(kind, str) else None,
        metadata,
    )
