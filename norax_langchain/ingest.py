"""Ingest LangChain ``Document`` objects into a Norax memory."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import Document

from norax_core.engine import NoraxMemory
from norax_core.ingest import write_records
from norax_langchain._convert import _document_to_memory


def add_documents(
    memory: NoraxMemory,
    documents: Sequence[Document],
    *,
    namespace: str | None = None,
    kind: str | None = None,
    created_at_key: str = "created_at",
    upsert: bool = False,
) -> list[str]:
    """Add LangChain documents as memories; returns their ids in order.

    A document's ``id`` becomes the memory id (a new one is generated when it has none). Its
    ``metadata[created_at_key]`` (datetime, ISO 8601 string or epoch seconds) becomes the
    creation time (default now). Metadata values a memory can store are kept (str, bool,
    int, float; dates as ISO strings); others are dropped, as are keys starting with
    ``norax_`` and the keys a search adds (``score``, ``signals``, ...), so documents returned
    by :class:`~norax_langchain.NoraxRetriever` re-ingest as the memories they came from.

    Args:
        memory: The store.
        documents: The documents.
        namespace: Namespace for all of them (default ``"default"``). Never read from the
            documents' metadata: namespaces separate users, so the caller chooses.
        kind: Memory kind for all of them; ``None`` takes each document's ``metadata["kind"]``
            when it is a string, else ``"episodic"``.
        created_at_key: Metadata key holding the creation time.
        upsert: Replace memories that already have these ids instead of failing.

    Raises:
        InvalidInputError: Empty text, bad time, bad kind; nothing is written.
        DuplicateIdError: An id repeats, or (without ``upsert``) is already stored.
    """
    rows = [_document_to_memory(doc, created_at_key) for doc in documents]
    return write_records(memory, rows, namespace=namespace, kind=kind, upsert=upsert)
