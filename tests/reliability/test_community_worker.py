"""Community recomputes meet the store: searches and writes never wait for one, and a close or
a crash during one leaves a store that opens and answers like a fresh one.

The recompute is networkx's Louvain wrapped so that it blocks on an Event until the test
releases it (no wall-clock timing); a namespace of a few thousand co-occurrence edges is over
the threshold above which recomputes run in the graph's worker thread.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import networkx as nx
import pytest
from _support import open_store

from norax_core import NoraxMemory
from norax_core.signals import entity_graph as entity_graph_mod
from norax_core.signals.base import Query
from norax_core.signals.graph import GraphSignal

NS = "team"
NOW = datetime(2026, 11, 29, tzinfo=timezone.utc)
WAIT = 30.0
QUERIES = ["Kestrel budget review", "harbor invoice", "Priya and the Kestrel roadmap"]
_REAL = entity_graph_mod.louvain_communities


def texts(n: int = 120, seed: int = 7) -> list[str]:
    """Memories of 10-14 distinct nouns from 150: a few thousand co-occurrence edges."""
    rng = random.Random(seed)
    vocab = [
        f"{a}{b}"
        for a in ("harbor", "kestrel", "invoice", "budget", "orbit")
        for b in (
            "",
            "plan",
            "fund",
            "desk",
            "ring",
            "gate",
            "mill",
            "port",
            "yard",
            "loom",
            "vane",
            "cask",
            "reef",
            "dune",
            "fern",
            "glen",
            "husk",
            "jade",
            "kiln",
            "lark",
            "moss",
            "nook",
            "opal",
            "pike",
            "quay",
            "rook",
            "sage",
            "tarn",
            "vale",
            "wick",
        )
    ]
    return [" ".join(rng.sample(vocab, rng.randint(10, 14))) + "." for _ in range(n)]


def fill(mem: NoraxMemory) -> None:
    docs = texts()
    mem.add(
        docs,
        ids=[f"m{i}" for i in range(len(docs))],
        namespace=NS,
        created_at=[NOW - timedelta(days=i) for i in range(len(docs))],
    )


def answers(mem: NoraxMemory) -> list[list[tuple[str, float, dict[str, float]]]]:
    return [
        [(r.id, r.score, r.signals) for r in mem.search(q, k=10, namespace=NS, now=NOW)]
        for q in QUERIES
    ]


class Blocking:
    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []

    def __call__(self, graph: nx.Graph, seed: int) -> Iterable[Iterable[str]]:
        self.threads.append(threading.current_thread())
        self.started.set()
        assert self.release.wait(WAIT), "the test never released the recompute"
        return _REAL(graph, seed)


@pytest.fixture
def blocking(monkeypatch: pytest.MonkeyPatch) -> Blocking:
    fn = Blocking()
    monkeypatch.setattr(entity_graph_mod, "louvain_communities", fn)
    return fn


def inline_reference() -> NoraxMemory:
    ref = open_store()
    ref.store.indexes.graph.background_min_edges = 10**9  # the synchronous path
    return ref


def test_search_and_writes_do_not_wait_for_a_recompute(blocking: Blocking) -> None:
    with open_store() as mem:
        fill(mem)
        graph = mem.store.indexes.graph
        space = graph.space(NS, wait=False)
        assert space is not None and space.edges >= graph.background_min_edges
        assert not blocking.started.is_set()  # the read above submitted the run
        assert blocking.started.wait(WAIT)
        during = answers(mem)  # answered while the worker is blocked inside Louvain
        mem.add("Priya moved the kestrel budget review", ids="late", namespace=NS, created_at=NOW)
        assert mem.get("late") and not blocking.release.is_set()
        assert graph.pending() == [NS] and blocking.threads[0] is not threading.current_thread()
        blocking.release.set()
        with mem.store.lock:
            assert graph.settle(WAIT)
        after = answers(mem)
    blocking.release.set()
    with inline_reference() as ref:
        fill(ref)
        ref.search(QUERIES[0], namespace=NS, now=NOW)  # Louvain runs here, before "late"
        ref.add("Priya moved the kestrel budget review", ids="late", namespace=NS, created_at=NOW)
        assert answers(ref) == after
    assert during != after  # the communities changed the graph scores: the test can fail


def test_close_during_a_recompute_stops_the_worker(tmp_path: Path, blocking: Blocking) -> None:
    mem = open_store(tmp_path / "s")
    fill(mem)
    mem.search(QUERIES[0], namespace=NS, now=NOW)
    assert blocking.started.wait(WAIT)
    closing = threading.Thread(target=mem.close)
    closing.start()
    blocking.release.set()
    closing.join(WAIT)
    assert not closing.is_alive() and not blocking.threads[0].is_alive()
    with open_store(tmp_path / "s") as again, inline_reference() as ref:
        assert again.check().ok and again.count() == 120
        fill(ref)
        again.store.indexes.graph.communities(NS)  # settle both the same way, synchronously
        ref.store.indexes.graph.communities(NS)
        assert answers(again) == answers(ref)


CHILD = textwrap.dedent(
    """
    import sys, threading
    sys.path.insert(0, {support!r})
    sys.path.insert(0, {here!r})
    from _support import open_store
    from test_community_worker import NOW, NS, QUERIES, fill
    from norax_core.signals import entity_graph as m

    started = threading.Event()
    def never(graph, seed):
        started.set()
        threading.Event().wait()
    m.louvain_communities = never
    mem = open_store(sys.argv[1])
    fill(mem)
    mem.search(QUERIES[0], namespace=NS, now=NOW)
    started.wait()
    print("recomputing", flush=True)
    threading.Event().wait()
    """
)


def test_a_crash_during_a_recompute_leaves_nothing_broken(tmp_path: Path) -> None:
    here = str(Path(__file__).parent)
    script = CHILD.format(support=here, here=here)
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "s")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "recomputing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with open_store(tmp_path / "s") as again, inline_reference() as ref:
        assert again.check().ok and again.count() == 120
        fill(ref)
        again.store.indexes.graph.communities(NS)
        ref.store.indexes.graph.communities(NS)
        assert answers(again) == answers(ref)


@pytest.mark.parametrize("reload", ["while it runs", "after it ends"])
@pytest.mark.parametrize("on_disk", [False, True], ids=["in memory", "on disk"])
def test_a_run_lands_when_its_namespace_is_evicted_meanwhile(
    tmp_path: Path, blocking: Blocking, reload: str, on_disk: bool
) -> None:
    """Issue 24.3: a namespace evicted while its community run is in flight gets the run's
    communities when it is read again; the run is neither lost nor run a second time (under
    a tight memory budget every read reloads the namespace, so a lost run was lost forever)."""
    with open_store(tmp_path / "s" if on_disk else None) as mem:
        fill(mem)
        graph, indexes = mem.store.indexes.graph, mem.store.indexes
        mem.search(QUERIES[0], namespace=NS, now=NOW)  # stale: submits the run
        assert blocking.started.wait(WAIT)
        with mem.store.lock:
            indexes.evict(NS)
        assert NS not in indexes.loaded() and graph.pending() == [NS]
        if reload == "while it runs":
            mem.search(QUERIES[0], namespace=NS, now=NOW)  # reloaded with the old communities
            assert graph.pending() == [NS]  # the run in flight is not submitted twice
        blocking.release.set()
        with mem.store.lock:
            assert graph.settle(WAIT)
        before = indexes.loads
        after = answers(mem)
        assert reload == "while it runs" or indexes.loads == before + 1  # reloaded here
        with mem.store.lock:
            assert graph.space(NS) is not None
            assert graph.pending() == []
        assert len(blocking.threads) == 1  # it landed: no second run
    with inline_reference() as ref:
        fill(ref)
        ref.search(QUERIES[0], namespace=NS, now=NOW)  # Louvain runs here, synchronously
        assert answers(ref) == after


def first_search(
    path: Path, blocking: Blocking | None = None
) -> list[tuple[str, float, dict[str, float]]]:
    """The first search of a new store at ``path`` after ``fill``: its namespace is stale.

    With ``blocking``, the community run it submits is released only after the search.
    """
    with open_store(path) as mem:
        fill(mem)
        assert mem.store.indexes.graph.pending() == []
        got = mem.search(QUERIES[2], k=10, namespace=NS, now=NOW)
        if blocking is not None:
            assert blocking.started.wait(WAIT)
            blocking.release.set()
        return [(r.id, r.score, r.signals) for r in got]


def test_a_first_search_does_not_depend_on_the_worker_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same store gives the same first search whether the community run it submits ends
    during the search or long after (the benchmark's first searches differed between
    processes): a search reads the communities its namespace had when it began."""
    blocking = Blocking()
    monkeypatch.setattr(entity_graph_mod, "louvain_communities", blocking)
    slow = first_search(tmp_path / "slow", blocking)  # the run ends after the search
    monkeypatch.setattr(entity_graph_mod, "louvain_communities", _REAL)
    proposals = GraphSignal.top
    waited: list[bool] = []

    def then_the_run_ends(self: GraphSignal, query: Query, n: int) -> dict[str, float]:
        got = proposals(self, query, n)  # this first read of the namespace submitted the run
        deadline = time.monotonic() + WAIT
        while self.graph.pending() and time.monotonic() < deadline:  # the worker, not us
            time.sleep(0.001)
        waited.append(not self.graph.pending())
        return got

    monkeypatch.setattr(GraphSignal, "top", then_the_run_ends)
    fast = first_search(tmp_path / "fast")  # the run ends right after the graph's proposals
    assert waited == [True] and fast == slow
    monkeypatch.setattr(GraphSignal, "top", proposals)
    with open_store(tmp_path / "again") as mem:  # the run's communities do change the scores
        fill(mem)
        mem.store.indexes.graph.communities(NS)
        got = mem.search(QUERIES[2], namespace=NS, now=NOW)
        settled = [(r.id, r.score, r.signals) for r in got]
    assert settled != slow
