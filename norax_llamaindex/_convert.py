"""Conversions between Norax results and LlamaIndex nodes (pure functions, unit-tested)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    CitableBlock,
    CitationBlock,
    MessageRole,
    TextBlock,
)
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, TextNode

from norax_core.conversation import DEFAULT_ROLES, Turn, normal_role, role_set
from norax_core.errors import InvalidInputError
from norax_core.ingest import MemoryRecord, memory_record
from norax_core.models import SEARCH_KEYS, SIGNALS, Explanation, QueryInfo, SearchResult
from norax_core.validation import storable_metadata as _storable_metadata  # noqa: F401 - the tests use it

logger = logging.getLogger("norax")


HIDDEN_KEYS = tuple(k for k in SEARCH_KEYS if k not in ("kind", "created_at"))
"""Search keys kept out of the text LLMs and embedders see (``excluded_*_metadata_keys``);
``kind`` and ``created_at`` stay visible, as the date of a memory helps answer questions."""

RERANK_KEYS = ("score", "signals", "query_plan", "explanation")
"""Metadata keys :class:`~norax_llamaindex.NoraxPostprocessor` sets on the node copies."""


def _hide(node: BaseNode, keys: tuple[str, ...]) -> dict[str, list[str]]:
    return {
        "excluded_llm_metadata_keys": list(
            dict.fromkeys([*node.excluded_llm_metadata_keys, *keys])
        ),
        "excluded_embed_metadata_keys": list(
            dict.fromkeys([*node.excluded_embed_metadata_keys, *keys])
        ),
    }


def _result_to_node(result: SearchResult) -> NodeWithScore:
    """A search result as ``NodeWithScore(TextNode(id_=memory id), score=fused score)``."""
    metadata = result.framework_metadata()
    node = TextNode(
        id_=result.id,
        text=result.text,
        metadata=metadata,
        excluded_llm_metadata_keys=list(HIDDEN_KEYS),
        excluded_embed_metadata_keys=list(HIDDEN_KEYS),
    )
    return NodeWithScore(node=node, score=result.score)


def _reranked(
    node: BaseNode,
    score: float,
    signals: Mapping[str, Mapping[str, float]],
    query_plan: QueryInfo,
) -> NodeWithScore:
    """A copy of ``node`` with its fused ``score``, ``signals``, query plan and explanation.

    Reranking has only the fusion stage: every later stage's contribution is 0. ``node`` is
    unchanged.
    """
    breakdown = {s: signals[s].get(node.node_id, 0.0) for s in SIGNALS}
    explained = {
        "query_plan": query_plan.to_dict(),
        "explanation": Explanation(fused=score).to_dict(),
    }
    copy = node.model_copy(
        update={
            "metadata": {**node.metadata, "score": score, "signals": breakdown, **explained},
            **_hide(node, RERANK_KEYS),
        }
    )
    return NodeWithScore(node=copy, score=score)


def _node_text(node: BaseNode) -> str:
    """The node's own text, without metadata."""
    return node.get_content(metadata_mode=MetadataMode.NONE)


def _node_to_memory(node: BaseNode, time_key: str) -> MemoryRecord:
    """``(id, text, created_at, kind, metadata)`` of a node to ingest.

    ``created_at`` is ``metadata[time_key]`` (``None`` when absent), ``kind`` the ``kind``
    metadata value when it is a string. Keys a search writes (:data:`SEARCH_KEYS`) are not
    stored, so a retrieved node re-ingests as the memory it came from.
    """
    return memory_record(
        node.node_id, _node_text(node), node.metadata, time_key=time_key, skip=SEARCH_KEYS
    )


ATTACHMENT_BLOCKS = ("image", "audio", "video", "document")
"""Block types a message may carry that hold no text; a memory records that they were there."""


def _block_texts(blocks: Sequence[Any]) -> tuple[list[str], list[str]]:
    """The texts of a message's content blocks, and the types of the blocks without text.

    Text blocks and the text inside citable and citation blocks count. Images, audio, video
    and documents are listed as attachments. Thinking, tool-call and cache blocks are the
    model's working, not the conversation, and are skipped.
    """
    texts: list[str] = []
    attachments: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, CitableBlock):
            inner, files = _block_texts(block.content)
            texts.extend(inner)
            attachments.extend(files)
        elif isinstance(block, CitationBlock):
            inner, files = _block_texts([block.cited_content])
            texts.extend(inner)
            attachments.extend(files)
        elif getattr(block, "block_type", None) in ATTACHMENT_BLOCKS:
            attachments.append(block.block_type)
    return texts, attachments


