"""The views a namespace's first search builds, built the cheap way, equal the plain builds.

A namespace restored from a snapshot builds some views at its first search: the entity
incidence (:class:`~norax_core.signals.entity_graph.Incidence`, read from the restored CSR
arrays), the entity document frequencies (synced at the restore), the time order
(:meth:`~norax_core.signals.temporal._Namespace.ordered`, one ``lexsort``) and the positions
in sessions (:func:`~norax_core.signals.context.session_positions`, vectorised). Each is
compared here with the plain construction on random inputs, ties and free slots included, as
are the supersession tokens of a search's candidates, decoded row by row from the restored
arrays (:func:`~norax_core.supersession._row_strs`). A search reads the time order as arrays
(:meth:`~norax_core.signals.temporal._Namespace.view`): its neighbours and session positions
are compared with those of the plain lists, writes in between.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from norax_core.signals.context import (
    neighbour_map,
    session_numbers,
    session_positions,
    session_split,
)
from norax_core.signals.entity_graph import Incidence, NamespaceGraph
from norax_core.signals.graph_arrays import from_arrays, to_arrays
from norax_core.signals.temporal import (
    TemporalSignal,
    _Namespace,
    view_neighbours,
    view_positions,
    view_sessions,
)
from norax_core.supersession import _flat, _nested, _row_strs


def random_graph(seed: int) -> NamespaceGraph:
    """Adds, replaces and removes (freed rows, freed and reused entity ids)."""
    rng = random.Random(seed)
    g = NamespaceGraph()
    for step in range(600):
        mid = f"m{rng.randrange(250)}"
        if rng.random() < 0.2:
            g.remove(mid)
        else:
            g.add(mid, [f"e{rng.randrange(120)}" for _ in range(rng.randrange(0, 8))])
        if step % 97 == 0:
            _ = g.df  # sync now and then: some stale ids left at the snapshot, some not
    return g


def plain_incidence(g: NamespaceGraph) -> Incidence:
    rows = [r for r, es in enumerate(g.ents) for _ in es]
    ents = [e for es in g.ents for e in es]
    row_ptr = np.cumsum([0, *map(len, g.ents)])
    ent_rows = [r for _, r in sorted(zip(ents, rows, strict=True), key=lambda p: p[0])]
    ent_ptr = np.cumsum([0, *np.bincount(np.array(ents, np.int64), minlength=len(g.names))])
    return Incidence(
        np.array(rows, np.int64),
        np.array(ents, np.int64),
        row_ptr,
        ent_ptr,
        np.array(ent_rows, np.int64),
    )


def same(a: Incidence, b: Incidence) -> None:
    for name in ("rows", "ents", "row_ptr", "ent_ptr", "ent_rows"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == np.int64 and x.tolist() == y.tolist(), name


@pytest.mark.parametrize("seed", range(6))
def test_restored_incidence_and_df_equal_the_plain_builds(seed: int) -> None:
    live = random_graph(seed)
    restored = from_arrays(*to_arrays(live))
    assert "_ents_csr" in restored.__dict__  # read from the arrays, not from the tuples
    assert "ents" not in restored.__dict__  # built at first use
    assert [restored.row_ents(r) for r in range(len(live.ids))] == [list(e) for e in live.ents]
    same(restored.incidence(), plain_incidence(live))
    again = from_arrays(*to_arrays(restored))  # re-saved from the arrays: the same graph
    assert again.ents == live.ents and "ents" not in restored.__dict__
    if seed % 2:
        assert restored.ents == live.ents  # the tuples, built from the arrays
    same(Incidence.of(live), plain_incidence(live))
    assert restored.df.tolist() == live.df.tolist()
    rng = random.Random(seed + 50)
    for _ in range(5):  # a write drops the arrays: the incidence is the tuples' again
        mid, drop = f"m{rng.randrange(250)}", rng.random() < 0.5
        for g in (live, restored):
            if drop:
                g.remove(mid)
            else:
                g.add(mid, ["e1", f"new{seed}"])
        assert "_ents_csr" not in restored.__dict__
        same(restored.incidence(), plain_incidence(live))
        assert restored.df.tolist() == live.df.tolist()


def test_empty_graph_incidence() -> None:
    g = from_arrays(*to_arrays(NamespaceGraph()))
    same(g.incidence(), plain_incidence(NamespaceGraph()))


def timeline(seed: int, nan: bool = False) -> _Namespace:
    """Slots with shared times, shared sequence numbers, dead slots (and NaN times)."""
    rng = random.Random(seed)
    ns = _Namespace()
    for i in range(300):
        t = float(rng.choice([0.0, -0.0, 1.0, 2.5, 1e9, math.inf, rng.uniform(0, 10)]))
        if nan and rng.random() < 0.05:
            t = math.nan
        ns.add(f"id{rng.randrange(400):03d}", t, 0, rng.choice([0, 1, 2, i]))
    for _ in range(40):
        m = f"id{rng.randrange(400):03d}"
        if m in ns.slot:
            ns.remove(m)
    return ns


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("nan", [False, True])
def test_time_order_equals_the_tuple_sort(seed: int, nan: bool) -> None:
    ns = timeline(seed, nan)
    ts, seq, names = ns.ts.tolist(), ns.seq.tolist(), ns.ids
    live = np.flatnonzero(ns.alive[: ns.n]).tolist()
    order = sorted(live, key=lambda i: (ts[i], seq[i], names[i]))
    ordered, times, pos, seqs = ns.ordered()
    assert ordered == [names[i] for i in order]
    assert [repr(t) for t in times] == [repr(ts[i]) for i in order]  # -0.0 and NaN kept
    assert seqs == [seq[i] for i in order]
    assert pos == {m: j for j, m in enumerate(ordered)}


def timeline_reads(
    ns: _Namespace, ids: list[str], window: int, gap: float
) -> tuple[dict[str, tuple[str, ...]], list[int], list[int]]:
    """Neighbours, session positions and sessions read from :meth:`_Namespace.ordered`'s lists."""
    ordered, times, pos, _ = ns.ordered()
    with np.errstate(invalid="ignore"):  # inf - inf
        number, at = session_split(times, gap)
    near = neighbour_map(ordered, times, window, gap, wanted=ids, pos=pos)
    sessions = [number[pos[m]] if m in pos else -1 - i for i, m in enumerate(ids)]
    return near, [at[pos[m]] if m in pos else -1 for m in ids], sessions


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("kept", [False, True])
def test_view_reads_equal_the_timeline_reads(seed: int, nan: bool, kept: bool) -> None:
    """Neighbours and positions read from the arrays equal those of the lists, writes between.

    ``kept``: the lists exist first (the view then takes their order, appends included).
    """
    rng = random.Random(seed)
    ns = timeline(seed, nan)
    for step in range(4):
        if kept:
            ns.ordered()
        ids = [f"id{rng.randrange(420):03d}" for _ in range(60)]  # unknown and dead ids too
        for window in (1, 2, 3):
            for gap in (0.0, 1.0, 5.0, math.inf, math.nan):
                near, positions, sessions = timeline_reads(ns, ids, window, gap)
                assert view_neighbours(ns, ids, window, gap) == near
                got = view_positions(ns, ids, gap)
                assert got == positions and all(type(x) is int for x in got)
                got = view_sessions(ns, ids, gap)
                assert got == sessions and all(type(x) is int for x in got)
        t = max(ns.ts[: ns.n].tolist() + [0.0]) + rng.choice([0.0, 1.0])  # appends mostly
        for i in range(rng.randrange(1, 5)):
            ns.add(f"new{step}-{i}", t, 0, 10_000 + i)
        if step == 2:
            ns.add(f"id{rng.randrange(400):03d}", rng.uniform(0, 10), 0, 5)  # a replace


