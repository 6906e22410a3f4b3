"""Chat messages as memories: one memory a message, in conversation order.

Both adapters store conversations through this module, so a chat log reads the same whichever
framework wrote it: ``norax_langchain.add_messages`` turns LangChain ``BaseMessage`` objects
into :class:`Turn` rows, ``norax_llamaindex.add_chat_messages`` and ``NoraxMemoryBlock`` turn
LlamaIndex ``ChatMessage`` objects into them, and all three write with :func:`write_turns`:
one ``add`` (or ``upsert``) for the whole list, so a bad message writes nothing and, with
``embed_context`` (the ``chat`` preset), each reply is embedded with the turns before it.

The convention, and why:

* **Ids.** A message whose session and position are known (a helper called with a session
  id: its position in the list, plus ``first_turn``) is stored as
  ``"{session_id}:{turn:06d}"``, so ingesting a session again with ``upsert=True`` replaces
  it instead of duplicating it, and the id says where the message came from. A message
  without a position (a memory block's flush, which sees a slice of a session) gets a short
  random id (64 bits, :func:`new_turn_id`), short enough to cite in a prompt.
* **Roles.** ``role`` is one vocabulary across frameworks, so one filter
  (``where={"role": "user"}``) works on memories either adapter wrote: LangChain's ``human``
  and ``ai`` become ``user`` and ``assistant`` (:data:`ROLE_ALIASES`, which also folds the
  ``chatbot`` and ``model`` roles LlamaIndex has for Cohere and Gemini into ``assistant``);
  other roles (``system``, ``tool``, a LangChain ``ChatMessage``'s own role) are kept as
  given. By default only ``user`` and ``assistant`` messages are stored
  (:data:`DEFAULT_ROLES`): system prompts repeat in every session and tool output is data,
  not conversation.
* **Metadata.** ``role``, ``speaker`` (the participant's name, else the role), and when known
  ``session_id``, ``turn`` and ``message_id`` (the framework message's own id), plus what an
  adapter adds (``attachments``).
* **Text.** A message whose speaker has a name is stored as ``"<name>: <text>"`` (the LoCoMo
  form of ``norax_core.bench.data`` that the ``chat`` preset was fitted on), so the name is a
  keyword and an entity like any other; a message known only by its role is stored as its
  bare text, since a role word in every memory would only add a hub to the entity graph.
* **Times.** A message keeps its own time; messages without one take the given default (else
  now). Times strictly increase in conversation order: a message not later than the one
  before it (a log at one-second resolution, a session given one time, a flush at one
  instant) is placed :data:`TURN_STEP` after it. Norax itself orders memories that share a
  time by write order (a persisted sequence number that an upsert keeps, and a list is
  written in one call in order), so the engine does not need the spacing; it is kept so the
  order is in the data anyone reads: ``created_at`` shows it in a table or an export, and it
  holds for memories written before stores numbered their writes. The spacing is
  deterministic, so re-ingesting a session gives it the same times. Explicit times that go
  backwards are refused: the messages are not in conversation order.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from norax_core import validation as check
from norax_core.errors import InvalidInputError
from norax_core.models import MetadataValue

if TYPE_CHECKING:
    from norax_core.engine import NoraxMemory

__all__ = [
    "DEFAULT_ROLES",
    "KNOWN_ROLES",
    "ROLE_ALIASES",
    "TURN_STEP",
    "Turn",
    "awrite_turns",
    "new_turn_id",
    "normal_role",
    "role_set",
    "turn_id",
    "turn_metadata",
    "turn_text",
    "turn_times",
    "write_turns",
]

ROLE_ALIASES = {"human": "user", "ai": "assistant", "chatbot": "assistant", "model": "assistant"}
"""Framework role names stored under the shared name."""

KNOWN_ROLES = ("user", "assistant", "system", "developer", "tool", "function")
"""The shared role names a ``roles`` selection may use (besides :data:`ROLE_ALIASES`)."""

DEFAULT_ROLES = ("user", "assistant")
"""Roles stored by default: the conversation itself, not system prompts or tool output."""

TURN_STEP = 0.001
"""Seconds between two messages that would otherwise share a time."""


def normal_role(role: str) -> str:
    """The shared name of a framework's role (``human`` -> ``user``, ``ai`` -> ``assistant``)."""
    return ROLE_ALIASES.get(role, role)


def role_set(roles: Collection[str] | None) -> frozenset[str] | None:
    """``roles`` as a set of shared role names; ``None`` means every role.

    Raises:
        InvalidInputError: A role that is neither in :data:`KNOWN_ROLES` nor an alias.
    """
    if roles is None:
        return None
    if isinstance(roles, str):
        roles = (roles,)
    valid = {*KNOWN_ROLES, *ROLE_ALIASES}
    unknown = sorted(str(r) for r in set(roles) - valid)
    if unknown:
        raise InvalidInputError(
            f"unknown message roles {unknown}; valid: {sorted(valid)} (None stores every role)"
        )
    return frozenset(normal_role(r) for r in roles)


