"""Conversions between Norax results and LangChain documents (pure functions, unit-tested)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from langchain_core.documents import Document

from norax_core.models import RESERVED_PREFIX, MetadataValue, SearchResult

logger = logging.getLogger("norax")

SEARCH_KEYS = ("kind", "created_at", "namespace", "score", "signals", "matched_entities")
"""Metadata keys a :class:`~norax_langchain.NoraxRetriever` document gets from the search.

They replace user metadata keys of the same name in the returned document.
"""

_INT64 = 2**63


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


def _storable_metadata(
    metadata: Mapping[str, Any], skip: tuple[str, ...] = ()
) -> dict[str, MetadataValue]:
    """The part of ``metadata`` that a memory can store.

    Keeps str, bool, finite floats and 64-bit ints; dates and datetimes become ISO strings.
    Drops ``skip`` keys, keys reserved by Norax (``norax_`` prefix) and every other value
    (``None``, lists, dicts, objects), logging the dropped keys at debug level.
    """
    out: dict[str, MetadataValue] = {}
    dropped = []
    for key, value in metadata.items():
        if key in skip:
            continue
        if isinstance(value, (date, datetime)):
            value = value.isoformat()
        ok_key = isinstance(key, str) and bool(key) and not key.startswith(RESERVED_PREFIX)
        ok_value = (
            isinstance(value, (str, bool))
            or (isinstance(value, int) and -_INT64 <= value < _INT64)
            or (isinstance(value, float) and math.isfinite(value))
        )
        if ok_key and ok_value:
            out[key] = value
        else:
            dropped.append(key)
    if dropped:
        logger.debug("norax: metadata keys not stored (unsupported key or value): %s", dropped)
    return out


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
