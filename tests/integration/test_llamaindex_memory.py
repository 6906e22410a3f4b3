"""NoraxMemoryBlock and add_chat_messages with LlamaIndex Memory, a FunctionAgent and the real
models: an embedded Chroma store, the ONNX MiniLM embedder and spaCy from ../shared/models."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from llama_index.core.tools import FunctionTool

from norax_core import NoraxMemory
from norax_core.errors import DuplicateIdError, InvalidInputError, WeightsError
from norax_core.signals.context import embedding_text
from norax_llamaindex import NoraxMemoryBlock, aadd_chat_messages, add_chat_messages

pytestmark = pytest.mark.integration

DAY = timedelta(days=1)
START = datetime(2026, 9, 1, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def store(tmp_path: Path, embedder, extractor) -> Iterator[NoraxMemory]:  # type: ignore[no-untyped-def]
    """A persistent chat store: the `chat` preset embeds each turn with the two before it."""
    mem = NoraxMemory(tmp_path / "store", embedder=embedder, extractor=extractor, weights="chat")
    yield mem
    mem.close()


def stored(mem: NoraxMemory, namespace: str = "ana") -> list[Any]:
    """Every memory of the namespace in conversation order: time, then write order (the
    order the engine's context and neighbours use)."""
    ordered = mem._indexes.temporal.timeline(namespace)[0]
    return mem.get(list(ordered))


# -- an agent over several sessions ----------------------------------------------------------

FACT = "My sister Lena is getting married in Porto on the 14th of June."
DISTRACTOR = "My colleague Marta is getting married in Lisbon next spring."
SESSIONS: list[list[str]] = [
    [FACT, "I should book a hotel near the river.", "Also remind me to buy a suit.", "Bye!"],
    [DISTRACTOR, "What's the weather in Lisbon?", "I started learning the cello.", "Good night."],
    ["I made a mushroom risotto for dinner.", "It needed more parmesan.", "Next time saffron."],
    ["Where is my sister's wedding again?"],
]
REPLIES = {
    FACT: "Congratulations to Lena!",
    DISTRACTOR: "How nice for Marta.",
    "I should book a hotel near the river.": "Riverside hotels fill up early in June.",
}


class Scripted:
    """A scripted function-calling LLM's brain: records every prompt, calls the weather tool
    when asked about the weather, and otherwise answers from a script."""

    def __init__(self) -> None:
        self.prompts: list[list[ChatMessage]] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.prompts.append([m.model_copy(deep=True) for m in messages])
        if messages[-1].role.value == "tool":
            return ChatMessage(role="assistant", content="Sunny, 24 degrees in Lisbon.")
        question = next(m for m in reversed(messages) if m.role.value == "user").content or ""
        if "weather" in question and kwargs.get("tools"):
            call = ToolCallBlock(tool_call_id="c1", tool_name="get_weather", tool_kwargs={})
            return ChatMessage(role="assistant", blocks=[call])
        return ChatMessage(role="assistant", content=REPLIES.get(question, "Okay."))


def get_weather(city: str = "Lisbon") -> str:
    """The current weather in a city."""
    return f"{city}: sunny, 24 C, light wind from the north west, humidity 40 %"


def system_text(prompt: list[ChatMessage]) -> str:
    return "\n".join(m.content or "" for m in prompt if m.role.value == "system")


async def test_function_agent_recalls_an_old_fact_in_a_later_session(
    store: NoraxMemory,
) -> None:
    brain = Scripted()
    agent = FunctionAgent(
        llm=MockFunctionCallingLLM(response_generator=brain),
        tools=[FunctionTool.from_defaults(get_weather)],
        system_prompt="You are Ana's assistant.",
    )
    block = NoraxMemoryBlock(memory=store, namespace="ana")
    first_prompt_of: list[int] = []
    for n, turns in enumerate(SESSIONS):
        block.now = START + n * 30 * DAY
        # Chat history may fill 10 % of the 400-token limit (40 tokens): Memory flushes the
        # oldest turns to the block mid-session; the rest of the budget is the block's.
        memory = Memory.from_defaults(
            session_id=f"s{n + 1}",
            memory_blocks=[block],
            token_limit=400,
            chat_history_token_ratio=0.1,
        )
        first_prompt_of.append(len(brain.prompts))
        for text in turns:
            await agent.run(user_msg=text, memory=memory)
        if n == 0:  # Memory flushed mid-session, without aflush
            assert [m.metadata["session_id"] for m in stored(store)] == ["s1"] * store.count("ana")
            assert 0 < store.count("ana") < 2 * len(turns)
        if n < len(SESSIONS) - 1:
            await block.aflush(memory)  # the session ends: its last turns go to Norax too

    assert "<memory>" not in system_text(brain.prompts[0])  # nothing remembered yet
    last = system_text(brain.prompts[-1])
    fact = next(m for m in stored(store) if m.text == FACT)
    assert fact.metadata == {"role": "user", "speaker": "user", "session_id": "s1"}
    line = f"[{fact.id} | {fact.created_at:%Y-%m-%d %H:%M}] user: {FACT}"
    assert line in last  # the fact from 90 days ago reaches the LLM, cited
    assert last.index(line) < (last.index(DISTRACTOR) if DISTRACTOR in last else len(last))
    # ... and its search ranked it above the distractor, which shares "getting married in"
    texts = [r.text for r in block.last_results]
    distractor_rank = texts.index(DISTRACTOR) if DISTRACTOR in texts else 99
    assert texts.index(FACT) < distractor_rank

    memories = stored(store)
    # user and assistant turns with text, nothing else: not the tool call, not the tool's
    # output, not the system prompt, not the memory block's own text
    said = [t for s in SESSIONS[:-1] for t in s]
    assert len(memories) == 2 * len(said)
    assert {m.metadata["role"] for m in memories} == {"user", "assistant"}
    assert not any("<memory>" in m.text or "north west" in m.text for m in memories)
    assert [m.text for m in memories if m.metadata["role"] == "user"] == said
    assert "Sunny, 24 degrees in Lisbon." in [m.text for m in memories]
    times = [m.created_at for m in memories]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert all(re.fullmatch("[0-9a-f]{16}", m.id) for m in memories)  # flushes: random ids


async def test_a_flush_is_one_add_in_order_so_short_replies_carry_their_question(
    store: NoraxMemory, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the chat preset (embed_context 2) the stored vector of "Congratulations to
    Lena!" is the embedding of the reply followed by the turns before it."""
    adds: list[list[str]] = []
    real_add = store.add

    def add(texts: list[str], **kwargs: Any) -> list[str]:
        adds.append(list(texts))
        return real_add(texts, **kwargs)

    monkeypatch.setattr(store, "add", add)
    block = NoraxMemoryBlock(memory=store, namespace="ana", now=START)
    turns = [
        ChatMessage(role="user", content="I should book a hotel near the river."),
        ChatMessage(role="assistant", content="Riverside hotels fill up early in June."),
        ChatMessage(role="user", content=FACT),
        ChatMessage(role="assistant", content="Congratulations to Lena!"),
    ]
    await block.aput(turns[:2], from_short_term_memory=True, session_id="s1")
    await block.aput(turns[2:], from_short_term_memory=True, session_id="s1")  # same instant
    assert adds == [[t.content for t in turns[:2]], [t.content for t in turns[2:]]]
    memories = stored(store)
    assert [m.text for m in memories] == [t.content for t in turns]
    reply = memories[-1]
    expected = embedding_text(reply.text, [memories[1].text, memories[2].text], 10_000)
    want = embedder.embed([expected])[0]
    got = store.embeddings([reply.id])[reply.id]
    assert float(np.dot(got, want)) > 0.999


def test_sync_memory_put_get_and_flush(store: NoraxMemory) -> None:
    block = NoraxMemoryBlock(memory=store, namespace="ana", now=START)
    memory = Memory.from_defaults(
        session_id="s1", memory_blocks=[block], token_limit=100, chat_history_token_ratio=0.2
    )
    said = [("user", FACT), ("assistant", "Congratulations!"), ("user", "I need a passport.")]
    for role, text in [*said, ("assistant", "Noted.")]:
        memory.put(ChatMessage(role=role, content=text))
    assert 0 < store.count("ana") < 4  # Memory flushed the oldest
    assert block.flush(memory) > 0 and store.count("ana") == 4
    assert block.flush(memory) == 0 and store.count("ana") == 4  # nothing queued twice
    later = Memory.from_defaults(session_id="s2", memory_blocks=[block])
    later.put(ChatMessage(role="user", content="When is Lena's wedding?"))
    prompt = later.get()
    assert prompt[0].role.value == "system" and FACT in (prompt[0].content or "")
    assert block.last_results[0].text == FACT
    assert set(block.last_results[0].signals) == {"bm25", "dense", "temporal", "graph"}


async def test_memory_truncates_the_least_relevant_lines_first(store: NoraxMemory) -> None:
    facts = [
        FACT,
        "Lena's wedding dinner is at a restaurant by the Douro river.",
        "Lena asked me to give a speech at her wedding.",
        "The wedding guests fly in on the 12th of June.",
        "My passport expires in May.",
    ]
    add_chat_messages(
        store,
        [ChatMessage(role="user", content=f) for f in facts],
        namespace="ana",
        created_at=START,
    )
    question = [ChatMessage(role="user", content="Tell me about Lena's wedding.")]

    async def block_text(token_limit: int, priority: int) -> str:
        block = NoraxMemoryBlock(memory=store, namespace="ana", now=START, priority=priority)
        memory = Memory.from_defaults(memory_blocks=[block], token_limit=token_limit)
        await memory.aput_messages(question)
        got = await memory.aget()
        return "\n".join(m.content or "" for m in got if m.role.value == "system")

    full = await block_text(10_000, priority=1)
    cut = await block_text(130, priority=1)
    kept = await block_text(130, priority=0)  # priority 0: never truncated
    lines = [x for x in full.splitlines() if x.startswith("[")]
    cut_lines = [x for x in cut.splitlines() if x.startswith("[")]
    assert len(lines) == 5 and 0 < len(cut_lines) < 5
    assert cut_lines == lines[: len(cut_lines)]  # the best ones stay, in order
    assert kept == full


async def test_block_options_filter_floor_budget_and_truncate(store: NoraxMemory) -> None:
    said = [("user", FACT), ("assistant", "Congratulations to Lena!"), ("user", DISTRACTOR)]
    block = NoraxMemoryBlock(memory=store, namespace="ana", now=START)
    await block.aput([ChatMessage(role=r, content=t) for r, t in said], session_id="s1")
    question = [ChatMessage(role="user", content="Who is getting married?")]

    async def lines(**options: Any) -> list[str]:
        text = await NoraxMemoryBlock(memory=store, namespace="ana", now=START, **options).aget(
            question
        )
        return text.splitlines()

    full = await lines()
    assert full[0].startswith("Memories from earlier") and len(full) == 4
    assert all("assistant:" not in x for x in await lines(where={"role": "user"}))
    floor = sorted(r.score for r in store.search("Who is getting married?", namespace="ana"))[1]
    assert len(await lines(min_score=floor)) == 3  # the weakest one is left out
    assert len("\n".join(await lines(max_chars=200))) <= 200
    assert (await lines(header="", similarity_top_k=1)) == full[1:2]
    text = "\n".join(full)
    assert await block.atruncate(text, 1) == "\n".join(full[:-1])  # the least relevant first
    assert await block.atruncate(text, 10_000) is None
    assert await block.atruncate([], 5) is None  # type: ignore[arg-type]  # Memory passes []


async def test_edge_cases_of_flushed_messages(store: NoraxMemory) -> None:
    block = NoraxMemoryBlock(memory=store, namespace="ana", now=START)
    await block.aput([], from_short_term_memory=True)  # an empty flush
    picture = ImageBlock(url="https://example.invalid/dress.png")
    await block.aput(
        [
            ChatMessage(role="user", blocks=[picture]),  # no text: skipped
            ChatMessage(role="user", blocks=[TextBlock(text="The dress I chose."), picture]),
            ChatMessage(
                role="assistant",
                blocks=[ThinkingBlock(content="the user wants praise"), TextBlock(text="Lovely.")],
            ),
            ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_name="f", tool_kwargs={})]),
            ChatMessage(role="tool", content="42", additional_kwargs={"name": "f"}),
            ChatMessage(role="system", content="Be brief."),
            ChatMessage(role="user", content="   "),
        ],
        session_id="s1",
    )
    memories = stored(store)
    assert [m.text for m in memories] == ["The dress I chose.", "Lovely."]
    assert memories[0].metadata["attachments"] == "image"
    assert "attachments" not in memories[1].metadata
    # tool output is stored when asked for, under the tool's name
    tools = NoraxMemoryBlock(memory=store, namespace="ops", roles=("tool",), now=START)
    await tools.aput([ChatMessage(role="tool", content="42", additional_kwargs={"name": "f"})])
    assert [(m.text, m.metadata["role"]) for m in stored(store, "ops")] == [("f: 42", "tool")]
    # nothing to search with: no query, no block
    assert await block.aget([]) == "" and await block.aget(None) == ""
    assert await block.aget([ChatMessage(role="user", blocks=[picture])]) == ""


