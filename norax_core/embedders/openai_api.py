"""The OpenAI embeddings API (or any compatible server) as an :class:`Embedder`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from norax_core.embedders.base import _PROBE_TEXT, _check_texts, _l2_normalise, _to_matrix
from norax_core.errors import InvalidInputError, NoraxError

if TYPE_CHECKING:
    import openai


_OPENAI_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError(
            'OpenAIEmbedder needs the openai package: pip install "norax[openai]"'
        ) from exc
    return openai


class OpenAIEmbedder:
    """The OpenAI embeddings API, or any server that speaks it (``base_url``).

    Args:
        model: Embedding model id.
        client: An ``openai.OpenAI`` (or ``AzureOpenAI``) client; built from ``api_key``
            and ``base_url`` when omitted.
        async_client: An ``openai.AsyncOpenAI`` client for :meth:`aembed`. When omitted it is
            built from ``api_key`` and ``base_url``, except when only ``client`` was given:
            then :meth:`aembed` runs :meth:`embed` in a worker thread.
        api_key: API key; the openai package falls back to ``OPENAI_API_KEY``.
        base_url: API root, e.g. ``http://localhost:8000/v1``.
        dimensions: Ask the model for shorter vectors (text-embedding-3 models).
        batch_size: Texts per request.

    Raises:
        ImportError: The openai package is not installed.
        NoraxError: The client cannot be built (no key) or, for a model whose dimension is
            not known, the probe request that discovers it fails.

    ``dim`` is ``dimensions`` when given, else known for OpenAI's models, else discovered by
    embedding one probe text at construction.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        client: openai.OpenAI | None = None,
        async_client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 256,
    ) -> None:
        if not model:
            raise InvalidInputError("model must be a non-empty string")
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be at least 1, got {batch_size}")
        if dimensions is not None and dimensions < 1:
            raise InvalidInputError(f"dimensions must be at least 1 or None, got {dimensions}")
        self._openai = _import_openai()
        self.model = model
        self.name = f"openai:{model}"
        self.batch_size = batch_size
        self.dimensions = dimensions
        self._api_key = api_key
        self._base_url = base_url
        self._client = client
        self._async_client = async_client
        self._async_via_thread = client is not None and async_client is None
        if client is None and async_client is None:
            self._sync_client()  # fail fast when there is no key
        self.dim: int = (
            dimensions or _OPENAI_DIMS.get(model) or self._request([_PROBE_TEXT]).shape[1]
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, dim={self.dim})"

    def _build(self, cls: Callable[..., Any]) -> Any:
        try:
            return cls(api_key=self._api_key, base_url=self._base_url)
        except self._openai.OpenAIError as exc:
            raise NoraxError(f"could not create the OpenAI client: {exc}") from exc

    def _sync_client(self) -> Any:
        if self._client is None:
            self._client = self._build(self._openai.OpenAI)
        return self._client

    def _kwargs(self, batch: list[str]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "input": batch}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        return kwargs

    def _parse(self, response: Any, n: int, dim: int | None) -> np.ndarray:
        data = sorted(response.data, key=lambda item: item.index)
        if [item.index for item in data] != list(range(n)):
            raise NoraxError(f"{self.name} answered {len(data)} embeddings for {n} texts")
        return _to_matrix([item.embedding for item in data], n, dim, self.name)

    def _fail(self, exc: Exception, n: int) -> NoraxError:
        return NoraxError(f"{self.name}: embedding request for {n} texts failed: {exc}")

    def _request(self, batch: list[str], dim: int | None = None) -> np.ndarray:
        try:
            response = self._sync_client().embeddings.create(**self._kwargs(batch))
        except self._openai.OpenAIError as exc:
            raise self._fail(exc, len(batch)) from exc
        return self._parse(response, len(batch), dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeds texts, ``batch_size`` per request; empty strings are rejected by the API.

        Raises:
            NoraxError: The API call failed or returned malformed vectors.
        """
        batch = _check_texts(texts)
        parts = [
            self._request(batch[i : i + self.batch_size], self.dim)
            for i in range(0, len(batch), self.batch_size)
        ]
        return (
            _l2_normalise(np.concatenate(parts)) if parts else np.zeros((0, self.dim), np.float32)
        )

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        """Async twin of :meth:`embed`, on ``openai.AsyncOpenAI``."""
        if self._async_via_thread:
            return await asyncio.to_thread(self.embed, texts)
        if self._async_client is None:
            self._async_client = self._build(self._openai.AsyncOpenAI)
        batch = _check_texts(texts)
        parts = []
        for i in range(0, len(batch), self.batch_size):
            chunk = batch[i : i + self.batch_size]
            try:
                response = await self._async_client.embeddings.create(**self._kwargs(chunk))
            except self._openai.OpenAIError as exc:
                raise self._fail(exc, len(chunk)) from exc
            parts.append(self._parse(response, len(chunk), self.dim))
        return (
            _l2_normalise(np.concatenate(parts)) if parts else np.zeros((0, self.dim), np.float32)
        )
