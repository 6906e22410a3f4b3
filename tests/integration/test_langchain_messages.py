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
    assert ids == ["trip:000000", "trip:000001", "trip:000002", "trip:000004", "trip:000005"]
    assert calls == [[m.text for m in CHAT if m.text]]  # one add, conversation order
    got = {m.id: m for m in mem.get(ids)}
    assert got["trip:000001"].text == CHAT[1].text
    assert dict(got["trip:000001"].metadata) == {
        "role": "human",
        "name": "ana",
        "session_id": "trip",
        "turn": 1,
        "message_id": "m-1",
    }
    assert got["trip:000002"].metadata["role"] == "ai"
    assert got["trip:000002"].metadata["name"] == "bot"
    assert got["trip:000000"].metadata["role"] == "system"
    assert got["trip:000004"].metadata["role"] == "tool"
    assert got["trip:000005"].metadata["role"] == "planner"
    assert {m.namespace for m in got.values()} == {"ana"}
    assert {m.created_at for m in got.values()} == {T0}
    hits = mem.search("sister", k=1, namespace="ana", where={"role": "ai"}, now=NOW)
    assert [h.id for h in hits] == ["trip:000002"]


def test_times_one_per_message(mem: NoraxMemory) -> None:
    times = [T0 + timedelta(minutes=i) for i in range(len(CHAT))]
    ids = add_messages(mem, CHAT, session_id="s", created_at=times)
    assert [m.created_at for m in mem.get(ids)] == [times[i] for i in (0, 1, 2, 4, 5)]
    with pytest.raises(InvalidInputError, match="6 messages"):
        add_messages(mem, CHAT, session_id="s2", created_at=times[:2])
    assert mem.count() == 5


def test_again_fails_without_upsert_and_replaces_with_it(mem: NoraxMemory) -> None:
    add_messages(mem, CHAT[:3], session_id="s", created_at=T0)
    with pytest.raises(DuplicateIdError):
        add_messages(mem, CHAT, session_id="s", created_at=T0)
    assert mem.count() == 3  # the failed batch wrote nothing
    add_messages(mem, CHAT, session_id="s", created_at=T0, upsert=True)
    assert mem.count() == 5
    with pytest.raises(InvalidInputError):
        add_messages(mem, CHAT, session_id=" ")


def test_embed_context_gives_a_short_reply_its_question(embedder: Any, extractor: Any) -> None:
    # The same conversation, all at one time: the ids keep the order the context needs.
    def dense_of_reply(weights: str) -> float:
        with NoraxMemory(embedder=embedder, extractor=extractor, weights=weights) as m:
            add_messages(m, CHAT[1:3], session_id="s", created_at=T0)
            hits = m.search("Louvre museum trip in Paris", k=2, now=NOW)
            return next(h.signals["dense"] for h in hits if h.id == "s:000001")

    assert dense_of_reply("chat") > dense_of_reply("default") + 0.1
