"""Ingest LangChain documents and conversations (``BaseMessage`` lists) into a Norax memory."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, ChatMessage

from norax_core.conversation import (
    DEFAULT_ROLES,
    Turn,
    normal_role,
    role_set,
    turn_times,
    write_turns,
)
from norax_core.engine import NoraxMemory
from norax_core.errors import InvalidInputError
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


def add_messages(
    memory: NoraxMemory,
    messages: Sequence[BaseMessage],
    *,
    session_id: str,
    created_at: Any = None,
    namespace: str | None = None,
    kind: str = "episodic",
    upsert: bool = False,
    roles: Collection[str] | None = DEFAULT_ROLES,
    first_turn: int = 0,
    speaker_in_text: bool = True,
) -> list[str]:
    """Add a conversation's messages as memories, one each, in one write; returns their ids.

    The convention is :mod:`norax_core.conversation`'s, shared with
    ``norax_llamaindex.add_chat_messages``. Each memory's text is the message's text
    (``message.text``), as ``"<name>: <text>"`` when the message has a ``name``. Its metadata
    keeps who spoke: ``role`` (``user`` for a ``HumanMessage``, ``assistant`` for an
    ``AIMessage``, else the message's type or a ``ChatMessage``'s role), ``speaker`` (the
    name, else the role), ``session_id``, ``turn`` (the position in ``messages`` plus
    ``first_turn``) and ``message_id`` when the message has an id. Only the ``roles`` asked
    for are stored (default user and assistant) and a message without text (an AI message
    that only calls tools) is skipped; their turn numbers stay unused.

    The memory ids are ``"{session_id}:{turn:06d}"``, so ingesting a session again with
    ``upsert=True`` replaces it. Everything is written in one ``add`` in conversation order,
    which lets ``embed_context`` embed a short reply with the turns before it.

    Args:
        memory: The store.
        messages: The conversation, oldest first.
        session_id: The session (conversation) they belong to.
        created_at: One time for all the messages or one per message (datetime, ISO 8601
            string or epoch seconds); default now. Times strictly increase in conversation
            order: a message not later than the one before it is placed a millisecond after
            it. Explicit times that go backwards are refused.
        namespace: Namespace for all of them (default ``"default"``).
        kind: Memory kind for all of them.
        upsert: Replace memories that already have these ids instead of failing.
        roles: Roles to store (``user``, ``assistant``, ``system``, ``tool``, ...; LangChain's
            ``human`` and ``ai`` work too); ``None`` stores every role.
        first_turn: Turn number of ``messages[0]``: to add the rest of a session later, pass
            the number of messages already added.
        speaker_in_text: Prefix the text with a named speaker (``False`` stores the bare
            text; the speaker stays in the metadata).

    Raises:
        InvalidInputError: A blank session id, a bad time, a time list of the wrong length,
            times that go backwards, an unknown role, a bad kind; nothing is written.
        DuplicateIdError: Without ``upsert``, the session's ids are already stored.
    """
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidInputError(f"session_id must be a non-empty string, got {session_id!r}")
    if isinstance(first_turn, bool) or not isinstance(first_turn, int) or first_turn < 0:
        raise InvalidInputError(f"first_turn must be an int >= 0, got {first_turn!r}")
    wanted = role_set(roles)
    given = _per_message(created_at, len(messages))
    turn_times(given)  # checked on every message first, so an error names its position
    turns: list[Turn] = []
    own: list[Any] = []
    for i, msg in enumerate(messages):
        turn = _message_turn(msg, i, session_id, first_turn + i)
        if turn is not None and (wanted is None or turn.role in wanted):
            turns.append(turn)
            own.append(given[i])
    times = turn_times(own)  # the stored messages' times, as add_chat_messages spaces them
    return write_turns(
        memory,
        turns,
        times,
        namespace=namespace,
        kind=kind,
        speaker_in_text=speaker_in_text,
        upsert=upsert,
    )


def _per_message(created_at: Any, n: int) -> list[Any]:
    if isinstance(created_at, Sequence) and not isinstance(created_at, (str, bytes)):
        if len(created_at) != n:
            raise InvalidInputError(f"created_at has {len(created_at)} times for {n} messages")
        return list(created_at)
    return [created_at] * n


def _message_turn(msg: BaseMessage, i: int, session_id: str, turn: int) -> Turn | None:
    """Message ``i`` as a :class:`~norax_core.conversation.Turn`; ``None`` without text."""
    if not isinstance(msg, BaseMessage):
        raise InvalidInputError(
            f"message {i} is a {type(msg).__name__}, not a LangChain BaseMessage"
        )
    text = msg.text.strip()
    if not text:
        return None
    role = normal_role(msg.role if isinstance(msg, ChatMessage) else msg.type)
    name = msg.name.strip() if isinstance(msg.name, str) else ""
    return Turn(
        text=text,
        role=role,
        speaker=name or role,
        session_id=session_id,
        turn=turn,
        message_id=msg.id or None,
    )
