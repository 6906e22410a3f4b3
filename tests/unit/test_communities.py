"""Community recomputes off the query path: a worker thread, adopted by the next read."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

import networkx as nx
import pytest

from norax_core.signals import entity_graph as entity_graph_mod
from norax_core.signals.base import Query
from norax_core.signals.entity_graph import louvain_communities
from norax_core.signals.graph import EntityGraph, GraphSignal

NS = "ns"
WAIT = 30.0  # seconds a test waits for an Event before failing (never reached when it works)


def corpus() -> dict[str, list[str]]:
    """Two topics joined by one bridge, plus filler memories that link them loosely."""
    mems = {f"a{i}": ["apple", "banana", "cherry", "date", f"fruit{i}"] for i in range(6)}
    mems |= {f"b{i}": ["xenon", "yttrium", "zinc", "argon", f"gas{i}"] for i in range(6)}
    mems["bridge"] = ["date", "xenon"]
    mems |= {f"c{i}": [f"fruit{i}", f"gas{(i + 1) % 6}", "kiwi"] for i in range(6)}
    return mems


class Slow:
    """A community function that blocks until released, then runs networkx's Louvain."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self.thread: threading.Thread | None = None

    def __call__(self, graph: nx.Graph, seed: int) -> Iterable[Iterable[str]]:
        self.calls += 1
        self.thread = threading.current_thread()
        self.started.set()
        assert self.release.wait(WAIT), "the test never released the recompute"
        return louvain_communities(graph, seed)


def background(slow: Slow, refresh_fraction: float = 0.1) -> EntityGraph:
    g = EntityGraph(background_min_edges=0, community_fn=slow, refresh_fraction=refresh_fraction)
    g.add_many(NS, corpus().items())
    return g


def inline(refresh_fraction: float = 0.1) -> EntityGraph:
    g = EntityGraph(background_min_edges=10**9, refresh_fraction=refresh_fraction)
    g.add_many(NS, corpus().items())
    return g


def q(*entities: str) -> Query:
    return Query(text="", namespace=NS, now=0.0, entities=entities)


def results(g: EntityGraph) -> tuple[object, ...]:
    sig = GraphSignal(g)
    ids = sorted(g.ids(NS))
    return tuple((sig.top(q(*e), 10), sig.score(q(*e), ids)) for e in (["apple"], ["kiwi"]))


def test_a_query_does_not_wait_for_a_recompute() -> None:
    slow = Slow()
    g = background(slow)
    sig = GraphSignal(g)
    first = sig.top(q("apple"), 10)  # the first read finds the namespace stale: submits
    assert slow.started.wait(WAIT)
    assert g.pending() == [NS]
    # The worker is blocked inside the community function: reads still answer, from the
    # communities the namespace had (each entity placed by its neighbours).
    assert sig.top(q("apple"), 10) == first
    assert sig.score(q("kiwi"), ["c0", "a0"]).keys() == {"c0", "a0"}
    assert g.match_query(NS, "any kiwi?") == ["kiwi"]
    assert not slow.release.is_set() and g.pending() == [NS]
    slow.release.set()
    assert g.settle(WAIT)
    assert g.pending() == [] and slow.calls == 1
    assert slow.thread is not threading.current_thread()


def test_results_after_the_recompute_equal_a_synchronous_one() -> None:
    slow = Slow()
    g = background(slow)
    before = results(g)
    slow.release.set()
    assert g.settle(WAIT)
    ref = inline()
    assert g.communities(NS) == ref.communities(NS)
    assert results(g) == results(ref)
    assert before != results(ref)  # the recompute changed the scores: the test can fail
    assert slow.calls == 1  # communities() did not rerun it: adopted, not recomputed


def test_writes_during_a_recompute_are_placed_on_adoption() -> None:
    slow = Slow()
    g = background(slow, refresh_fraction=0.5)
    g.space(NS)
    assert slow.started.wait(WAIT)
    g.add(NS, "late", ["lime", "apple", "banana"])  # a new entity, while the worker runs
    g.remove(NS, "c5")  # frees no entity; "gone" below frees "plum"'s id
    g.add(NS, "gone", ["plum", "zinc"])
    g.remove(NS, "gone")
    slow.release.set()
    assert g.settle(WAIT)
    comm = g.communities(NS)
    assert "plum" not in comm and min(comm.values()) >= 0
    assert comm["lime"] == comm["apple"]  # placed with its strongest neighbours
    # The same run, then the same writes read inline (4 changes: below 50 % of 20, no rerun).
    ref = inline(refresh_fraction=0.5)
    ref.communities(NS)
    ref.add(NS, "late", ["lime", "apple", "banana"])
    ref.remove(NS, "c5")
    ref.add(NS, "gone", ["plum", "zinc"])
    ref.remove(NS, "gone")
    assert ref.communities(NS) == comm
    space = g.space(NS)
    assert space is not None and space.changes == 4  # the writes after the snapshot count


