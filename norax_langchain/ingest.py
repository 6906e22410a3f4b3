"""Ingest LangChain documents and conversations (``BaseMessage`` lists) into a Norax memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, ChatMessage

from norax_core.engine import NoraxMemory
from norax_core.errors import InvalidInputError
from norax_core.ingest import MemoryRecord, write_records
from norax_core.models import MetadataValue
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


def add_messages(
    memory: NoraxMemory,
    messages: Sequence[BaseMessage],
    *,
    session_id: str,
    created_at: Any = None,
    namespace: str | None = None,
    kind: str = "episodic",
    upsert: bool = False,
) -> list[str]:
    """Add a conversation's messages as memories, one each, in one write; returns their ids.

    Each memory's text is the message's text (``message.text``); its metadata keeps who
    spoke: ``role`` (``human``, ``ai``, ``system``, ``tool``, or a ``ChatMessage``'s role),
    ``name`` when the message has one, plus ``session_id``, ``turn`` (the position in
    ``messages``) and ``message_id`` when the message has an id. A message without text
    (an AI message that only calls tools) is skipped; its turn number stays unused.

    The memory ids are ``"{session_id}:{turn:06d}"``, so ingesting a session again with
    ``upsert=True`` replaces it, and messages with the same time keep the conversation's
    order: everything is written in one ``add`` in that order, which is what
    ``embed_context`` needs to embed a short reply with the turns before it.

    Args:
        memory: The store.
        messages: The conversation, oldest first.
        session_id: The session (conversation) they belong to.
        created_at: One time for all the messages or one per message (datetime, ISO 8601
            string or epoch seconds); default now.
        namespace: Namespace for all of them (default ``"default"``).
        kind: Memory kind for all of them.
        upsert: Replace memories that already have these ids instead of failing.

    Raises:
        InvalidInputError: A blank session id, a bad time or a time list of the wrong
            length, a bad kind; nothing is written.
        DuplicateIdError: Without ``upsert``, the session's ids are already stored.
    """
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidInputError(f"session_id must be a non-empty string, got {session_id!r}")
    times = _per_message(created_at, len(messages))
    rows = [
        MemoryRecord(
            f"{session_id}:{turn:06d}", msg.text, times[turn], kind, _speaker(msg, session_id, turn)
        )
        for turn, msg in enumerate(messages)
        if msg.text.strip()
    ]
    return write_records(memory, rows, namespace=namespace, kind=kind, upsert=upsert)


def _per_message(created_at: Any, n: int) -> list[Any]:
    if isinstance(created_at, Sequence) and not isinstance(created_at, (str, bytes)):
        if len(created_at) != n:
            raise InvalidInputError(f"created_at has {len(created_at)} times for {n} messages")
        return list(created_at)
    return [created_at] * n


def _speaker(msg: BaseMessage, session_id: str, turn: int) -> dict[str, MetadataValue]:
    """The metadata of a message's memory: who spoke, in which session, at which turn."""
    meta: dict[str, MetadataValue] = {
        "role": msg.role if isinstance(msg, ChatMessage) else msg.type,
        "session_id": session_id,
        "turn": turn,
    }
    if msg.name:
        meta["name"] = msg.name
    if msg.id:
        meta["message_id"] = msg.id
    return meta
