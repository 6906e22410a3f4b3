"""``NoraxRetriever``: a LlamaIndex retriever over a Norax memory."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from norax_core import validation as check
from norax_core.engine import NoraxMemory, WeightsLike, resolve_weights
from norax_llamaindex._convert import _result_to_node


class NoraxRetriever(BaseRetriever):
    """Retrieves memories ranked by keywords, meaning, recency and shared entities.

    Returns ``NodeWithScore(node=TextNode(id_=<memory id>, text=..., metadata=...),
    score=<fused score>)``. The metadata holds the memory's own metadata plus ``kind``,
    ``created_at`` (ISO 8601, UTC), ``namespace``, ``score``, ``signals`` (each signal's
    normalised score), ``matched_entities``, ``query_plan`` (``{"intent", "periods":
    [{"start", "end", "text"}], "entities"}``) and ``explanation`` (``{"fused",
    "context", "bridges", "period", "latest_wins", "supersede", "turns", "exchange", "lane"}``,
    summing to the score); all but ``kind`` and ``created_at`` are excluded
    from the text LLMs and embedders see.

    Args:
        memory: The store to search.
        similarity_top_k: Number of nodes to return (fewer if the namespace holds fewer).
        namespace: Namespace to search; ``None`` is ``"default"``.
        where: Chroma filter on the memories' metadata, applied before ranking.
        weights: A ``Weights``, preset name or mapping; ``None`` for the store's default.
        now: The clock for recency (datetime, ISO string or epoch seconds); ``None`` is the
            current time.
        callback_manager: LlamaIndex callbacks.
        verbose: LlamaIndex verbosity flag.

    Raises:
        InvalidInputError: ``similarity_top_k`` below 1 or a bad namespace.
        WeightsError: Unknown preset or invalid weights.
    """

    def __init__(
        self,
        memory: NoraxMemory,
        similarity_top_k: int = 4,
        namespace: str | None = None,
        where: dict[str, Any] | None = None,
        weights: WeightsLike = None,
        now: Any = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.memory = memory
        self.similarity_top_k = check.k(similarity_top_k)
        self.namespace = namespace if namespace is None else check.namespace(namespace)
        self.where = where
        self.weights = None if weights is None else resolve_weights(weights)
        self.now = now
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _options(self) -> dict[str, Any]:
        return {
            "k": self.similarity_top_k,
            "namespace": self.namespace,
            "where": self.where,
            "weights": self.weights,
            "now": self.now,
        }

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = self.memory.search(query_bundle.query_str, **self._options())
        return [_result_to_node(r) for r in results]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = await self.memory.asearch(query_bundle.query_str, **self._options())
        return [_result_to_node(r) for r in results]
