"""``NoraxRetriever``: a LangChain retriever over a Norax memory."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, field_validator

from norax_core.engine import NoraxMemory, resolve_weights
from norax_core.weights import Weights
from norax_langchain._convert import _result_to_document

_OPTIONS = ("k", "namespace", "where", "weights", "now")


class NoraxRetriever(BaseRetriever):
    """Retrieves memories ranked by keywords, meaning, recency and shared entities.

    Each returned ``Document`` has the memory id as ``id``, the memory text as
    ``page_content``, and in ``metadata`` the memory's own metadata plus:

    * ``kind``, ``created_at`` (ISO 8601, UTC) and ``namespace`` of the memory;
    * ``score``: the fused score (higher is better);
    * ``signals``: each signal's normalised score, ``{"bm25", "dense", "temporal", "graph"}``;
    * ``matched_entities``: the query entities the memory shares;
    * ``query_plan``: the query's reading, ``{"intent", "periods": [{"start", "end",
      "text"}], "entities"}`` (periods in ISO 8601 UTC);
    * ``explanation``: what each ranking stage contributed, ``{"fused", "context",
      "bridges", "period", "latest_wins", "supersede", "turns", "exchange", "lane"}``, summing
      to ``score``.

    These keys replace user metadata keys of the same name.

    Every search option can be overridden per call: ``retriever.invoke(q, k=1,
    namespace="alice", now=...)``.

    Example:
        .. code-block:: python

            retriever = NoraxRetriever(memory=NoraxMemory("./mem"), k=4, namespace="alice")
            chain = retriever | format_docs | prompt | llm | StrOutputParser()
    """

    memory: NoraxMemory
    """The store to search."""

    k: int = Field(default=4, ge=1)
    """Number of documents to return (fewer if the namespace holds fewer)."""

    namespace: str | None = None
    """Namespace to search; ``None`` is the ``"default"`` namespace."""

    where: dict[str, Any] | None = None
    """Chroma filter on the memories' metadata, applied before ranking."""

    weights: Weights | str | dict[str, float] | None = None
    """Fusion weights: a ``Weights``, a preset name (``"seed"``, ``"rrf"``, ...), a mapping
    of signal to weight, or ``None`` for the store's default weights."""

    now: datetime | float | str | None = None
    """The clock for recency (datetime, ISO 8601 string or epoch seconds); ``None`` is the
    current time. Pin it for reproducible rankings."""

    @field_validator("weights")
    @classmethod
    def _check_weights(cls, value: Any) -> Any:
        if value is not None:
            resolve_weights(value)  # fail at construction, not at the first query
        return value

    def _options(self, overrides: dict[str, Any]) -> dict[str, Any]:
        overrides.pop("verbose", None)  # read by BaseRetriever.invoke for its callbacks
        unknown = sorted(set(overrides) - set(_OPTIONS))
        if unknown:
            raise TypeError(f"unknown search option(s) {unknown}; valid: {list(_OPTIONS)}")
        return {name: overrides.get(name, getattr(self, name)) for name in _OPTIONS}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        results = self.memory.search(query, **self._options(kwargs))
        return [_result_to_document(r) for r in results]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        results = await self.memory.asearch(query, **self._options(kwargs))
        return [_result_to_document(r) for r in results]
