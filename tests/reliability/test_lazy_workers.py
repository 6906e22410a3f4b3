"""Lean workers over one Chroma server: lazily loaded namespaces, evicted under a small budget.

A real ``chroma run`` on 127.0.0.1 and three worker processes, each serving its own disjoint
set of namespaces with a mixed load (adds, upserts, deletes, searches) for a few seconds,
with index and vector budgets so small that nearly every switch of namespace evicts. Each worker
checks as it goes that every search answers from the namespace it asked and finds the
memory it looked for; at the end, every acknowledged write is found again (count, get and
search) and the parent checks Chroma against the union of the workers' ledgers: nothing
lost, nothing mixed between workers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.server

WORKERS = 3
SECONDS = 8.0
SPACES = 5  # namespaces per worker

WORKER = textwrap.dedent(
    """
    import json, random, sys, time
    from urllib.parse import urlparse
    sys.path.insert(0, sys.argv[5])
    import chromadb
    from _support import open_store
    from norax_core import NoraxConfig

    url, collection, wid, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    u = urlparse(url)
    mem = open_store(
        client=chromadb.HttpClient(host=u.hostname, port=u.port),
        collection=collection,
        # a few memories, one namespace's vectors: switching namespaces evicts both
        config=NoraxConfig(index_cache_mb=0.004, dense_cache_mb=0.0005),
        sync_interval=0.5,
    )
    rng = random.Random(wid)
    spaces = [f"w{wid}-n{j}" for j in range(int(sys.argv[6]))]
    live = {}  # id -> (namespace, text)
    errors, ops, searches, n = [], 0, 0, 0

    def text_for(tag):
        return f"note zq{tag}x about {rng.choice(['harbour', 'forest', 'ledger', 'orbit'])}"

    def find(mid, ns, text):
        hits = mem.search(text, k=5, namespace=ns)
        wrong = [h.id for h in hits if not h.id.startswith(ns + ":")]
        if wrong:
            errors.append(f"search in {ns} returned {wrong}")
        if mid not in {h.id for h in hits}:
            errors.append(f"{mid} not found in {ns}")

    end = time.time() + seconds
    while time.time() < end or ops < 20:
        ops += 1
        roll = rng.random()
        ns = rng.choice(spaces)
        mine = [m for m, (s, _) in live.items() if s == ns]
        if roll < 0.5 or not mine:
            ids = [f"{ns}:{wid}-{n + i}" for i in range(rng.randint(1, 3))]
            n += len(ids)
            texts = [text_for(f"{wid}q{n + i}") for i in range(len(ids))]
            mem.add(texts, ids=ids, namespace=ns)
            live.update({m: (ns, t) for m, t in zip(ids, texts)})
        elif roll < 0.6:
            mid = rng.choice(mine)
            text = live[mid][1] + " (revised)"
            mem.upsert(text, ids=mid, namespace=ns)
            live[mid] = (ns, text)
        elif roll < 0.7:
            mid = rng.choice(mine)
            if mem.delete(mid, namespace=ns) != 1:
                errors.append(f"delete of {mid} missed")
            del live[mid]
        else:
            mid = rng.choice(mine)
            searches += 1
            find(mid, ns, live[mid][1])
    for ns in spaces:  # every acknowledged write is there, in its namespace
        mine = {m: t for m, (s, t) in live.items() if s == ns}
        if mem.count(ns) != len(mine):
            errors.append(f"count({ns}) = {mem.count(ns)}, want {len(mine)}")
        got = {m.id: m.text for m in mem.get(list(mine), namespace=ns)}
        if got != mine:
            errors.append(f"get in {ns} differs")
        for mid, text in list(mine.items())[:5]:
            find(mid, ns, text)
    idx = mem.store.indexes
    print(json.dumps({"ops": ops, "searches": searches, "loads": idx.loads,
                      "evictions": idx.evictions, "vectors": len(idx.vectors.loaded()),
                      "live": {m: s for m, (s, _) in live.items()},
                      "errors": errors}), flush=True)
    mem.close()
    """
)


def test_workers_serve_disjoint_namespaces_over_one_server(chroma_url: str) -> None:
    from urllib.parse import urlparse

    import chromadb

    collection = f"workers-{uuid.uuid4().hex[:10]}"
    here = str(Path(__file__).parent)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, chroma_url, collection, str(w), str(SECONDS), here]
            + [str(SPACES)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    for w, r in enumerate(reports):
        assert r["errors"] == [], (w, r["errors"][:10])
        assert r["searches"] > 0 and r["evictions"] > 0 and r["loads"] > r["evictions"] // 2
        assert r["vectors"] <= 1  # the vector budget holds one namespace's at most
        assert all(ns.startswith(f"w{w}-") for ns in r["live"].values())
    print(
        "\nworkers:",
        [{k: r[k] for k in ("ops", "searches", "loads", "evictions", "vectors")} for r in reports],
    )
    want = {m: ns for r in reports for m, ns in r["live"].items()}
    u = urlparse(chroma_url)
    client = chromadb.HttpClient(host=u.hostname, port=u.port)
    col = client.get_collection(collection)
    try:
        got = col.get(include=["metadatas"])
        held = {
            m: meta["norax_namespace"] for m, meta in zip(got["ids"], got["metadatas"], strict=True)
        }
        assert held == want  # nothing lost, nothing left over, nothing in another namespace
    finally:
        client.delete_collection(collection)
