"""Chat messages as memories: one memory a message, in conversation order.

An adapter turns its framework's message objects into :class:`Turn` rows (as
``norax_llamaindex`` does for ``ChatMessage``: its chat ingestion and its memory block) and
writes them with :func:`write_turns`: one ``add`` for the whole list, so a bad message writes
nothing and, with ``embed_context`` (the ``chat`` preset), each reply is embedded with the turns
before it.

Conventions:

* a message whose speaker has a name is stored as ``"<name>: <text>"`` (the LoCoMo form of
  ``norax_core.bench.data`` that the ``chat`` preset was fitted on), so the name is a keyword
  and an entity like any other; a message known only by its role (``user``, ``assistant``)
  is stored as its bare text, since a role word in every memory would only add a hub to the
  entity graph;
* the metadata keeps ``role``, ``speaker`` and, when known, ``session_id``;
* times strictly increase in conversation order. Norax orders a namespace's memories by
  time (ties by id) to find a turn's context, so two messages stamped alike (a chat log at
  one-second resolution, a batch flushed at one instant) are spaced :data:`TURN_STEP`
  apart; explicit times that go backwards are refused.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from norax_core import validation as check
from norax_core.errors import InvalidInputError
from norax_core.models import MetadataValue

if TYPE_CHECKING:
    from norax_core.engine import NoraxMemory

__all__ = [
    "TURN_STEP",
    "Turn",
    "awrite_turns",
    "new_turn_id",
    "turn_metadata",
    "turn_text",
    "turn_times",
    "write_turns",
]

TURN_STEP = 0.001
"""Seconds between two messages that would otherwise share a time."""


@dataclass(frozen=True)
class Turn:
    """One chat message to store, as the adapters extract it."""

    text: str
    """The message's own text (no speaker prefix)."""
    role: str
    """``user``, ``assistant``, ``tool``, ``system``..."""
    speaker: str
    """Who said it: a participant's name, else the role."""
    created_at: Any = None
    """The message's own time (datetime, ISO 8601 string, epoch seconds) or ``None``."""
    session_id: str | None = None
    """The conversation the message belongs to, if known."""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    """More flat metadata to store (for example the attachments a message carried)."""

    @property
    def named(self) -> bool:
        """Whether the speaker is a name rather than the role."""
        return self.speaker != self.role


def turn_text(turn: Turn, *, speaker_in_text: bool = True) -> str:
    """The stored text: ``"<speaker>: <text>"`` for a named speaker, else the bare text."""
    return f"{turn.speaker}: {turn.text}" if speaker_in_text and turn.named else turn.text


def turn_metadata(turn: Turn) -> dict[str, MetadataValue]:
    """``role``, ``speaker``, ``session_id`` (when known) and the turn's own metadata."""
    meta: dict[str, MetadataValue] = {**turn.metadata, "role": turn.role, "speaker": turn.speaker}
    if turn.session_id is not None:
        meta["session_id"] = turn.session_id
    return meta


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


def new_turn_id() -> str:
    """A fresh memory id, short enough to cite in a prompt (64 random bits)."""
    return uuid.uuid4().hex[:16]


def _columns(
    turns: Sequence[Turn], times: Sequence[float], *, speaker_in_text: bool
) -> dict[str, Any]:
    return {
        "texts": [turn_text(t, speaker_in_text=speaker_in_text) for t in turns],
        "ids": [new_turn_id() for _ in turns],
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
) -> list[str]:
    """Add ``turns`` at ``times`` (from :func:`turn_times`) in one ``add``; returns the ids.

    Raises:
        InvalidInputError: A text, time, kind, namespace or metadata value Norax refuses;
            nothing is written.
    """
    if not turns:
        return []
    cols = _columns(turns, times, speaker_in_text=speaker_in_text)
    texts = cols.pop("texts")
    return memory.add(texts, kind=kind, namespace=namespace, **cols)


async def awrite_turns(
    memory: NoraxMemory,
    turns: Sequence[Turn],
    times: Sequence[float],
    *,
    namespace: str | None = None,
    kind: str = "episodic",
    speaker_in_text: bool = True,
) -> list[str]:
    """Async :func:`write_turns`: the add runs in a worker thread."""
    if not turns:
        return []
    cols = _columns(turns, times, speaker_in_text=speaker_in_text)
    texts = cols.pop("texts")
    return await memory.aadd(texts, kind=kind, namespace=namespace, **cols)
