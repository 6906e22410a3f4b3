"""The graph side's caches follow writes: a warm graph answers exactly as a fresh one.

:class:`~norax_core.signals.graph.GraphSignal` keeps per-query tables, and a namespace graph
keeps derived views until it changes (its incidence arrays, each entity's best neighbours and
each seed's neighbourhood, the bridge stage's walks). After every write, every read of a graph
that has been read before (all those caches warm) must equal, bit for bit, the reads of a
graph that replayed the same writes without reading in between (no cache at all).
"""

from __future__ import annotations

import numpy as np
import pytest

from norax_core.signals.base import Query
from norax_core.signals.entity_graph import EntityGraph, NamespaceGraph
from norax_core.signals.graph import GraphSignal
from norax_core.signals.graph_arrays import from_arrays, to_arrays
from norax_core.stages.bridges import MemoryEntities, bridge_scores

NS = "ns"
Op = tuple[str, str, tuple[str, ...]]


def corpus(seed: int, n: int = 300, vocab: int = 90) -> list[Op]:
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    return [
        ("add", f"m{i}", tuple(f"e{x}" for x in rng.choice(vocab, rng.integers(1, 7), p=p)))
        for i in range(n)
    ]


def writes(seed: int) -> list[Op]:
    """Adds of new and known entities, replaces, deletes (some freeing an entity), re-adds."""
    rng = np.random.default_rng(seed + 100)
    out: list[Op] = [
        ("add", "new0", ("e3", "fresh-a", "e40")),
        ("add", "m5", ("e1", "fresh-b")),  # a replace
        ("remove", "m7", ()),
        ("add", "new1", ("fresh-a", "fresh-b", "e2")),
        ("remove", "new0", ()),
        ("remove", "new1", ()),  # fresh-a has no memory left: its id is freed
        ("add", "new2", ("fresh-c", "e3")),  # and reused
        ("add", "m7", ("e3", "e1", "e0")),  # a re-add of a deleted id (a freed row)
    ]
    for i in range(6):
        mid = f"m{int(rng.integers(0, 300))}"
        out.append(("remove", mid, ()) if i % 2 else ("add", mid, ("e3", f"e{i + 50}")))
    return out


def apply(g: EntityGraph, op: Op) -> None:
    kind, mid, ents = op
    if kind == "add":
        g.add(NS, mid, list(ents))
    else:
        g.remove(NS, mid)


def make() -> EntityGraph:
    # Communities recomputed at every read after a change (in the caller's thread): a warm
    # and a fresh graph hold the same ones whenever they were read.
    return EntityGraph(refresh_fraction=0.0, background_min_edges=10**9)


QUERIES = [("e0",), ("e3", "e1"), ("e2", "fresh-b"), ("fresh-c",), ("e40", "e12", "e0")]


def reads(g: EntityGraph, sig: GraphSignal, ids: list[str]) -> list[object]:
    out: list[object] = []
    space = g.space(NS)
    assert space is not None
    graph = space.memo("bridges", MemoryEntities.of)
    for ents in QUERIES:
        q = Query(text="", namespace=NS, now=0.0, entities=ents)
        allowed = frozenset(ids[::3])
        fq = Query(text="", namespace=NS, now=0.0, entities=ents, allowed=allowed)
        out += [sig.top(q, 20), sig.score(q, ids), sig.explain(q, ids)]
        out += [sig.top(fq, 20), sig.score(fq, ids)]
        seeds = graph.rows_for(ids[:5])
        query = np.array([space.eid[e] for e in ents if e in space.eid], np.int64)
        for gain, skip in ((False, False), (True, True), (True, False), (False, True)):
            walk = bridge_scores(
                graph, seeds, np.linspace(1.0, 0.2, 5), query, seed_gain=gain, skip_query=skip
            )
            out.append(walk.tobytes())
    return out


def replayed(ops: list[Op]) -> EntityGraph:
    g = make()
    for op in ops:
        apply(g, op)
    return g


@pytest.mark.parametrize("seed", [0, 1])
def test_reads_after_each_write_equal_a_fresh_graph(seed: int) -> None:
    done = corpus(seed)
    warm = replayed(done)
    sig = GraphSignal(warm)
    ids = [f"m{i}" for i in range(300)] + ["new0", "new1", "new2"]
    reads(warm, sig, ids)  # every cache warm
    for op in writes(seed):
        apply(warm, op)
        done.append(op)
        fresh = replayed(done)
        assert reads(warm, sig, ids) == reads(fresh, GraphSignal(fresh), ids), op


def test_a_graph_restored_from_arrays_follows_writes() -> None:
    done = corpus(3)
    live = replayed(done)
    live.space(NS)  # communities placed
    exported = live.export(NS)
    assert exported is not None
    meta, arrays = to_arrays(exported[0])
    restored = make()
    space: NamespaceGraph = from_arrays(meta, arrays)
    restored.restore(NS, (space, exported[1]))
    sig = GraphSignal(restored)
    ids = [f"m{i}" for i in range(300)] + ["new0", "new1", "new2"]
    assert reads(restored, sig, ids) == reads(live, GraphSignal(live), ids)
    for op in writes(3):
        apply(restored, op)
        apply(live, op)
        assert reads(restored, sig, ids) == reads(live, GraphSignal(live), ids), op


def test_a_recreated_namespace_misses_the_old_caches() -> None:
    g = make()
    sig = GraphSignal(g)
    for op in corpus(4, n=60):
        apply(g, op)
    ids = [f"m{i}" for i in range(60)]
    reads(g, sig, ids)
    for mid in ids:
        g.remove(NS, mid)
    assert g.space(NS) is None
    again = corpus(5, n=60)
    for op in again:
        apply(g, op)
    assert reads(g, sig, ids) == reads(replayed(again), GraphSignal(replayed(again)), ids)


def test_query_matching_follows_writes() -> None:
    g = make()
    g.add(NS, "a", ["colby"])
    text = "Did Colby fly to New York with the wallets?"
    assert g.match_query(NS, text) == ["colby"]
    g.add(NS, "b", ["new york", "wallet"])
    assert g.match_query(NS, text) == ["colby", "new york", "wallet"]
    g.remove(NS, "b")
    assert g.match_query(NS, text) == ["colby"]
