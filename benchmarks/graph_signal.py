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
(c) Query entities (``--query-entities``): on every dev question of LoCoMo and BEAM 100K, the
    graph matcher (``query_entities="match"``, the default) against spaCy on the query
    (``"extract"``): the entities each finds that are graph nodes, the graph signal's score of
    the gold memories, recall@k of the graph alone and of the fused presets (each question
    pooled once per mode through ``NoraxMemory.candidates``), and the cost of finding the
    query's entities (p50/p95, the two interleaved question by question), written to
    ``--out`` as JSON.

(d) Communities (``--communities``): on the Louvain input graph of 10k and 100k synthetic
    memories (the ``louvain_max_edges`` heaviest edges), time and modularity of networkx's
    Louvain, igraph's (the default) and igraph's Leiden; then graph-signal query latency
    (``top`` + ``score``, p50/p95) with no recompute, while a recompute runs in the worker
    thread (the default, with each backend), and of the query that ran the recompute inline
    (the old behaviour), written to ``--out`` as JSON.

Run from the repository root::

    python benchmarks/graph_signal.py --locomo ../shared/data/locomo/locomo10_dev.json
    python benchmarks/graph_signal.py --query-entities \
        --locomo ../shared/data/locomo/locomo10_dev.json --beam ../shared/data/beam/100K \
        --out benchmarks/results/query_entities.json
    python benchmarks/graph_signal.py --communities --out benchmarks/results/communities.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from norax_core.bench.data import BenchDataset, load_beam, load_locomo
from norax_core.bench.harness import (
    bm25_needed,
    documents_for,
    evaluate,
    ingest,
    open_store,
    requests_for,
)
from norax_core.bench.pools import Pool, add_bm25_variants, build_pools
from norax_core.config import NoraxConfig, QueryEntities
from norax_core.entities import load_extractor
from norax_core.models import SIGNALS
from norax_core.presets import get_preset
from norax_core.signals.base import Query
from norax_core.signals.entity_graph import louvain_communities
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


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)] if ordered else float("nan")


def _gold_graph(pools: Sequence[Pool]) -> list[float]:
    """Per question: the mean graph score of its gold memories (0 where not in the pool)."""
    row = SIGNALS.index("graph")
    out = []
    for p in pools:
        pos = {m: i for i, m in enumerate(p.ids)}
        gold = p.request.relevant
        if gold:
            out.append(sum(p.scores[row, pos[m]] if m in pos else 0.0 for m in gold) / len(gold))
    return out


