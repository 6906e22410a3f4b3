"""Scale-out rows of ``benchmarks/scale.py``: open time, RSS, cold namespaces, worker processes.

For each size N (``--stores 10000,100000,1000000``) a real Chroma store of N memories over
about N / 100 namespaces (log-normal sizes, plus :data:`COLD_COUNT` namespaces of exactly
:data:`COLD_SIZE` memories, the cold-query targets) is built once through
``NoraxMemory.add`` (embedded). Texts come from a pool of :data:`POOL` corpus texts of
``scale.py`` (LoCoMo turns and BEAM snippets with varied names); their embeddings are the
cached ones of ``scale.py`` (a repeated text gets its vector plus a little noise) and their
entities are extracted by the real spaCy pipeline once per pool text and cached, so the build
costs Chroma, the sidecar and the indexes, not the models. Recall is not measured here.

Then, each in a fresh process (so RSS is its own; ``rss_base_mb`` is the process with the
embedder and spaCy loaded, before opening anything):

* ``open``: Norax (``NoraxMemory(folder)`` embedded; ``NoraxMemory(client=HttpClient)``
  against ``chroma run --path folder``) and plain Chroma (the client and ``get_collection``)
  on the same store: ``open_s``, RSS after open, the first query of each cold namespace
  (Chroma's first one also loads its HNSW index), then steady-state p50/p95 over the same
  namespaces (query embeddings precomputed for both). The server's first read of the
  collection (it loads the collection's index: ``client_server_warm_s``) is done before any
  client is measured, as on a server that is already serving.
* ``workers`` (the largest size up to ``--workers-n``): one ``chroma run`` serving the store
  and 4 worker processes at once, each serving a disjoint quarter of the namespaces with
  mixed load (80 % searches, 20 % single-memory adds), first as Norax clients, then as plain
  Chroma clients doing the same operations; each worker's RSS and p50/p95, and a check that
  no result came from another namespace and no write was lost.

Ratios are always against the peer measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

POOL = 20_000
"""Distinct corpus texts the stores are made of (their embeddings are in scale.py's cache)."""
PER_NS = 100
COLD_SIZE = 1_000
COLD_COUNT = 4
STEADY = 200
WORKERS = 4
WORKER_OPS = 400
WRITE_SHARE = 0.2
BUILD_BATCH = 1_000
YEAR_END = 1_735_689_600.0
K = 10


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the store's shape --------------------------------------------------------------------------


def namespace_sizes(n: int, seed: int = 0) -> list[int]:
    """Sizes of the namespaces of an ``n``-memory store: :data:`COLD_COUNT` of
    :data:`COLD_SIZE` first, then about ``n / PER_NS`` log-normal ones (sigma 1)."""
    rng = np.random.default_rng(seed)
    n_ns = max(n // PER_NS, COLD_COUNT + 1)
    rest = n - COLD_COUNT * COLD_SIZE
    if rest < n_ns - COLD_COUNT:
        raise ValueError(f"{n} memories are too few for {COLD_COUNT} cold namespaces")
    raw = rng.lognormal(0.0, 1.0, n_ns - COLD_COUNT)
    sizes = np.maximum(1, np.floor(raw / raw.sum() * rest)).astype(int)
    sizes[np.argsort(-raw)[: rest - int(sizes.sum())]] += 1  # the remainder, to the largest
    while sizes.sum() > rest:  # rounding up the 1s may overshoot by a few
        sizes[int(np.argmax(sizes))] -= 1
    return [COLD_SIZE] * COLD_COUNT + sizes.tolist()


def ns_name(i: int) -> str:
    return f"user-{i:05d}"


def layout(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Per memory: its namespace, pool text, kind and time; the write order is shuffled."""
    sizes = namespace_sizes(n, seed)
    rng = np.random.default_rng(seed + 1)
    spaces = np.repeat(np.arange(len(sizes)), sizes)
    rng.shuffle(spaces)
    return {
        "namespace": spaces,
        "text": rng.integers(0, POOL, n),
        "kind": rng.choice(4, n, p=[0.6, 0.25, 0.1, 0.05]),
        "time": YEAR_END - rng.random(n) * 365 * 86_400.0,
    }


KINDS = ("episodic", "semantic", "procedural", "scratchpad")


# -- models: the embedder serves cached vectors, the extractor cached entities -------------------


def lookup_embedder(table: dict[str, np.ndarray]) -> Any:
    """Norax's ONNX embedder, answering from ``table`` (a miss raises: nothing is embedded)."""
    from norax_core.embedders import OnnxMiniLMEmbedder

    inner = OnnxMiniLMEmbedder()
    inner._load()  # a serving process holds the model (for the queries it embeds)

    class Lookup:
        name, dim = inner.name, inner.dim

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.stack([table[t] for t in texts])

        async def aembed(self, texts: Sequence[str]) -> np.ndarray:
            return self.embed(texts)

    return Lookup()


def cached_extractor(pool: Sequence[str], cache: Path) -> Any:
    """The real spaCy extractor, run once per pool text; its entities are cached on disk."""
    from norax_core.entities import EntityExtractor, load_extractor

    inner = load_extractor()
    key = hashlib.sha1("\x1e".join([inner.name, *pool]).encode()).hexdigest()[:20]
    f = cache / f"entities-{key}.json"
    known: dict[str, list[str]] = {}
    if f.exists():
        known = dict(zip(pool, json.loads(f.read_text()), strict=True))

    class Cached(EntityExtractor):
        @property
        def name(self) -> str:
            return inner.name

        def _extract_clean(self, texts: list[str], batch_size: int) -> list[list[str]]:
            missing = [t for t in dict.fromkeys(texts) if t not in known]
            if missing:
                found = inner.extract(missing, batch_size)
                known.update(zip(missing, found, strict=True))
            return [known[t] for t in texts]

    ext = Cached()
    if not known:
        t0 = time.perf_counter()
        lists = [ext.extract(pool[s : s + 2_000]) for s in range(0, len(pool), 2_000)]
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps([e for part in lists for e in part]))
        log(f"  spaCy entities of {len(pool)} pool texts in {time.perf_counter() - t0:.0f} s")
    return ext


def pool_vectors(base: np.ndarray, idx: np.ndarray, seed: int = 0) -> np.ndarray:
    """The vectors of memories made of pool texts ``idx``: a text's second and later uses
    get its cached vector plus noise (norm 1 again), so the HNSW index holds no duplicates."""
    rng = np.random.default_rng(seed)
    out = base[idx].copy()
    seen = np.zeros(len(base), bool)
    repeat = np.zeros(len(idx), bool)
    for j, t in enumerate(idx):
        repeat[j] = seen[t]
        seen[t] = True
    noise = rng.normal(0.0, 0.02, (int(repeat.sum()), base.shape[1])).astype(np.float32)
    out[repeat] += noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


# -- process helpers --------------------------------------------------------------------------


def rss_mb(peak: bool = False) -> float:
    """VmRSS (or VmHWM, ``peak``) of this process, in MB."""
    key = "VmHWM:" if peak else "VmRSS:"
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def pct(xs: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, p)) if xs else float("nan")


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


class ChromaServer:
    """``chroma run --path folder`` on a free port of 127.0.0.1, for the duration of a with."""

    def __init__(self, folder: Path, log_file: Path) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        beside = Path(sys.executable).parent / "chroma"
        exe = str(beside) if beside.exists() else shutil.which("chroma") or "chroma"
        cmd = [exe, "run", "--path", str(folder), "--host", "127.0.0.1", "--port", str(self.port)]
        self.log = log_file.open("w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

    def __enter__(self) -> ChromaServer:
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=2)
                return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"chroma run did not start (log: {self.log.name})")

    def warm(self, namespace: str, embedding: np.ndarray, collection: str = "norax") -> float:
        """Seconds of the server's first reads: the collection, Norax's companions, each path once.

        It loads the collection's index, in proportion to the store: done once before any
        client is measured, as on a server that is already serving, so neither system's first
        query pays it. The change log and the published snapshots (Norax's companion
        collections, if present) cost a server its first read of them too (about 0.3 s
        each, whatever their size), once per server. Then each system's read path serves
        ``namespace`` (one not measured) once: plain Chroma's filtered query with
        ``embedding``, and Norax's read of its published blob. A server's first two responses
        of a few MB took it 5-8 ms longer each than later ones, whichever namespace they
        held (Chroma 1.5.9): a cost of the server process, paid before it serves anyone.
        """
        from norax_core import fast_get
        from norax_core.published import SUFFIX, part_ids
        from norax_core.sync import LOG_SUFFIX

        t0 = time.perf_counter()
        client = client_for(self.url)
        col = client.get_collection(collection)
        col.count()
        for _ in range(2):
            col.query(
                query_embeddings=[embedding.tolist()],
                n_results=K,
                where={"norax_namespace": namespace},
            )
        for companion in (collection + LOG_SUFFIX, collection + SUFFIX):
            with contextlib.suppress(Exception):  # not there: nothing to load
                client.get_collection(companion).get(ids=["-"])
        with contextlib.suppress(Exception):  # no published snapshots: nothing to read
            published = client.get_collection(collection + SUFFIX)
            for _ in range(2):
                fast_get.get(published, part_ids(namespace))
        return time.perf_counter() - t0

    def rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return float("nan")

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def client_for(url: str) -> Any:
    import chromadb

    host, port = url.rsplit("//", 1)[-1].rsplit(":", 1)
    return chromadb.HttpClient(host=host, port=int(port))


