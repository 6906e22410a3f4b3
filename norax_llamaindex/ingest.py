"""Ingest LlamaIndex documents, nodes and chat messages into a Norax memory."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import BaseNode

from norax_core.conversation import Turn, awrite_turns, turn_times, write_turns
from norax_core.engine import NoraxMemory
from norax_core.errors import InvalidInputError
from norax_core.ingest import write_records
from norax_llamaindex._convert import DEFAULT_ROLES, _chat_turns, _node_to_memory


def add_nodes(
    memory: NoraxMemory,
    nodes: Sequence[BaseNode],
    *,
    namespace: str | None = None,
    kind: str | None = None,
    time_key: str = "created_at",
    upsert: bool = False,
) -> list[str]:
    """Add LlamaIndex ``Document`` or ``TextNode`` objects as memories; returns their ids.

    The node id becomes the memory id, so the same nodes in a ``VectorStoreIndex`` are
    recognised by :class:`~norax_llamaindex.NoraxPostprocessor`. The text is the node's
    content without metadata; ``metadata[time_key]`` (datetime, ISO 8601 string or epoch
    seconds) is the creation time (default now). Metadata values a memory can store are kept
    (str, bool, int, float; dates as ISO strings); others are dropped, as are keys starting
    with ``norax_`` and the keys a search adds (``score``, ``signals``, ...).

    Args:
        memory: The store.
        nodes: Documents or text nodes.
        namespace: Namespace for all of them (default ``"default"``); never read from the
            nodes, since namespaces separate users and the caller chooses.
        kind: Memory kind for all; ``None`` takes each node's ``metadata["kind"]`` when it
            is a string, else ``"episodic"``.
        time_key: Metadata key holding the creation time.
        upsert: Replace memories that already have these ids instead of failing.

    Raises:
        InvalidInputError: Empty text, bad time, bad kind; nothing is written.
        DuplicateIdError: An id repeats, or (without ``upsert``) is already stored.
    """
    rows = [_node_to_memory(node, time_key) for node in nodes]
    return write_records(memory, rows, namespace=namespace, kind=kind, upsert=upsert)


def add_chat_messages(
    memory: NoraxMemory,
    messages: Sequence[ChatMessage],
    *,
    session_id: str | None = None,
    created_at: Any = None,
    namespace: str | None = None,
    kind: str = "episodic",
    roles: Collection[str] | None = DEFAULT_ROLES,
    speaker_key: str = "name",
    time_key: str = "created_at",
    speaker_in_text: bool = True,
    upsert: bool = False,
    first_turn: int = 0,
) -> list[str]:
    """Store a conversation, one memory a message, in one call; returns the ids in order.

    The convention is :mod:`norax_core.conversation`'s, shared with
    ``norax_langchain.add_messages``. Each message becomes one memory with metadata ``role``
    (``chatbot`` and ``model`` are stored as ``assistant``), ``speaker``, and when known
    ``session_id``, ``turn`` and, when the message carried images, audio, video or documents,
    ``attachments`` (their types; only text is stored). The speaker is
    ``additional_kwargs[speaker_key]`` when set (a participant's name), and the text is then
    ``"<speaker>: <text>"`` (the form Norax's ``chat`` preset was fitted on); otherwise the
    speaker is the role and the text is the message's own. All messages go in one ``add``:
    with a store whose weights embed context (``"chat"``), each reply is embedded with the
    turns before it.

    With a ``session_id``, message ``i`` is turn ``first_turn + i`` and its memory id is
    ``"{session_id}:{turn:06d}"``, so ingesting the session again with ``upsert=True``
    replaces it; without one, the ids are new random ones.

    A message's time is its entry in a ``created_at`` list, else its own
    ``additional_kwargs[time_key]``, else a single ``created_at`` (the start of the
    conversation), else now. Times strictly increase in message order: a message not later
    than the one before it is placed a millisecond after it. Explicit times that go backwards
    are refused.

    Args:
        memory: The store.
        messages: LlamaIndex ``ChatMessage`` objects in conversation order.
        session_id: Stored as ``session_id`` on every memory, and makes the ids; ``None``
            takes each message's ``additional_kwargs["session_id"]`` (set by LlamaIndex
            ``Memory``), if any, with random ids.
        created_at: One time for messages without their own (datetime, ISO 8601 string or
            epoch seconds), or a list with one time per message (``None`` entries take the
            message's own time).
        namespace: The user or agent the conversation belongs to (default ``"default"``).
        kind: Memory kind of every message.
        roles: Roles to store (default user and assistant: tool output and system prompts
            are skipped); ``None`` stores every role. Messages without text are skipped too.
        speaker_key: ``additional_kwargs`` key holding the speaker's name.
        time_key: ``additional_kwargs`` key holding a message's time.
        speaker_in_text: Prefix the text with a named speaker (``False`` stores the bare
            text; the speaker stays in the metadata).
        upsert: Replace memories that already have these ids instead of failing.
        first_turn: Turn number of ``messages[0]`` (with ``session_id``): to add the rest of
            a session later, pass the number of messages already added.

    Raises:
        InvalidInputError: A malformed time, times that go backwards, an unknown role, or a
            text, kind or namespace Norax refuses; nothing is written.
        DuplicateIdError: Without ``upsert``, the session's ids are already stored.
    """
    turns, times = _prepared(
        messages, created_at, roles, session_id, speaker_key, time_key, first_turn
    )
    return write_turns(
        memory,
        turns,
        times,
        namespace=namespace,
        kind=kind,
        speaker_in_text=speaker_in_text,
        upsert=upsert,
    )


async def aadd_chat_messages(
    memory: NoraxMemory,
    messages: Sequence[ChatMessage],
    *,
    session_id: str | None = None,
    created_at: Any = None,
    namespace: str | None = None,
    kind: str = "episodic",
    roles: Collection[str] | None = DEFAULT_ROLES,
    speaker_key: str = "name",
    time_key: str = "created_at",
    speaker_in_text: bool = True,
    upsert: bool = False,
    first_turn: int = 0,
) -> list[str]:
    """Async :func:`add_chat_messages`: the add runs in a worker thread."""
    turns, times = _prepared(
        messages, created_at, roles, session_id, speaker_key, time_key, first_turn
    )
    return await awrite_turns(
        memory,
        turns,
        times,
        namespace=namespace,
        kind=kind,
        speaker_in_text=speaker_in_text,
        upsert=upsert,
    )


def _prepared(
    messages: Sequence[ChatMessage],
    created_at: Any,
    roles: Collection[str] | None,
    session_id: str | None,
    speaker_key: str,
    time_key: str,
    first_turn: int,
) -> tuple[list[Turn], list[float]]:
    if isinstance(first_turn, bool) or not isinstance(first_turn, int) or first_turn < 0:
        raise InvalidInputError(f"first_turn must be an int >= 0, got {first_turn!r}")
    if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
        raise InvalidInputError(f"session_id must be a non-empty string, got {session_id!r}")
    per_message = isinstance(created_at, Sequence) and not isinstance(created_at, str)
    if per_message and len(created_at) != len(messages):
        raise InvalidInputError(
            f"created_at has {len(created_at)} times for {len(messages)} messages"
        )
    turns, own = _chat_turns(
        messages,
        roles=roles,
        session_id=session_id,
        speaker_key=speaker_key,
        time_key=time_key,
        times=created_at if per_message else None,
        first_turn=None if session_id is None else first_turn,
    )
    return turns, turn_times(own, None if per_message else created_at)
