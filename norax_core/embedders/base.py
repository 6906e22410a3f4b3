"""The :class:`Embedder` protocol and the checks every embedder applies to vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from norax_core.errors import InvalidInputError, NoraxError

_PROBE_TEXT = "dimension probe"

Rows = Sequence[Sequence[float]]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    Attributes:
        name: Stable identifier recorded by stores, e.g. ``"onnx:all-MiniLM-L6-v2"``.
        dim: Length of every vector.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeds texts into a float32 array of shape ``(len(texts), dim)``, rows of norm 1."""
        ...

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        """Same as :meth:`embed`, without blocking the event loop."""
        ...


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInputError("embed() takes a sequence of texts, not a single string")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise InvalidInputError(f"text #{i} is a {type(text).__name__}, not a str")
    return out


def _l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Scales rows to unit norm; an all-zero row stays zero (it has no direction)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, np.maximum(norms, 1e-12), dtype=np.float32)


def _to_matrix(rows: object, n: int, dim: int | None, source: str) -> np.ndarray:
    """Validates raw vectors from an external model; returns them as a float32 matrix."""
    try:
        with np.errstate(over="ignore"):  # values beyond float32 become inf, reported below
            matrix = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise NoraxError(
            f"{source} returned something that is not a list of equal-length numeric vectors"
        ) from exc
    if matrix.ndim != 2 or matrix.shape[0] != n:
        got = f"{matrix.shape[0]} vectors" if matrix.ndim == 2 else f"shape {matrix.shape}"
        raise NoraxError(f"{source} returned {got} for {n} texts; expected {n} vectors")
    if dim is not None and matrix.shape[1] != dim:
        raise NoraxError(
            f"{source} returned vectors of dimension {matrix.shape[1]}, expected {dim}"
        )
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        raise NoraxError(
            f"{source} returned NaN or infinite values for text #{int(np.argmin(finite))}"
        )
    return matrix