# -- roles, each in its own process -----------------------------------------------------------


def chroma_hits(col: Any, emb: Any, q: str, ns: str) -> list[str]:
    """Plain Chroma's namespace-filtered query: the namespaces of its top ``K`` hits."""
    res = col.query(
        query_embeddings=emb.embed([q]),
        n_results=K,
        where={"norax_namespace": ns},
        include=["documents", "metadatas", "distances"],
    )
    return [m["norax_namespace"] for m in (res["metadatas"] or [[]])[0]]


def _inputs(work: Path) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    meta = json.loads((work / "pool.json").read_text())
    return meta["texts"], np.load(work / "pool.npy"), meta["queries"], np.load(work / "qemb.npy")


def role_build(work: Path, n: int, folder: Path, cache: Path) -> dict[str, Any]:
    """Build the ``n``-memory store in ``folder`` through ``NoraxMemory.add`` (embedded)."""
    from norax_core import NoraxMemory

    texts, base, _, _ = _inputs(work)
    lay = layout(n)
    extractor = cached_extractor(texts, cache)
    vectors = pool_vectors(base, lay["text"])
    emb = _Rows()
    t0 = time.perf_counter()
    with NoraxMemory(folder, embedder=emb, extractor=extractor) as mem:
        for s in range(0, n, BUILD_BATCH):
            e = min(s + BUILD_BATCH, n)
            emb.rows = vectors[s:e]
            mem.add(
                [texts[t] for t in lay["text"][s:e]],
                ids=[f"m{i:08d}" for i in range(s, e)],
                kind=[KINDS[k] for k in lay["kind"][s:e]],
                created_at=lay["time"][s:e].tolist(),
                namespace=[ns_name(int(x)) for x in lay["namespace"][s:e]],
            )
            if (e // BUILD_BATCH) % 50 == 0 or e == n:
                rate = e / (time.perf_counter() - t0)
                log(f"    built {e:,}/{n:,} ({rate:.0f}/s)")
        adds_s = time.perf_counter() - t0
    build_s = time.perf_counter() - t0  # with the close, which snapshots every namespace
    return {
        "build_s": build_s,
        "build_per_s": n / build_s,
        "adds_per_s": n / adds_s,
        "close_s": build_s - adds_s,
        "disk_mb": du_mb(folder),
        "namespaces": int(lay["namespace"].max()) + 1,
        "build_rss_mb": rss_mb(peak=True),
    }


class _Rows:
    """An embedder that returns the rows the build put in ``rows`` (one batch at a time)."""

    def __init__(self) -> None:
        from norax_core.embedders import OnnxMiniLMEmbedder

        inner = OnnxMiniLMEmbedder()
        self.name, self.dim = inner.name, inner.dim
        self.rows = np.zeros((0, self.dim), np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) != len(self.rows):
            raise RuntimeError("the build embeds other texts than the batch it wrote")
        return self.rows

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


def role_publish(folder: Path) -> dict[str, Any]:
    """Publish the snapshots of a store built without them (``norax publish``)."""
    from norax_core import CallableEmbedder, NoraxMemory
    from norax_core.published import SUFFIX
    from norax_core.store.publishing import publish_all

    def unused(texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("publishing embeds nothing")

    inner = _Rows()
    before = du_mb(folder)
    t0, c0 = time.perf_counter(), time.process_time()
    emb = CallableEmbedder(unused, name=inner.name, dim=inner.dim)
    with NoraxMemory(folder, embedder=emb, extractor=False) as mem:
        published = publish_all(mem.store)
        namespaces = len(mem.namespaces())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    import chromadb

    client = chromadb.PersistentClient(path=str(folder))
    try:
        records = client.get_collection("norax" + SUFFIX).count()
    finally:
        client.close()
    return {
        "publish_s": wall,
        "publish_cpu_s": cpu,
        "published": published,
        "namespaces": namespaces,
        "records": records,
        "disk_added_mb": du_mb(folder) - before,
    }


def published_count(folder: Path) -> tuple[int, int]:
    """``(namespaces with a published snapshot, namespaces)`` of an embedded store's folder.

    Only blobs of the current :data:`~norax_core.published.VERSION` count (their settings
    start with it): a store published in an older one is published again
    (``role_publish``), timed.
    """
    import sqlite3

    from norax_core.published import SUFFIX, VERSION

    conn = sqlite3.connect(f"file:{folder / 'chroma.sqlite3'}?mode=ro", uri=True)
    try:
        got = conn.execute(
            "SELECT count(*) FROM embedding_metadata m JOIN embeddings e ON e.id = m.id"
            " JOIN segments s ON s.id = e.segment_id JOIN collections c ON c.id = s.collection"
            " WHERE c.name = ? AND m.key = 'settings' AND m.string_value LIKE ?",
            ("norax" + SUFFIX, f"{VERSION}-%"),
        ).fetchone()
    finally:
        conn.close()
    side = sqlite3.connect(f"file:{folder / 'norax_index.sqlite3'}?mode=ro", uri=True)
    try:
        total = side.execute("SELECT count(DISTINCT namespace) FROM memories").fetchone()
    finally:
        side.close()
    return int(got[0]), int(total[0])


def warm_namespace(n: int) -> str:
    """The largest namespace that is not a cold target: the servers' warm-up reads it."""
    sizes = namespace_sizes(n)
    return ns_name(max(range(COLD_COUNT, len(sizes)), key=lambda i: (sizes[i], -i)))


def _targets(n: int) -> list[str]:
    return [ns_name(i) for i in range(COLD_COUNT)]


def role_open(
    work: Path,
    n: int,
    system: str,
    folder: Path,
    url: str | None,
    cache: Path,
    snapshots: Path | None = None,
) -> dict[str, Any]:
    """Open the store, then cold first queries and steady-state queries on the cold ones."""
    from norax_core.entities import load_extractor

    texts, _, queries, qemb = _inputs(work)
    table = dict(zip(queries, qemb, strict=True))
    emb = lookup_embedder(table)
    extractor = load_extractor() if system == "norax" else None
    if extractor is not None:
        extractor.extract(["Warm up the pipeline, Alice."])
    base = rss_mb()
    targets = _targets(n)
    rng = random.Random(3)
    asks = [(rng.choice(queries), targets[i % len(targets)]) for i in range(STEADY)]
    t0 = time.perf_counter()
    if system == "norax":
        from norax_core import NoraxMemory

        if url:
            mem = NoraxMemory(
                client=client_for(url), embedder=emb, extractor=extractor, snapshot_path=snapshots
            )
        else:
            mem = NoraxMemory(folder, embedder=emb, extractor=extractor)
        opened = time.perf_counter() - t0

        def query(q: str, ns: str) -> list[str]:
            return [r.namespace for r in mem.search(q, k=K, namespace=ns, now=YEAR_END)]

    else:
        import chromadb

        client = client_for(url) if url else chromadb.PersistentClient(path=str(folder))
        col = client.get_collection("norax")
        opened = time.perf_counter() - t0

        def query(q: str, ns: str) -> list[str]:
            return chroma_hits(col, emb, q, ns)

    rss_open = rss_mb()
    first: list[float] = []
    mixed = 0
    for q, ns in asks[: len(targets)]:
        t0 = time.perf_counter()
        got = query(q, ns)
        first.append(time.perf_counter() - t0)
        mixed += sum(g != ns for g in got)
    rss_first = rss_mb()
    steady: list[float] = []
    for q, ns in asks:
        t0 = time.perf_counter()
        got = query(q, ns)
        steady.append(time.perf_counter() - t0)
        mixed += sum(g != ns for g in got)
    if mixed:
        raise RuntimeError(f"{mixed} results came from another namespace")
    extra: dict[str, Any] = {}
    if system == "norax":  # loads served by a snapshot; the close stores a client's
        extra["restored"] = mem.store.indexes.restored
        t0 = time.perf_counter()
        mem.close()
        extra["close_s"] = time.perf_counter() - t0
    return {
        **extra,
        "open_s": opened,
        "rss_base_mb": base,
        "rss_open_mb": rss_open,
        "rss_after_first_queries_mb": rss_first,
        "rss_peak_mb": rss_mb(peak=True),
        "first_query_ms": [x * 1000.0 for x in first],
        "first_query_ms_max": max(first) * 1000.0,
        "steady_p50_ms": pct(steady, 50),
        "steady_p95_ms": pct(steady, 95),
        "cold_namespace_size": COLD_SIZE,
    }


def role_worker(
    work: Path,
    n: int,
    system: str,
    url: str,
    index: int,
    ops: int,
    budgets: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One of :data:`WORKERS` processes: mixed searches and adds on its own namespaces.

    ``budgets``: a Norax worker's ``(dense_cache_mb, index_cache_mb)`` (default: the
    defaults); its RSS is sampled every tenth of the operations (``rss_trace_mb``), with the
    loads and evictions of its namespaces and the heap trims that gave freed memory back
    (:mod:`norax_core.reclaim`: ``trims``, ``trim_cpu_s``).
    """
    from norax_core.entities import load_extractor

    texts, base, queries, qemb = _inputs(work)
    table = dict(zip(queries, qemb, strict=True))
    table.update(zip(texts, base, strict=True))
    emb = lookup_embedder(table)
    n_ns = len(namespace_sizes(n))
    mine = [ns_name(i) for i in range(n_ns) if i % WORKERS == index]
    extractor = load_extractor() if system == "norax" else None
    if extractor is not None:
        extractor.extract(["Warm up the pipeline, Alice."])
    base_rss = rss_mb()
    rng = random.Random(100 + index)
    plan = [
        (
            rng.random() < WRITE_SHARE,
            rng.choice(mine),
            rng.randrange(len(queries)),
            rng.randrange(POOL),
        )
        for _ in range(ops)
    ]
    prefix = f"w{index}-{system}-{os.getpid()}-"
    t0 = time.perf_counter()
    if system == "norax":
        from norax_core import NoraxConfig, NoraxMemory

        config = NoraxConfig()
        if budgets is not None:
            config = NoraxConfig(dense_cache_mb=budgets[0], index_cache_mb=budgets[1])
        mem = NoraxMemory(client=client_for(url), embedder=emb, extractor=extractor, config=config)
        opened = time.perf_counter() - t0

        def search(q: str, ns: str) -> list[str]:
            return [r.namespace for r in mem.search(q, k=K, namespace=ns, now=YEAR_END)]

        def add(mid: str, text: str, ns: str) -> None:
            mem.add(text, ids=mid, namespace=ns, created_at=YEAR_END)

        def stored(ids: list[str]) -> list[str]:
            return [m.namespace for m in mem.get(ids)]

    else:
        col = client_for(url).get_collection("norax")
        opened = time.perf_counter() - t0

        def search(q: str, ns: str) -> list[str]:
            return chroma_hits(col, emb, q, ns)

        def add(mid: str, text: str, ns: str) -> None:
            col.add(
                ids=[mid],
                documents=[text],
                embeddings=emb.embed([text]),
                metadatas=[{"norax_namespace": ns}],
            )

        def stored(ids: list[str]) -> list[str]:
            got = col.get(ids=ids, include=["metadatas"])
            return [m["norax_namespace"] for m in got["metadatas"] or []]

    rss_open = rss_mb()
    reads: list[float] = []
    writes: list[float] = []
    written: dict[str, str] = {}
    mixed = 0
    trace: list[float] = []
    for i, (is_write, ns, qi, ti) in enumerate(plan):
        if i % max(1, ops // 10) == 0:
            trace.append(rss_mb())
        t0 = time.perf_counter()
        if is_write:
            mid = f"{prefix}{i}"
            add(mid, texts[ti], ns)
            writes.append(time.perf_counter() - t0)
            written[mid] = ns
        else:
            got = search(queries[qi], ns)
            reads.append(time.perf_counter() - t0)
            mixed += sum(g != ns for g in got)
    ids = list(written)
    back = stored(ids)
    lost = len(ids) - len(back)
    extra: dict[str, Any] = {}
    if system == "chroma":  # the plain clients' writes lack Norax's metadata: remove them
        col.delete(ids=ids)
    else:
        idx = mem.store.indexes
        extra = {
            "loads": idx.loads,
            "evictions": idx.evictions,
            "trims": idx.reclaim.trims,
            "trim_cpu_s": idx.reclaim.cpu_s,
        }
        if budgets is not None:
            extra["budgets_mb"] = list(budgets)
    return {
        **extra,
        "rss_trace_mb": trace,
        "open_s": opened,
        "rss_base_mb": base_rss,
        "rss_open_mb": rss_open,
        "rss_end_mb": rss_mb(),
        "rss_peak_mb": rss_mb(peak=True),
        "namespaces": len(mine),
        "reads": len(reads),
        "writes": len(writes),
        "read_p50_ms": pct(reads, 50),
        "read_p95_ms": pct(reads, 95),
        "write_p50_ms": pct(writes, 50),
        "write_p95_ms": pct(writes, 95),
        "mixed_results": mixed,
        "lost_writes": lost,
    }


# -- orchestration (called by scale.py) ---------------------------------------------------------


def _run(role: list[str], out: Path, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, *role, "--out", str(out)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        log(f"  {' '.join(role[:2])}: timed out after {timeout:.0f} s")
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        log(f"  {' '.join(role[:2])}: failed ({proc.returncode})")
        return {"error": f"exit {proc.returncode}"}
    res: dict[str, Any] = json.loads(out.read_text())
    res["wall_s"] = time.perf_counter() - t0
    return res


def _short(res: dict[str, Any]) -> str:
    keep = {k: round(v, 1) for k, v in res.items() if isinstance(v, float)}
    return json.dumps({**keep, **{k: v for k, v in res.items() if isinstance(v, int)}})


def run(
    sizes: Sequence[int],
    *,
    texts: Sequence[str],
    vectors: np.ndarray,
    queries: Sequence[str],
    qvectors: np.ndarray,
    cache: Path,
    tmp: Path,
    workers_n: int,
    worker_ops: int = WORKER_OPS,
    timeout: float = 3 * 3600.0,
    save: Any = None,
    keep: Path | None = None,
    worker_budgets: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Build each size, measure open / cold / steady (embedded and client mode, Norax and
    plain Chroma), then the worker processes on the largest size up to ``workers_n``.

    ``save(report)`` is called after every measurement, so a stopped run keeps its rows.
    ``keep``: build the stores in this folder and keep them; a store already built there
    (its ``store-N.build.json`` present) is measured again without being rebuilt (its build row is
    the one of that build). Without it the stores go to a temporary folder, removed after.
    """
    report: dict[str, Any] = {"sizes": {}, "workers": {}}
    work = keep or Path(tempfile.mkdtemp(prefix="scale-store-", dir=tmp))
    try:
        work.mkdir(parents=True, exist_ok=True)
        pool = json.dumps({"texts": list(texts[:POOL]), "queries": list(queries)})
        if keep and (work / "pool.json").exists() and (work / "pool.json").read_text() != pool:
            raise ValueError(f"{work} holds stores of another corpus: give another --keep")
        (work / "pool.json").write_text(pool)
        np.save(work / "pool.npy", vectors[:POOL])
        np.save(work / "qemb.npy", qvectors)
        workers_at = max((n for n in sizes if n <= workers_n), default=None)
        for n in sizes:
            folder = work / f"store-{n}"
            row: dict[str, Any] = {}
            report["sizes"][str(n)] = row
            common = ["--work", str(work), "--n", str(n), "--folder", str(folder)]
            built = work / f"store-{n}.build.json"
            if keep and built.exists():
                log(f"store N={n:,}: kept in {folder}")
                row["build"] = json.loads(built.read_text())
            else:
                log(f"store N={n:,}: building ...")
                shutil.rmtree(folder, ignore_errors=True)
                row["build"] = _run(
                    ["build", *common, "--cache", str(cache)], work / "build.json", timeout
                )
                if keep and "error" not in row["build"]:
                    built.write_text(json.dumps(row["build"]))
            log(f"  build: {_short(row['build'])}")
            if "error" in row["build"]:
                continue
            held, total = published_count(folder)
            if held < total:  # kept from before publishing existed: publish, timed
                row["publish"] = _run(["publish", *common], work / "o.json", timeout)
                log(f"  publish ({held}/{total} published before): {_short(row['publish'])}")
            for system in ("norax", "chroma"):
                res = _run(["open", *common, "--system", system], work / "o.json", timeout)
                row[f"embedded_{system}"] = res
                log(f"  embedded {system}: {_short(res)}")
                if save:
                    save(report)
            with ChromaServer(folder, work / f"chroma-{n}.log") as server:
                row["client_server_warm_s"] = server.warm(warm_namespace(n), _inputs(work)[3][0])
                # The Norax clients share a snapshot file: the first process loads the cold
                # namespaces from Chroma and stores them at close, the second from the file.
                snap_file = work / f"client-snapshots-{n}.sqlite3"
                snap_file.unlink(missing_ok=True)  # the first client starts cold
                snap = ["--snapshots", str(snap_file)]
                for system, key in (
                    ("norax", "norax"),
                    ("chroma", "chroma"),
                    ("norax", "norax_snapshot"),
                ):
                    res = _run(
                        ["open", *common, "--system", system, "--url", server.url, *snap],
                        work / "o.json",
                        timeout,
                    )
                    row[f"client_{key}"] = res
                    log(f"  client {key}: {_short(res)}")
                    if save:
                        save(report)
                if n == workers_at:
                    report["workers"] = run_workers(
                        work, n, folder, server, worker_ops, timeout, worker_budgets
                    )
                    report["workers"]["n"] = n
                    if save:
                        save(report)
            if not keep:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return report


def run_workers(
    work: Path,
    n: int,
    folder: Path,
    server: ChromaServer,
    ops: int,
    timeout: float,
    budgets: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """:data:`WORKERS` Norax clients at once, then as many plain Chroma clients at once.

    ``budgets``: the Norax workers' ``(dense_cache_mb, index_cache_mb)``.
    """
    out: dict[str, Any] = {}
    for system in ("norax", "chroma"):
        procs = []
        t0 = time.perf_counter()
        for i in range(WORKERS):
            res_file = work / f"worker-{system}-{i}.json"
            cmd = [
                sys.executable,
                __file__,
                "worker",
                "--work",
                str(work),
                "--n",
                str(n),
                "--folder",
                str(folder),
                "--system",
                system,
                "--url",
                server.url,
                "--index",
                str(i),
                "--ops",
                str(ops),
                *(["--budgets", ",".join(map(str, budgets))] if budgets else []),
                "--out",
                str(res_file),
            ]
            procs.append((subprocess.Popen(cmd, stdout=subprocess.DEVNULL), res_file))
        rows = []
        for proc, res_file in procs:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = -1
            rows.append(json.loads(res_file.read_text()) if code == 0 else {"error": code})
        out[system] = {
            "workers": rows,
            "wall_s": time.perf_counter() - t0,
            "server_rss_peak_mb": server.rss_mb(),
        }
        log(f"  workers {system}: " + "; ".join(_short(r) for r in rows))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="one role of the scale-out rows (internal)")
    ap.add_argument("role", choices=("build", "open", "worker", "publish"))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--folder", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--system", default="norax", choices=("norax", "chroma"))
    ap.add_argument("--url")
    ap.add_argument("--snapshots", type=Path, help="a Norax client's shared snapshot file")
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--ops", type=int, default=WORKER_OPS)
    ap.add_argument("--budgets", help="a Norax worker's dense_cache_mb,index_cache_mb")
    args = ap.parse_args()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    if args.role == "build":
        res = role_build(args.work, args.n, args.folder, args.cache)
    elif args.role == "publish":
        res = role_publish(args.folder)
    elif args.role == "open":
        res = role_open(
            args.work, args.n, args.system, args.folder, args.url, args.cache, args.snapshots
        )
    else:
        budgets = None
        if args.budgets:
            dense, index = (float(x) for x in args.budgets.split(","))
            budgets = (dense, index)
        res = role_worker(args.work, args.n, args.system, args.url, args.index, args.ops, budgets)
    res["load_avg"] = list(os.getloadavg())
    args.out.write_text(json.dumps(res))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