def bench_query_entities(dataset: BenchDataset, presets: Sequence[str]) -> dict[str, object]:
    """Graph matcher vs spaCy on the query, over every question of ``dataset``."""
    spacy = load_extractor()  # the model itself, not the benchmark cache
    mem = open_store(config=NoraxConfig())
    try:
        ingest(mem, dataset, progress=False)
        requests = requests_for(dataset)
        graph = mem._indexes.graph  # noqa: SLF001 - the store's own graph, read only
        for ns in graph.namespaces():
            graph.communities(ns)  # both modes read the same, settled communities
        # Entities found, and their cost, interleaved question by question.
        t_spacy, t_match, same, jacc, missed, extra, n_sp, n_m = [], [], 0, [], 0, 0, 0, 0
        for r in requests:
            t0 = time.perf_counter()
            raw = spacy.extract_query(r.query)
            t1 = time.perf_counter()
            matched = graph.match_query(r.namespace, r.query)
            t2 = time.perf_counter()
            t_spacy.append((t1 - t0) * 1000)
            t_match.append((t2 - t1) * 1000)
            space = graph.space(r.namespace)
            nodes = {e for e in raw if space is not None and e in space.eid}
            got = set(matched)
            same += nodes == got
            jacc.append(len(nodes & got) / len(nodes | got) if nodes | got else 1.0)
            missed += len(nodes - got)
            extra += len(got - nodes)
            n_sp += len(nodes)
            n_m += len(got)
        methods = {name: get_preset(name) for name in ("graph", *presets)}
        runs: dict[str, object] = {}
        for mode in QueryEntities:
            mem.config = dataclasses.replace(mem.config, query_entities=mode)
            t0 = time.perf_counter()
            pools = build_pools(mem, requests)
            seconds = time.perf_counter() - t0
            add_bm25_variants(pools, documents_for(dataset), sorted(bm25_needed(pools, methods)))
            run = evaluate(pools, methods, (1, 5, 10, 25), dataset=dataset.name).to_json()
            gold = _gold_graph(pools)
            runs[mode.value] = {
                "methods": run["methods"],
                "by_category": run["by_category"],
                "gold_graph_score_mean": statistics.mean(gold),
                "questions_with_gold_graph_score": int(sum(g > 0 for g in gold)),
                "pooling_seconds": seconds,
            }
    finally:
        mem.close()
    n = len(requests)
    return {
        "dataset": dataset.name,
        "n_questions": n,
        "entities": {
            "spacy_in_graph_per_question": n_sp / n,
            "match_per_question": n_m / n,
            "identical_share": same / n,
            "jaccard_mean": statistics.mean(jacc),
            "spacy_nodes_missed_by_match": missed,
            "match_nodes_not_found_by_spacy": extra,
        },
        "cost_ms": {
            "spacy_p50": _pct(t_spacy, 0.5),
            "spacy_p95": _pct(t_spacy, 0.95),
            "match_p50": _pct(t_match, 0.5),
            "match_p95": _pct(t_match, 0.95),
            "match_mean": statistics.mean(t_match),
            "ratio_p50_match_over_spacy": _pct(t_match, 0.5) / _pct(t_spacy, 0.5),
        },
        "runs": runs,
    }


def print_query_entities(res: dict[str, Any]) -> None:
    e, c = res["entities"], res["cost_ms"]
    print(f"  {res['dataset']}: {res['n_questions']} questions")
    print(
        "    entities that are graph nodes per question:"
        f" spaCy {e['spacy_in_graph_per_question']:.2f},"
        f" match {e['match_per_question']:.2f}; identical on {e['identical_share']:.1%},"
        f" Jaccard {e['jaccard_mean']:.3f}; spaCy nodes missed {e['spacy_nodes_missed_by_match']},"
        f" extra {e['match_nodes_not_found_by_spacy']}"
    )
    print(
        f"    cost: match p50 {c['match_p50']:.3f} ms (p95 {c['match_p95']:.3f}),"
        f" spaCy p50 {c['spacy_p50']:.2f} ms (p95 {c['spacy_p95']:.2f});"
        f" match/spaCy {c['ratio_p50_match_over_spacy']:.4f}"
    )
    runs = res["runs"]
    for method in runs["extract"]["methods"]:
        x, m = runs["extract"]["methods"][method], runs["match"]["methods"][method]
        cells = "  ".join(
            f"{k} {x[k]:.3f} -> {m[k]:.3f} ({m[k] - x[k]:+.3f})" for k in ("recall@5", "recall@10")
        )
        print(f"    {method:8s} spaCy -> match: {cells}")
    gx, gm = runs["extract"], runs["match"]
    print(
        f"    gold memories' graph score: spaCy {gx['gold_graph_score_mean']:.4f}"
        f" ({gx['questions_with_gold_graph_score']} questions > 0),"
        f" match {gm['gold_graph_score_mean']:.4f} ({gm['questions_with_gold_graph_score']})"
    )


def _louvain_input(g: EntityGraph, ns: str) -> Any:
    """The graph a community run of ``ns`` partitions (its heaviest edges), as networkx."""
    captured: list[Any] = []

    def keep(graph: Any, seed: int) -> list[set[str]]:
        captured.append(graph)
        return [set(graph.nodes)]

    probe = EntityGraph(community_fn=keep, louvain_max_edges=g.louvain_max_edges)
    space = g.space(ns)
    assert space is not None
    snap = space.snapshot()
    snap.compute(probe.seed, probe.louvain_max_edges, keep)
    space.touched = None
    return captured[0]


