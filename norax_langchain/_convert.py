"""Conversions between Norax results and LangChain documents (pure functions, unit-tested)."""

from __future__ import annotations

import logging

from langchain_core.documents import Document

from norax_core.ingest import MemoryRecord, memory_record
from norax_core.models import SEARCH_KEYS, SearchResult
from norax_core.validation import storable_metadata as _storable_metadata  # noqa: F401 - the tests use it

logger = logging.getLogger("norax")


def _result_to_document(result: SearchResult) -> Document:
    """A search result as a ``Document``: memory id as ``id``, explanation in ``metadata``."""
    metadata = result.framework_metadata()
    return Document(id=result.id, page_content=result.text, metadata=metadata)


def _document_to_memory(doc: Document, created_at_key: str) -> MemoryRecord:
    """``(id, text, created_at, kind, metadata)`` of a document to ingest.

    ``created_at`` is the ``created_at_key`` metadata value (``None`` when absent) and
    ``kind`` the ``kind`` metadata value when it is a string. Keys a search writes
    (:data:`SEARCH_KEYS`) are not stored, so a retrieved document re-ingests as the memory it
    came from. A blank id is ``None``: a new one is generated.
    """
    return memory_record(
        doc.id or None, doc.page_content, doc.metadata, time_key=created_at_key, skip=SEARCH_KEYS
    )
