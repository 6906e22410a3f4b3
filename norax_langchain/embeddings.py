"""Any LangChain ``Embeddings`` as a Norax embedder."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from norax_core.embedders import CallableEmbedder


class LangChainEmbedder(CallableEmbedder):
    """Wraps a LangChain ``Embeddings`` so a :class:`~norax_core.NoraxMemory` can use it.

    Texts and queries both go through ``embed_documents`` (async: ``aembed_documents``):
    Norax embedders have one path for both, so models that embed queries differently
    (instruction prefixes) are used in their document mode.

    Args:
        embeddings: The LangChain embeddings model.
        name: Identifier the store records; default
            ``"langchain:<class name>[:<model>]"``.
        dim: Vector length; discovered with one probe call when omitted.

    Example:
        >>> mem = NoraxMemory(embedder=LangChainEmbedder(OpenAIEmbeddings()))  # doctest: +SKIP
    """

    def __init__(
        self, embeddings: Embeddings, *, name: str | None = None, dim: int | None = None
    ) -> None:
        super().__init__(
            embeddings.embed_documents,
            afn=embeddings.aembed_documents,
            name=name or _default_name(embeddings),
            dim=dim,
        )
        self.embeddings = embeddings


def _default_name(embeddings: Embeddings) -> str:
    model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
    base = f"langchain:{type(embeddings).__name__}"
    return f"{base}:{model}" if isinstance(model, str) and model else base