async def test_bad_input_is_refused_and_writes_nothing(store: NoraxMemory) -> None:
    block = NoraxMemoryBlock(memory=store, namespace="ana", now=START)
    bad_time = ChatMessage(role="user", content="hi", additional_kwargs={"created_at": "soon"})
    with pytest.raises(InvalidInputError, match="ISO 8601"):
        await block.aput([ChatMessage(role="user", content="first"), bad_time])
    nul = ChatMessage(role="user", content="bad \ud800 text")
    with pytest.raises(InvalidInputError):
        await block.aput([ChatMessage(role="user", content="first"), nul])
    assert store.count("ana") == 0
    with pytest.raises(InvalidInputError):
        NoraxMemoryBlock(memory=store, namespace="")
    with pytest.raises(InvalidInputError, match="roles"):
        NoraxMemoryBlock(memory=store, roles=("narrator",))
    with pytest.raises(InvalidInputError):
        NoraxMemoryBlock(memory=store, similarity_top_k=0)
    with pytest.raises(InvalidInputError):
        NoraxMemoryBlock(memory=store, priority=-1)
    with pytest.raises(InvalidInputError):
        NoraxMemoryBlock(memory=store, now="yesterday")
    with pytest.raises(InvalidInputError):
        NoraxMemoryBlock(memory=store, where={"norax_namespace": "x"})
    with pytest.raises(WeightsError):
        NoraxMemoryBlock(memory=store, weights="nope")
    with pytest.raises(InvalidInputError):
        NoraxMemoryBlock(memory="not a store")  # type: ignore[arg-type]
    other = Memory.from_defaults(memory_blocks=[])
    with pytest.raises(InvalidInputError, match="not one of"):
        await block.aflush(other)


