"""``NoraxPostprocessor``: rerank any retriever's nodes with Norax's four signals."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from norax_core import validation as check
from norax_core.config import NoraxConfig
from norax_core.embedders import Embedder, resolve_embedder
from norax_core.engine import NoraxMemory, resolve_weights
from norax_core.entities import EntityExtractor, load_extractor
from norax_core.fusion import fuse, rank
from norax_core.models import SIGNALS
from norax_core.postprocess import (
    SignalScores,
    ascore_candidate_set,
    score_candidate_set,
    store_signal_scores,
)
from norax_core.query import plan_query
from norax_core.weights import Weights
from norax_llamaindex._convert import _node_text, _reranked
from norax_llamaindex.embeddings import LlamaIndexEmbedder


class NoraxPostprocessor(BaseNodePostprocessor):
    """Reranks the nodes of any retriever by keywords, meaning, recency and shared entities.

    Nodes that are memories of ``memory`` in ``namespace`` get the store's own signal scores:
    node id == memory id and node text == the stored text, as after
    :func:`~norax_llamaindex.add_nodes` or from :class:`~norax_llamaindex.NoraxRetriever`. A
    node that only reuses a memory's id (another namespace's memory, or another text) is not
    that memory. Every other node is scored over the candidate set itself with
    :func:`norax_core.postprocess.score_candidate_set`: BM25 over the candidates, embeddings
    from ``embedder``, recency from ``metadata[time_key]`` (datetime, ISO 8601 string or
    epoch seconds) and the entity graph of the candidates. A node without a time scores 0 on
    the temporal signal; a node with an unreadable time raises ``InvalidInputError``.

    Returns copies of the best ``top_n`` nodes whose metadata gains ``score`` (fused),
    ``signals`` (each signal's score), ``query_plan`` (the query's intent, periods and
    entities) and ``explanation`` (``fused`` is the score, every later stage 0: reranking
    has only the fusion stage), hidden from LLM and embedding text; the input nodes
    are not changed. Repeated node ids are reranked once (first occurrence).

    Args:
        memory: A Norax store whose memories may be among the nodes.
        embedder: A Norax embedder, a LlamaIndex ``BaseEmbedding`` or an embedder name;
            ``None`` takes ``memory``'s embedder, else the local all-MiniLM-L6-v2;
            ``False`` switches the dense signal off.
        extractor: An entity extractor or spaCy model name; ``None`` takes ``memory``'s,
            else :func:`~norax_core.entities.load_extractor`; ``False`` switches the graph
            signal off.
        config: BM25 and decay settings for candidate-set scoring; default ``memory``'s.
        **fields: The fields below (``top_n``, ``weights``, ``time_key``, ...).
    """

    top_n: int = Field(default=3, ge=1, description="Number of nodes to return after reranking.")
    weights: Weights | str | dict[str, float] | None = Field(
        default=None,
        description=(
            "Fusion weights: a norax Weights, a preset name ('seed', 'rrf', 'bm25', ...) or a "
            "mapping of signal to weight; None takes the memory's weights, else 'default'."
        ),
    )
    time_key: str = Field(
        default="created_at",
        description=(
            "Metadata key holding a node's time (datetime, ISO 8601 string or epoch seconds) "
            "for the temporal signal; a node without it scores 0 on that signal."
        ),
    )
    kind_key: str = Field(
        default="kind",
        description="Metadata key holding a node's memory kind, which sets its decay rate.",
    )
    default_kind: str = Field(
        default="episodic",
        description="Memory kind of nodes without a kind (episodic decays in ~30 days).",
    )
    now: datetime | float | str | None = Field(
        default=None,
        description="The clock for recency (pin it for reproducible rankings); None is now.",
    )
    namespace: str | None = Field(
        default=None,
        description=(
            "The namespace of ``memory`` whose memories take the store's scores (None is "
            "'default', as in NoraxMemory.search); nodes matching another namespace's "
            "memories are scored as foreign nodes."
        ),
    )

    _memory: NoraxMemory | None = PrivateAttr(default=None)
    _embedder: Embedder | None = PrivateAttr(default=None)
    _extractor: EntityExtractor | None = PrivateAttr(default=None)
    _config: NoraxConfig = PrivateAttr(default_factory=NoraxConfig)

    def __init__(
        self,
        *,
        memory: NoraxMemory | None = None,
        embedder: Any = None,
        extractor: Any = None,
        config: NoraxConfig | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(**fields)
        if self.namespace is not None:
            self.namespace = check.namespace(self.namespace)
        self._memory = memory
        self._fusion_weights()  # fail at construction, not at the first query
        self._embedder = _embedder(embedder, memory)
        self._extractor = _extractor(extractor, memory)
        self._config = config or (memory.config if memory is not None else NoraxConfig())

    @classmethod
    def class_name(cls) -> str:
        """Name used in LlamaIndex serialisation."""
        return "NoraxPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, unique = _query(query_bundle), _unique(nodes)
        if not unique:
            return []
        store = self._store_scores(query, unique)
        cands: SignalScores = {}
        if any(i not in store["bm25"] for i in unique):
            cands = score_candidate_set(query, *self._columns(unique), **self._engines())
        return self._rank(query, unique, cands, store)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, unique = _query(query_bundle), _unique(nodes)
        if not unique:
            return []
        store = await asyncio.to_thread(self._store_scores, query, unique)
        cands: SignalScores = {}
        if any(i not in store["bm25"] for i in unique):
            cands = await ascore_candidate_set(query, *self._columns(unique), **self._engines())
        return self._rank(query, unique, cands, store)

    def _fusion_weights(self) -> Weights:
        if self.weights is not None:
            return resolve_weights(self.weights)
        return self._memory.weights if self._memory is not None else resolve_weights("default")

    def _store_scores(self, query: str, unique: dict[str, BaseNode]) -> SignalScores:
        if self._memory is None:
            return {s: {} for s in SIGNALS}
        return store_signal_scores(
            self._memory,
            query,
            list(unique),
            namespace=self.namespace,
            texts=[_node_text(node) for node in unique.values()],
            now=self.now,
            weights=self._fusion_weights(),
        )

    def _columns(
        self, unique: dict[str, BaseNode]
    ) -> tuple[list[str], list[str], list[Any], list[str]]:
        nodes = list(unique.values())
        kinds = [node.metadata.get(self.kind_key) for node in nodes]
        return (
            [_node_text(node) for node in nodes],
            list(unique),
            [node.metadata.get(self.time_key) for node in nodes],
            [k if isinstance(k, str) and k.strip() else self.default_kind for k in kinds],
        )

    def _engines(self) -> dict[str, Any]:
        return {
            "embedder": self._embedder,
            "extractor": self._extractor,
            "config": self._config,
            "now": self.now,
        }

    def _rank(
        self, query: str, unique: dict[str, BaseNode], cands: SignalScores, store: SignalScores
    ) -> list[NodeWithScore]:
        # A memory's own scores win over the candidate-set ones.
        signals = {s: {**cands.get(s, {}), **store.get(s, {})} for s in SIGNALS}
        plan = plan_query(query, self.now)
        weights = self._fusion_weights()  # the query's intent picks them, as search does
        fused = fuse(signals, list(unique), weights.for_intent(plan.intent))
        override = plan.intent.value if plan.intent.value in weights.intents else None
        info = dataclasses.replace(plan.info(), weights_intent=override)
        return [_reranked(unique[i], fused[i], signals, info) for i in rank(fused, self.top_n)]


def _query(query_bundle: QueryBundle | None) -> str:
    if query_bundle is None:
        raise ValueError("NoraxPostprocessor needs the query: pass query_bundle or query_str")
    return query_bundle.query_str


def _unique(nodes: Sequence[NodeWithScore]) -> dict[str, BaseNode]:
    """Nodes by id, first occurrence kept, input order kept."""
    out: dict[str, BaseNode] = {}
    for item in nodes:
        out.setdefault(item.node.node_id, item.node)
    return out


def _embedder(value: Any, memory: NoraxMemory | None) -> Embedder | None:
    if value is False:
        return None
    if isinstance(value, BaseEmbedding):
        return LlamaIndexEmbedder(value)
    if value is None and memory is not None:
        return memory.embedder
    return resolve_embedder(value)


def _extractor(value: Any, memory: NoraxMemory | None) -> EntityExtractor | None:
    if value is False:
        return None
    if value is None and memory is not None:
        return memory.extractor
    return load_extractor(value)
