"""Recall of the retrievers people use instead of Norax, on the same data and embedder.

The quality counterpart of :mod:`scale` (which times the same peers): every LoCoMo turn or
BEAM message is one document, each conversation its own namespace, and each question is
asked of its own namespace only; recall@k is DATA.md's (the share of the gold ids in the
top k). Every system embeds with Norax's local all-MiniLM-L6-v2 (``OnnxMiniLMEmbedder``,
through the benchmark's embedding cache, so the vectors are bit for bit those ``norax
bench`` uses), wrapped for LangChain and LlamaIndex, with each library's defaults otherwise:

* ``chroma``: plain Chroma, one collection (cosine), ``collection.query(n_results=k,
  where={"namespace": ns})``: the embedding alone, as a Chroma user gets it.
* ``langchain_ensemble``: ``EnsembleRetriever`` (weights 0.5/0.5, weighted reciprocal rank)
  over ``BM25Retriever`` (rank_bm25, its default whitespace tokenizer) and a
  ``langchain_chroma.Chroma`` retriever with a namespace filter, k each.
* ``llamaindex_fusion``: ``QueryFusionRetriever`` (``num_queries=1``: no LLM rewrites,
  reciprocal rerank) over the bm25s ``BM25Retriever`` (English stemming and stop words, its
  defaults) and a ``VectorStoreIndex`` on ``ChromaVectorStore`` with a namespace filter.

One BM25 retriever per namespace (neither library's can be restricted to a tenant), one Chroma
collection per system for everybody. Norax's own figures are those of ``norax bench``
(``benchmarks/results/locomo.json``, ``beam_*.json``); ``benchmarks/readme_table.py`` prints
the two side by side.

Run from the repository root (needs ``pip install -e '.[scale]'``)::

    python benchmarks/peers.py --data ../shared/data --json benchmarks/results/peers.json

``--merge`` keeps the datasets of an existing ``--json`` file that this run does not measure
(``--datasets beam_500k --merge`` adds one). ``--limit N`` keeps the first N conversations of
each dataset (a quick check; the JSON then says so).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from norax_core.bench.cache import CachedEmbedder, TextCache
from norax_core.bench.data import BenchDataset, load_beam, load_locomo
from norax_core.bench.harness import store_id
from norax_core.bench.metrics import mean, recall_at_k
from norax_core.embedders import resolve_embedder

SYSTEMS = ("chroma", "langchain_ensemble", "llamaindex_fusion")
DATASETS = {
    "locomo": ("locomo/locomo10_dev.json", load_locomo),
    "beam_100k": ("beam/100K", load_beam),
    "beam_500k": ("beam/500K", load_beam),
}
KS = (5, 10)
Query = Callable[[str, str], list[str]]
"""``(question, namespace) -> ids, best first``."""


def _docs(ds: BenchDataset) -> tuple[list[str], list[str], list[str]]:
    ids, texts, namespaces = [], [], []
    for conv in ds.conversations:
        for m in conv.memories:
            ids.append(store_id(conv.name, m.id))
            texts.append(m.text)
            namespaces.append(conv.name)
    return ids, texts, namespaces


def _by_namespace(namespaces: Sequence[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, ns in enumerate(namespaces):
        out.setdefault(ns, []).append(i)
    return out


def build_chroma(ds: BenchDataset, emb: CachedEmbedder, folder: Path, k: int) -> Query:
    import chromadb

    ids, texts, namespaces = _docs(ds)
    client = chromadb.PersistentClient(path=str(folder / "chroma"))
    col = client.create_collection("plain", configuration={"hnsw": {"space": "cosine"}})
    for s in range(0, len(ids), 1000):
        col.add(
            ids=ids[s : s + 1000],
            documents=texts[s : s + 1000],
            embeddings=emb.embed(texts[s : s + 1000]),
            metadatas=[{"namespace": ns} for ns in namespaces[s : s + 1000]],
        )

    def query(q: str, ns: str) -> list[str]:
        got = col.query(query_embeddings=emb.embed([q]), n_results=k, where={"namespace": ns})
        return list(got["ids"][0])

    return query


def build_langchain(ds: BenchDataset, emb: CachedEmbedder, folder: Path, k: int) -> Query:
    import chromadb
    from langchain_chroma import Chroma
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.embeddings import Embeddings

    class LCEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return emb.embed(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return emb.embed([text])[0].tolist()

    ids, texts, namespaces = _docs(ds)
    metas = [{"namespace": ns} for ns in namespaces]
    store = Chroma(
        collection_name="langchain",
        embedding_function=LCEmbeddings(),
        client=chromadb.PersistentClient(path=str(folder / "langchain")),
        collection_metadata={"hnsw:space": "cosine"},
    )
    for s in range(0, len(ids), 1000):
        store.add_texts(texts[s : s + 1000], metadatas=metas[s : s + 1000], ids=ids[s : s + 1000])
    ensembles = {}
    for ns, rows in _by_namespace(namespaces).items():
        bm25 = BM25Retriever.from_texts(
            [texts[i] for i in rows],
            metadatas=[metas[i] for i in rows],
            ids=[ids[i] for i in rows],
            k=k,
        )
        dense = store.as_retriever(search_kwargs={"k": k, "filter": {"namespace": ns}})
        ensembles[ns] = EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])

    def query(q: str, ns: str) -> list[str]:
        return [str(d.id) for d in ensembles[ns].invoke(q)][:k]

    return query


def build_llamaindex(ds: BenchDataset, emb: CachedEmbedder, folder: Path, k: int) -> Query:
    import chromadb
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
    from llama_index.retrievers.bm25 import BM25Retriever
    from llama_index.vector_stores.chroma import ChromaVectorStore

    class LIEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return emb.embed([query])[0].tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return emb.embed([text])[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return emb.embed(texts).tolist()

    ids, texts, namespaces = _docs(ds)
    client = chromadb.PersistentClient(path=str(folder / "llamaindex"))
    col = client.create_collection("llamaindex", configuration={"hnsw": {"space": "cosine"}})
    storage = StorageContext.from_defaults(vector_store=ChromaVectorStore(chroma_collection=col))
    keys = ["namespace"]  # metadata kept out of the embedded text: everyone embeds the same
    nodes = [
        TextNode(
            id_=i,
            text=t,
            metadata={"namespace": ns},
            excluded_embed_metadata_keys=keys,
            excluded_llm_metadata_keys=keys,
        )
        for i, t, ns in zip(ids, texts, namespaces, strict=True)
    ]
    index = VectorStoreIndex(
        nodes,
        storage_context=storage,
        embed_model=LIEmbedding(model_name=emb.name, embed_batch_size=64),
        insert_batch_size=1000,
    )
    fusions = {}
    for ns, rows in _by_namespace(namespaces).items():
        ns_nodes = [nodes[i] for i in rows]
        bm25 = BM25Retriever.from_defaults(nodes=ns_nodes, similarity_top_k=min(k, len(ns_nodes)))
        dense = index.as_retriever(
            similarity_top_k=k,
            filters=MetadataFilters(filters=[MetadataFilter(key="namespace", value=ns)]),
        )
        fusions[ns] = QueryFusionRetriever(
            [dense, bm25],
            llm=MockLLM(),
            mode=FUSION_MODES.RECIPROCAL_RANK,
            similarity_top_k=k,
            num_queries=1,
            use_async=False,
        )

    def query(q: str, ns: str) -> list[str]:
        return [n.node.node_id for n in fusions[ns].retrieve(q)][:k]

    return query


BUILDERS = {
    "chroma": build_chroma,
    "langchain_ensemble": build_langchain,
    "llamaindex_fusion": build_llamaindex,
}


def evaluate(ds: BenchDataset, system: str, emb: CachedEmbedder) -> dict[str, Any]:
    """Recall@k of one system over every question of ``ds``."""
    k = max(KS)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        query = BUILDERS[system](ds, emb, Path(tmp), k)
        t1 = time.perf_counter()
        rows: list[tuple[str, list[str], tuple[str, ...]]] = []
        for conv in ds.conversations:
            for q in conv.questions:
                gold = tuple(store_id(conv.name, g) for g in q.gold)
                rows.append((q.category, query(q.text, conv.name), gold))
        t2 = time.perf_counter()
    out: dict[str, Any] = {
        f"recall@{c}": mean(recall_at_k(got, gold, c) for _, got, gold in rows) for c in KS
    }
    cats = sorted({cat for cat, _, _ in rows})
    out["by_category"] = {
        cat: mean(recall_at_k(got, gold, k) for c, got, gold in rows if c == cat) for cat in cats
    }
    out["seconds"] = {"build": round(t1 - t0, 1), "query": round(t2 - t1, 1)}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the shared data folder (../shared/data)")
    p.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    p.add_argument("--limit", type=int, default=0, help="first N conversations of each")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--merge", action="store_true", help="keep the --json file's other datasets")
    args = p.parse_args(argv)
    load_at_start = os.getloadavg()
    emb = CachedEmbedder(resolve_embedder(None), TextCache())
    results: dict[str, Any] = {}
    for name in args.datasets.split(","):
        rel, load = DATASETS[name]
        ds = load(Path(args.data) / rel)
        if args.limit:
            ds = BenchDataset(ds.name, ds.conversations[: args.limit])
        # every text embedded (or read from the cache) once, in one batch, before the builds
        emb.embed([m.text for c in ds.conversations for m in c.memories])
        emb.embed([q.text for c in ds.conversations for q in c.questions])
        results[name] = {"n_questions": ds.n_questions, "systems": {}}
        for system in args.systems.split(","):
            got = evaluate(ds, system, emb)
            results[name]["systems"][system] = got
            print(f"{name:<10} {system:<20} R@5 {got['recall@5']:.3f}  R@10 {got['recall@10']:.3f}")
    meta = {
        "command": "python benchmarks/peers.py " + " ".join(argv or sys.argv[1:]),
        "embedder": emb.name,
        "k": list(KS),
        "limit": args.limit or None,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "load_avg_at_start": [round(x, 1) for x in load_at_start],
        "load_avg_at_end": [round(x, 1) for x in os.getloadavg()],
    }
    if args.json:
        out = Path(args.json)
        runs = [meta]
        if args.merge and out.exists():
            old = json.loads(out.read_text())
            results = {**old["datasets"], **results}
            runs = [*old["runs"], meta]
        out.write_text(json.dumps({"datasets": results, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
