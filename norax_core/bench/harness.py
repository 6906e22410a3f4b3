"""The benchmark run: ingest a dataset once, pool every question once, score many methods.

Every conversation goes into its own namespace of one in-memory store; each question is
asked once with every signal on (:func:`~norax_core.bench.pools.build_pools`), and each
method's ranking is then computed from those pools by :func:`norax_core.ranking.rank`, the
function ``search`` calls (a test checks the two give the same top 10 on whole conversations).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from norax_core.bench.cache import CachedEmbedder, CachedExtractor, TextCache
from norax_core.bench.data import BenchDataset
from norax_core.bench.metrics import latest_wins, mean, mean_by, recall_at_k
from norax_core.bench.pools import (
    Pool,
    PoolRequest,
    add_bm25_variants,
    build_pools,
    plan_groups,
)
from norax_core.config import NoraxConfig
from norax_core.embedders import resolve_embedder
from norax_core.engine import NoraxMemory
from norax_core.entities import load_extractor
from norax_core.errors import InvalidInputError
from norax_core.models import SIGNALS
from norax_core.presets import get_preset
from norax_core.ranking import rank
from norax_core.weights import Weights

__all__ = [
    "pool_datasets",
    "DEFAULT_KS",
    "BenchRun",
    "bm25_needed",
    "documents_for",
    "default_methods",
    "evaluate",
    "ingest",
    "open_store",
    "pool_dataset",
    "requests_for",
    "store_config",
    "store_id",
]

logger = logging.getLogger("norax")

DEFAULT_KS = (1, 5, 10, 25)
INGEST_BATCH = 256


def store_id(namespace: str, memory_id: str) -> str:
    """The store-wide id of a conversation's memory (ids are unique across namespaces)."""
    return f"{namespace}::{memory_id}"


def default_methods(fused: Weights | None = None) -> dict[str, Weights]:
    """``fused`` (the shipped default unless given), each signal alone, and ``seed``."""
    methods = {"fused": fused or get_preset("default")}
    methods.update({s: get_preset(s) for s in SIGNALS})
    methods["seed"] = get_preset("seed")
    return methods


def open_store(
    cache: str | Path | None = None,
    config: NoraxConfig | None = None,
    *,
    embedder: Any = None,
    extractor: Any = None,
    use_cache: bool = True,
) -> NoraxMemory:
    """An in-memory store whose embeddings and entities are cached on disk."""
    emb = resolve_embedder(embedder)
    ext = load_extractor(extractor)
    if use_cache:
        store = TextCache(cache)
        emb = CachedEmbedder(emb, store)
        ext = CachedExtractor(ext, store)
    return NoraxMemory(embedder=emb, extractor=ext, config=config, weights="seed")


def ingest(memory: NoraxMemory, dataset: BenchDataset, *, progress: bool = True) -> int:
    """Add every memory of every conversation, each conversation in its own namespace."""
    total = sum(len(c.memories) for c in dataset.conversations)
    with tqdm(total=total, desc=f"ingest {dataset.name}", unit="mem", disable=not progress) as bar:
        for conv in dataset.conversations:
            mems = conv.memories
            for s in range(0, len(mems), INGEST_BATCH):
                batch = mems[s : s + INGEST_BATCH]
                memory.add(
                    [m.text for m in batch],
                    ids=[store_id(conv.name, m.id) for m in batch],
                    created_at=[m.created_at for m in batch],
                    namespace=conv.name,
                    metadata=[
                        {
                            "speaker": m.speaker,
                            "session": m.session,
                            **({"role": m.role} if m.role else {}),
                        }
                        for m in batch
                    ],
                )
                bar.update(len(batch))
    # Communities of big namespaces are recomputed off the query path and adopted by a later
    # read: bring them up to date now, so every question (and a later search) sees the same.
    with memory.store.lock:
        for conv in dataset.conversations:
            memory.store.indexes.ensure(conv.name)
            memory.store.indexes.graph.communities(conv.name)
    return total