def test_the_view_is_no_part_of_a_snapshot_layout() -> None:
    """A new namespace has no view attribute: ``snapshots.layout()`` lists them."""
    ns = timeline(0)
    ns.view()
    assert {"_view", "derived"} <= set(vars(ns))
    assert not {"_view", "derived"} & set(vars(_Namespace()))
    ns.add("later", 1.0, 0, 1)
    assert not {"_view", "derived"} & set(vars(ns))


def test_signal_reads_the_view_as_the_filtered_lists() -> None:
    """``neighbours`` and ``session_positions`` unfiltered equal the filtered (list) path."""
    sig = TemporalSignal(lambda kind: 30.0)
    rng = random.Random(3)
    for i in range(200):
        sig.add("ns", f"m{i:03d}", float(rng.choice([0, 10, 4000, 9000]) + i), "fact", i % 7)
    sig.remove("ns", "m010")
    ids = [f"m{i:03d}" for i in range(0, 210, 3)]
    every = sig.ids("ns")
    for window, gap in ((1, 60.0), (2, 3600.0), (3, 0.0)):
        assert sig.neighbours("ns", ids, window, gap) == sig.neighbours(
            "ns", ids, window, gap, allowed=every
        )
        assert sig.session_positions("ns", ids, gap) == sig.session_positions(
            "ns", ids, gap, allowed=every
        )
        assert sig.sessions("ns", ids, gap) == sig.sessions("ns", ids, gap, allowed=every)
    assert sig.session_positions("none", ids[:2], 1.0) == [-1, -1]
    empty = TemporalSignal(lambda kind: 30.0)
    empty.add("ns", "a", 1.0, "fact")
    empty.remove("ns", "a")
    assert empty.session_positions("ns", ["a"], 1.0) == [-1]
    assert empty.neighbours("ns", ["a"], 2, 1.0) == {}
    assert empty.sessions("ns", ["a", "b"], 1.0) == [-1, -2]