def _backends() -> dict[str, Callable[[Any, int], Any]]:
    import random

    import igraph
    import networkx as nx

    def networkx_louvain(graph: Any, seed: int) -> Any:
        return nx.community.louvain_communities(graph, weight="weight", seed=seed)

    def igraph_leiden(graph: Any, seed: int) -> Any:
        nodes = list(graph.nodes)
        index = {n: i for i, n in enumerate(nodes)}
        edges = list(graph.edges(data="weight"))
        h = igraph.Graph(n=len(nodes), edges=[(index[u], index[v]) for u, v, _ in edges])
        h.es["weight"] = [float(w) for *_, w in edges]
        igraph.set_random_number_generator(random.Random(seed))
        part = h.community_leiden(
            objective_function="modularity", weights="weight", n_iterations=-1
        )
        igraph.set_random_number_generator(random)
        return [{nodes[i] for i in c} for c in part]

    return {
        "networkx louvain": networkx_louvain,
        "igraph louvain (default)": louvain_communities,
        "igraph leiden": igraph_leiden,
    }


def _query_loop(
    g: EntityGraph,
    ns: str,
    items: list[tuple[str, list[str]]],
    rng: np.random.Generator,
    n: int,
    during: Callable[[], bool],
) -> list[float]:
    """Latencies (ms) of ``n`` graph queries, each issued while ``during()`` holds."""
    sig = GraphSignal(g)
    lat: list[float] = []
    while len(lat) < n:
        if not during():
            continue
        src = items[int(rng.integers(len(items)))][1]
        ents = tuple(rng.permutation(src)[: int(rng.integers(1, 4))].tolist())
        q = Query(text="", namespace=ns, now=0.0, entities=ents)
        pool = [items[int(k)][0] for k in rng.integers(len(items), size=100)]
        t0 = time.perf_counter()
        sig.score(q, list(sig.top(q, 50)) + pool)
        lat.append((time.perf_counter() - t0) * 1000)
    return lat