def documents_for(dataset: BenchDataset) -> dict[str, list[tuple[str, str]]]:
    """Each namespace's ``(store id, text)`` pairs, in ingestion order."""
    return {
        c.name: [(store_id(c.name, m.id), m.text) for m in c.memories]
        for c in dataset.conversations
    }


def bm25_needed(pools: Sequence[Pool], methods: Mapping[str, Weights]) -> set[tuple[float, float]]:
    """The ``(k1, b)`` pairs the methods use beside the pools' own."""
    if not pools:
        return set()
    base = pools[0].config
    out = set()
    for w in methods.values():
        for chosen in (w, *(w.for_intent(i) for i in w.intents)):
            cfg = chosen.applied(base)
            out.add((cfg.bm25_k1, cfg.bm25_b))
    return out - {(base.bm25_k1, base.bm25_b)}


def requests_for(dataset: BenchDataset) -> list[PoolRequest]:
    """One pool request per question, gold ids mapped to store ids."""
    out = []
    for conv in dataset.conversations:
        for q in conv.questions:

            def ids(local: Sequence[str], ns: str = conv.name) -> tuple[str, ...]:
                return tuple(store_id(ns, m) for m in local)

            out.append(
                PoolRequest(
                    query=q.text,
                    namespace=conv.name,
                    now=conv.now,
                    relevant=ids(q.gold),
                    qid=q.id,
                    category=q.category,
                    original=ids(q.original),
                    updated=ids(q.updated),
                )
            )
    return out


def pool_dataset(
    memory: NoraxMemory, requests: Sequence[PoolRequest], *, progress: bool = True
) -> list[Pool]:
    """Pool every request (queries embedded in one batch first)."""
    texts = list(dict.fromkeys(r.query for r in requests))
    memory.embedder.embed(texts)  # warms a CachedEmbedder: one batched model call
    if memory.extractor is not None:
        memory.extractor.extract(texts)
    with tqdm(total=len(requests), desc="query", unit="q", disable=not progress) as bar:
        return build_pools(memory, requests, progress=bar.update)


