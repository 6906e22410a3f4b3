"""The dense signal ranks a namespace exactly, whatever its size and whatever was written.

Reference: every vector Chroma holds in the namespace (one ``get``), scored by
:func:`norax_core.signals.dense.similarity` and sorted by ``(-score, id)``. The search under
test goes through ``NoraxMemory.candidates`` with a dense-only weighting, so its candidates
are the dense signal's own top ``pool``, best first. Namespaces are above the old exact
threshold (256) and share a collection with others; the store is then changed in every way
a store changes (add, upsert, delete, re-embedding with ``embed_context``, reopen, a repair
after writes behind its back, another process's writes over a Chroma server) and the ranking
is compared again each time.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from _support import hash_embedder, open_store

from norax_core import NoraxConfig
from norax_core.signals.dense import NAMESPACE_KEY, similarity

WORDS = ["wallet", "refund", "deploy", "invoice", "schema"]
WORDS += ["budget", "vendor", "staging", "review", "roadmap"]
NAMES = ["Colby", "Priya", "Ines", "Omar"]
DENSE = {"dense": 1.0}
QUERIES = ["refund the vendor invoice", "Colby staging deploy", "budget", "zebra"]


def texts(rng: random.Random, n: int) -> list[str]:
    """Short texts over a small vocabulary: many near and exact duplicates (ties)."""
    return [
        " ".join(rng.choices(WORDS, k=rng.randint(1, 4)) + rng.sample(NAMES, rng.randint(0, 2)))
        for _ in range(n)
    ]


def fill(mem, rng: random.Random, ns: str, n: int, prefix: str, start: float = 0.0) -> list[str]:
    ids = [f"{prefix}{i:04d}" for i in range(n)]
    mem.add(
        texts(rng, n),
        ids=ids,
        namespace=ns,
        created_at=[1.7e9 + start + 60.0 * i for i in range(n)],
        metadata=[{"topic": rng.choice(["t1", "t2"])} for _ in range(n)],
    )
    return ids


def brute(mem, ns: str, query: str, n: int, where=None) -> list[tuple[str, float]]:
    """The top ``n`` by scoring every vector Chroma holds in ``ns`` (and ``where``)."""
    flt = {NAMESPACE_KEY: ns} if where is None else {"$and": [{NAMESPACE_KEY: ns}, where]}
    got = mem.store.collection.get(where=flt, include=["embeddings"])
    if not got["ids"]:
        return []
    q = mem.embedder.embed([query])[0]
    sims = similarity(got["embeddings"], q)
    # the float64 cosine itself, computed another way, agrees to rounding
    stored = np.asarray(got["embeddings"], np.float32).astype(np.float64)  # Chroma's float32
    ref = np.clip(stored @ q.astype(np.float64), 0, 1)
    np.testing.assert_allclose(sims, ref, rtol=0, atol=1e-12)
    ranked = sorted(zip(got["ids"], sims.tolist(), strict=True), key=lambda p: (-p[1], p[0]))
    return ranked[:n]


def searched(mem, ns: str, query: str, n: int, where=None) -> list[tuple[str, float]]:
    """The dense signal's top ``n`` through the public search path, best first."""
    c = mem.candidates(query, k=min(n, 10), namespace=ns, where=where, weights=DENSE, pool=n)
    return [(m, c.signals["dense"][m]) for m in c.ids]


def assert_exact(mem, ns: str, n: int = 60) -> None:
    assert mem.count(ns) > 256
    for query in QUERIES:
        for where in (None, {"topic": "t1"}):
            assert searched(mem, ns, query, n, where) == brute(mem, ns, query, n, where), (
                f"{ns}: {query!r} {where}"
            )
    assert ns in mem.store.indexes.vectors, "searched from its in-process matrix"
    # any memory's score, asked directly (a reranker), is the same similarity
    ids = sorted(mem.store.indexes.temporal.ids(ns))[:40] + ["nope", "o0000"]
    c = mem.candidates(QUERIES[0], k=5, namespace=ns, ids=ids)
    full = dict(brute(mem, ns, QUERIES[0], 10**6))
    assert c.signals["dense"] == {m: full.get(m, 0.0) for m in c.ids}


