"""A NoraxMemory on OpenAIEmbedder, against a real OpenAI-compatible server on 127.0.0.1.

No client is mocked: the openai package sends real HTTP requests to tests/openai_server.py,
whose vectors are a hashed bag of words (texts sharing words are similar).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from norax_core import NoraxMemory, OpenAIEmbedder
from norax_langchain import NoraxRetriever

try:  # `python -m pytest` puts the repo root on sys.path, tests/conftest.py puts tests/
    from tests.openai_server import FakeOpenAIServer
except ImportError:
    from openai_server import FakeOpenAIServer

pytest.importorskip("openai")
pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
MEMORIES = {
    "wallet": "Colby set up the team wallet on Base.",
    "deploys": "Deploys go through GitHub Actions after review.",
    "sync": "The weekly sync moved from Monday to Tuesday morning.",
    "lunch": "Lunch for the offsite: twelve vegetarian wraps.",
}


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def memory(server: FakeOpenAIServer, extractor) -> Iterator[NoraxMemory]:  # type: ignore[no-untyped-def]
    emb = OpenAIEmbedder("text-embedding-3-small", base_url=server.base_url, api_key="test")
    mem = NoraxMemory(embedder=emb, extractor=extractor, weights="seed")
    yield mem
    mem.close()


def sent_texts(server: FakeOpenAIServer) -> list[str]:
    return [t for r in server.embedding_requests() for t in r.body["input"]]


def add_all(mem: NoraxMemory) -> None:
    mem.add(
        list(MEMORIES.values()),
        ids=list(MEMORIES),
        created_at=[NOW - timedelta(days=d) for d in (2, 30, 3, 1)],
    )


def test_add_and_search_through_the_server(memory: NoraxMemory, server: FakeOpenAIServer) -> None:
    add_all(memory)
    assert sent_texts(server) == list(MEMORIES.values())  # one batch, in order
    assert memory.embedder.dim == 1536
    results = memory.search("team wallet on Base", k=2, now=NOW)
    assert results[0].id == "wallet"
    assert sent_texts(server)[-1] == "team wallet on Base"
    # the dense score is the cosine of the server's vectors
    expected = server.expected(["team wallet on Base", MEMORIES["wallet"]])
    cosine = float(np.dot(expected[0], expected[1]))
    assert results[0].signals["dense"] == pytest.approx(max(cosine, 0.0), abs=1e-5)
    for request in server.embedding_requests():
        headers = {k.lower(): v for k, v in request.headers.items()}
        assert headers["authorization"] == "Bearer test"


async def test_aadd_and_asearch_through_the_server(
    memory: NoraxMemory, server: FakeOpenAIServer
) -> None:
    await memory.aadd(list(MEMORIES.values()), ids=list(MEMORIES), created_at=NOW)
    results = await memory.asearch("weekly sync Tuesday", k=1, now=NOW)
    assert [r.id for r in results] == ["sync"]
    assert sent_texts(server) == [*MEMORIES.values(), "weekly sync Tuesday"]


async def test_langchain_retriever_through_the_server(
    memory: NoraxMemory, server: FakeOpenAIServer
) -> None:
    add_all(memory)
    retriever = NoraxRetriever(memory=memory, k=1, now=NOW)
    docs = retriever.invoke("Deploys via GitHub Actions")
    assert [d.id for d in docs] == ["deploys"]
    adocs = await retriever.ainvoke("offsite lunch wraps")
    assert [d.id for d in adocs] == ["lunch"]
    assert sent_texts(server)[-2:] == ["Deploys via GitHub Actions", "offsite lunch wraps"]


def test_server_errors_surface_and_nothing_is_written(
    memory: NoraxMemory, server: FakeOpenAIServer
) -> None:
    from norax_core.errors import NoraxError

    server.fail_next(status=400, message="bad request")
    with pytest.raises(NoraxError, match="bad request"):
        memory.add("Colby set up the team wallet on Base.", ids="x")
    assert memory.count() == 0
