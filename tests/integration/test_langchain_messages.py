"""norax_langchain.add_messages: a conversation becomes memories in one write, speaker kept."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage

from norax_core import DuplicateIdError, InvalidInputError, NoraxMemory
from norax_langchain import add_messages

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 20, 18, 0, tzinfo=timezone.utc)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)

CHAT = [
    SystemMessage("You are a travel assistant."),
    HumanMessage("Did you visit the Louvre museum in Paris last summer?", name="ana", id="m-1"),
    AIMessage("Yes, with my sister!", name="bot"),
    AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}]),  # no text
    ToolMessage("museum open 9-18", tool_call_id="c1"),
    ChatMessage("Noted for the itinerary.", role="planner"),
]


@pytest.fixture
def mem(embedder: Any, extractor: Any) -> Iterator[NoraxMemory]:
    with NoraxMemory(embedder=embedder, extractor=extractor) as m:
        yield m


def test_one_memory_per_message_with_its_speaker(mem: NoraxMemory) -> None:
    calls: list[list[str]] = []
    add = mem.add

    def spy(texts: Any, **kw: Any) -> list[str]:
        calls.append(list(texts))
        return add(texts, **kw)

    mem.add = spy  # type: ignore[method-assign]
    ids = add_messages(mem, CHAT, session_id="trip", created_at=T0, namespace="ana")
    # user and assistant turns with text (the convention's default roles)
    assert ids == ["trip:000001", "trip:000002"]
    assert calls == [["ana: " + CHAT[1].text, "bot: " + CHAT[2].text]]  # one add, in order
    got = {m.id: m for m in mem.get(ids)}
    assert dict(got["trip:000001"].metadata) == {
        "role": "user",
        "speaker": "ana",
        "session_id": "trip",
        "turn": 1,
        "message_id": "m-1",
    }
    assert got["trip:000002"].metadata["role"] == "assistant"
    assert got["trip:000002"].metadata["speaker"] == "bot"
    assert {m.namespace for m in got.values()} == {"ana"}
    # one time for the session: the turns are spaced a millisecond apart, in order
    assert got["trip:000001"].created_at == T0
    assert got["trip:000002"].created_at == T0 + timedelta(milliseconds=1)
    hits = mem.search("sister", k=1, namespace="ana", where={"role": "assistant"}, now=NOW)
    assert [h.id for h in hits] == ["trip:000002"]


def test_every_role_on_request_with_shared_names(mem: NoraxMemory) -> None:
    ids = add_messages(mem, CHAT, session_id="trip", created_at=T0, roles=None)
    assert ids == ["trip:000000", "trip:000001", "trip:000002", "trip:000004", "trip:000005"]
    got = {m.id: m for m in mem.get(ids)}
    assert {i: (m.metadata["role"], m.metadata["speaker"]) for i, m in got.items()} == {
        "trip:000000": ("system", "system"),
        "trip:000001": ("user", "ana"),
        "trip:000002": ("assistant", "bot"),
        "trip:000004": ("tool", "tool"),
        "trip:000005": ("planner", "planner"),
    }
    assert got["trip:000000"].text == CHAT[0].text  # known only by its role: the bare text
    assert add_messages(mem, CHAT, session_id="t2", roles=["human"]) == ["t2:000001"]
    with pytest.raises(InvalidInputError, match="unknown message roles"):
        add_messages(mem, CHAT, session_id="t3", roles=["narrator"])
    assert add_messages(mem, CHAT, session_id="t4", speaker_in_text=False, roles=["ai"]) == [
        "t4:000002"
    ]
    assert mem.get(["t4:000002"])[0].text == CHAT[2].text


def test_times_one_per_message(mem: NoraxMemory) -> None:
    times = [T0 + timedelta(minutes=i) for i in range(len(CHAT))]
    ids = add_messages(mem, CHAT, session_id="s", created_at=times, roles=None)
    assert [m.created_at for m in mem.get(ids)] == [times[i] for i in (0, 1, 2, 4, 5)]
    with pytest.raises(InvalidInputError, match="6 messages"):
        add_messages(mem, CHAT, session_id="s2", created_at=times[:2])
    with pytest.raises(InvalidInputError, match="message 2 is dated before message 1"):
        add_messages(mem, CHAT, session_id="s3", created_at=[T0, T0, T0 - timedelta(1), T0, T0, T0])
    assert mem.count() == 5


def test_again_fails_without_upsert_and_replaces_with_it(mem: NoraxMemory) -> None:
    add_messages(mem, CHAT[:2], session_id="s", created_at=T0)
    with pytest.raises(DuplicateIdError):
        add_messages(mem, CHAT, session_id="s", created_at=T0)
    assert mem.count() == 1  # the failed batch wrote nothing
    ids = add_messages(mem, CHAT, session_id="s", created_at=T0, upsert=True)
    assert mem.count() == 2 and ids == ["s:000001", "s:000002"]
    # the rest of the session later: numbered after what is stored
    later = [HumanMessage("And the Orsay?"), AIMessage("Closed on Mondays.")]
    assert add_messages(mem, later, session_id="s", first_turn=len(CHAT), created_at=T0) == [
        "s:000006",
        "s:000007",
    ]
    with pytest.raises(InvalidInputError):
        add_messages(mem, CHAT, session_id=" ")
    with pytest.raises(InvalidInputError, match="first_turn"):
        add_messages(mem, CHAT, session_id="x", first_turn=-1)
    with pytest.raises(InvalidInputError, match="not a LangChain BaseMessage"):
        add_messages(mem, [*CHAT, "hi"], session_id="x")  # type: ignore[list-item]
    assert mem.count() == 4


def test_embed_context_gives_a_short_reply_its_question(embedder: Any, extractor: Any) -> None:
    # The same conversation, all at one time: the write order keeps the order the context needs.
    def dense_of_reply(weights: str) -> float:
        with NoraxMemory(embedder=embedder, extractor=extractor, weights=weights) as m:
            add_messages(m, CHAT[1:3], session_id="s", created_at=T0)
            hits = m.search("Louvre museum trip in Paris", k=2, now=NOW)
            return next(h.signals["dense"] for h in hits if h.id == "s:000001")

    assert dense_of_reply("chat") > dense_of_reply("default") + 0.1