def test_dense_ranking_is_brute_force_cosine_through_every_kind_of_write(tmp_path: Path):
    rng = random.Random(11)
    path = tmp_path / "store"
    with open_store(path, weights=DENSE) as mem:
        fill(mem, rng, "other", 500, "o")  # near-duplicates of "big"'s memories, elsewhere
        big = fill(mem, rng, "big", 300, "b")
        assert_exact(mem, "big")  # loads the matrix
        fill(mem, rng, "big", 40, "n", start=1e5)
        assert_exact(mem, "big")
        mem.upsert(texts(rng, 25), ids=big[:25], namespace="big", created_at=1.7e9)
        assert_exact(mem, "big")
        mem.delete(big[25:60] + ["o0001"])
        assert_exact(mem, "big")
        before = searched(mem, "big", QUERIES[0], 60)
    with open_store(path, weights=DENSE) as mem:  # reopen: loaded again from Chroma
        assert searched(mem, "big", QUERIES[0], 60) == before
        assert_exact(mem, "big")
        # writes behind Norax's back, then a repair (norax check --repair)
        col = mem.store.collection
        col.delete(ids=big[60:70])
        new = mem.embedder.embed(["zebra zebra"] * 5)
        col.update(ids=big[70:75], documents=["zebra zebra"] * 5, embeddings=new)
        assert not mem.check().ok
        mem.repair()
        assert_exact(mem, "big")
        assert searched(mem, "big", "zebra", 5)[0][0] in big[70:75]


def test_re_embedded_followers_move_in_the_matrix_too():
    """With ``embed_context``, a memory written into a session re-embeds the ones after it:
    their new vectors must reach the loaded matrix."""
    rng = random.Random(3)
    with open_store(config=NoraxConfig(embed_context=2), weights=DENSE) as mem:
        fill(mem, rng, "big", 300, "b")  # a minute apart: one session
        assert_exact(mem, "big")
        mem.add(
            texts(rng, 5),
            ids=[f"mid{i}" for i in range(5)],
            namespace="big",
            created_at=[1.7e9 + 60.0 * 100 + 7 * i for i in range(5)],
        )
        assert_exact(mem, "big")
        mem.delete(["b0150", "b0151"])
        assert_exact(mem, "big")


def test_matrices_beyond_the_budget_are_dropped_and_reloaded():
    rng = random.Random(5)
    tiny = NoraxConfig(dense_cache_mb=0.05)  # room for one namespace's matrix (~50 KB each)
    with open_store(config=tiny, weights=DENSE) as mem:
        for ns in ("n1", "n2", "n3"):
            fill(mem, rng, ns, 280, ns)
        for ns in ("n1", "n2", "n3", "n1"):
            assert_exact(mem, ns)
            assert mem.store.indexes.vectors.loaded() == [ns]
        mem.delete(["n20001"])  # a write to an unloaded namespace loads nothing
        assert mem.store.indexes.vectors.loaded() == ["n1"]
        assert_exact(mem, "n2")


def test_namespaces_above_the_limit_use_chroma_hnsw():
    rng = random.Random(7)
    with open_store(config=NoraxConfig(dense_exact_limit=200), weights=DENSE) as mem:
        fill(mem, rng, "big", 300, "b")
        fill(mem, rng, "small", 150, "s")
        got = searched(mem, "big", QUERIES[0], 10)
        assert len(got) == 10 and "big" not in mem.store.indexes.vectors
        assert searched(mem, "small", QUERIES[0], 30) == brute(mem, "small", QUERIES[0], 30)
        assert "small" in mem.store.indexes.vectors


WRITER = textwrap.dedent(
    """
    import json, sys
    from urllib.parse import urlparse
    import chromadb
    sys.path.insert(0, sys.argv[3])
    from _support import open_store

    u = urlparse(sys.argv[1])
    mem = open_store(client=chromadb.HttpClient(host=u.hostname, port=u.port),
                     collection=sys.argv[2], sync_interval=0.1)
    ops = json.loads(sys.stdin.read())
    mem.add(ops["add"], ids=[f"x{i:03d}" for i in range(len(ops["add"]))], namespace="big")
    mem.upsert(ops["upsert"], ids=ops["upsert_ids"], namespace="big")
    mem.delete(ops["delete"])
    mem.close()
    """
)


@pytest.mark.server
def test_another_processs_writes_reach_the_matrix(chroma_url: str):
    import uuid

    import chromadb

    rng = random.Random(9)
    u = urlparse(chroma_url)
    name = f"dense-{uuid.uuid4().hex[:8]}"
    client = chromadb.HttpClient(host=u.hostname, port=u.port)
    mem = open_store(client=client, collection=name, weights=DENSE, sync_interval=0.1)
    try:
        fill(mem, rng, "other", 300, "o")
        big = fill(mem, rng, "big", 300, "b")
        assert_exact(mem, "big")
        ops = {
            "add": texts(rng, 30),
            "upsert": texts(rng, 20),
            "upsert_ids": big[:20],
            "delete": big[20:45],
        }
        subprocess.run(
            [sys.executable, "-c", WRITER, chroma_url, name, str(Path(__file__).parent)],
            input=json.dumps(ops),
            text=True,
            check=True,
            timeout=300,
        )
        import time

        time.sleep(0.3)  # past the sync interval: the next search pulls the change log
        assert_exact(mem, "big")
        assert mem.count("big") == 300 + 30 - 25
        assert hash_embedder().name == mem.embedder.name
    finally:
        client.delete_collection(name)
        mem.close()
