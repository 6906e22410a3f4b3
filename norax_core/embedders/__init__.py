"""Pluggable text embedders for the dense signal.

Every embedder has a stable ``name`` that stores record, a fixed ``dim``, and returns float32
matrices of shape ``(n, dim)`` with L2-normalised rows, so that a dot product is a cosine.

* :class:`OnnxMiniLMEmbedder`: the local default, all-MiniLM-L6-v2 on onnxruntime.
* :class:`OpenAIEmbedder`: the OpenAI embeddings API (or any compatible server).
* :class:`CallableEmbedder`: wraps any function, e.g. a LangChain ``Embeddings``::

      CallableEmbedder(
          lc.embed_documents, afn=lc.aembed_documents, name=f"langchain:{type(lc).__name__}"
      )

  or a LlamaIndex ``BaseEmbedding``: ``CallableEmbedder(m.get_text_embedding_batch,
  afn=m.aget_text_embedding_batch, name=f"llamaindex:{m.model_name}")``.
"""

from __future__ import annotations

from collections.abc import Callable

from norax_core.embedders.base import Embedder, Rows
from norax_core.embedders.function import CallableEmbedder
from norax_core.embedders.onnx import (
    _MINILM,
    MODEL_DIR_ENV,
    LongText,
    OnnxMiniLMEmbedder,
    default_embedder,
    token_windows,
)
from norax_core.embedders.openai_api import OpenAIEmbedder

__all__ = [
    "MODEL_DIR_ENV",
    "CallableEmbedder",
    "Embedder",
    "LongText",
    "OnnxMiniLMEmbedder",
    "OpenAIEmbedder",
    "default_embedder",
    "resolve_embedder",
    "token_windows",
]

_VALID_NAMES = ("default", "onnx", f"onnx:{_MINILM}", "openai", "openai:<model>")


def resolve_embedder(obj: Embedder | str | Callable[[list[str]], Rows] | None) -> Embedder:
    """Turns what a user passed as ``embedder=`` into an :class:`Embedder`.

    Args:
        obj: An embedder (returned as is); ``None``, ``"default"``, ``"onnx"`` or
            ``"onnx:all-MiniLM-L6-v2"`` for the local model; ``"openai"`` or
            ``"openai:<model>"``; or a plain function ``list[str] -> vectors``.

    Returns:
        The embedder.

    Raises:
        ValueError: An unknown string; the message lists the valid ones.
        TypeError: Anything else.
    """
    if isinstance(obj, (OnnxMiniLMEmbedder, OpenAIEmbedder, CallableEmbedder)):
        return obj
    if obj is None:
        return default_embedder()
    if isinstance(obj, str):
        key = obj.strip()
        if key in ("default", "onnx", f"onnx:{_MINILM}"):
            return default_embedder()
        if key == "openai":
            return OpenAIEmbedder()
        if key.startswith("openai:") and key[len("openai:") :]:
            return OpenAIEmbedder(key[len("openai:") :])
        raise ValueError(f"unknown embedder {obj!r}; valid: {', '.join(_VALID_NAMES)}")
    if isinstance(obj, Embedder):
        return obj
    if callable(obj):
        label = getattr(obj, "__qualname__", type(obj).__qualname__)
        module = getattr(obj, "__module__", None) or type(obj).__module__
        return CallableEmbedder(obj, name=f"callable:{module}.{label}")
    raise TypeError(
        f"cannot use a {type(obj).__name__} as an embedder: pass an Embedder, a callable, "
        f"None or one of {', '.join(_VALID_NAMES)}"
    )
