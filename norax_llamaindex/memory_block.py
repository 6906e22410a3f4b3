"""``NoraxMemoryBlock``: long-term memory for LlamaIndex agents (``llama_index.core.memory``)."""

from __future__ import annotations

import math
import time
from datetime import datetime
from typing import Any

from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock, Memory
from llama_index.core.storage.chat_store.sql import MessageStatus
from llama_index.core.utils import get_tokenizer

from norax_core import validation as check
from norax_core.conversation import awrite_turns, turn_times
from norax_core.engine import NoraxMemory, resolve_weights
from norax_core.errors import InvalidInputError
from norax_core.models import SearchResult
from norax_core.weights import Weights
from norax_llamaindex._convert import DEFAULT_ROLES, _chat_turns, _render_memories, _roles

DEFAULT_HEADER = (
    "Memories from earlier conversations, most relevant first "
    "([memory id | time UTC] speaker: text):"
)


class NoraxMemoryBlock(BaseMemoryBlock[str]):
    """Long-term agent memory in Norax, for ``Memory.from_defaults(memory_blocks=[...])``.

    **Writing.** When LlamaIndex ``Memory`` flushes messages out of its short-term queue
    (its ``token_limit`` times ``chat_history_token_ratio`` is passed), every message of
    the stored ``roles`` that has text becomes one memory: its text (``"<name>: <text>"``
    when ``additional_kwargs[speaker_key]`` names the speaker) with metadata ``role``,
    ``speaker`` (that name, else the role), ``session_id`` (the ``Memory``'s) and ``attachments``
    (the types of image, audio, video or document blocks, whose content is not stored). A
    flush is one ``add`` in conversation order, so a store created with ``weights="chat"``
    embeds each short reply with the turns before it. A message's time is its
    ``additional_kwargs[time_key]``, else the clock (``now``); times strictly increase, so
    two flushes at one clock reading still keep their order (a clock set back starts
    afresh). Ids are short random ones (a
    flush is a slice of a session, not numbered turns); the convention is
    :mod:`norax_core.conversation`'s, shared with ``add_chat_messages`` and
    ``norax_langchain.add_messages``. Tool output, system prompts, thinking
    and tool-call blocks are not stored by default; an empty flush writes nothing. ``Memory``
    flushes only when its queue is full: call :meth:`aflush` when a session ends so its
    last turns are stored too.

    **Reading.** Each time ``Memory`` builds the prompt, the block searches the namespace
    with the text of the last ``retrieval_context_window`` messages and returns one cited
    line per memory, best first: ``[<memory id> | <YYYY-MM-DD HH:MM>] speaker: text``, at
    most ``max_chars`` characters. Memories of every session of the namespace are searched
    (that is the point of long-term memory); ``where`` narrows them. :attr:`last_results`
    keeps the latest search's results with their per-signal scores.

    **Budget.** ``Memory`` truncates blocks with a priority above 0, lowest priority first,
    when the prompt passes its ``token_limit``; this block's :meth:`atruncate` then drops
    its least relevant lines first. With ``priority=0`` it is never truncated (only
    ``max_chars`` bounds it).

    Both ``Memory``'s async methods and its sync ``put`` / ``get`` work; the store's work
    runs in a worker thread, never on the event loop.

    Args:
        memory: The Norax store (open it with ``weights="chat"`` for conversations).
        **fields: The fields below.

    Raises:
        InvalidInputError: A bad namespace, kind, role, filter, clock or budget.
        WeightsError: Unknown preset or invalid weights.

    Example:
        >>> mem = NoraxMemory("./agent-memory", weights="chat")  # doctest: +SKIP
        >>> memory = Memory.from_defaults(  # doctest: +SKIP
        ...     session_id="s1", memory_blocks=[NoraxMemoryBlock(memory=mem, namespace="ana")]
        ... )
    """

    name: str = Field(
        default="norax_memory",
        description="Name of the block; the prompt shows its text inside <name> tags.",
    )
    priority: int = Field(
        default=1,
        description=(
            "Memory's truncation order: blocks with a lower priority above 0 are truncated "
            "first when the prompt passes Memory's token_limit; 0 is never truncated."
        ),
    )
    namespace: str | None = Field(
        default=None,
        description=(
            "Norax namespace (a user or an agent) written to and searched; None is "
            "'default'. Not the Memory's session id: every session of a namespace is searched."
        ),
    )
    similarity_top_k: int = Field(
        default=5, description="How many memories a search returns at most."
    )
    retrieval_context_window: int = Field(
        default=3,
        description=(
            "How many of the latest messages (of the stored roles, with text) form the query."
        ),
    )
    roles: tuple[str, ...] = Field(
        default=DEFAULT_ROLES,
        description=(
            "Message roles stored and used in queries ('user', 'assistant', 'tool', "
            "'system', ...); tool output and system prompts are left out by default."
        ),
    )
    kind: str = Field(
        default="episodic",
        description="Norax memory kind of the stored messages; it sets their decay rate.",
    )
    weights: Weights | str | dict[str, float] | None = Field(
        default=None,
        description=(
            "Fusion weights for the searches: a norax Weights, a preset name or a mapping of "
            "signal to weight; None takes the store's."
        ),
    )
    where: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Chroma filter on the memories' metadata (role, speaker, session_id, ...) applied "
            "inside every signal before ranking, e.g. {'role': 'user'}."
        ),
    )
    min_score: float = Field(
        default=0.0,
        description="Memories whose fused score is below this are left out of the prompt.",
    )
    max_chars: int = Field(
        default=2000,
        description="Most characters the block returns, header included.",
    )
    max_memory_chars: int = Field(
        default=400,
        description="Longer memories are cut to this many characters (with an ellipsis).",
    )
    header: str = Field(
        default=DEFAULT_HEADER,
        description="First line of the block's text; '' for none.",
    )
    now: datetime | float | str | None = Field(
        default=None,
        description=(
            "The clock (datetime, ISO 8601 string or epoch seconds) for recency and for the "
            "time of messages without their own; pin it for reproducible runs. None is now."
        ),
    )
    time_key: str = Field(
        default="created_at",
        description="additional_kwargs key holding a message's own time, if it has one.",
    )
    speaker_key: str = Field(
        default="name",
        description=(
            "additional_kwargs key holding the speaker's name (else the role is the speaker)."
        ),
    )
    speaker_in_text: bool = Field(
        default=True,
        description=(
            "Store '<name>: <text>' for messages whose speaker has a name (the form the "
            "'chat' preset was fitted on); False stores the bare text. The speaker is always "
            "in the metadata."
        ),
    )

    _memory: NoraxMemory = PrivateAttr()
    _last_results: list[SearchResult] = PrivateAttr(default_factory=list)
    _last: tuple[float, float] | None = PrivateAttr(default=None)
    """The clock and the last message time of the latest flush."""

    def __init__(self, *, memory: NoraxMemory, **fields: Any) -> None:
        super().__init__(**fields)
        if not isinstance(memory, NoraxMemory):
            raise InvalidInputError(f"memory must be a NoraxMemory, got {type(memory).__name__}")
        self._memory = memory
        self._check()

    def _check(self) -> None:
        if self.namespace is not None:
            check.namespace(self.namespace)
        check.name(self.kind, "kind")
        check.k(self.similarity_top_k)
        if self.priority < 0:
            raise InvalidInputError(f"priority must be >= 0, got {self.priority}")
        for what in ("retrieval_context_window", "max_chars", "max_memory_chars"):
            value = getattr(self, what)
            if value < 1:
                raise InvalidInputError(f"{what} must be >= 1, got {value}")
        if not math.isfinite(self.min_score):
            raise InvalidInputError(f"min_score must be finite, got {self.min_score}")
        _roles(self.roles)
        check.where(self.where)
        if self.weights is not None:
            resolve_weights(self.weights)
        if self.now is not None:
            check.timestamp(self.now, "now")

    @property
    def memory(self) -> NoraxMemory:
        """The Norax store behind the block."""
        return self._memory

    @property
    def last_results(self) -> list[SearchResult]:
        """The latest search's results (with ``score`` and ``signals``), best first."""
        return list(self._last_results)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Store the flushed messages, one memory each, in one add."""
        turns, own = _chat_turns(
            messages, roles=self.roles, speaker_key=self.speaker_key, time_key=self.time_key
        )
        if not turns:
            return
        # Computed before the add is awaited, so concurrent flushes never share a time. A
        # flush comes after the previous one unless the clock was set back (a replay).
        base = time.time() if self.now is None else check.timestamp(self.now, "now")
        after = self._last is not None and base >= self._last[0]
        times = turn_times(own, base, floor=self._last[1] if after and self._last else None)
        self._last = (base, times[-1])
        await awrite_turns(
            self._memory,
            turns,
            times,
            namespace=self.namespace,
            kind=self.kind,
            speaker_in_text=self.speaker_in_text,
        )

    def _query(self, messages: list[ChatMessage]) -> str:
        turns, _ = _chat_turns(messages, roles=self.roles)
        return "\n".join(t.text for t in turns[-self.retrieval_context_window :])

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The memories the latest messages call for, as cited lines ('' for none)."""
        query = self._query(messages or [])
        if not query:
            self._last_results = []
            return ""
        results = await self._memory.asearch(
            query,
            k=self.similarity_top_k,
            namespace=self.namespace,
            where=self.where,
            now=self.now,
            weights=self.weights,
        )
        self._last_results = [r for r in results if r.score >= self.min_score]
        return _render_memories(
            self._last_results,
            header=self.header,
            max_chars=self.max_chars,
            max_memory_chars=self.max_memory_chars,
        )

    async def aflush(self, memory: Memory) -> int:
        """End of a session: pass the messages still in ``memory``'s short-term queue on.

        ``Memory`` hands messages to its blocks only when its queue passes the token limit,
        so the last turns of a session would never reach long-term memory. This gives every
        block of ``memory`` (this one among them) the messages still queued, as ``Memory``'s
        own flush does, then archives them in its chat store. Returns how many messages were
        flushed.

        Raises:
            InvalidInputError: This block is not one of ``memory``'s blocks.
        """
        if not any(block is self for block in memory.memory_blocks):
            raise InvalidInputError("this NoraxMemoryBlock is not one of the Memory's blocks")
        queued = await memory.sql_store.get_messages(memory.session_id, status=MessageStatus.ACTIVE)
        if not queued:
            return 0
        # Blocks first, archive after: a failed write leaves the messages queued, not lost.
        for block in memory.memory_blocks:
            await block.aput(queued, from_short_term_memory=True, session_id=memory.session_id)
        await memory.sql_store.archive_oldest_messages(memory.session_id, n=len(queued))
        return len(queued)

    def flush(self, memory: Memory) -> int:
        """Sync :meth:`aflush`."""
        return asyncio_run(self.aflush(memory))

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the least relevant lines until about ``tokens_to_truncate`` tokens are gone.

        Tokens are counted with LlamaIndex's default tokenizer (``Memory``'s unless given
        another). Returns ``None`` when no memory line is left.
        """
        if not isinstance(content, str) or not content:
            return None
        lines = content.split("\n")
        keep = self.header.count("\n") + 1 if self.header else 0
        count = get_tokenizer()
        removed = 0
        while len(lines) > keep and removed < tokens_to_truncate:
            removed += len(count(lines.pop())) + 1
        return "\n".join(lines) if len(lines) > keep else None
