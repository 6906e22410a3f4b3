"""Speed at scale: Norax next to plain Chroma, LangChain's ensemble and LlamaIndex's fusion.

Builds stores of N memories from the dev data (LoCoMo turns and BEAM message snippets, with
names and numbers varied, four kinds, dates over one year, 300 namespaces of Zipf-like
sizes) and measures, for every system, on the same machine, data and embedder (Norax's
``OnnxMiniLMEmbedder``, wrapped for LangChain and LlamaIndex):

* ``norax``: ``NoraxMemory.search(q, k=10, namespace=ns)``, all four signals; the dense
  signal ranks each namespace exactly over its own vectors (an in-process float32 matrix,
  loaded from Chroma on the namespace's first search).
* ``norax_hnsw``: the same store and search with the dense signal as it was before exact
  namespaces (``NoraxConfig(dense_exact_limit=256)``: Chroma's filtered HNSW for namespaces
  above 256 memories), for the side-by-side cost.
* ``chroma``: ``collection.query(n_results=10, where={"namespace": ns})``: dense only, the floor.
* ``langchain_ensemble``: ``EnsembleRetriever`` (weights 0.5/0.5, RRF) over ``BM25Retriever``
  (rank_bm25) and a ``langchain_chroma.Chroma`` retriever (k=10 each).
* ``llamaindex_fusion``: ``QueryFusionRetriever`` (``num_queries=1``, reciprocal rerank, no LLM)
  over the bm25s ``BM25Retriever`` and a ``VectorStoreIndex`` on ``ChromaVectorStore``.

Namespaces for the peers, as a typical multi-tenant user would set them up: one Chroma
collection for everybody, filtered by a ``namespace`` metadata key (Chroma's recommended
pattern, as Norax does), and one in-memory BM25 retriever per namespace, since neither
``BM25Retriever`` can restrict a query to a tenant cheaply (LangChain's has no filter;
LlamaIndex's applies its filter as a corpus-wide weight mask built per retriever). Their
BM25 indexes are built once from the full corpus (neither supports incremental adds) and
are not persisted: their ``disk_mb`` is Chroma's folder only.

Measured per system, each in its own subprocess (so peak RSS is its own; every worker loads
the same corpus arrays and the ONNX model, ``rss_base_mb`` is that common baseline). The two
Norax rows open one store that a third subprocess built (its ingest rate and disk size are
reported on both), so their RSS is that of a process serving the store, not building it;
``open_s`` is how long opening took, ``dense_matrix_mb`` what the loaded matrices hold at the
end and ``namespaces_loaded`` how many namespaces the queries loaded:

* query p50/p95 over the same queries (LoCoMo and BEAM questions, namespaces drawn in
  proportion to their size), with the query's own embedding, and without it (precomputed);
* ingest rate without embedding (precomputed vectors served by a lookup embedder through
  each system's normal add path), and with it: ``1 / (1/no_embed_rate + 1/embed_rate)``, the
  embedder's own rate measured on a corpus sample in the same run (every system embeds with
  the same model in the same batches, so the embedding time is the same for everyone);
* peak RSS, and disk size of the store folder.

Norax only: the entity graph's share of query time (query entity extraction plus the graph
signal's ``top``/``score``/``explain``) and spaCy extraction vs embedding throughput.

Run from the repository root (100k embeddings take ~15 min once; they are cached)::

    export NORAX_EMBEDDING_MODEL_DIR=../shared/models/all-MiniLM-L6-v2
    export NORAX_SPACY_MODEL=../shared/models/en_core_web_sm-3.8.0
    python benchmarks/scale.py --data ../shared/data --n 10000,100000 \\
        --json benchmarks/results/scale.json
    python benchmarks/scale.py --quick
    python benchmarks/scale.py --server http://127.0.0.1:8000 --n 10000 \\
        --json benchmarks/results/scale_server.json

Scale-out and ingest rows (issue 15), in the same JSON: ``--stores`` (open time, RSS,
cold-namespace and steady queries for stores of each size, embedded and over ``chroma run``,
and 4 worker processes over one server; :mod:`scale_store`) and ``--ingest`` (where
``NoraxMemory.add`` spends its time on short and long texts; :mod:`scale_ingest`)::

    python benchmarks/scale.py --data ../shared/data --n "" --stores 10000,100000 \\
        --workers-n 100000 --json benchmarks/results/scale.json --merge
    python benchmarks/scale.py --data ../shared/data --n "" --ingest \\
        --json benchmarks/results/scale.json --merge
    python benchmarks/scale.py --json benchmarks/results/scale.json --show

Benchmark-only dependencies: ``pip install -e '.[scale]'``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_retrievers  # noqa: E402 (the peers' retrievers, shared with peers.py)
import scale_ingest  # noqa: E402 (the ingest rows, a module beside this one)
import scale_store  # noqa: E402 (the scale-out rows, likewise)

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("norax", "norax_hnsw", "chroma", "langchain_ensemble", "llamaindex_fusion")
SERVER_SYSTEMS = ("norax", "norax_hnsw", "chroma")
NORAX_CONFIGS = {"norax": {}, "norax_hnsw": {"dense_exact_limit": 256}}
"""``NoraxConfig`` overrides per Norax system: ``norax_hnsw`` forces the old dense path."""
N_NAMESPACES = 300
KINDS = (("episodic", 0.6), ("semantic", 0.25), ("procedural", 0.1), ("scratchpad", 0.05))
YEAR_END = 1_735_689_600.0  # 2025-01-01 UTC: memories span the year before it
YEAR = 365 * 86_400.0
K = 10
BATCH = 1_000
EMB_CHUNK = 5_000
NAMES = [
    "Alice",
    "Amara",
    "Ben",
    "Bianca",
    "Carlos",
    "Chen",
    "Dana",
    "Diego",
    "Elena",
    "Emeka",
    "Farah",
    "Felix",
    "Gita",
    "Hana",
    "Hugo",
    "Ines",
    "Ivan",
    "Jana",
    "Jonas",
    "Kai",
    "Kavya",
    "Lars",
    "Lea",
    "Leon",
    "Lina",
    "Luca",
    "Maya",
    "Mateo",
    "Mira",
    "Nadia",
    "Nico",
    "Noor",
    "Omar",
    "Olga",
    "Pablo",
    "Priya",
    "Quinn",
    "Rafael",
    "Rosa",
    "Sami",
    "Sara",
    "Sven",
    "Tara",
    "Theo",
    "Uma",
    "Vera",
    "Victor",
    "Wen",
    "Yara",
    "Yusuf",
    "Zoe",
    "Aiko",
    "Bruno",
    "Cleo",
    "Dmitri",
    "Esme",
    "Fatima",
    "Goran",
    "Ilse",
    "Joao",
    "Keiko",
    "Lior",
    "Marta",
    "Nils",
    "Oscar",
    "Pia",
    "Ravi",
    "Selma",
    "Tomas",
    "Ulla",
    "Vikram",
    "Wanda",
    "Xavier",
    "Yuki",
    "Zara",
]
_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")
_FENCE = re.compile(r"```.*?(```|$)", re.S)
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
_NUM = re.compile(r"\b\d{1,4}\b")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- corpus ----------------------------------------------------------------------------------


@dataclass
class Sources:
    """Raw material: LoCoMo turns (with their speakers), BEAM snippets, questions."""

    turns: list[tuple[str, str, tuple[str, ...]]]  # (speaker, text, conversation speakers)
    snippets: list[str]
    questions: list[str]


def load_sources(data: Path) -> Sources:
    """Read LoCoMo turns, BEAM messages (cut into 1-3 sentence snippets) and all questions."""
    turns: list[tuple[str, str, tuple[str, ...]]] = []
    questions: list[str] = []
    for conv in json.loads((data / "locomo" / "locomo10_dev.json").read_text()):
        c = conv["conversation"]
        speakers = (c.get("speaker_a", ""), c.get("speaker_b", ""))
        for key, value in c.items():
            if key.startswith("session_") and isinstance(value, list):
                turns.extend((t["speaker"], t["text"], speakers) for t in value if t.get("text"))
        questions.extend(q["question"] for q in conv["qa"])
    snippets: list[str] = []
    for chat in sorted((data / "beam").glob("*/*/chat.json")):
        for batch in json.loads(chat.read_text()):
            for group in batch["turns"]:
                for msg in group:
                    snippets.extend(_snippets(_MARKER.sub("", msg["content"])))
        probing = json.loads((chat.parent / "probing_questions.json").read_text())
        for items in probing.values():
            questions.extend(q["question"] for q in items if q.get("question"))
    return Sources(turns, snippets, questions)


def _snippets(text: str) -> list[str]:
    """Memory-sized pieces of a long chat message: 1-3 sentences, code blocks left out."""
    out = []
    for para in _FENCE.sub(" ", text).split("\n"):
        sents = [s.strip(" -*#>") for s in _SENT.split(para.strip()) if len(s.strip()) > 15]
        i = 0
        while i < len(sents):
            take = 1 + (len(sents[i]) < 120) + (i + 1 < len(sents) and len(sents[i + 1]) < 80)
            piece = " ".join(sents[i : i + take])[:400]
            if len(piece) >= 30:
                out.append(piece)
            i += take
    return out


@dataclass
class Corpus:
    """N memories and the queries asked of them."""

    ids: list[str]
    texts: list[str]
    kinds: list[str]
    times: list[float]
    namespaces: list[str]
    queries: list[str]
    query_namespaces: list[str]


def _vary(text: str, rng: random.Random, names: Sequence[str]) -> str:
    for name in names:
        if name and name in text:
            text = text.replace(name, rng.choice(NAMES))
    if rng.random() < 0.5:
        text = _NUM.sub(lambda m: str(rng.randint(1, 10 ** len(m.group()) - 1)), text)
    return text


def make_corpus(src: Sources, n: int, n_queries: int, seed: int = 0) -> Corpus:
    """A deterministic corpus; the corpus of a smaller ``n`` is a prefix of a larger one."""
    rng = random.Random(seed)
    weights = np.array([1.0 / (r + 1) for r in range(N_NAMESPACES)])
    ns_names = [f"agent-{i:03d}" for i in range(N_NAMESPACES)]
    cum = np.cumsum(weights / weights.sum()).tolist()
    kinds, kind_w = zip(*KINDS, strict=True)
    order = list(range(len(src.snippets)))
    rng.shuffle(order)
    texts, spaces, kind_list, times = [], [], [], []
    for i in range(n):
        if rng.random() < 0.4:
            speaker, text, names = rng.choice(src.turns)
            text = _vary(f"{speaker}: {text}", rng, names)
        else:
            text = _vary(src.snippets[order[i % len(order)]], rng, ())
        texts.append(text)
        spaces.append(ns_names[min(_bisect(cum, rng.random()), N_NAMESPACES - 1)])
        kind_list.append(rng.choices(kinds, kind_w)[0])
        times.append(YEAR_END - rng.random() * YEAR)
    qrng = random.Random(seed + 1)
    names = tuple(sorted({s for _, _, sp in src.turns for s in sp}))  # sorted: no hash order
    queries = [_vary(qrng.choice(src.questions), qrng, names) for _ in range(n_queries)]
    qspaces = [spaces[qrng.randrange(n)] for _ in range(n_queries)]
    ids = [f"m{i:07d}" for i in range(n)]
    return Corpus(ids, texts, kind_list, times, spaces, queries, qspaces)


def _bisect(cum: list[float], x: float) -> int:
    lo, hi = 0, len(cum)
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


# -- embeddings, computed once and cached on disk ----------------------------------------------


def embed_cached(texts: Sequence[str], cache: Path, embedder: Any) -> np.ndarray:
    """Embeddings of ``texts``, cached in chunks keyed by their content (reruns are free)."""
    cache.mkdir(parents=True, exist_ok=True)
    parts = []
    for start in range(0, len(texts), EMB_CHUNK):
        chunk = list(texts[start : start + EMB_CHUNK])
        key = hashlib.sha1("\x1e".join([embedder.name, *chunk]).encode()).hexdigest()[:20]
        f = cache / f"emb-{key}.npy"
        if f.exists():
            parts.append(np.load(f))
            continue
        t0 = time.perf_counter()
        mat = embedder.embed(chunk).astype(np.float32)
        np.save(f, mat)
        parts.append(mat)
        log(
            f"  embedded {start + len(chunk)}/{len(texts)}"
            f" ({len(chunk) / (time.perf_counter() - t0):.0f}/s)"
        )
    return np.concatenate(parts) if parts else np.empty((0, 384), np.float32)


class LookupEmbedder:
    """Norax's ONNX embedder, serving precomputed vectors for known texts while ``lookup``.

    Used by every system so that ingest and query can be timed with and without embedding
    through each one's normal code path.
    """

    def __init__(self, inner: Any, table: dict[str, np.ndarray]) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.table = table
        self.lookup = True

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.lookup:  # strict: a miss means a system embeds other text than the corpus's
            return np.stack([self.table[t] for t in texts])
        return self.inner.embed(texts)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


# -- the systems ---------------------------------------------------------------------------------


@dataclass
class Built:
    """A built system: how long ingest took and how to query it."""

    ingest_s: float
    query: Callable[[str, str], Any]
    folder: Path | None
    close: Callable[[], None] = lambda: None
    memory: Any = None  # Norax only: the store
    open_s: float | None = None  # Norax only: how long opening took


def _batches(n: int) -> list[tuple[int, int]]:
    return [(s, min(s + BATCH, n)) for s in range(0, n, BATCH)]


def build_norax(
    c: Corpus,
    emb: LookupEmbedder,
    folder: Path,
    server: str | None,
    system: str = "norax",
    existing: bool = False,
) -> Built:
    """Build a Norax store (or, ``existing``, open the one built in ``folder``)."""
    from norax_core import NoraxConfig, NoraxMemory

    config = NoraxConfig(**NORAX_CONFIGS.get(system, {}))
    t0 = time.perf_counter()
    if server:
        import chromadb

        host, port = server.rsplit("//", 1)[-1].rsplit(":", 1)
        client = chromadb.HttpClient(host=host, port=int(port))
        mem = NoraxMemory(
            client=client,
            collection=f"scale-{uuid.uuid4().hex[:8]}",
            embedder=emb,
            config=config,
        )
    else:
        mem = NoraxMemory(folder, embedder=emb, config=config)
    opened = time.perf_counter() - t0
    t0 = time.perf_counter()
    if not existing:
        for s, e in _batches(len(c.ids)):
            mem.add(
                c.texts[s:e],
                ids=c.ids[s:e],
                kind=c.kinds[s:e],
                created_at=c.times[s:e],
                namespace=c.namespaces[s:e],
            )
    ingest = time.perf_counter() - t0

    def query(q: str, ns: str) -> Any:
        return mem.search(q, k=K, namespace=ns, now=YEAR_END)

    def close() -> None:
        if server:
            mem.store.client.delete_collection(mem.collection_name)
        mem.close()

    built = Built(ingest, query, None if server else folder, close)
    built.memory, built.open_s = mem, opened
    return built


def build_chroma(c: Corpus, emb: LookupEmbedder, folder: Path, server: str | None) -> Built:
    import chromadb

    if server:
        host, port = server.rsplit("//", 1)[-1].rsplit(":", 1)
        client = chromadb.HttpClient(host=host, port=int(port))
    else:
        client = chromadb.PersistentClient(path=str(folder))
    name = f"plain-{uuid.uuid4().hex[:8]}"
    col = client.create_collection(name, configuration={"hnsw": {"space": "cosine"}})
    t0 = time.perf_counter()
    for s, e in _batches(len(c.ids)):
        col.add(
            ids=c.ids[s:e],
            documents=c.texts[s:e],
            embeddings=emb.embed(c.texts[s:e]),
            metadatas=[
                {"namespace": ns, "kind": k, "created_at": t}
                for ns, k, t in zip(c.namespaces[s:e], c.kinds[s:e], c.times[s:e], strict=True)
            ],
        )
    ingest = time.perf_counter() - t0

    def query(q: str, ns: str) -> Any:
        return col.query(
            query_embeddings=emb.embed([q]),
            n_results=K,
            where={"namespace": ns},
            include=["documents", "metadatas", "distances"],
        )

    def close() -> None:
        if server:
            client.delete_collection(name)

    return Built(ingest, query, None if server else folder, close)


def build_langchain(c: Corpus, emb: LookupEmbedder, folder: Path, server: str | None) -> Built:
    import chromadb

    store = peer_retrievers.langchain_store(emb, chromadb.PersistentClient(path=str(folder)))
    metas = [
        {"namespace": ns, "kind": k, "created_at": t}
        for ns, k, t in zip(c.namespaces, c.kinds, c.times, strict=True)
    ]
    t0 = time.perf_counter()
    ensembles = peer_retrievers.langchain_ensembles(store, c.ids, c.texts, metas, K, BATCH)
    ingest = time.perf_counter() - t0
    return Built(ingest, lambda q, ns: ensembles[ns].invoke(q), folder)


def build_llamaindex(c: Corpus, emb: LookupEmbedder, folder: Path, server: str | None) -> Built:
    import chromadb

    client = chromadb.PersistentClient(path=str(folder))
    col = client.create_collection("llamaindex", configuration={"hnsw": {"space": "cosine"}})
    metas = [
        {"namespace": ns, "kind": k, "created_at": ts}
        for ns, k, ts in zip(c.namespaces, c.kinds, c.times, strict=True)
    ]
    nodes = peer_retrievers.llamaindex_nodes(c.ids, c.texts, metas)
    t0 = time.perf_counter()
    fusions = peer_retrievers.llamaindex_fusions(emb, col, nodes, K, BATCH)
    ingest = time.perf_counter() - t0
    return Built(ingest, lambda q, ns: fusions[ns].retrieve(q), folder)


BUILDERS = {
    "norax": build_norax,
    "norax_hnsw": lambda *a: build_norax(*a, system="norax_hnsw"),
    "chroma": build_chroma,
    "langchain_ensemble": build_langchain,
    "llamaindex_fusion": build_llamaindex,
}


# -- one system, in its own process ------------------------------------------------------------


def _rss_mb() -> float:
    """Peak RSS of this process image (VmHWM).

    Not ``ru_maxrss``: Linux carries that across ``exec``, so a worker would report its
    parent's size.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _du_mb(path: Path | None) -> float | None:
    if path is None:
        return None
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _pct(xs: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, p))


