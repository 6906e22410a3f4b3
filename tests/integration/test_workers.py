"""Worker processes over one Chroma server, each serving its own namespaces (issue 15).

The small-size twin of ``benchmarks/scale_store.py``'s multi-process run: a real ``chroma
run`` on 127.0.0.1, a collection seeded with a few memories per namespace, then four real
subprocesses opening it at once through ``chromadb.HttpClient`` (the ONNX embedder and spaCy
from ``../shared/models``). Each owns a disjoint set of namespaces and interleaves searches and
adds on them. Every hit must come from the namespace asked and be a memory written there; at
the end a fresh process finds every worker's writes, in its namespace, and nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid

import chromadb
import pytest

from norax_core import NoraxMemory

pytestmark = [pytest.mark.integration, pytest.mark.server]

WORKERS = 4
SPACES_PER_WORKER = 3
SEED_PER_SPACE = 4
OPS = 24
TOPICS = (
    "hiking trip to the Alps with Maya",
    "the quarterly budget review on Thursday",
    "adopting a rescue dog named Biscuit",
    "learning to bake sourdough bread",
    "moving the database to Postgres 16",
    "planning a surprise party for Jonas",
)

WORKER = textwrap.dedent(
    """
    import json, random, sys
    from urllib.parse import urlparse
    import chromadb
    from norax_core import NoraxMemory

    url, collection, index, spaces, ops, seeded = (
        sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5]),
        json.loads(sys.argv[6]),
    )
    u = urlparse(url)
    mem = NoraxMemory(client=chromadb.HttpClient(host=u.hostname, port=u.port),
                      collection=collection, sync_interval=0.2)
    known = {ns: set(ids) for ns, ids in seeded.items()}
    rng = random.Random(index)
    written, mixed, searches, empty = [], [], 0, 0
    for i in range(ops):
        ns = rng.choice(spaces)
        if i % 3 == 0:
            mid = f"w{index}-{i}"
            mem.add(f"note {i} of worker {index} about {ns}", ids=mid, namespace=ns)
            known[ns].add(mid)
            written.append([mid, ns])
        else:
            hits = mem.search(f"what about {ns}?", k=5, namespace=ns)
            searches += 1
            empty += not hits
            mixed += [h.id for h in hits if h.namespace != ns or h.id not in known[ns]]
    mem.close()
    out = {"written": written, "mixed": mixed, "searches": searches, "empty": empty}
    print(json.dumps(out), flush=True)
    """
)


def _space(w: int, j: int) -> str:
    return f"tenant-{w}-{j}"


def test_four_workers_on_disjoint_namespaces_lose_and_mix_nothing(chroma_url: str) -> None:
    from urllib.parse import urlparse

    u = urlparse(chroma_url)
    collection = f"workers-{uuid.uuid4().hex[:10]}"
    client = chromadb.HttpClient(host=u.hostname, port=u.port)
    seeded: dict[str, list[str]] = {}
    with NoraxMemory(client=client, collection=collection) as mem:
        for w in range(WORKERS):
            for j in range(SPACES_PER_WORKER):
                ns = _space(w, j)
                ids = [f"{ns}-seed-{k}" for k in range(SEED_PER_SPACE)]
                texts = [f"{TOPICS[(w + j + k) % len(TOPICS)]} ({ns})" for k in range(len(ids))]
                mem.add(texts, ids=ids, namespace=ns)
                seeded[ns] = ids
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    procs = []
    for w in range(WORKERS):
        spaces = [_space(w, j) for j in range(SPACES_PER_WORKER)]
        mine = {ns: seeded[ns] for ns in spaces}
        args = [chroma_url, collection, str(w), json.dumps(spaces), str(OPS), json.dumps(mine)]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, *args], stdout=subprocess.PIPE, text=True, env=env
            )
        )
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0
        results.append(json.loads(out.strip().splitlines()[-1]))

    for res in results:
        assert res["mixed"] == []
        assert res["empty"] == 0  # every namespace holds memories: a search finds some
        assert res["searches"] == OPS - len(res["written"])
    expected = {ns: set(ids) for ns, ids in seeded.items()}
    for res in results:
        for mid, ns in res["written"]:
            expected[ns].add(mid)
    assert sum(len(r["written"]) for r in results) == WORKERS * (OPS // 3)
    with NoraxMemory(client=client, collection=collection) as fresh:
        assert sorted(fresh.namespaces()) == sorted(expected)
        for ns, ids in expected.items():
            assert fresh.count(ns) == len(ids)
            got = fresh.get(sorted(ids), namespace=ns)
            assert {m.id for m in got} == ids
    client.delete_collection(collection)
