"""Entity extraction throughput and graph-signal query latency.

(a) Extraction: texts/s of the spaCy extractor (POS-tag noun heads, the default, and the
    parser's noun chunks) and of the rule-based fallback on 2,000 LoCoMo turns, next to the
    throughput of Chroma's ONNX all-MiniLM-L6-v2 embedder on the same turns (the ingest cost
    extraction should not exceed).
(b) Graph signal: ``top(q, 50)`` + ``score(q, 100 ids)`` per query over 10k and 100k synthetic
    memories whose entities are drawn Zipf-like (exponent 1.1) from a 50k-entity vocabulary,
    in one namespace and spread over 300 namespaces; plus build (add_many) and Louvain times.

Run from the repository root::

    python benchmarks/graph_signal.py --locomo ../shared/data/locomo/locomo10_dev.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from norax_core.entities import EntityExtractor, load_extractor
from norax_core.signals.base import Query
from norax_core.signals.graph import EntityGraph, GraphSignal

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / ".." / "shared" / "models"


def locomo_turns(path: Path, n: int) -> list[str]:
    """The first ``n`` turns of the LoCoMo file, conversation by conversation."""
    texts: list[str] = []
    for conv in json.loads(path.read_text()):
        c = conv["conversation"]
        sessions = sorted(
            (k for k in c if k.startswith("session_") and isinstance(c[k], list)),
            key=lambda k: int(k.split("_")[1]),
        )
        for k in sessions:
            texts.extend(t["text"] for t in c[k])
    return texts[:n]


def rate(fn: Callable[[Sequence[str]], object], texts: Sequence[str], warm: int = 64) -> float:
    fn(texts[:warm])
    t0 = time.perf_counter()
    fn(texts)
    return len(texts) / (time.perf_counter() - t0)


def bench_extraction(locomo: Path, n: int) -> None:
    texts = locomo_turns(locomo, n)
    model = os.environ.get("NORAX_SPACY_MODEL") or str(SHARED / "en_core_web_sm-3.8.0")
    mean_len = np.mean([len(t) for t in texts])
    print(f"(a) extraction on {len(texts)} LoCoMo turns (mean {mean_len:.0f} chars)")
    extractors: list[tuple[str, EntityExtractor]] = [
        ("spaCy, POS noun heads (default)", load_extractor(model)),
        ("spaCy, parser noun chunks", load_extractor(model, noun_mode="parser")),
        ("rule-based fallback", load_extractor("rules")),
    ]
    outputs = {}
    for label, ex in extractors:
        r = rate(ex.extract, texts)
        outputs[label] = ex.extract(texts)
        per = np.mean([len(e) for e in outputs[label]])
        print(f"    {label:34s} {r:7.0f} texts/s   {per:.2f} entities/text   [{ex.name}]")
    a, b = outputs[extractors[0][0]], outputs[extractors[1][0]]
    inter = sum(len(set(x) & set(y)) for x, y in zip(a, b, strict=True))
    union = sum(len(set(x) | set(y)) for x, y in zip(a, b, strict=True))
    print(f"    POS vs parser entity overlap (Jaccard over all turns): {inter / union:.3f}")
    try:
        from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2

        ef = ONNXMiniLM_L6_V2()
        ef.DOWNLOAD_PATH = str(SHARED / "all-MiniLM-L6-v2")  # offline: the shared copy
        print(f"    {'embedder (Chroma ONNX MiniLM)':34s} {rate(ef, texts):7.0f} texts/s")
    except Exception as exc:  # noqa: BLE001 - the reference is optional
        print(f"    embedder reference unavailable: {exc}")


def zipf_memories(n: int, vocab: int, rng: np.random.Generator) -> list[list[str]]:
    p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    sizes = rng.integers(2, 9, size=n)  # 2-8 entities, like a chat turn
    flat = rng.choice(vocab, size=int(sizes.sum()), p=p)
    out, i = [], 0
    for s in sizes:
        out.append([f"e{x}" for x in dict.fromkeys(flat[i : i + s].tolist())])
        i += s
    return out


def bench_graph(n: int, namespaces: int, queries: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    mems = zipf_memories(n, 50_000, rng)
    g = EntityGraph()
    t0 = time.perf_counter()
    per_ns: dict[str, list[tuple[str, list[str]]]] = {}
    for i, ents in enumerate(mems):
        per_ns.setdefault(f"ns{i % namespaces}", []).append((f"m{i}", ents))
    for ns, items in per_ns.items():
        g.add_many(ns, items)
    build = time.perf_counter() - t0
    sig = GraphSignal(g)
    names = list(per_ns)
    t0 = time.perf_counter()
    for ns in names:
        g.communities(ns)  # the lazy first Louvain run
    louvain = time.perf_counter() - t0
    big = names[0]
    nodes = g.graph(big).number_of_nodes() if namespaces == 1 else None
    lat = []
    for j in range(queries):
        ns = names[j % len(names)]
        # Query entities: 1-3 taken from a random memory of the namespace (so they exist),
        # which draws them Zipf-like too; hubs included.
        items = per_ns[ns]
        src = items[int(rng.integers(len(items)))][1]
        ents = tuple(rng.permutation(src)[: int(rng.integers(1, 4))].tolist())
        q = Query(text="", namespace=ns, now=0.0, entities=ents)
        pool = [items[int(k)][0] for k in rng.integers(len(items), size=100)]
        t0 = time.perf_counter()
        sig.score(q, list(sig.top(q, 50)) + pool)
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    where = "1 namespace" if namespaces == 1 else f"{namespaces} namespaces"
    extra = f", {nodes} entities" if nodes else ""
    print(
        f"    {n:>7,} memories, {where:15s}: top(50)+score(150) per query"
        f" mean {statistics.mean(lat):5.2f} ms,"
        f" p50 {lat[len(lat) // 2]:5.2f}, p95 {lat[int(len(lat) * 0.95)]:5.2f}"
        f" | add_many {build:5.2f} s, first Louvain {louvain / len(names):5.2f} s"
        f" per namespace{extra}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = ROOT / ".." / "shared" / "data" / "locomo" / "locomo10_dev.json"
    ap.add_argument("--locomo", type=Path, default=default)
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--skip-extraction", action="store_true")
    args = ap.parse_args()
    machine = platform.processor() or platform.machine()
    print(f"# {machine}, {os.cpu_count()} cores, Python {platform.python_version()}")
    if not args.skip_extraction:
        bench_extraction(args.locomo, args.texts)
    print("(b) graph signal, synthetic Zipf entities (50k vocabulary, 2-8 per memory)")
    for n in args.sizes:
        for namespaces in (1, 300):
            bench_graph(n, namespaces, args.queries)


if __name__ == "__main__":
    main()