async def test_concurrent_flushes_keep_distinct_ordered_times(store: NoraxMemory) -> None:
    block = NoraxMemoryBlock(memory=store, namespace="ana", now=START)
    batches = [
        [ChatMessage(role="user", content=f"note {i} {j}") for j in range(3)] for i in range(4)
    ]
    await asyncio.gather(*(block.aput(b) for b in batches))
    memories = stored(store)
    assert len(memories) == 12 and len({m.created_at for m in memories}) == 12
    for i, b in enumerate(batches):  # each flush keeps its own order
        order = [m.text for m in memories if m.text.startswith(f"note {i} ")]
        assert order == [m.content for m in b]
    # a clock set back (a replay of an old conversation) dates the messages by it
    block.now = START - 30 * DAY
    await block.aput([ChatMessage(role="user", content="replayed")])
    (old,) = [m for m in stored(store) if m.text == "replayed"]
    assert old.created_at == START - 30 * DAY


# -- add_chat_messages -----------------------------------------------------------------------

LOG = [
    ChatMessage(
        role="user",
        content="I went to the support group yesterday.",
        additional_kwargs={"name": "Caroline"},
    ),
    ChatMessage(
        role="assistant", content="That's brave! How was it?", additional_kwargs={"name": "Melanie"}
    ),
    ChatMessage(
        role="user",
        content="Inspiring. I want to work in counseling.",
        additional_kwargs={"name": "Caroline"},
    ),
]