def worker(args: argparse.Namespace) -> None:
    from norax_core.embedders import OnnxMiniLMEmbedder

    work = Path(args.work)
    c = Corpus(**json.loads((work / "corpus.json").read_text()))
    vectors = np.load(work / "emb.npy")
    qvectors = np.load(work / "qemb.npy")
    table = dict(zip(c.texts, vectors, strict=True))
    table.update(zip(c.queries, qvectors, strict=True))
    emb = LookupEmbedder(OnnxMiniLMEmbedder(), table)
    emb.inner.embed(["warm up"])
    base = _rss_mb()
    if args.worker == "norax_build":  # the store both Norax systems open
        built = build_norax(c, emb, work / "norax-store", None)
        built.close()
        result = {
            "ingest_per_s_no_embed": len(c.ids) / built.ingest_s,
            "disk_mb": _du_mb(built.folder),
            "rss_mb": _rss_mb(),
        }
        Path(args.out).write_text(json.dumps(result))
        return
    shared = args.worker in NORAX_CONFIGS and not args.server
    folder = (
        work / "norax-store"
        if shared
        else Path(tempfile.mkdtemp(prefix=f"scale-{args.worker}-", dir=args.tmp))
    )
    try:
        if shared:
            built = build_norax(c, emb, folder, None, args.worker, existing=True)
        else:
            built = BUILDERS[args.worker](c, emb, folder, args.server)
        disk = _du_mb(built.folder)
        pairs = list(zip(c.queries, c.query_namespaces, strict=True))
        for q, ns in pairs[: args.warmup]:
            built.query(q, ns)
        out: dict[str, list[float]] = {"no_embed": [], "embed": [], "embed_no_graph": []}
        # Norax only: each query is asked again without query entities (the graph signal then
        # finds nothing), right after, so that load changes on a shared machine hit both alike.
        mem = built.memory
        extractor = mem.extractor if mem is not None else None
        for mode in ("no_embed", "embed"):
            emb.lookup = mode == "no_embed"
            for q, ns in pairs:
                t0 = time.perf_counter()
                built.query(q, ns)
                out[mode].append(time.perf_counter() - t0)
                if mem is not None and mode == "embed":
                    mem.extractor = None
                    t0 = time.perf_counter()
                    built.query(q, ns)
                    out["embed_no_graph"].append(time.perf_counter() - t0)
                    mem.extractor = extractor
        if mem is not None:
            cache = mem.store.indexes.vectors
            matrix_mb, loaded = cache.nbytes / 2**20, len(cache.loaded())
        if args.worker == "norax":
            out.update(_paired(mem, pairs, emb))
        lat, lat_ne = out["embed"], out["no_embed"]
        result = {
            "query_p50_ms": _pct(lat, 50),
            "query_p95_ms": _pct(lat, 95),
            "query_p50_ms_no_embed": _pct(lat_ne, 50),
            "query_p95_ms_no_embed": _pct(lat_ne, 95),
            "rss_mb": _rss_mb(),
            "rss_base_mb": base,
            "disk_mb": disk,
        }
        if not shared:
            result["ingest_per_s_no_embed"] = len(c.ids) / built.ingest_s
        if mem is not None:
            result["query_p50_ms_without_graph"] = _pct(out["embed_no_graph"], 50)
            result["open_s"] = built.open_s
            result["dense_matrix_mb"] = matrix_mb  # after the timed queries
            result["namespaces_loaded"] = loaded
        if args.worker == "norax":
            for key in ("exact", "hnsw", "dense_exact", "dense_hnsw", "chroma"):
                result[f"paired_p50_ms_{key}"] = _pct(out[key], 50)
                result[f"paired_p95_ms_{key}"] = _pct(out[key], 95)
            result["cold_largest_ms"] = out["cold_largest"][0] * 1000.0
            result["largest_namespace"] = int(out["largest"][0])
        built.close()
        Path(args.out).write_text(json.dumps(result))
    finally:
        if not shared:
            shutil.rmtree(folder, ignore_errors=True)


