"""Any LlamaIndex ``BaseEmbedding`` as a Norax embedder."""

from __future__ import annotations

from llama_index.core.base.embeddings.base import BaseEmbedding

from norax_core.embedders import CallableEmbedder


class LlamaIndexEmbedder(CallableEmbedder):
    """Wraps a LlamaIndex ``BaseEmbedding`` so Norax can use it.

    Texts and queries both go through ``get_text_embedding_batch`` (async:
    ``aget_text_embedding_batch``): Norax embedders have one path for both, so models that
    embed queries differently (instruction prefixes) are used in their text mode.

    Args:
        embed_model: The LlamaIndex embedding model.
        name: Identifier the store records; default ``"llamaindex:<model_name>"``.
        dim: Vector length; discovered with one probe call when omitted.
    """

    def __init__(
        self, embed_model: BaseEmbedding, *, name: str | None = None, dim: int | None = None
    ) -> None:
        super().__init__(
            embed_model.get_text_embedding_batch,
            afn=embed_model.aget_text_embedding_batch,
            name=name or f"llamaindex:{embed_model.model_name}",
            dim=dim,
        )
        self.embed_model = embed_model
