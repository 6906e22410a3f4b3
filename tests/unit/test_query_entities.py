"""The query's entities are extracted only when the graph signal counts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from norax_core import NoraxMemory
from norax_core.embedders import CallableEmbedder
from norax_core.entities import RuleBasedExtractor

T0 = 1_700_000_000.0


class Counting(RuleBasedExtractor):
    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def extract_query(self, text: str) -> list[str]:
        self.queries.append(text)
        return super().extract_query(text)


def _embed(texts: Sequence[str]) -> np.ndarray:
    out = np.ones((len(texts), 4), dtype=np.float32)
    out[:, 1] = [len(t) for t in texts]
    return out


def test_zero_graph_weight_skips_query_extraction() -> None:
    ext = Counting()
    emb = CallableEmbedder(_embed, name="len", dim=4)
    with NoraxMemory(embedder=emb, extractor=ext) as mem:
        mem.add(["Colby picked TypeORM", "lunch was fine"], created_at=[T0, T0 + 1])
        (hit, *_) = mem.search("TypeORM for Colby", weights={"bm25": 1.0, "dense": 1.0})
        assert ext.queries == [] and hit.signals["graph"] == 0.0
        assert hit.matched_entities == ()
        (hit, *_) = mem.search("TypeORM for Colby", weights={"bm25": 1.0, "graph": 1.0})
        assert ext.queries == ["TypeORM for Colby"]
        assert hit.signals["graph"] > 0 and "typeorm" in hit.matched_entities
        mem.candidates("TypeORM", weights={"dense": 1.0}, ids=[hit.id])  # a reranker's call
        assert ext.queries[-1] == "TypeORM"