def _paired(mem: Any, pairs: list[tuple[str, str]], emb: LookupEmbedder) -> dict[str, list[float]]:
    """Exact dense vs the old HNSW path, query by query in one process (load hits both alike).

    ``exact`` / ``hnsw``: the full search (query embedding precomputed); ``dense_exact`` /
    ``dense_hnsw``: the dense signal's candidates alone; ``chroma``: plain Chroma's
    namespace-filtered query (k = 10, documents and metadata) on the same collection, the
    ``chroma`` system's query. Then the first search of the largest namespace with its matrix
    not loaded (read from Chroma).
    """
    from norax_core.signals.dense import SMALL_FILTER

    dense = mem.store.dense
    exact_limit = dense.exact_limit
    out: dict[str, list[float]] = {
        k: []
        for k in ("exact", "hnsw", "dense_exact", "dense_hnsw", "chroma", "cold_largest", "largest")
    }
    col = mem.store.collection
    emb.lookup = True
    try:
        paths = [("exact", exact_limit), ("hnsw", SMALL_FILTER)]
        for i, (q, ns) in enumerate(pairs):
            for key, limit in paths if i % 2 else paths[::-1]:  # neither always goes first
                dense.exact_limit = limit
                t0 = time.perf_counter()
                mem.search(q, k=K, namespace=ns, now=YEAR_END)
                out[key].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                mem.candidates(q, k=K, namespace=ns, now=YEAR_END, weights={"dense": 1.0})
                out[f"dense_{key}"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            col.query(
                query_embeddings=emb.embed([q]),
                n_results=K,
                where={"norax_namespace": ns},
                include=["documents", "metadatas", "distances"],
            )
            out["chroma"].append(time.perf_counter() - t0)
        dense.exact_limit = exact_limit
        largest = max(mem.namespaces(), key=mem.count)
        mem.store.indexes.vectors.clear()
        t0 = time.perf_counter()
        mem.candidates(pairs[0][0], k=K, namespace=largest, weights={"dense": 1.0})
        out["cold_largest"].append(time.perf_counter() - t0)
        out["largest"].append(float(mem.count(largest)))
    finally:
        dense.exact_limit = exact_limit
    return out


# -- orchestration -------------------------------------------------------------------------------


def throughput(src: Sources, n: int) -> dict[str, float]:
    """Texts/s of the embedder and of the spaCy extractor on the same ``n`` corpus texts."""
    from norax_core.embedders import OnnxMiniLMEmbedder
    from norax_core.entities import load_extractor

    sample = make_corpus(src, n, 0, seed=7).texts
    embedder, extractor = OnnxMiniLMEmbedder(), load_extractor()
    embedder.embed(sample[:64])
    extractor.extract(sample[:64])
    t0 = time.perf_counter()
    embedder.embed(sample)
    t1 = time.perf_counter()
    extractor.extract(sample)
    t2 = time.perf_counter()
    return {"embed_per_s": len(sample) / (t1 - t0), "extract_per_s": len(sample) / (t2 - t1)}


def _round(v: Any) -> Any:
    return round(v, 2) if isinstance(v, float) else v


def run_one(system: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    out = work / f"{system}.json"
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        system,
        "--work",
        str(work),
        "--out",
        str(out),
        "--tmp",
        str(args.tmp),
        "--warmup",
        str(args.warmup),
    ]
    if args.server:
        cmd += ["--server", args.server]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
    if proc.returncode != 0:
        log(f"  {system}: worker failed ({proc.returncode})")
        return {"error": f"worker exit {proc.returncode}"}
    res = json.loads(out.read_text())
    log(
        f"  {system}: {json.dumps({k: _round(v) for k, v in res.items()})}"
        f" [{time.perf_counter() - t0:.0f}s]"
    )
    return res


def _budgets(text: str | None) -> tuple[float, float] | None:
    """``--worker-budgets DENSE,INDEX`` (MB), or ``None``."""
    if not text:
        return None
    dense, index = (float(x) for x in text.split(","))
    return dense, index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--n", default="10000,100000", help="comma-separated store sizes")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--merge", action="store_true", help="keep the other sizes already in --json")
    ap.add_argument("--quick", action="store_true", help="N=2000, 40 queries (about a minute)")
    ap.add_argument("--server", help="Chroma server URL: measure norax and chroma over HttpClient")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "norax-scale")
    ap.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument(
        "--stores",
        default="",
        help="scale-out rows (benchmarks/scale_store.py): store sizes, e.g. 10000,100000,1000000",
    )
    ap.add_argument(
        "--workers-n",
        type=int,
        default=100_000,
        help="the multi-process run uses the largest --stores size up to this",
    )
    ap.add_argument("--worker-ops", type=int, default=400, help="operations per worker process")
    ap.add_argument(
        "--worker-budgets",
        help="the Norax workers' dense_cache_mb,index_cache_mb (default: NoraxConfig's)",
    )
    ap.add_argument(
        "--keep",
        type=Path,
        help="build the --stores stores in this folder and keep them; reuse those built there",
    )
    ap.add_argument(
        "--ingest",
        action="store_true",
        help="ingest rows (benchmarks/scale_ingest.py): add vs embed + Chroma add, short and long",
    )
    ap.add_argument("--show", action="store_true", help="print the tables of --json, run nothing")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    models = ROOT.parent / "shared" / "models"
    os.environ.setdefault("NORAX_EMBEDDING_MODEL_DIR", str(models / "all-MiniLM-L6-v2"))
    os.environ.setdefault("NORAX_SPACY_MODEL", str(models / "en_core_web_sm-3.8.0"))
    if args.worker:
        worker(args)
        return
    if args.show:
        print_report(json.loads(args.json.read_text()))
        return
    if args.quick:
        args.n, args.queries, args.warmup = "2000", 40, 5
    sizes = [int(x) for x in args.n.split(",") if x]
    stores = [int(x) for x in args.stores.split(",") if x]
    systems = [s for s in args.systems.split(",") if s]
    if args.server:
        systems = [s for s in systems if s in SERVER_SYSTEMS]
    from norax_core.embedders import OnnxMiniLMEmbedder

    log("loading sources ...")
    src = load_sources(args.data)
    log(
        f"  {len(src.turns)} LoCoMo turns, {len(src.snippets)} BEAM snippets,"
        f" {len(src.questions)} questions"
    )
    embedder = OnnxMiniLMEmbedder()
    # Embeddings are cached in aligned chunks: a smaller N reuses the larger run's prefix.
    pool_n = scale_store.POOL if stores else 0
    corpus_n = -(-max([*sizes, pool_n, 1]) // EMB_CHUNK) * EMB_CHUNK
    full = make_corpus(src, corpus_n if sizes or stores else 1, args.queries)
    vectors = qvectors = np.empty((0, 384), np.float32)
    if sizes or stores:
        log(f"embedding {len(full.texts)} memories (cached in {args.cache}) ...")
        vectors = embed_cached(full.texts, args.cache, embedder)
        qvectors = embed_cached(full.queries, args.cache, embedder)
    rates = throughput(src, 300 if args.quick else 2_000) if sizes else {}
    if rates:
        log(
            f"  embedder {rates['embed_per_s']:.0f} texts/s,"
            f" spaCy extraction {rates['extract_per_s']:.0f} texts/s"
        )
    report: dict[str, Any] = {"n": {}}
    if args.merge and args.json and args.json.exists():
        report = json.loads(args.json.read_text())
    for n in sizes:
        c = make_corpus(src, n, args.queries)
        work = Path(tempfile.mkdtemp(prefix="scale-work-", dir=args.tmp))
        (work / "corpus.json").write_text(json.dumps(vars(c)))
        np.save(work / "emb.npy", vectors[:n])
        np.save(work / "qemb.npy", qvectors)
        log(
            f"N={n}: {len(set(c.namespaces))} namespaces,"
            f" largest {max(len(v) for v in peer_retrievers.by_namespace(c.namespaces).values())}"
        )
        rows: dict[str, Any] = {}
        build: dict[str, Any] = {}
        if not args.server and any(s in NORAX_CONFIGS for s in systems):
            build = run_one("norax_build", work, args)
        for system in systems:
            res = run_one(system, work, args)
            if system in NORAX_CONFIGS and not args.server and "error" not in res:
                res["ingest_per_s_no_embed"] = build.get("ingest_per_s_no_embed")
                res["disk_mb"] = build.get("disk_mb")
                res["build_rss_mb"] = build.get("rss_mb")
            if res.get("ingest_per_s_no_embed"):
                res["ingest_per_s"] = 1.0 / (
                    1.0 / res["ingest_per_s_no_embed"] + 1.0 / rates["embed_per_s"]
                )
            rows[system] = res
            report["n"][str(n)] = {**report["n"].get(str(n), {}), **rows}
            _save(report, rates, args)
        shutil.rmtree(work, ignore_errors=True)
    if args.ingest:
        log("ingest: short chat turns and long BEAM messages ...")
        report["ingest"] = scale_ingest.run(args.data, args.tmp)
        _save(report, rates, args)
    if stores:

        def save_stores(part: dict[str, Any]) -> None:
            report["stores"] = part["sizes"]
            report["workers"] = part["workers"]
            _save(report, rates, args)

        save_stores(
            scale_store.run(
                stores,
                texts=full.texts,
                vectors=vectors,
                queries=full.queries,
                qvectors=qvectors,
                cache=args.cache,
                tmp=args.tmp,
                workers_n=args.workers_n,
                worker_ops=args.worker_ops,
                worker_budgets=_budgets(args.worker_budgets),
                save=save_stores,
                keep=args.keep,
            )
        )
    _save(report, rates, args)
    print_report(report)


def _save(report: dict[str, Any], rates: dict[str, float], args: argparse.Namespace) -> None:
    """Write the JSON after every system, so a long run that is stopped keeps its results."""
    report["meta"] = {
        **report.get("meta", {}),
        **rates,
        "k": K,
        "queries": args.queries,
        "namespaces": N_NAMESPACES,
        "server": args.server,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_avg_at_end": os.getloadavg(),
        "python": platform.python_version(),
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


def print_report(report: dict[str, Any]) -> None:
    if report.get("stores") or report.get("workers") or report.get("ingest"):
        print(markdown_scale_out(report) + "\n")
    if not report.get("n"):
        return
    print(markdown_table(report))
    meta = report["meta"]
    print(
        f"\ningest: embedder {meta['embed_per_s']:.0f} texts/s, spaCy entity extraction "
        f"{meta['extract_per_s']:.0f} texts/s (extraction / embedding cost: "
        f"{meta['embed_per_s'] / meta['extract_per_s']:.2f})"
    )
    for n, rows in report["n"].items():
        nx = rows.get("norax", {})
        if "query_p50_ms_without_graph" in nx:
            p50, without = nx["query_p50_ms"], nx["query_p50_ms_without_graph"]
            print(
                f"N={n}: the entity graph (query extraction + graph signal) adds "
                f"{100 * (p50 / without - 1):.0f}% to Norax's query p50"
                f" ({without:.1f} -> {p50:.1f} ms)"
            )
        if "paired_p50_ms_exact" in nx:
            print(
                f"N={n}: paired in one process, exact / HNSW dense: search p50 "
                f"{nx['paired_p50_ms_exact']:.1f} vs {nx['paired_p50_ms_hnsw']:.1f} ms "
                f"({nx['paired_p50_ms_exact'] / nx['paired_p50_ms_hnsw']:.2f}x), dense "
                f"candidates alone {nx['paired_p50_ms_dense_exact']:.1f} vs "
                f"{nx['paired_p50_ms_dense_hnsw']:.1f} ms, plain Chroma's filtered query "
                f"{nx['paired_p50_ms_chroma']:.1f} ms (search / Chroma "
                f"{nx['paired_p50_ms_exact'] / nx['paired_p50_ms_chroma']:.2f}x); loading the "
                "largest namespace's "
                f"matrix ({nx['largest_namespace']:,} memories) "
                f"{nx['cold_largest_ms']:.0f} ms"
            )
        old = rows.get("norax_hnsw", {})
        if "query_p50_ms" in nx and "query_p50_ms" in old:
            print(
                f"N={n}: exact dense / old HNSW path: query p50 "
                f"{nx['query_p50_ms'] / old['query_p50_ms']:.2f}x "
                f"({nx['query_p50_ms']:.1f} vs {old['query_p50_ms']:.1f} ms; no embed "
                f"{nx['query_p50_ms_no_embed']:.1f} vs {old['query_p50_ms_no_embed']:.1f}), "
                f"p95 {nx['query_p95_ms']:.1f} vs {old['query_p95_ms']:.1f} ms, RSS "
                f"{nx['rss_mb']:.0f} vs {old['rss_mb']:.0f} MB (matrices "
                f"{nx.get('dense_matrix_mb', 0):.0f} MB for {nx.get('namespaces_loaded')} "
                "namespaces)"
            )
        ch, lc, li = (
            rows.get("chroma"),
            rows.get("langchain_ensemble"),
            rows.get("llamaindex_fusion"),
        )
        if nx and ch and "query_p50_ms" in ch:
            print(
                f"N={n}: norax/chroma query p50 {nx['query_p50_ms'] / ch['query_p50_ms']:.2f}x "
                f"(no embed {nx['query_p50_ms_no_embed'] / ch['query_p50_ms_no_embed']:.2f}x); "
                f"ingest norax/chroma {nx['ingest_per_s'] / ch['ingest_per_s']:.2f}x"
            )
        for name, peer in (("langchain", lc), ("llamaindex", li)):
            if nx and peer and "query_p50_ms" in peer:
                print(
                    f"N={n}: {name} / norax query p50"
                    f" {peer['query_p50_ms'] / nx['query_p50_ms']:.1f}x "
                    f"(no embed {peer['query_p50_ms_no_embed'] / nx['query_p50_ms_no_embed']:.1f}x)"
                )
    sizes = list(report["n"])
    if len(sizes) > 1 and all("norax" in report["n"][s] for s in sizes):
        a, b = report["n"][sizes[0]]["norax"], report["n"][sizes[-1]]["norax"]
        print(
            f"norax query p50 growth {sizes[0]} -> {sizes[-1]}: "
            f"{b['query_p50_ms'] / a['query_p50_ms']:.2f}x "
            f"(no embed {b['query_p50_ms_no_embed'] / a['query_p50_ms_no_embed']:.2f}x)"
        )


def markdown_scale_out(report: dict[str, Any]) -> str:
    """The scale-out and ingest rows (``--stores``, ``--ingest``) as Markdown tables."""
    lines = []
    stores = report.get("stores") or {}
    if stores:
        lines += [
            "| N (namespaces) | mode | system | open s | RSS after open MB | RSS after first"
            " queries MB | first query on a cold 1k namespace ms (max of 4)"
            " | steady p50 / p95 ms |",
            "|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for n, row in stores.items():
            b = row.get("build", {})
            for mode in ("embedded", "client"):
                for system in ("norax", "chroma"):
                    r = row.get(f"{mode}_{system}")
                    if not r:
                        continue
                    if "error" in r:
                        lines.append(f"| {int(n):,} | {mode} | {system} | {r['error']} |||||")
                        continue
                    lines.append(
                        f"| {int(n):,} ({b.get('namespaces', '?'):,}) | {mode} | {system} | "
                        f"{r['open_s']:.2f} | {r['rss_open_mb']:,.0f} | "
                        f"{r['rss_after_first_queries_mb']:,.0f} | "
                        f"{r['first_query_ms_max']:,.0f} | "
                        f"{r['steady_p50_ms']:.1f} / {r['steady_p95_ms']:.1f} |"
                    )
        lines.append("")
        for n, row in stores.items():
            b = row.get("build", {})
            if "build_s" in b:
                lines.append(
                    f"N={int(n):,}: built in {b['build_s']:,.0f} s ({b['build_per_s']:,.0f} "
                    f"memories/s through NoraxMemory.add), {b['disk_mb']:,.0f} MB on disk, "
                    f"load average {b.get('load_avg', [float('nan')])[0]:.1f}"
                )
            for mode in ("embedded", "client"):
                nx, ch = row.get(f"{mode}_norax", {}), row.get(f"{mode}_chroma", {})
                if "open_s" in nx and "open_s" in ch:
                    rss = nx["rss_after_first_queries_mb"] / ch["rss_after_first_queries_mb"]
                    lines.append(
                        f"N={int(n):,}, {mode}, Norax / plain Chroma: open "
                        f"{nx['open_s'] / ch['open_s']:.0f}x, RSS after the first queries "
                        f"{rss:.1f}x,"
                        f" first query {nx['first_query_ms_max'] / ch['first_query_ms_max']:.1f}x,"
                        f" steady p50 {nx['steady_p50_ms'] / ch['steady_p50_ms']:.2f}x"
                    )
    workers = report.get("workers") or {}
    if workers.get("norax"):
        lines += [
            "",
            f"Workers: {len(workers['norax']['workers'])} processes over one `chroma run`, "
            f"N={workers.get('n', 0):,}, each serving its own namespaces "
            "(80 % searches, 20 % adds)",
            "",
            "| system | worker | namespaces | open s | RSS after open / peak MB "
            "| search p50 / p95 ms | add p50 / p95 ms | mixed results | lost writes |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for system in ("norax", "chroma"):
            for i, r in enumerate(workers.get(system, {}).get("workers", [])):
                if "error" in r:
                    lines.append(f"| {system} | {i} | error {r['error']} |||||||")
                    continue
                lines.append(
                    f"| {system} | {i} | {r['namespaces']} | {r['open_s']:.1f} | "
                    f"{r['rss_open_mb']:,.0f} / {r['rss_peak_mb']:,.0f} | {r['read_p50_ms']:.1f} / "
                    f"{r['read_p95_ms']:.1f} | {r['write_p50_ms']:.1f} / {r['write_p95_ms']:.1f} | "
                    f"{r['mixed_results']} | {r['lost_writes']} |"
                )
    ingest = report.get("ingest") or {}
    if ingest:
        lines += [
            "",
            "| texts | n | mean chars | add /s (with embedding) | embed + Chroma add /s | ratio"
            " (wall) | ratio (CPU) | inside add: embed / spaCy / tokenize / Chroma / indexes s |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for name, r in ingest.items():
            inside = r["inside_add_s"]
            parts = " / ".join(
                f"{inside.get(k, 0.0):.1f}"
                for k in ("embed", "extract", "tokenize", "chroma", "indexes")
            )
            lines.append(
                f"| {name} | {r['texts']} | {r['mean_chars']:,.0f} | {r['norax_per_s']:.1f} | "
                f"{r['embed_chroma_per_s']:.1f} | {r['ratio']:.2f} | "
                f"{r.get('ratio_cpu', float('nan')):.2f} | {parts} |"
            )
    return "\n".join(lines)


def markdown_table(report: dict[str, Any]) -> str:
    """The results as a Markdown table (one row per N and system)."""

    def f(v: Any, digits: int = 1) -> str:
        return "n/a" if v is None else f"{v:,.{digits}f}"

    lines = [
        "| N | system | query p50 ms | p95 ms | p50 no-embed ms | ingest /s | ingest /s no-embed"
        " | peak RSS MB | disk MB |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, rows in report["n"].items():
        for system, r in rows.items():
            if "error" in r:
                lines.append(f"| {int(n):,} | {system} | {r['error']} | | | | | | |")
                continue
            lines.append(
                f"| {int(n):,} | {system} | {f(r['query_p50_ms'])} | {f(r['query_p95_ms'])} | "
                f"{f(r['query_p50_ms_no_embed'])} | {f(r['ingest_per_s'], 0)} | "
                f"{f(r['ingest_per_s_no_embed'], 0)} | {f(r['rss_mb'], 0)} | {f(r['disk_mb'])} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
