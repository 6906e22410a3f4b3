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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_retrievers  # noqa: E402 (the peers' retrievers, shared with scale.py)

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

    ids, texts, namespaces = _docs(ds)
    client = chromadb.PersistentClient(path=str(folder / "langchain"))
    store = peer_retrievers.langchain_store(emb, client)
    metas = [{"namespace": ns} for ns in namespaces]
    ensembles = peer_retrievers.langchain_ensembles(store, ids, texts, metas, k, 1000)

    def query(q: str, ns: str) -> list[str]:
        return [str(d.id) for d in ensembles[ns].invoke(q)][:k]

    return query


def build_llamaindex(ds: BenchDataset, emb: CachedEmbedder, folder: Path, k: int) -> Query:
    import chromadb

    ids, texts, namespaces = _docs(ds)
    client = chromadb.PersistentClient(path=str(folder / "llamaindex"))
    col = client.create_collection("llamaindex", configuration={"hnsw": {"space": "cosine"}})
    nodes = peer_retrievers.llamaindex_nodes(ids, texts, [{"namespace": ns} for ns in namespaces])
    fusions = peer_retrievers.llamaindex_fusions(emb, col, nodes, k, 1000)

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