@dataclass(frozen=True)
class Turn:
    """One chat message to store, as the adapters extract it."""

    text: str
    """The message's own text (no speaker prefix)."""
    role: str
    """``user``, ``assistant``, ``tool``, ``system``...; framework names are normalised."""
    speaker: str
    """Who said it: a participant's name, else the role."""
    created_at: Any = None
    """The message's own time (datetime, ISO 8601 string, epoch seconds) or ``None``."""
    session_id: str | None = None
    """The conversation the message belongs to, if known."""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    """More flat metadata to store (for example the attachments a message carried)."""
    turn: int | None = None
    """The message's position in its session, if known; with ``session_id`` it makes the id."""
    message_id: str | None = None
    """The framework message's own id, if it has one."""

    def __post_init__(self) -> None:
        role = normal_role(self.role)
        if role != self.role:
            if self.speaker == self.role:
                object.__setattr__(self, "speaker", role)
            object.__setattr__(self, "role", role)

    @property
    def named(self) -> bool:
        """Whether the speaker is a name rather than the role."""
        return self.speaker != self.role


def turn_text(turn: Turn, *, speaker_in_text: bool = True) -> str:
    """The stored text: ``"<speaker>: <text>"`` for a named speaker, else the bare text."""
    return f"{turn.speaker}: {turn.text}" if speaker_in_text and turn.named else turn.text


def turn_metadata(turn: Turn) -> dict[str, MetadataValue]:
    """``role``, ``speaker``, and when known ``session_id``, ``turn`` and ``message_id``."""
    meta: dict[str, MetadataValue] = {**turn.metadata, "role": turn.role, "speaker": turn.speaker}
    if turn.session_id is not None:
        meta["session_id"] = turn.session_id
    if turn.turn is not None:
        meta["turn"] = turn.turn
    if turn.message_id is not None:
        meta["message_id"] = turn.message_id
    return meta


def new_turn_id() -> str:
    """A fresh memory id, short enough to cite in a prompt (64 random bits)."""
    return uuid.uuid4().hex[:16]


def turn_id(turn: Turn) -> str:
    """``"{session_id}:{turn:06d}"`` when both are known, else a new random id."""
    if turn.session_id is not None and turn.turn is not None:
        return f"{turn.session_id}:{turn.turn:06d}"
    return new_turn_id()


def turn_times(
    explicit: Sequence[Any],
    default: Any = None,
    *,
    floor: float | None = None,
    step: float = TURN_STEP,
) -> list[float]:
    """Strictly increasing epoch seconds for messages in conversation order.

    Args:
        explicit: Each message's own time, or ``None``.
        default: The time of messages without one (default: the current time).
        floor: Messages without their own time come after this time (the last message of an
            earlier batch of the same conversation).
        step: Gap that separates two messages that would otherwise share a time.

    Returns:
        One time per message: its own (or ``default``), moved forward by ``step`` past the
        message before it when it is not later.

    Raises:
        InvalidInputError: A time is malformed, or an explicit time is earlier than an
            explicit time before it (the messages are not in conversation order).
    """
    base = time.time() if default is None else check.timestamp(default)
    out: list[float] = []
    last_explicit: tuple[int, float] | None = None
    for i, value in enumerate(explicit):
        if value is None:
            t = base if floor is None else max(base, round(floor + step, 6))
        else:
            t = check.timestamp(value, f"message {i}'s time")
            if last_explicit is not None and t < last_explicit[1]:
                raise InvalidInputError(
                    f"message {i} is dated before message {last_explicit[0]}: messages must be "
                    "given in conversation order"
                )
            last_explicit = (i, t)
        if out and t <= out[-1]:
            t = round(out[-1] + step, 6)  # whole microseconds, as datetimes show them
        out.append(t)
    return out


def _columns(
    turns: Sequence[Turn], times: Sequence[float], *, speaker_in_text: bool
) -> dict[str, Any]:
    ids = [turn_id(t) for t in turns]
    if len(set(ids)) != len(ids):
        raise InvalidInputError("two messages have the same session and turn number")
    return {
        "texts": [turn_text(t, speaker_in_text=speaker_in_text) for t in turns],
        "ids": ids,
        "created_at": list(times),
        "metadata": [turn_metadata(t) for t in turns],
    }


def write_turns(
    memory: NoraxMemory,
    turns: Sequence[Turn],
    times: Sequence[float],
    *,
    namespace: str | None = None,
    kind: str = "episodic",
    speaker_in_text: bool = True,
    upsert: bool = False,
) -> list[str]:
    """Add ``turns`` at ``times`` (from :func:`turn_times`) in one write; returns the ids.

    Args:
        memory: The store.
        turns: The messages, in conversation order.
        times: One time per turn.
        namespace: Namespace for all of them (default ``"default"``).
        kind: Memory kind for all of them.
        speaker_in_text: Prefix a named speaker to the text (see :func:`turn_text`).
        upsert: Replace memories that already have these ids instead of failing.

    Raises:
        InvalidInputError: A text, time, kind, namespace or metadata value Norax refuses;
            nothing is written.
        DuplicateIdError: Without ``upsert``, an id is already stored; nothing is written.
    """
    if not turns:
        return []
    cols = _columns(turns, times, speaker_in_text=speaker_in_text)
    write = memory.upsert if upsert else memory.add
    return write(cols.pop("texts"), kind=kind, namespace=namespace, **cols)


async def awrite_turns(
    memory: NoraxMemory,
    turns: Sequence[Turn],
    times: Sequence[float],
    *,
    namespace: str | None = None,
    kind: str = "episodic",
    speaker_in_text: bool = True,
    upsert: bool = False,
) -> list[str]:
    """Async :func:`write_turns`: the write runs in a worker thread."""
    return await asyncio.to_thread(
        write_turns,
        memory,
        turns,
        times,
        namespace=namespace,
        kind=kind,
        speaker_in_text=speaker_in_text,
        upsert=upsert,
    )
