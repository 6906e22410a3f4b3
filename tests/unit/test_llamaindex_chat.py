"""Chat messages to turns and search results to the memory block's text: pure conversions."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from llama_index.core.base.llms.types import (
    AudioBlock,
    ChatMessage,
    CitableBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)

from norax_core import SearchResult
from norax_core.errors import InvalidInputError
from norax_llamaindex._convert import (
    _block_texts,
    _chat_turns,
    _memory_line,
    _message_turn,
    _render_memories,
)

WHEN = datetime(2026, 9, 1, 10, 5, tzinfo=timezone.utc)
IMAGE = ImageBlock(url="https://example.invalid/a.png")


def result(mid: str, text: str, **metadata: object) -> SearchResult:
    return SearchResult(
        id=mid, text=text, kind="episodic", created_at=WHEN, namespace="ana", metadata=metadata
    )


def test_block_texts_keep_text_and_list_attachments() -> None:
    blocks = [
        TextBlock(text="look"),
        IMAGE,
        ThinkingBlock(content="hidden reasoning"),
        ToolCallBlock(tool_name="f", tool_kwargs={}),
        CitableBlock(title="t", source="s", content=[TextBlock(text="quoted"), IMAGE]),
        AudioBlock(url="https://example.invalid/a.mp3"),
        DocumentBlock(url="https://example.invalid/a.pdf"),
    ]
    assert _block_texts(blocks) == (["look", "quoted"], ["image", "image", "audio", "document"])


def test_message_turn_speaker_session_time_and_attachments() -> None:
    message = ChatMessage(
        role="user",
        blocks=[TextBlock(text=" Hello "), IMAGE, TextBlock(text="there")],
        additional_kwargs={"name": "Caroline", "session_id": "s9", "created_at": "2026-09-01"},
    )
    turn = _message_turn(message)
    assert turn is not None
    assert (turn.text, turn.role, turn.speaker) == ("Hello \nthere", "user", "Caroline")
    assert (turn.session_id, turn.created_at) == ("s9", "2026-09-01")
    assert turn.metadata == {"attachments": "image"}
    assert _message_turn(message, session_id="given").session_id == "given"  # type: ignore[union-attr]
    assert turn.turn is None and _message_turn(message, turn=3).turn == 3  # type: ignore[union-attr]
    gemini = _message_turn(ChatMessage(role="model", content="Hi"))
    assert gemini is not None and (gemini.role, gemini.speaker) == ("assistant", "assistant")
    # a blank name falls back to the role; a message without text is no turn
    assert _message_turn(ChatMessage(role="tool", content="4", additional_kwargs={"name": " "}))
    assert _message_turn(ChatMessage(role="user", blocks=[IMAGE])) is None
    assert _message_turn(ChatMessage(role="user", content=" \n ")) is None


def test_chat_turns_filter_roles_and_take_given_times() -> None:
    messages = [
        ChatMessage(role="system", content="rules"),
        ChatMessage(role="user", content="a", additional_kwargs={"created_at": 5}),
        ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_name="f", tool_kwargs={})]),
        ChatMessage(role="tool", content="out"),
        ChatMessage(role="assistant", content="b"),
    ]
    turns, own = _chat_turns(messages)
    assert [t.text for t in turns] == ["a", "b"] and own == [5, None]
    turns, own = _chat_turns(messages, roles=None, times=[1, 2, 3, 4, None])
    assert [t.role for t in turns] == ["system", "user", "tool", "assistant"]
    assert own == [1, 2, 4, None]
    with pytest.raises(InvalidInputError, match="unknown message roles"):
        _chat_turns(messages, roles=("narrator",))
    turns, _ = _chat_turns(messages, roles=("system",), session_id="d1", first_turn=10)
    assert [(t.text, t.turn, t.session_id) for t in turns] == [("rules", 10, "d1")]
    assert all(t.turn is None for t in _chat_turns(messages)[0])  # no position without it
    with pytest.raises(InvalidInputError, match="message 1 is a str"):
        _chat_turns([messages[0], "hi"])  # type: ignore[list-item]


def test_memory_line_cites_id_time_and_speaker_once() -> None:
    assert (
        _memory_line(result("m1", "user: I moved\nto Porto.", speaker="user"), 400)
        == "[m1 | 2026-09-01 10:05] user: I moved to Porto."
    )
    assert (
        _memory_line(result("m2", "Deploys go through CI.", speaker="Colby"), 400)
        == "[m2 | 2026-09-01 10:05] Colby: Deploys go through CI."
    )
    assert _memory_line(result("m3", "x" * 50), 10).endswith("] xxxxxxxxx…")


def test_render_keeps_rank_order_within_the_budget() -> None:
    results = [result(f"m{i}", f"memory number {i}") for i in range(5)]
    full = _render_memories(results, header="Memories:", max_chars=10_000, max_memory_chars=400)
    lines = full.split("\n")
    assert lines[0] == "Memories:" and [x.split(" ")[0] for x in lines[1:]] == [
        f"[m{i}" for i in range(5)
    ]
    cut = _render_memories(
        results, header="Memories:", max_chars=len(full) - 1, max_memory_chars=400
    )
    assert cut == "\n".join(lines[:-1]) and len(cut) <= len(full) - 1
    tiny = _render_memories(results, header="", max_chars=12, max_memory_chars=400)
    assert tiny == lines[1][:11] + "…" and len(tiny) == 12  # the best one, cut to fit
    assert _render_memories([], header="Memories:", max_chars=100, max_memory_chars=400) == ""
    assert _render_memories(results, header="Memories:", max_chars=9, max_memory_chars=9) == ""
