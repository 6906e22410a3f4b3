"""A LangGraph agent remembers across threads through langmem's tools over NoraxStore.

Real Chroma (embedded, on disk), the real embedding model and spaCy pipeline; the chat model
is scripted: it emits the tool calls a real model would and records what it was shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langmem import create_manage_memory_tool, create_search_memory_tool

from norax_core import NoraxMemory
from norax_langgraph import NoraxStore

pytestmark = pytest.mark.integration


class ScriptedChatModel(BaseChatModel):
    """Answers with the next scripted message and records the messages of every call."""

    script: list[AIMessage]
    seen: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])


def _call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{n}"}])


@pytest.fixture
def store(tmp_path: Path, embedder: Any, extractor: Any) -> Iterator[NoraxStore]:
    with NoraxMemory(tmp_path / "agent", embedder=embedder, extractor=extractor) as mem:
        yield NoraxStore(mem, index={"fields": ["content"]})


def _agent(store: NoraxStore, model: ScriptedChatModel) -> Any:
    namespace = ("memories", "{langgraph_user_id}")
    tools = [create_manage_memory_tool(namespace), create_search_memory_tool(namespace)]
    return create_agent(model, tools, store=store)


def test_agent_stores_in_one_thread_and_recalls_in_another(store: NoraxStore) -> None:
    facts = [
        "The user's daughter Mia is allergic to peanuts.",
        "The user deploys the billing service with GitHub Actions every Tuesday.",
        "The user prefers answers as short bullet points.",
    ]
    model = ScriptedChatModel(
        script=[
            *[
                _call("manage_memory", {"content": f, "action": "create"}, i)
                for i, f in enumerate(facts)
            ],
            AIMessage(content="Noted."),
            # a later conversation, another thread
            _call("search_memory", {"query": "What food is Mia allergic to?"}, 10),
            AIMessage(content="Mia is allergic to peanuts."),
        ]
    )
    agent = _agent(store, model)
    cfg = {"configurable": {"langgraph_user_id": "u1"}}
    agent.invoke(
        {"messages": [HumanMessage("Remember a few things about me.")]},
        {**cfg, "configurable": {**cfg["configurable"], "thread_id": "t1"}},
    )
    stored = store.search(("memories", "u1"), limit=10)
    assert sorted(i.value["content"] for i in stored) == sorted(facts)

    out = agent.invoke(
        {"messages": [HumanMessage("Can I bake a peanut cake for Mia?")]},
        {**cfg, "configurable": {**cfg["configurable"], "thread_id": "t2"}},
    )
    # The search's result reached the model on its next call, best match first.
    last_seen = model.seen[-1]
    tool_messages = [m for m in last_seen if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1
    found = json.loads(str(tool_messages[0].content))
    assert found[0]["value"]["content"] == facts[0]
    assert found[0]["signals"]["dense"] > 0 and found[0]["score"] > found[-1]["score"]
    assert out["messages"][-1].content == "Mia is allergic to peanuts."
    # The first thread's messages are not in the second's: the memory came from the store.
    assert not any("Remember a few things" in str(m.content) for m in last_seen)


def test_users_do_not_see_each_others_memories(store: NoraxStore) -> None:
    model = ScriptedChatModel(
        script=[
            _call("manage_memory", {"content": "Alice's locker code is 4711."}, 1),
            AIMessage(content="Saved."),
            _call("search_memory", {"query": "locker code"}, 2),
            AIMessage(content="I found nothing."),
        ]
    )
    agent = _agent(store, model)
    agent.invoke(
        {"messages": [HumanMessage("Remember my locker code.")]},
        {"configurable": {"langgraph_user_id": "alice", "thread_id": "a"}},
    )
    agent.invoke(
        {"messages": [HumanMessage("What is Alice's locker code?")]},
        {"configurable": {"langgraph_user_id": "mallory", "thread_id": "m"}},
    )
    tool_messages = [m for m in model.seen[-1] if isinstance(m, ToolMessage)]
    assert json.loads(str(tool_messages[0].content)) == []
    assert store.list_namespaces() == [("memories", "alice")]
