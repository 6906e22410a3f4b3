"""OpenAIEmbedder with the real openai clients against a local OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from norax_core.embedders import OpenAIEmbedder, resolve_embedder
from norax_core.errors import NoraxError

try:  # `python -m pytest` puts the repo root on sys.path, tests/conftest.py puts tests/
    from tests.openai_server import FakeOpenAIServer, fake_embedding
except ImportError:
    from openai_server import FakeOpenAIServer, fake_embedding

openai = pytest.importorskip("openai")

TEXTS = [
    f"memory number {i} about {topic}"
    for i, topic in enumerate(
        ["coffee", "the dentist", "Base wallets", "hiking", "tax forms", "a birthday", "jazz"] * 2
    )
]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def make(server: FakeOpenAIServer, **kwargs: object) -> OpenAIEmbedder:
    return OpenAIEmbedder(api_key="test", base_url=server.base_url, **kwargs)  # type: ignore[arg-type]


def test_sync_embed(server: FakeOpenAIServer) -> None:
    emb = make(server)
    out = emb.embed(TEXTS)
    assert (emb.name, emb.dim) == ("openai:text-embedding-3-small", 1536)
    assert out.shape == (len(TEXTS), 1536) and out.dtype == np.float32
    np.testing.assert_allclose(out, server.expected(TEXTS), atol=1e-6)
    (request,) = server.embedding_requests()
    assert request.body["model"] == "text-embedding-3-small"
    assert request.body["input"] == TEXTS
    assert request.headers["authorization"] == "Bearer test"
    # The openai client asks for base64 by default and decodes it: the server must speak it.
    assert request.body["encoding_format"] == "base64"
    assert "dimensions" not in request.body


async def test_async_embed(server: FakeOpenAIServer) -> None:
    emb = make(server)
    out = await emb.aembed(TEXTS)
    np.testing.assert_allclose(out, server.expected(TEXTS), atol=1e-6)
    assert len(server.embedding_requests()) == 1


@pytest.mark.parametrize("use_async", [False, True])
async def test_batches_and_restores_order(use_async: bool) -> None:
    with FakeOpenAIServer(shuffle=True) as server:
        emb = make(server, batch_size=3)
        out = await emb.aembed(TEXTS) if use_async else emb.embed(TEXTS)
        sizes = [len(r.body["input"]) for r in server.embedding_requests()]
    assert sizes == [3, 3, 3, 3, 2]
    np.testing.assert_allclose(out, server.expected(TEXTS), atol=1e-6)


def test_dimensions_passed_through(server: FakeOpenAIServer) -> None:
    emb = make(server, model="text-embedding-3-large", dimensions=256)
    out = emb.embed(["a short text"])
    assert emb.dim == 256 and out.shape == (1, 256)
    assert server.embedding_requests()[0].body["dimensions"] == 256
    np.testing.assert_allclose(out[0], fake_embedding("a short text", 256), atol=1e-6)


def test_unknown_model_dimension_is_probed(server: FakeOpenAIServer) -> None:
    server.default_dim = 768
    emb = make(server, model="nomic-embed-text")
    assert (emb.name, emb.dim) == ("openai:nomic-embed-text", 768)
    assert len(server.embedding_requests()) == 1  # the probe
    assert emb.embed(["x", "y"]).shape == (2, 768)


def test_wrong_dimension_from_server_is_rejected(server: FakeOpenAIServer) -> None:
    server.default_dim = 99
    emb = make(server, model="local-model", dimensions=None)
    server.default_dim = 100  # the server changes model behind our back
    with pytest.raises(NoraxError, match="dimension 100, expected 99"):
        emb.embed(["x"])


@pytest.mark.parametrize("status", [400, 401, 429, 500])
def test_server_error_becomes_norax_error(server: FakeOpenAIServer, status: int) -> None:
    client = openai.OpenAI(api_key="test", base_url=server.base_url, max_retries=0)
    emb = OpenAIEmbedder(client=client)
    server.fail_next(status, "boom from the fake server")
    with pytest.raises(NoraxError, match="boom from the fake server") as info:
        emb.embed(["x"])
    assert isinstance(info.value.__cause__, openai.APIStatusError)
    assert info.value.__cause__.status_code == status
    assert emb.embed(["x"]).shape == (1, 1536)  # the next call succeeds


async def test_async_server_error_becomes_norax_error(server: FakeOpenAIServer) -> None:
    emb = OpenAIEmbedder(
        async_client=openai.AsyncOpenAI(api_key="test", base_url=server.base_url, max_retries=0)
    )
    server.fail_next(503, "overloaded")
    with pytest.raises(NoraxError, match="overloaded") as info:
        await emb.aembed(["x"])
    assert isinstance(info.value.__cause__, openai.InternalServerError)


def test_connection_error_becomes_norax_error(server: FakeOpenAIServer) -> None:
    url = server.base_url
    server.stop()
    client = openai.OpenAI(api_key="test", base_url=url, max_retries=0, timeout=5)
    with pytest.raises(NoraxError) as info:
        OpenAIEmbedder(client=client).embed(["x"])
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


async def test_given_sync_client_serves_aembed_from_a_thread(server: FakeOpenAIServer) -> None:
    emb = OpenAIEmbedder(client=openai.OpenAI(api_key="test", base_url=server.base_url))
    out = await emb.aembed(["hello"])
    np.testing.assert_allclose(out, server.expected(["hello"]), atol=1e-6)


def test_empty_batch_sends_nothing(server: FakeOpenAIServer) -> None:
    assert make(server).embed([]).shape == (0, 1536)
    assert server.embedding_requests() == []


def test_resolve_openai_from_environment(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    emb = resolve_embedder("openai:text-embedding-3-large")
    assert emb.embed(["hi"]).shape == (1, 3072)
    assert server.embedding_requests()[0].body["model"] == "text-embedding-3-large"


def test_similar_texts_are_similar(server: FakeOpenAIServer) -> None:
    query, near, far = make(server).embed(
        ["my crypto wallet address", "the crypto wallet on Base", "chocolate cake recipe"]
    )
    assert float(query @ near) > float(query @ far)


def test_fake_server_also_serves_floats(server: FakeOpenAIServer) -> None:
    client = openai.OpenAI(api_key="test", base_url=server.base_url)
    response = client.embeddings.create(
        model="text-embedding-3-small", input="plain floats", encoding_format="float"
    )
    assert response.data[0].index == 0
    np.testing.assert_allclose(
        response.data[0].embedding, fake_embedding("plain floats", 1536), atol=1e-6
    )
    assert response.usage.total_tokens == 2