def bench_communities(sizes: Sequence[int], queries: int, seed: int = 0) -> dict[str, Any]:
    import networkx as nx

    out: dict[str, Any] = {}
    for n in sizes:
        rng = np.random.default_rng(seed)
        items = [(f"m{i}", e) for i, e in enumerate(zipf_memories(n, 50_000, rng))]
        row: dict[str, Any] = {}
        base = EntityGraph()
        base.add_many("ns", items)
        graph = _louvain_input(base, "ns")
        row["louvain_input"] = {"nodes": graph.number_of_nodes(), "edges": graph.number_of_edges()}
        algos = {}
        for name, fn in _backends().items():
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                groups = [set(c) for c in fn(graph, 42)]
                times.append(time.perf_counter() - t0)
            algos[name] = {
                "seconds_median": statistics.median(times),
                "modularity": nx.community.modularity(graph, groups, weight="weight"),
                "communities": len(groups),
            }
            print(
                f"    {n:>7,} memories, Louvain input {graph.number_of_edges():,} edges:"
                f" {name:26s} {statistics.median(times) * 1000:8.1f} ms,"
                f" modularity {algos[name]['modularity']:.4f}, {len(groups)} communities"
            )
        row["algorithms"] = algos
        # Query latency, in interleaved blocks of 20 queries so that load on a shared machine
        # hits every mode alike. A recomputing graph's every write makes it stale
        # (refresh_fraction 0): before each of its queries, if no run is in flight, one write
        # and one read start the next, so every query meets a recompute in the worker.
        modes: dict[str, Any] = {
            "no recompute": None,
            "during a recompute in the worker (igraph)": louvain_communities,
            "during a recompute in the worker (networkx)": _backends()["networkx louvain"],
        }
        graphs, rngs, lat = {}, {}, {}
        for label, fn in modes.items():
            g = EntityGraph(refresh_fraction=0.0, background_min_edges=0, community_fn=fn)
            g.add_many("ns", items)
            g.communities("ns")
            graphs[label], rngs[label], lat[label] = g, np.random.default_rng(seed + 1), []
        writes = 0
        while any(len(v) < queries for v in lat.values()):
            for label, g in graphs.items():
                for _ in range(20):
                    if modes[label] is not None and not g.pending():
                        g.add("ns", f"w{writes}", items[writes % len(items)][1])
                        g.space("ns")  # adopts the last run, submits the next
                        writes += 1
                    lat[label] += _query_loop(g, "ns", items, rngs[label], 1, lambda: True)
        for g in graphs.values():
            g.close()
        for label, fn in (
            ("that runs the recompute inline (networkx: old)", _backends()["networkx louvain"]),
            ("that runs the recompute inline (igraph)", louvain_communities),
        ):
            inline: list[float] = []
            g = EntityGraph(refresh_fraction=0.0, background_min_edges=10**12, community_fn=fn)
            g.add_many("ns", items)
            g.communities("ns")
            qrng = np.random.default_rng(seed + 1)
            for r in range(5):
                g.add("ns", f"w{r}", items[r][1])
                inline += _query_loop(g, "ns", items, qrng, 1, lambda: True)
            lat[label] = inline
        row["query_ms"] = {
            k: {"p50": _pct(v, 0.5), "p95": _pct(v, 0.95), "n": len(v)} for k, v in lat.items()
        }
        quiet = row["query_ms"]["no recompute"]
        for k, v in row["query_ms"].items():
            ratio = f"{v['p50'] / quiet['p50']:.2f}x / {v['p95'] / quiet['p95']:.2f}x"
            print(
                f"    {n:>7,} memories, query {k:44s} p50 {v['p50']:7.2f} ms, p95 {v['p95']:7.2f}"
                f" ({ratio} quiet), n={v['n']}"
            )
        out[str(n)] = row
    return out


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
    ap.add_argument("--query-entities", action="store_true", help="run (c) only")
    ap.add_argument("--communities", action="store_true", help="run (d) only")
    ap.add_argument("--beam", type=Path, default=ROOT / ".." / "shared" / "data" / "beam" / "100K")
    ap.add_argument("--out", type=Path, default=None, help="(c)'s JSON")
    args = ap.parse_args()
    machine = platform.processor() or platform.machine()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# {machine}, {os.cpu_count()} cores, Python {platform.python_version()},"
        f" load average {load:.1f} at start"
    )
    if args.communities:
        print("(d) communities: backends, and queries during a recompute")
        res = {
            "command": "python benchmarks/graph_signal.py --communities"
            f" --sizes {' '.join(map(str, args.sizes))} --queries {args.queries}",
            "machine": {"cpu": machine, "cores": os.cpu_count(), "load_at_start": load},
            "sizes": bench_communities(args.sizes, args.queries),
        }
        if args.out:
            args.out.write_text(json.dumps(res, indent=2) + "\n")
        return
    if args.query_entities:
        print("(c) query entities: graph match vs spaCy on the query, every dev question")
        results: dict[str, Any] = {
            "command": "python benchmarks/graph_signal.py --query-entities"
            f" --locomo {args.locomo} --beam {args.beam}",
            "machine": {"cpu": machine, "cores": os.cpu_count(), "load_at_start": load},
            "datasets": [],
        }
        for data, presets in (
            (load_locomo(args.locomo), ["default", "seed"]),
            (load_beam(args.beam), ["default", "project", "seed"]),
        ):
            results["datasets"].append(bench_query_entities(data, presets))
            print_query_entities(results["datasets"][-1])
        if args.out:
            args.out.write_text(json.dumps(results, indent=2, default=float) + "\n")
        return
    if not args.skip_extraction:
        bench_extraction(args.locomo, args.texts, args.rounds, not args.skip_chroma)
    print("(b) graph signal, synthetic Zipf entities (50k vocabulary, 2-8 per memory)")
    for n in args.sizes:
        for namespaces in (1, 300):
            bench_graph(n, namespaces, args.queries)


if __name__ == "__main__":
    main()
