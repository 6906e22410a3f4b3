"""Norax core: a four-signal agent memory over Chroma.

Signals: BM25 keywords, embedding similarity, temporal decay per memory kind, and an entity
graph; fused by learned or preset weights. Framework adapters live in ``norax_langchain`` and
``norax_llamaindex``.
"""

from norax_core.config import NoraxConfig
from norax_core.embedders import (
    CallableEmbedder,
    Embedder,
    OnnxMiniLMEmbedder,
    OpenAIEmbedder,
    default_embedder,
    resolve_embedder,
)
from norax_core.engine import NoraxMemory, resolve_weights
from norax_core.errors import (
    DimensionMismatchError,
    DuplicateIdError,
    IndexInconsistentError,
    InvalidInputError,
    MemoryNotFoundError,
    ModelNotFoundError,
    NoraxError,
    StoreLockedError,
    WeightsError,
)
from norax_core.models import (
    SIGNALS,
    Explanation,
    Kind,
    Memory,
    NamedPeriod,
    QueryInfo,
    SearchResult,
)
from norax_core.presets import get_preset, preset_names
from norax_core.query import Intent, QueryPlan, plan_query
from norax_core.weights import FusionMethod, Weights, load_weights, save_weights

__all__ = [
    "SIGNALS",
    "CallableEmbedder",
    "DimensionMismatchError",
    "DuplicateIdError",
    "Embedder",
    "Explanation",
    "FusionMethod",
    "IndexInconsistentError",
    "Intent",
    "InvalidInputError",
    "Kind",
    "Memory",
    "MemoryNotFoundError",
    "ModelNotFoundError",
    "NamedPeriod",
    "NoraxConfig",
    "NoraxError",
    "NoraxMemory",
    "OnnxMiniLMEmbedder",
    "OpenAIEmbedder",
    "QueryInfo",
    "QueryPlan",
    "SearchResult",
    "StoreLockedError",
    "Weights",
    "WeightsError",
    "default_embedder",
    "get_preset",
    "load_weights",
    "plan_query",
    "preset_names",
    "resolve_embedder",
    "resolve_weights",
    "save_weights",
]

__version__ = "0.1.0"