def test_close_during_a_recompute_stops_the_worker() -> None:
    slow = Slow()
    g = background(slow)
    g.space(NS)
    assert slow.started.wait(WAIT)
    before = dict(g.space(NS).communities())  # type: ignore[union-attr]
    closing = threading.Thread(target=g.close)
    closing.start()
    slow.release.set()
    closing.join(WAIT)
    assert not closing.is_alive()
    assert slow.thread is not None and not slow.thread.is_alive()
    assert g.pending() == []
    space = g.space(NS)
    assert space is not None and space.communities() != before  # now recomputed inline
    assert slow.calls == 2


def test_a_failed_recompute_keeps_the_communities_and_retries() -> None:
    calls: list[int] = []

    def failing(graph: nx.Graph, seed: int) -> Iterable[Iterable[str]]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return louvain_communities(graph, seed)

    g = EntityGraph(background_min_edges=0, community_fn=failing)
    g.add_many(NS, corpus().items())
    before = g.space(NS).communities()  # type: ignore[union-attr]
    assert g.settle(WAIT)
    assert g.space(NS).communities() == before  # type: ignore[union-attr]  # kept; resubmitted
    assert g.settle(WAIT)
    assert g.communities(NS) == inline().communities(NS) and len(calls) == 2


def test_small_namespaces_recompute_inline() -> None:
    slow = Slow()
    slow.release.set()
    g = EntityGraph(community_fn=slow)  # the default threshold: far above this graph
    g.add_many(NS, corpus().items())
    g.space(NS)
    assert slow.calls == 1 and g.pending() == []
    assert slow.thread is threading.current_thread()


def test_without_reads_adopt_only_begin_adopts_a_finished_run() -> None:
    """A store's graph: reads, exports and saved states between two begin() calls keep the
    communities the namespace had, however early the worker finishes (a search reads one set)."""
    slow = Slow()
    g = EntityGraph(background_min_edges=0, community_fn=slow, reads_adopt=False)
    g.add_many(NS, corpus().items())
    g.begin(NS)
    before = results(g)  # the first read submits the run and reads the placed communities
    placed = g.space(NS).communities()  # type: ignore[union-attr]
    assert slow.started.wait(WAIT)
    slow.release.set()
    deadline = time.monotonic() + WAIT
    while g.pending() and time.monotonic() < deadline:  # the run ends "during the search"
        time.sleep(0.001)
    assert g.pending() == []
    assert results(g) == before  # the reads after it still see the placed communities
    assert g.export(NS) is not None and g.namespace_state(NS) is not None
    assert g.space(NS).communities() == placed and g.generation(NS) == 0  # type: ignore[union-attr]
    g.begin(NS)  # the next search
    assert g.generation(NS) == 1 and results(g) == results(inline()) != before
    assert slow.calls == 1


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="background_min_edges"):
        EntityGraph(background_min_edges=-1)


def _two_topics() -> nx.Graph:
    g = nx.Graph()
    for block in (["apple", "banana", "cherry", "date"], ["argon", "xenon", "yttrium", "zinc"]):
        g.add_weighted_edges_from((a, b, 3) for i, a in enumerate(block) for b in block[i + 1 :])
    g.add_edge("date", "xenon", weight=1)
    return g


@pytest.mark.parametrize("igraph", [True, False])
def test_louvain_backends_find_the_topics(monkeypatch: pytest.MonkeyPatch, igraph: bool) -> None:
    if not igraph:  # the networkx fallback, as without igraph installed
        monkeypatch.setitem(__import__("sys").modules, "igraph", None)
    g = _two_topics()
    groups = sorted(sorted(c) for c in louvain_communities(g, 42))
    assert groups == [["apple", "banana", "cherry", "date"], ["argon", "xenon", "yttrium", "zinc"]]
    bigger = nx.relabel_nodes(nx.les_miserables_graph(), str)
    runs = [sorted(sorted(c) for c in louvain_communities(bigger, 7)) for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0]) > 3  # deterministic for a seed
    assert nx.community.modularity(bigger, runs[0], weight="weight") > 0.5


def test_default_backend_is_looked_up_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def spy(graph: nx.Graph, seed: int) -> Iterable[Iterable[str]]:
        seen.append(seed)
        return [set(graph.nodes)]

    monkeypatch.setattr(entity_graph_mod, "louvain_communities", spy)
    g = inline()
    assert len(set(g.communities(NS).values())) == 1 and seen == [g.seed]
