"""Entity extraction throughput and graph-signal query latency.

(a) Extraction: texts/s of the spaCy extractor (POS-tag noun heads, the default; the parser's
    noun chunks) and of the rule-based fallback on 2,000 LoCoMo turns, next to the embedders
    on the same turns (the ingest cost extraction should not exceed): Chroma's
    ``ONNXMiniLM_L6_V2`` and Norax's ``OnnxMiniLMEmbedder``. The methods run interleaved,
    chunk by chunk, so that a busy machine slows them alike.
(b) Graph signal: ``top(q, 50)`` plus ``score(q, 150 ids)`` per query (wall and CPU time: on a
    shared machine the process's CPU time is the better estimate of an idle run) over 10k and 100k
    synthetic memories whose 2-8 entities are drawn Zipf-like (exponent 1.1) from a 50k-entity
    vocabulary, in one namespace and spread over 300 namespaces (30 of them queried); plus the
    ``add_many`` build time and the first (lazy) Louvain run.

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

from norax_core.entities import load_extractor
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


def extraction_methods(
    model: str, with_chroma: bool
) -> dict[str, Callable[[Sequence[str]], object]]:
    default = load_extractor(model)
    methods: dict[str, Callable[[Sequence[str]], object]] = {
        f"spaCy, POS-tag noun heads (default) [{default.name}]": default.extract,
        "spaCy, parser noun chunks": load_extractor(model, noun_mode="parser").extract,
        "rule-based fallback": load_extractor("rules").extract,
    }
    try:
        from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2

        if not with_chroma:
            raise RuntimeError("skipped (--skip-chroma)")
        chroma = ONNXMiniLM_L6_V2()
        chroma.DOWNLOAD_PATH = SHARED / "all-MiniLM-L6-v2"  # offline: the shared copy
        methods["embedder: Chroma ONNXMiniLM_L6_V2 (pads to 256 tokens)"] = chroma
    except Exception as exc:  # noqa: BLE001 - a reference only
        print(f"    Chroma embedder unavailable: {exc}")
    try:
        from norax_core.embedders import OnnxMiniLMEmbedder

        ours = OnnxMiniLMEmbedder(model_dir=SHARED / "all-MiniLM-L6-v2")
        methods["embedder: Norax OnnxMiniLMEmbedder (dynamic padding)"] = ours.embed
    except Exception as exc:  # noqa: BLE001
        print(f"    Norax embedder unavailable: {exc}")
    return methods


def bench_extraction(locomo: Path, n: int, rounds: int, with_chroma: bool) -> None:
    texts = locomo_turns(locomo, n)
    model = os.environ.get("NORAX_SPACY_MODEL") or str(SHARED / "en_core_web_sm-3.8.0")
    mean_len = np.mean([len(t) for t in texts])
    print(f"(a) extraction on {len(texts)} LoCoMo turns (mean {mean_len:.0f} chars)")
    methods = extraction_methods(model, with_chroma)
    for fn in methods.values():
        fn(texts[:32])  # warm up
    spent = dict.fromkeys(methods, 0.0)
    chunks = [texts[i : i + 250] for i in range(0, len(texts), 250)]
    for _ in range(rounds):
        for chunk in chunks:
            for label, fn in methods.items():
                t0 = time.perf_counter()
                fn(chunk)
                spent[label] += time.perf_counter() - t0
    for label, seconds in spent.items():
        print(f"    {rounds * len(texts) / seconds:7.0f} texts/s  {label}")
    pos = load_extractor(model).extract(texts)
    parsed = load_extractor(model, noun_mode="parser").extract(texts)
    inter = sum(len(set(x) & set(y)) for x, y in zip(pos, parsed, strict=True))
    union = sum(len(set(x) | set(y)) for x, y in zip(pos, parsed, strict=True))
    print(
        f"    entities per turn: POS {np.mean([len(e) for e in pos]):.2f},"
        f" parser {np.mean([len(e) for e in parsed]):.2f};"
        f" POS vs parser Jaccard {inter / union:.3f}"
    )


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
    per_ns: dict[str, list[tuple[str, list[str]]]] = {}
    for i, ents in enumerate(mems):
        per_ns.setdefault(f"ns{i % namespaces}", []).append((f"m{i}", ents))
    g = EntityGraph()
    t0 = time.perf_counter()
    for ns, items in per_ns.items():
        g.add_many(ns, items)
    build = time.perf_counter() - t0
    names = list(per_ns)[:30]
    t0 = time.perf_counter()
    for ns in names:
        g.communities(ns)  # the first, lazy Louvain run
    louvain = (time.perf_counter() - t0) / len(names)
    sig = GraphSignal(g)
    lat, cpu = [], []
    for j in range(queries):
        ns = names[j % len(names)]
        items = per_ns[ns]
        # 1-3 query entities taken from a random memory (so they exist, drawn Zipf-like too,
        # hubs included), a pool of 100 random ids as other signals' candidates.
        src = items[int(rng.integers(len(items)))][1]
        ents = tuple(rng.permutation(src)[: int(rng.integers(1, 4))].tolist())
        q = Query(text="", namespace=ns, now=0.0, entities=ents)
        pool = [items[int(k)][0] for k in rng.integers(len(items), size=100)]
        t0, c0 = time.perf_counter(), time.process_time()
        sig.score(q, list(sig.top(q, 50)) + pool)
        lat.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    lat.sort()
    where = "1 namespace" if namespaces == 1 else f"{namespaces} namespaces"
    size = g.graph(names[0]).number_of_nodes() if namespaces == 1 else None
    extra = f"; {size:,} entities" if size else ""
    print(
        f"    {n:>7,} memories, {where:15s}: top+score mean {statistics.mean(lat):5.2f} ms"
        f" (CPU {statistics.mean(cpu):5.2f}),"
        f" p50 {lat[len(lat) // 2]:5.2f}, p95 {lat[int(len(lat) * 0.95)]:6.2f}"
        f" | add_many {build:5.2f} s, first Louvain {louvain:5.2f} s/namespace{extra}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = ROOT / ".." / "shared" / "data" / "locomo" / "locomo10_dev.json"
    ap.add_argument("--locomo", type=Path, default=default)
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--skip-extraction", action="store_true")
    ap.add_argument("--skip-chroma", action="store_true", help="its 256-token padding is slow")
    args = ap.parse_args()
    machine = platform.processor() or platform.machine()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# {machine}, {os.cpu_count()} cores, Python {platform.python_version()},"
        f" load average {load:.1f} at start"
    )
    if not args.skip_extraction:
        bench_extraction(args.locomo, args.texts, args.rounds, not args.skip_chroma)
    print("(b) graph signal, synthetic Zipf entities (50k vocabulary, 2-8 per memory)")
    for n in args.sizes:
        for namespaces in (1, 300):
            bench_graph(n, namespaces, args.queries)


if __name__ == "__main__":
    main()