def test_add_chat_messages_keeps_speakers_sessions_and_order(store: NoraxMemory) -> None:
    ids = add_chat_messages(store, LOG, session_id="d1", created_at=START, namespace="ana")
    assert ids == ["d1:000000", "d1:000001", "d1:000002"]
    memories = store.get(ids)
    assert [m.text for m in memories] == [
        "Caroline: I went to the support group yesterday.",
        "Melanie: That's brave! How was it?",
        "Caroline: Inspiring. I want to work in counseling.",
    ]
    assert [m.metadata for m in memories] == [
        {"role": r, "speaker": s, "session_id": "d1", "turn": i}
        for i, (r, s) in enumerate(
            [("user", "Caroline"), ("assistant", "Melanie"), ("user", "Caroline")]
        )
    ]
    times = [m.created_at for m in memories]
    assert times[0] == START and times == sorted(times) and len(set(times)) == 3
    assert [m.id for m in stored(store)] == ids
    # the speaker is a keyword and a filter
    hits = store.search("What does Caroline want to do?", k=1, namespace="ana", now=START)
    assert hits[0].id == ids[2]
    only = store.search("support", k=5, namespace="ana", where={"speaker": "Melanie"})
    assert [r.id for r in only] == [ids[1]]


async def test_aadd_chat_messages_per_message_times_and_roles(store: NoraxMemory) -> None:
    when = [START, START, START + DAY]  # a log at one-second resolution: ties are spaced
    ids = await aadd_chat_messages(
        store, LOG, created_at=when, namespace="ana", speaker_in_text=False, roles=None
    )
    memories = store.get(ids)
    assert [m.text for m in memories] == [m.content for m in LOG]
    assert memories[0].created_at == START and START < memories[1].created_at < START + DAY
    assert memories[2].created_at == START + DAY
    assert [m.id for m in stored(store)] == ids
    # no session id: no turn numbers, short random ids
    assert "session_id" not in memories[0].metadata and "turn" not in memories[0].metadata
    assert all(re.fullmatch("[0-9a-f]{16}", i) for i in ids)


