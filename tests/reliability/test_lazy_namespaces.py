"""Namespaces load lazily and are evicted under a memory budget: what a search returns never
depends on what happens to be loaded.

The parity test uses two whole LoCoMo conversations with the real ONNX embedder and spaCy
pipeline (embeddings cached on disk as ``norax bench`` caches them); the others use the fast
hashed embedder, and one a real ``chroma run`` server with two processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _procs import serving
from _support import open_store

from norax_core import NoraxConfig, NoraxMemory
from norax_core.bench.cache import CachedEmbedder, CachedExtractor, TextCache
from norax_core.bench.data import load_locomo
from norax_core.embedders import default_embedder
from norax_core.entities import load_extractor
from norax_core.weights import Weights

DATA = Path(os.environ.get("NORAX_DATA_DIR", Path(__file__).parents[3] / "shared" / "data"))
NOW = 1_700_000_000.0
TINY = NoraxConfig(index_cache_mb=0.0)  # every use of another namespace evicts the last
WEIGHTS = {
    "default": "default",
    "context": Weights(
        0.3,
        0.5,
        0.05,
        0.15,
        params={"context_window": 2, "context_weight": 1.0, "latest_wins_weight": 1.0},
    ),
}


def _fill(mem: NoraxMemory, convs: list) -> None:  # type: ignore[type-arg]
    for conv in convs:
        mems = conv.memories
        for s in range(0, len(mems), 200):
            batch = mems[s : s + 200]
            mem.add(
                [m.text for m in batch],
                ids=[f"{conv.name}/{m.id}" for m in batch],
                created_at=[m.created_at for m in batch],
                namespace=conv.name,
            )
        with mem.store.lock:  # communities up to date, as norax bench does
            mem.store.indexes.ensure(conv.name)
            mem.store.indexes.graph.communities(conv.name)


def _answers(mem: NoraxMemory, convs: list) -> dict:  # type: ignore[type-arg]
    """Every question of every conversation, alternating namespaces, under two weightings."""
    out = {}
    for name, w in WEIGHTS.items():
        for i in range(max(len(c.questions) for c in convs[:2])):
            for conv in convs:
                if i < len(conv.questions):
                    q = conv.questions[i]
                    got = mem.search(q.text, k=10, namespace=conv.name, now=conv.now, weights=w)
                    out[(name, conv.name, i)] = [(r.id, r.score) for r in got]
    return out


def test_evicted_namespace_reloads_with_identical_results(tmp_path: Path) -> None:
    path = DATA / "locomo" / "locomo10_dev.json"
    if not path.is_file():
        pytest.skip(f"LoCoMo dev data not found at {path}")
    convs = load_locomo(path).conversations[:2]
    for c in convs:
        c.questions[:] = c.questions[:25]
    cache = TextCache(tmp_path / "cache")
    models = {
        "embedder": CachedEmbedder(default_embedder(), cache),
        "extractor": CachedExtractor(load_extractor(), cache),
    }
    store = tmp_path / "store"
    with NoraxMemory(store, **models) as mem:
        _fill(mem, convs)
        warm = _answers(mem, convs)
        assert sorted(mem.store.indexes.loaded()) == sorted(c.name for c in convs)
        with mem.store.lock:
            for c in convs:
                mem.store.indexes.evict(c.name)
        assert mem.store.indexes.loaded() == []
        assert _answers(mem, convs) == warm  # reloaded from the sidecar
    # a cold open with a budget so small that every search evicts the other namespace
    with NoraxMemory(store, config=TINY, **models) as mem:
        assert mem.store.indexes.loaded() == []  # opening read no memory
        assert _answers(mem, convs) == warm
        assert mem.store.indexes.evictions >= len(warm) - 2  # nearly every search evicted
        assert len(mem.store.indexes.loaded()) == 1


def test_writes_to_an_evicted_namespace_are_seen(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", config=TINY) as mem:
        mem.add(
            ["alpha one about the harbour", "alpha two about ships"],
            ids=["a1", "a2"],
            namespace="a",
            created_at=NOW - 100,
        )
        mem.add(["beta one about the forest"], ids=["b1"], namespace="b", created_at=NOW - 100)
        assert mem.search("forest", k=5, namespace="b", now=NOW)[0].id == "b1"
        idx = mem.store.indexes
        assert "a" not in idx.loaded()
        mem.add("alpha three about the lighthouse", ids="a3", namespace="a", created_at=NOW)
        mem.upsert("alpha two about sailing ships", ids="a2", namespace="a", created_at=NOW - 50)
        assert "a" not in idx.loaded()  # the writes did not load it
        with pytest.raises(Exception, match="already stored"):
            mem.add("again", ids="a1", namespace="b")  # found without loading "a"
        assert mem.delete("a1", namespace="b") == 0  # another namespace's id is left alone
        assert mem.delete("a1", namespace="a") == 1
        assert "a" not in idx.loaded()
        hits = mem.search("lighthouse sailing harbour", k=5, namespace="a", now=NOW)
        assert {h.id for h in hits} == {"a2", "a3"}
        assert mem.get("a2")[0].text == "alpha two about sailing ships"
        assert mem.count("a") == 2 and mem.count() == 3
        assert mem.namespaces() == ["a", "b"]
        assert mem.check().ok
    with open_store(tmp_path / "s", config=TINY) as mem:  # and after a reopen
        assert mem.count("a") == 2 and mem.count("b") == 1
        assert [h.id for h in mem.search("lighthouse", k=1, namespace="a", now=NOW)] == ["a3"]


def test_isolation_when_every_search_evicts(tmp_path: Path) -> None:
    texts = {
        ns: [f"{ns} note {i} about shared words apple river {i % 3}" for i in range(12)]
        for ns in ("u1", "u2", "u3", "u4")
    }
    with open_store(tmp_path / "big") as big, open_store(tmp_path / "tiny", config=TINY) as tiny:
        for mem in (big, tiny):
            for ns, ts in texts.items():
                mem.add(
                    ts,
                    ids=[f"{ns}-{i}" for i in range(len(ts))],
                    namespace=ns,
                    created_at=[NOW - 60 * i for i in range(len(ts))],
                )
        for rnd in range(3):
            for ns in texts:
                q = f"apple river note {rnd}"
                got = [(r.id, r.score) for r in tiny.search(q, k=8, namespace=ns, now=NOW)]
                assert got and all(m.startswith(f"{ns}-") for m, _ in got)
                assert got == [(r.id, r.score) for r in big.search(q, k=8, namespace=ns, now=NOW)]
                assert tiny.store.indexes.loaded() == [ns]
        assert tiny.store.indexes.evictions >= 11


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    from _support import open_store
    from norax_core import NoraxConfig
    mem = open_store(sys.argv[1], config=NoraxConfig(index_cache_mb=0.0))
    mem.search("warm", k=1, namespace="other")  # only "other" is loaded
    print("open", flush=True)
    i = 0
    while True:
        ids = [f"c{i + j}" for j in range(5)]
        mem.add([f"cold note {i + j} about the archive" for j in range(5)], ids=ids,
                namespace="cold")
        assert "cold" not in mem.store.indexes.loaded()
        print("acked " + " ".join(ids), flush=True)
        i += 5
    """
)