@dataclass
class BenchRun:
    """Everything one benchmark run measured.

    Attributes:
        dataset: ``"locomo"`` or ``"beam"``.
        ks: The cut-offs.
        recall: method -> k -> per-question recall, in pool order.
        categories: Each question's category, in pool order.
        latest: method -> per-question latest-wins verdicts (knowledge updates only).
        timings: Seconds per phase.
    """

    dataset: str
    ks: tuple[int, ...]
    recall: dict[str, dict[int, list[float]]]
    categories: list[str]
    latest: dict[str, list[bool]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document."""
        methods = {m: {f"recall@{k}": mean(v[k]) for k in self.ks} for m, v in self.recall.items()}
        by_cat: dict[str, dict[str, dict[str, float]]] = {}
        for m, per_k in self.recall.items():
            for k in self.ks:
                for cat, value in mean_by(per_k[k], self.categories).items():
                    by_cat.setdefault(cat, {}).setdefault(m, {})[f"recall@{k}"] = value
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "n_questions": len(self.categories),
            "k": list(self.ks),
            "methods": methods,
            "by_category": by_cat,
        }
        if self.dataset == "beam":
            out["latest_wins"] = {m: mean(float(x) for x in v) for m, v in self.latest.items()}
        return out


def pool_datasets(
    datasets: Sequence[BenchDataset],
    bm25: Callable[[list[Pool]], Iterable[tuple[float, float]]] | None = None,
) -> tuple[list[Pool], list[str]]:
    """Every dataset's pools from one in-memory store (a namespace per conversation).

    ``bm25(pools)`` names the BM25 ``(k1, b)`` settings each dataset's pools must also score
    (default: those of :func:`default_methods`). Returns the pools and each one's dataset name.
    """
    mem = open_store()
    pools: list[Pool] = []
    names: list[str] = []
    try:
        for ds in datasets:
            ingest(mem, ds, progress=False)
            got = pool_dataset(mem, requests_for(ds), progress=False)
            needed = bm25(got) if bm25 else bm25_needed(got, default_methods())
            add_bm25_variants(got, documents_for(ds), sorted(needed))
            pools += got
            names += [ds.name] * len(got)
    finally:
        mem.close()
    return pools, names


def evaluate(
    pools: Sequence[Pool],
    methods: Mapping[str, Weights],
    ks: Sequence[int],
    *,
    dataset: str,
    config: NoraxConfig | None = None,
) -> BenchRun:
    """Recall@k of every method on every pooled question (and latest-wins where defined)."""
    recall: dict[str, dict[int, list[float]]] = {
        m: {k: [0.0] * len(pools) for k in ks} for m in methods
    }
    latest: dict[str, list[bool]] = {m: [] for m in methods}
    if not pools:
        methods = {}
    updates = {i for i, p in enumerate(pools) if p.request.original and p.request.updated}
    for name, w in methods.items():
        # every pool of a group at once, through the ranking function search calls
        verdicts: dict[int, bool] = {}
        for idx, table, plan in plan_groups(pools, w, config):
            for k in ks:
                got = rank(table, plan, k)
                for j, i in enumerate(idx):
                    recall[name][k][i] = recall_at_k(got.ids(j), pools[i].request.relevant, k)
            if updates.intersection(idx):
                full = rank(table, plan, table.size)
                for j, i in enumerate(idx):
                    req = pools[i].request
                    if i in updates:
                        verdict = latest_wins(full.ids(j), req.original, req.updated)
                        if verdict is not None:
                            verdicts[i] = verdict
        latest[name] = [verdicts[i] for i in sorted(verdicts)]
    return BenchRun(
        dataset=dataset,
        ks=tuple(ks),
        recall=recall,
        categories=[p.request.category for p in pools],
        latest=latest if any(latest.values()) else {},
    )


def store_config(methods: Mapping[str, Weights]) -> NoraxConfig:
    """The store configuration the methods need at add time (``embed_context``).

    Raises:
        InvalidInputError: Two methods want different add-time parameters (one store
            cannot serve both).
    """
    wanted = {
        int(w.params["embed_context"]) for w in methods.values() if "embed_context" in w.params
    }
    if len(wanted) > 1:
        raise InvalidInputError(
            f"the methods want stores built with different embed_context values {sorted(wanted)}"
        )
    return NoraxConfig(embed_context=wanted.pop()) if wanted else NoraxConfig()


def run_benchmark(
    dataset: BenchDataset,
    methods: Mapping[str, Weights],
    ks: Sequence[int] = DEFAULT_KS,
    *,
    memory: NoraxMemory | None = None,
    cache: str | Path | None = None,
    progress: bool = True,
) -> tuple[BenchRun, list[Pool]]:
    """Ingest, pool and evaluate; returns the run and the pools (for fitting)."""
    t0 = time.perf_counter()
    own = memory is None
    mem = memory or open_store(cache, store_config(methods))
    try:
        t1 = time.perf_counter()
        ingest(mem, dataset, progress=progress)
        t2 = time.perf_counter()
        pools = pool_dataset(mem, requests_for(dataset), progress=progress)
        add_bm25_variants(pools, documents_for(dataset), sorted(bm25_needed(pools, methods)))
        t3 = time.perf_counter()
    finally:
        if own:
            mem.close()
    run = evaluate(pools, methods, ks, dataset=dataset.name)
    t4 = time.perf_counter()
    run.timings = {
        "open": t1 - t0,
        "ingest": t2 - t1,
        "query": t3 - t2,
        "evaluate": t4 - t3,
        "total": t4 - t0,
    }
    return run, pools