def loop_positions(times: list[float], gap: float) -> list[int]:
    out: list[int] = []
    prev = -1
    for s in session_numbers(times, gap):
        out.append(out[-1] + 1 if s == prev else 0)
        prev = s
    return out


@pytest.mark.parametrize("seed", range(10))
def test_session_positions_equal_the_loop(seed: int) -> None:
    rng = random.Random(seed)
    steps = [0.0, 5.0, 3600.0, 7200.0, 1e5]
    times = sorted(rng.choice(steps) + i for i in range(rng.randrange(0, 60)))
    if seed % 3 == 0 and times:
        times[len(times) // 2] = math.nan
    for gap in (0.0, 10.0, 3600.0, math.inf):
        got = session_positions(times, gap)
        assert got == loop_positions(times, gap)
        assert all(type(x) is int for x in got)
        numbers, positions = session_split(times, gap)
        assert numbers == session_numbers(times, gap) and positions == got
        assert all(type(x) is int for x in numbers)


def nested(seed: int, nul: bool) -> dict[str, np.ndarray]:
    """A nested string array as the supersession snapshot writes it (rows may be empty)."""
    rng = random.Random(seed)
    alphabet = ["a", "bb", "", "é", "日本", "x y", "ü-1"]
    rows = [[rng.choice(alphabet) for _ in range(rng.randrange(0, 5))] for _ in range(80)]
    if not nul and rows and rows[-1]:
        rows[-1][0] += "\0"  # a string holding NUL: written with offsets
    elif not nul:
        rows.append(["\0"])
    return _nested("tokens", rows)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("nul", [True, False])
def test_row_strings_equal_the_flat_unpack(seed: int, nul: bool) -> None:
    arrays = nested(seed, nul)
    assert (arrays["tokens_o"].tolist()[0] == -1) is nul
    flat, cuts = _flat(arrays, "tokens")
    row = _row_strs(arrays, "tokens")
    for i in range(len(cuts) - 1):
        assert row(i) == flat[cuts[i] : cuts[i + 1]]


def test_row_strings_of_no_strings_and_misfits() -> None:
    row = _row_strs(_nested("tokens", [[], [], []]), "tokens")
    assert [row(i) for i in range(3)] == [[], [], []]
    arrays = _nested("tokens", [["a", "b"], ["c"]])
    bad = {**arrays, "tokens_ptr": np.array([0, 2, 4], np.int64)}
    with pytest.raises(ValueError):
        _row_strs(bad, "tokens")
    with pytest.raises(ValueError):
        _row_strs({**arrays, "tokens_o": np.array([-1, 4], np.int64)}, "tokens")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("frees", [False, True])
def test_restored_postings_and_edges_equal_the_thawed_ones(seed: int, frees: bool) -> None:
    """Read from the arrays (entity ids in order: no position map) or thawed into sets and
    dicts, an entity's rows and neighbours come out the same, in the same order."""
    if frees:
        live = random_graph(seed)  # freed (and reused) entity ids: a position map
    else:
        live = NamespaceGraph()
        rng = random.Random(seed)
        for i in range(200):
            live.add(f"m{i}", [f"e{rng.randrange(60)}" for _ in range(rng.randrange(0, 6))])
    arrays = to_arrays(live)
    lazy, thawed = from_arrays(*arrays), from_arrays(*arrays)
    assert (lazy.__dict__["_gcsr"][0] is None) is not frees
    _ = thawed.post  # thaws
    assert "_gcsr" in lazy.__dict__ and "_gcsr" not in thawed.__dict__
    assert thawed.post == live.post and thawed.adj == live.adj
    for e in live.eid.values():
        assert lazy.rows_of(e).tolist() == thawed.rows_of(e).tolist()
        for x, y in zip(lazy.neighbours(e), thawed.neighbours(e), strict=True):
            assert x.tolist() == y.tolist()
    names = list(live.eid)
    for a, b in zip(names, names[1:], strict=False):
        assert lazy.linked(a, b) == live.linked(a, b)
    assert "_gcsr" in lazy.__dict__  # a search's reads never thaw