def test_sigkill_during_writes_into_an_unloaded_namespace_recovers(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        mem.add("first cold note", ids="c-first", namespace="cold")
        mem.add("other note", ids="o1", namespace="other")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(store), str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked: list[str] = []
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "open"
    while len(acked) < 40:
        line = proc.stdout.readline()
        assert line, "the writer died"
        acked += line.split()[1:]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with open_store(store) as mem:
        report = mem.check()
        assert report.ok, report.problems()
        assert not report.pending
        found = {m.id for m in mem.get(acked, namespace="cold")}
        assert found == set(acked)  # every acknowledged write survived
        n = mem.count("cold")
        assert n == mem.store.collection.get(where={"norax_namespace": "cold"})["ids"].__len__()
        hits = mem.search("archive cold note", k=n, namespace="cold", now=time.time())
        assert {h.id for h in hits} >= set(acked)


@pytest.mark.server
def test_a_process_writes_into_a_namespace_another_has_evicted(chroma_url: str) -> None:
    with serving(chroma_url, "lazy") as srv:
        child = srv.open(0.2)
        mem = open_store(
            client=srv.client, collection=srv.collection, config=TINY, sync_interval=0.2
        )
        try:
            mem.add("a note about the lighthouse keeper", ids="x1", namespace="x")
            mem.add("a note about the forest ranger", ids="y1", namespace="y")
            assert [h.id for h in mem.search("lighthouse", k=1, namespace="x")] == ["x1"]
            assert [h.id for h in mem.search("forest", k=1, namespace="y")] == ["y1"]
            assert mem.store.indexes.loaded() == ["y"]  # x was evicted
            # into the evicted one, then into the loaded one
            child.ok("add", text="the lighthouse keeper repaired the lamp", id="x2", ns="x")
            child.ok("add", text="the forest ranger counted owls", id="y2", ns="y")
            hits = mem.search("lighthouse lamp", k=5, namespace="x")
            assert {h.id for h in hits} == {"x1", "x2"}
            deadline = time.time() + 10
            while mem.count("y") < 2 and time.time() < deadline:  # y: through the change log
                time.sleep(0.1)
            assert {h.id for h in mem.search("forest owls", k=5, namespace="y")} == {"y1", "y2"}
            assert mem.count() == 4 and mem.namespaces() == ["x", "y"]
        finally:
            mem.close()


def test_searching_empty_namespaces_keeps_no_entry_for_them() -> None:
    # Issue 24 G: an empty namespace's estimate is 0 bytes, so no budget ever evicted one.
    mem = open_store()  # the default budget: nothing is evicted for its size here
    try:
        mem.add("the lighthouse keeper repaired the lamp", ids="x1", namespace="x")
        for i in range(5_000):
            assert mem.search("lamp", k=3, namespace=f"empty-{i}") == []
            if i % 10 == 0:
                assert mem.count(f"empty-{i}-c") == 0
        idx = mem.store.indexes
        assert idx.loaded() == ["x", "empty-4999"]  # the one in use only
        assert [h.id for h in mem.search("lamp", k=3, namespace="x")] == ["x1"]
        mem.add("a first memory", ids="n1", namespace="new")  # a new namespace starts loaded
        assert mem.count("new") == 1 and idx.loaded() == ["x", "new"]
        assert mem.delete("n1") == 1 and mem.search("lamp", k=3, namespace="empty-0") == []
        assert idx.loaded() == ["x", "empty-0"]  # "new", emptied by the delete, is dropped
    finally:
        mem.close()