def _message_turn(
    message: ChatMessage,
    *,
    speaker_key: str = "name",
    time_key: str = "created_at",
    session_id: str | None = None,
    turn: int | None = None,
) -> Turn | None:
    """A chat message as a :class:`~norax_core.conversation.Turn`; ``None`` without text.

    The speaker is ``additional_kwargs[speaker_key]`` when it is a non-blank string (a
    participant's name, a tool's name), else the role. The time is
    ``additional_kwargs[time_key]``; the session is ``session_id``, else
    ``additional_kwargs["session_id"]`` (which LlamaIndex ``Memory`` sets on the messages it
    flushes). ``turn`` is the message's position in its session, when known. Blocks without
    text are listed in ``metadata["attachments"]``.
    """
    texts, attachments = _block_texts(message.blocks)
    text = "\n".join(t for t in texts if t.strip()).strip()
    if not text:
        return None
    extra = message.additional_kwargs
    role = _role(message)
    name = extra.get(speaker_key)
    session = session_id if session_id is not None else extra.get("session_id")
    return Turn(
        text=text,
        role=role,
        speaker=name.strip() if isinstance(name, str) and name.strip() else role,
        created_at=extra.get(time_key),
        session_id=None if session is None else str(session),
        metadata={"attachments": ",".join(dict.fromkeys(attachments))} if attachments else {},
        turn=turn,
    )


def _role(message: ChatMessage) -> str:
    """The message's role under its shared name (``chatbot`` and ``model`` are ``assistant``)."""
    role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
    return normal_role(role)


def _roles(roles: Collection[str] | None) -> frozenset[str] | None:
    """``roles`` as a set of shared role names (LlamaIndex's are all accepted); ``None``: all."""
    return role_set(roles)


def _chat_turns(
    messages: Sequence[ChatMessage],
    *,
    roles: Collection[str] | None = DEFAULT_ROLES,
    session_id: str | None = None,
    speaker_key: str = "name",
    time_key: str = "created_at",
    times: Sequence[Any] | None = None,
    first_turn: int | None = None,
) -> tuple[list[Turn], list[Any]]:
    """The messages worth storing, as turns, with each one's own time (or ``None``).

    Messages of other roles (``roles=None``: none) and messages without text are dropped.
    ``times`` (one per message) overrides the messages' own times where not ``None``. With
    ``first_turn``, message ``i`` is turn ``first_turn + i`` of its session.

    Raises:
        InvalidInputError: Not a ``ChatMessage``, or a role LlamaIndex does not know.
    """
    wanted = _roles(roles)
    turns: list[Turn] = []
    own: list[Any] = []
    for i, message in enumerate(messages):
        if not isinstance(message, ChatMessage):
            raise InvalidInputError(
                f"message {i} is a {type(message).__name__}, not a LlamaIndex ChatMessage"
            )
        if wanted is not None and _role(message) not in wanted:
            continue
        turn = _message_turn(
            message,
            speaker_key=speaker_key,
            time_key=time_key,
            session_id=session_id,
            turn=None if first_turn is None else first_turn + i,
        )
        if turn is None:
            continue
        turns.append(turn)
        given = None if times is None else times[i]
        own.append(turn.created_at if given is None else given)
    return turns, own


def _memory_line(result: SearchResult, max_chars: int) -> str:
    """``[id | YYYY-MM-DD HH:MM] speaker: text`` on one line, the text cut at ``max_chars``."""
    text = " ".join(result.text.split())
    speaker = result.metadata.get("speaker")
    if isinstance(speaker, str) and speaker and not text.startswith(f"{speaker}: "):
        text = f"{speaker}: {text}"
    if len(text) > max_chars:
        text = text[: max(max_chars - 1, 0)].rstrip() + "…"
    return f"[{result.id} | {result.created_at:%Y-%m-%d %H:%M}] {text}"


def _render_memories(
    results: Sequence[SearchResult], *, header: str, max_chars: int, max_memory_chars: int
) -> str:
    """The header and one cited line per result, best first, at most ``max_chars`` in all.

    The first line that would pass the budget ends the list; the best one is cut to fit
    when even it alone would pass. Empty when no memory fits.
    """
    body: list[str] = []
    used = len(header)
    for result in results:
        line = _memory_line(result, max_memory_chars)
        cost = len(line) + (1 if header or body else 0)  # the newline before it
        if used + cost > max_chars:
            room = max_chars - used - (1 if header else 0)
            if not body and room > 1:
                body.append(line[: room - 1] + "…")
            break
        body.append(line)
        used += cost
    if not body:
        return ""
    return "\n".join([header, *body] if header else body)
