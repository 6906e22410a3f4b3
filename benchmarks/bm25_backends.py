"""Compare BM25 backends on a synthetic corpus of short, chat-like documents.

Backends: Norax's incremental ``BM25Index``, ``rank_bm25.BM25Okapi``, ``bm25s`` (if
installed: ``pip install bm25s``; benchmark only, not a Norax dependency) and SQLite FTS5
with its ``bm25()`` ranking. Every backend gets the same pre-tokenized documents and the
same queries, and returns its top 10.

Documents are drawn from a Zipf-distributed vocabulary (exponent ~1.1, like word frequencies
in English text) with lengths of short chat messages after stop word removal; no data set
is read. Run from the repository root after ``pip install -e .``::

    python benchmarks/bm25_backends.py --n 100000
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sqlite3
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence

import numpy as np
from rank_bm25 import BM25Okapi

from norax_core.signals.bm25 import BM25Index

NS = "bench"
TOP_K = 10
clock = time.perf_counter  # --clock cpu swaps in time.process_time
SYLLABLES = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"]  # 85 syllables


def make_vocabulary(size: int) -> list[str]:
    """Pseudo-words of 2-4 syllables, distinct, deterministic."""
    words = []
    for i in range(size):
        n, parts = i, []
        while True:
            parts.append(SYLLABLES[n % len(SYLLABLES)])
            n //= len(SYLLABLES)
            if n == 0:
                break
        parts.append(SYLLABLES[(i * 7) % len(SYLLABLES)])  # at least 2 syllables
        words.append("".join(parts))
    return words


def make_corpus(
    n_docs: int, n_queries: int, seed: int = 42
) -> tuple[list[list[str]], list[list[str]], list[list[str]], int]:
    rng = np.random.default_rng(seed)
    vocab_size = max(2_000, min(60_000, n_docs // 2))
    vocab = np.array(make_vocabulary(vocab_size), dtype=object)
    ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
    p = ranks**-1.1
    p /= p.sum()
    # Chat messages: mostly 4-20 content tokens, a long tail of longer notes.
    lengths = np.clip(rng.lognormal(mean=2.2, sigma=0.5, size=n_docs + 1000), 2, 80).astype(int)
    flat = rng.choice(vocab_size, size=int(lengths.sum()), p=p)
    docs, start = [], 0
    for length in lengths:
        docs.append(vocab[flat[start : start + length]].tolist())
        start += length
    corpus, extra = docs[:n_docs], docs[n_docs:]
    queries = [
        vocab[rng.choice(vocab_size, size=int(rng.integers(3, 7)), p=p)].tolist()
        for _ in range(n_queries)
    ]
    return corpus, extra, queries, vocab_size


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    start = clock()
    result = fn()
    return clock() - start, result


def latencies(search: Callable[[list[str]], object], queries: list[list[str]]) -> list[float]:
    search(queries[0])  # warm-up: lazy caches, JIT, statement cache
    out = []
    for q in queries:
        start = clock()
        search(q)
        out.append(clock() - start)
    return out


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


# -- backends ----------------------------------------------------------------------------


def bench_norax(corpus: list[list[str]], extra: list[list[str]], queries: list[list[str]]) -> dict:
    index = BM25Index()
    build, _ = timed(lambda: index.add_many(NS, ((f"d{i}", d) for i, d in enumerate(corpus))))
    lat = latencies(lambda q: index.top(NS, q, TOP_K), queries)

    add_times = []
    for i, doc in enumerate(extra):
        start = clock()
        index.add(NS, f"x{i}", doc)
        add_times.append(clock() - start)

    # Worst case for the lazy caches: every query right after a write.
    after_write = []
    for i, q in enumerate(queries):
        index.add(NS, f"y{i}", extra[i % len(extra)])
        start = clock()
        index.top(NS, q, TOP_K)
        after_write.append(clock() - start)
    return {
        "build": build,
        "add": statistics.fmean(add_times),
        "add_note": f"mean of {len(add_times)} adds",
        "lat": lat,
        "after_write": after_write,
    }


def bench_rank_bm25(
    corpus: list[list[str]], extra: list[list[str]], queries: list[list[str]]
) -> dict:
    build, bm25 = timed(lambda: BM25Okapi(corpus))
    assert isinstance(bm25, BM25Okapi)

    def search(q: list[str]) -> object:
        scores = bm25.get_scores(q)
        top = np.argpartition(-scores, TOP_K)[:TOP_K]
        return top[np.argsort(-scores[top])]

    lat = latencies(search, queries)
    # No incremental API: adding a document means rebuilding the index.
    add, _ = timed(lambda: BM25Okapi([*corpus, extra[0]]))
    return {"build": build, "add": add, "add_note": "full rebuild", "lat": lat}


def bench_bm25s(corpus: list[list[str]], extra: list[list[str]], queries: list[list[str]]) -> dict:
    import bm25s

    def build_index(docs: list[list[str]]) -> object:
        retriever = bm25s.BM25()  # Lucene variant, numpy backend
        retriever.index(docs, show_progress=False)
        return retriever

    build, retriever = timed(lambda: build_index(corpus))

    def search(q: list[str]) -> object:
        return retriever.retrieve([q], k=TOP_K, show_progress=False, n_threads=1)  # type: ignore[attr-defined]

    lat = latencies(search, queries)
    add, _ = timed(lambda: build_index([*corpus, extra[0]]))
    return {"build": build, "add": add, "add_note": "full rebuild", "lat": lat}


def bench_fts5(corpus: list[list[str]], extra: list[list[str]], queries: list[list[str]]) -> dict:
    db = sqlite3.connect(":memory:", isolation_level=None)

    def build_index() -> None:
        db.execute("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='unicode61')")
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO docs(rowid, body) VALUES (?, ?)",
            ((i, " ".join(d)) for i, d in enumerate(corpus)),
        )
        db.execute("COMMIT")

    build, _ = timed(build_index)
    sql = "SELECT rowid, bm25(docs) AS s FROM docs WHERE docs MATCH ? ORDER BY s LIMIT ?"

    def search(q: list[str]) -> object:
        match = " OR ".join(f'"{t}"' for t in q)  # tokens are plain words; quoted anyway
        return db.execute(sql, (match, TOP_K)).fetchall()

    lat = latencies(search, queries)
    add_times = []
    for i, doc in enumerate(extra):  # autocommit: one transaction per document
        start = clock()
        db.execute("INSERT INTO docs(rowid, body) VALUES (?, ?)", (len(corpus) + i, " ".join(doc)))
        add_times.append(clock() - start)
    db.close()
    return {
        "build": build,
        "add": statistics.fmean(add_times),
        "add_note": f"mean of {len(add_times)} inserts",
        "lat": lat,
    }


def norax_memory(corpus: list[list[str]]) -> int:
    """Bytes held by a BM25Index over ``corpus`` (tracemalloc; excludes the token lists)."""
    gc.collect()
    tracemalloc.start()
    index = BM25Index()
    index.add_many(NS, ((f"d{i}", d) for i, d in enumerate(corpus)))
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del index
    return current


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="documents (default 100000)")
    parser.add_argument("--queries", type=int, default=200, help="queries (default 200)")
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall time, or process CPU time: steadier on a shared machine (every backend "
        "here runs on one thread)",
    )
    args = parser.parse_args()
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    corpus, extra, queries, vocab_size = make_corpus(args.n, args.queries)
    lengths = [len(d) for d in corpus]
    print(
        f"{len(corpus):,} docs, vocabulary {vocab_size:,} (Zipf 1.1), "
        f"{statistics.fmean(lengths):.1f} tokens/doc (median {statistics.median(lengths):.0f}), "
        f"{len(queries)} queries of 3-6 tokens, top {TOP_K}"
    )
    print(f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}", end=", ")
    print(f"{os.cpu_count()} CPUs, {args.clock} clock, load average {os.getloadavg()[0]:.1f}")

    runs: list[tuple[str, Callable[..., dict]]] = [
        ("norax BM25Index", bench_norax),
        ("rank_bm25 BM25Okapi", bench_rank_bm25),
        ("bm25s (numpy)", bench_bm25s),
        ("SQLite FTS5 bm25()", bench_fts5),
    ]
    rows = []
    for name, bench in runs:
        try:
            result = bench(corpus, extra, queries)
        except ImportError as exc:
            print(f"skipped {name}: {exc} (pip install bm25s)")
            continue
        rows.append((name, result))
        print(f"  done: {name}", flush=True)

    header = f"{'backend':<22} {'build':>10} {'add 1 doc':>11}  {'':<20} {'p50':>10} {'p95':>10}"
    print()
    print(header)
    print("-" * len(header))
    for name, r in rows:
        print(
            f"{name:<22} {fmt_s(r['build']):>10} {fmt_s(r['add']):>11}  {r['add_note']:<20} "
            f"{fmt_s(pct(r['lat'], 50)):>10} {fmt_s(pct(r['lat'], 95)):>10}"
        )
        if "after_write" in r:
            aw = r["after_write"]
            print(
                f"{'  query after a write':<22} {'':>10} {'':>11}  {'(cold lazy caches)':<20} "
                f"{fmt_s(pct(aw, 50)):>10} {fmt_s(pct(aw, 95)):>10}"
            )
    print()
    print(f"norax BM25Index memory at {len(corpus):,} docs: {norax_memory(corpus) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