def test_add_chat_messages_again_replaces_with_upsert_and_continues(store: NoraxMemory) -> None:
    add_chat_messages(store, LOG[:2], session_id="d1", created_at=START, namespace="ana")
    with pytest.raises(DuplicateIdError):
        add_chat_messages(store, LOG, session_id="d1", created_at=START, namespace="ana")
    assert store.count("ana") == 2  # the failed call wrote nothing
    ids = add_chat_messages(
        store, LOG, session_id="d1", created_at=START, namespace="ana", upsert=True
    )
    assert store.count("ana") == 3 and [m.id for m in stored(store)] == ids
    more = [ChatMessage(role="chatbot", content="Counseling suits you.")]
    (last,) = add_chat_messages(
        store, more, session_id="d1", first_turn=3, created_at=START + DAY, namespace="ana"
    )
    got = store.get([last])[0]
    assert last == "d1:000003" and got.metadata["role"] == "assistant"  # chatbot: assistant


def test_add_chat_messages_refuses_bad_input_whole(store: NoraxMemory) -> None:
    with pytest.raises(InvalidInputError, match="conversation order"):
        add_chat_messages(store, LOG, created_at=[START, START - DAY, START], namespace="ana")
    with pytest.raises(InvalidInputError, match="3 messages"):
        add_chat_messages(store, LOG, created_at=[START], namespace="ana")
    with pytest.raises(InvalidInputError, match="not a LlamaIndex ChatMessage"):
        add_chat_messages(store, [*LOG, "hello"], namespace="ana")  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        add_chat_messages(store, LOG, namespace="ana", kind="")
    with pytest.raises(InvalidInputError, match="first_turn"):
        add_chat_messages(store, LOG, session_id="d1", first_turn=-1, namespace="ana")
    assert store.count("ana") == 0
    assert add_chat_messages(store, [], namespace="ana") == []
