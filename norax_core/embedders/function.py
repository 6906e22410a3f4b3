"""Any function ``list[str] -> vectors`` as an :class:`Embedder`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from norax_core.embedders.base import _PROBE_TEXT, Rows, _check_texts, _l2_normalise, _to_matrix
from norax_core.errors import InvalidInputError


class CallableEmbedder:
    """Wraps a function ``list[str] -> vectors``; validates and L2-normalises its output.

    Args:
        fn: Embeds a list of texts, returning one vector per text.
        name: Stable identifier recorded by stores, e.g. ``"langchain:OllamaEmbeddings"``.
        dim: Vector length; when omitted, discovered by embedding one probe text now.
        afn: Async twin of ``fn``, used by :meth:`aembed`; without it, :meth:`aembed` runs
            ``fn`` in a worker thread.

    Raises:
        NoraxError: ``fn`` returned the wrong number of vectors, vectors of the wrong length,
            or NaN / infinite values (at the probe or at any later call).
    """

    def __init__(
        self,
        fn: Callable[[list[str]], Rows],
        *,
        name: str,
        dim: int | None = None,
        afn: Callable[[list[str]], Awaitable[Rows]] | None = None,
    ) -> None:
        if not callable(fn) or (afn is not None and not callable(afn)):
            raise TypeError("fn and afn must be callables")
        if not name:
            raise InvalidInputError("name must be a non-empty string")
        if dim is not None and dim < 1:
            raise InvalidInputError(f"dim must be at least 1 or None, got {dim}")
        self.name = name
        self._fn = fn
        self._afn = afn
        self.dim: int = dim or _to_matrix(fn([_PROBE_TEXT]), 1, None, repr(name)).shape[1]

    def __repr__(self) -> str:
        return f"CallableEmbedder(name={self.name!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeds texts with ``fn``.

        Raises:
            NoraxError: ``fn``'s output has the wrong shape or non-finite values.
        """
        batch = _check_texts(texts)
        if not batch:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _l2_normalise(_to_matrix(self._fn(batch), len(batch), self.dim, repr(self.name)))

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeds texts with ``afn``, or ``fn`` in a worker thread."""
        if self._afn is None:
            return await asyncio.to_thread(self.embed, texts)
        batch = _check_texts(texts)
        if not batch:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = await self._afn(batch)
        return _l2_normalise(_to_matrix(rows, len(batch), self.dim, repr(self.name)))
