"""The bridge step: its personalised PageRank against a direct solve, and the stage in ``rank``.

Tiny hand-made graphs (memories and their entities), no models: a memory that links the
query's entity to a second entity rises, the filter and hubs stop the walk, a table that
holds only candidates grows by the bridge memories exactly as a whole-namespace table ranks
them, and nothing outside the namespace's graph can join.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from norax_core.config import NoraxConfig
from norax_core.errors import InvalidInputError
from norax_core.models import SIGNALS
from norax_core.ranking import NEVER, Plan, Table, rank, signal_ranks
from norax_core.signals.context import neighbour_map
from norax_core.signals.entity_graph import EntityGraph
from norax_core.stages.bridges import (
    HUB_FRACTION,
    MIN_HUB_DF,
    BridgeInput,
    MemoryEntities,
    best_rows,
    bridge_scores,
)
from norax_core.stages.walk import MAX_ITER, TOL
from norax_core.weights import Weights


def _graph(ents: list[list[int]], ids: list[str] | None = None) -> MemoryEntities:
    ids = ids or [f"m{i}" for i in range(len(ents))]
    rows = np.array([r for r, es in enumerate(ents) for _ in es], np.int64)
    flat = np.array([e for es in ents for e in es], np.int64)
    n_ents = int(flat.max()) + 1 if len(flat) else 0
    return MemoryEntities(
        rows, flat, len(ents), n_ents, ids, {m: r for r, m in enumerate(ids)}, len(ents)
    )


def _solve(
    g: MemoryEntities,
    seeds: np.ndarray,
    weights: np.ndarray,
    query: np.ndarray,
    damping: float = 0.5,
    seed_gain: bool = False,
    skip_query: bool = False,
) -> np.ndarray:
    """The same walk by a direct linear solve of the PageRank equations (dense matrices)."""
    n, e = g.n_rows, g.n_ents
    df = np.bincount(g.ents, minlength=e).astype(float)
    hub = df > max(HUB_FRACTION * g.size, MIN_HUB_DF)
    idf = np.log1p((g.size - df + 0.5) / (df + 0.5))
    left_out = hub | (df < 2) if seed_gain else hub.copy()
    q_set = {x for x in np.unique(query).tolist() if not left_out[x] and df[x] > 0}
    if skip_query:
        left_out[list(q_set)] = True
    trans = np.zeros((n + e, n + e))  # trans[to, from]
    for r, x in zip(g.rows.tolist(), g.ents.tolist(), strict=True):
        if not left_out[x]:
            trans[n + x, r] = idf[x]
            trans[r, n + x] = 1.0
    out = trans.sum(axis=0)
    trans[:, out > 0] /= out[out > 0]
    p = np.zeros(n + e)
    p[seeds] = weights
    p[:n] /= p[:n].sum()  # the seeds' weights are positive: no restart on the query
    dangling = out == 0
    m = trans + np.outer(p, dangling)
    pi = np.linalg.solve(np.eye(n + e) - damping * m, (1 - damping) * p)
    walk = pi[:n].copy()
    if seed_gain:  # what each memory receives beyond its own restart mass
        restart = 1 - damping + damping * pi[:n][dangling[:n]].sum()
        walk = np.maximum(walk - restart * p[:n], 0.0)
    else:
        walk[seeds] = 0.0
    return walk / walk.max() if walk.max() > 0 else walk


@pytest.mark.parametrize("seed", range(12))
def test_bridge_scores_equal_a_direct_solve_of_the_pagerank_equations(seed: int) -> None:
    rng = random.Random(seed)
    n, e = rng.randrange(3, 40), rng.randrange(2, 30)
    ents = [rng.sample(range(e), rng.randrange(0, min(e, 6))) for _ in range(n)]
    ents[0] = ents[0] or [0]
    g = _graph(ents)
    seeds = np.array(sorted(rng.sample(range(n), rng.randrange(1, min(n, 5) + 1))))
    weights = np.array([rng.uniform(0.1, 1.0) for _ in seeds])
    query = np.array(rng.sample(range(g.n_ents), min(2, g.n_ents)))
    got = bridge_scores(g, seeds, weights, query)
    want = _solve(g, seeds, weights, query)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert got.min() >= 0 and got.max() <= 1
    assert (got[seeds] == 0).all()


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(("seed_gain", "skip_query"), [(True, False), (False, True), (True, True)])
def test_seed_gain_and_skip_query_equal_the_direct_solve(
    seed: int, seed_gain: bool, skip_query: bool
) -> None:
    rng = random.Random(seed)
    n, e = rng.randrange(3, 40), rng.randrange(2, 30)
    ents = [rng.sample(range(e), rng.randrange(0, min(e, 6))) for _ in range(n)]
    ents[0] = ents[0] or [0]
    g = _graph(ents)
    seeds = np.array(sorted(rng.sample(range(n), rng.randrange(1, min(n, 5) + 1))))
    weights = np.array([rng.uniform(0.1, 1.0) for _ in seeds])
    query = np.array(rng.sample(range(g.n_ents), min(2, g.n_ents)))
    got = bridge_scores(g, seeds, weights, query, seed_gain=seed_gain, skip_query=skip_query)
    want = _solve(g, seeds, weights, query, seed_gain=seed_gain, skip_query=skip_query)
    np.testing.assert_allclose(got, want, atol=1e-5)


def _plain(
    g: MemoryEntities,
    seeds: np.ndarray,
    weights: np.ndarray,
    query: np.ndarray,
    allowed: np.ndarray | None,
    damping: float,
    seed_gain: bool,
    skip_query: bool,
) -> np.ndarray:
    """The same walk by the plain power iteration: memories and entities in one vector, every
    step along both directions' pairs, the dangling memories' mass measured at each step."""
    n, e = g.n_rows, g.n_ents
    keep = np.ones(len(g.rows), bool) if allowed is None else allowed[g.rows]
    rows, ents = g.rows[keep], g.ents[keep]
    size = g.size if allowed is None else int(allowed.sum())
    df = np.bincount(ents, minlength=e).astype(float)
    hub = df > max(HUB_FRACTION * size, MIN_HUB_DF)
    rows, ents = rows[~hub[ents]], ents[~hub[ents]]
    df = np.bincount(ents, minlength=e).astype(float)
    idf = np.log1p((size - df + 0.5) / (df + 0.5))
    p = np.zeros(n + e)
    ok = (weights > 0) & (seeds >= 0)
    if allowed is not None:
        ok &= allowed[np.maximum(seeds, 0)]
    np.add.at(p, seeds[ok], weights[ok])
    walked = df[ents] > 1 if seed_gain else np.ones(len(ents), bool)
    follows = set(ents[walked].tolist())
    q = sorted({x for x in query.tolist() if 0 <= x < e and x in follows})
    if skip_query:
        walked &= ~np.isin(ents, q)
    else:
        p[[n + x for x in q]] = idf[q]
    rows, ents = rows[walked], ents[walked]
    if p.sum() <= 0 or not len(rows):
        return np.zeros(n)
    p[n:] = 0.0 if p[:n].sum() > 0 else p[n:]
    p /= p.sum()
    strength = np.bincount(rows, weights=idf[ents], minlength=n)
    src, dst = np.concatenate([rows, n + ents]), np.concatenate([n + ents, rows])
    share = np.concatenate([idf[ents] / strength[rows], 1.0 / df[ents]])
    dangling = strength == 0
    x, restart = p.copy(), 1.0 - damping
    for _ in range(MAX_ITER):
        new = np.bincount(dst, weights=damping * share * x[src], minlength=n + e)
        restart = 1.0 - damping + damping * x[:n][dangling].sum()
        new += restart * p
        change = np.abs(new - x).sum()
        x = new
        if change < TOL:
            break
    mass = x[:n].copy()
    if seed_gain:
        mass = np.maximum(mass - restart * p[:n], 0.0)
    else:
        mass[p[:n] > 0] = 0.0
    if allowed is not None:
        mass[~allowed] = 0.0
    return mass / mass.max() if mass.max() > 0 else np.zeros(n)


@pytest.mark.parametrize("seed", range(40))
def test_the_one_sided_iteration_equals_the_plain_power_iteration(seed: int) -> None:
    """Random graphs (hubs, memories without entities, private entities), filters, seeds
    without entities (their mass restarts), non-positive weights (the restart then on the
    query's entities), every damping: the same values as the plain iteration, to rounding
    (a different stopping step would differ by ~1e-7)."""
    rng = random.Random(seed)
    n = rng.choice([rng.randrange(2, 40), rng.randrange(60, 300)])
    e = rng.randrange(2, 60)
    ents = [rng.sample(range(e), rng.randrange(0, min(e, 6))) for _ in range(n)]
    if n > MIN_HUB_DF and rng.random() < 0.5:  # "user": in most memories, a hub
        ents = [es + [e] if rng.random() < 0.8 else es for es in ents]
    ents[0] = ents[0] or [0]
    g = _graph(ents)
    seeds = np.array(rng.sample(range(n), rng.randrange(1, min(n, 6) + 1)) + [-1])
    weights = np.array([rng.choice([rng.uniform(0.1, 1.0), 0.0, -0.2]) for _ in seeds])
    query = np.array([rng.randrange(-1, g.n_ents + 1) for _ in range(rng.randrange(0, 4))])
    allowed = None
    if rng.random() < 0.4:
        allowed = np.array([rng.random() < 0.7 for _ in range(n)])
    damping = rng.choice([0.5, 0.5, 0.3, 0.85])
    for seed_gain in (False, True):
        for skip_query in (False, True):
            got = bridge_scores(
                g, seeds, weights, query, allowed,
                damping=damping, seed_gain=seed_gain, skip_query=skip_query,
            )  # fmt: skip
            want = _plain(g, seeds, weights, query, allowed, damping, seed_gain, skip_query)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_seed_gain_lifts_a_seed_linked_to_a_better_seed_not_one_with_private_entities() -> None:
    # a (best seed): wallet=0 base=1; b (seed): base=1; c (seed): logo=2 only; d: wallet=0
    g = _graph([[0, 1], [1], [2], [0]], ["a", "b", "c", "d"])
    seeds, w, none = np.array([0, 1, 2]), np.array([1.0, 0.8, 0.9]), np.zeros(0, np.int64)
    assert bridge_scores(g, seeds, w, none)[:3].tolist() == [0.0, 0.0, 0.0]
    got = bridge_scores(g, seeds, w, none, seed_gain=True)
    assert got[1] > 0 and got[0] > 0  # a and b reach each other through base
    assert got[2] == 0.0  # its logo is in no other memory: the walk only came back to it


def test_skip_query_walks_around_the_query_entities() -> None:
    # the query names the tip jar (0); a and b mention it; a also names Lightning (1), as c does
    g = _graph([[0, 1], [0], [1]], ["a", "b", "c"])
    seeds, w, query = np.array([0]), np.array([1.0]), np.array([0])
    through = bridge_scores(g, seeds, w, query)
    assert through[1] > 0 and through[2] > 0
    around = bridge_scores(g, seeds, w, query, skip_query=True)
    assert around[1] == 0.0 and around[2] == 1.0


def test_a_memory_linking_the_query_entity_to_a_second_entity_rises() -> None:
    # colby=0 wallet=1 base=2 cat=3 fees=4 lunch=5
    g = _graph([[0, 1], [1, 2], [3], [2, 4], [5]], ["a", "b", "c", "d", "e"])
    got = bridge_scores(g, np.array([0]), np.array([1.0]), np.array([0]))
    # "b" shares the wallet with the seed; "d" is two hops away (via base); the rest: nothing
    assert got[1] == 1.0 and 0 < got[3] < got[1]
    assert got[2] == got[4] == got[0] == 0.0


def test_the_filter_stops_the_walk_and_its_results() -> None:
    g = _graph([[0], [0, 1], [1]], ["a", "b", "c"])  # a -x- b -y- c
    seeds, w, no_query = np.array([0]), np.array([1.0]), np.zeros(0, np.int64)
    open_ = bridge_scores(g, seeds, w, no_query)
    assert open_[1] > 0 and open_[2] > 0
    shut = bridge_scores(g, seeds, w, no_query, np.array([True, False, True]))
    assert shut.tolist() == [0.0, 0.0, 0.0]  # c was reachable only through b


def test_hub_entities_do_not_carry_the_walk() -> None:
    n = MIN_HUB_DF + 10  # every memory mentions entity 0 ("user"); only m1 shares entity 1
    ents = [[0, 1]] + [[0, 1]] + [[0, 2 + i] for i in range(n - 2)]
    got = bridge_scores(_graph(ents), np.array([0]), np.array([1.0]), np.zeros(0, np.int64))
    assert got[1] == 1.0 and got[2:].max() == 0.0


def test_best_rows_breaks_ties_by_id_and_skips_zeros() -> None:
    ids = ["d", "c", "b", "a", "e"]
    got = best_rows(np.array([0.5, 0.5, 0.0, 0.5, 0.9]), 3, ids)
    assert [ids[r] for r in got] == ["e", "a", "c"]
    assert best_rows(np.zeros(3), 2, ids[:3]).tolist() == []


@pytest.mark.parametrize("seed", range(20))
def test_best_rows_is_a_stable_sort_by_score_then_id(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(0, 60)
    score = np.array([rng.choice([0.0, 0.5, 1.0, rng.random(), -0.1]) for _ in range(n)])
    ids = [rng.choice([None, "a", "b", f"m{i}"]) for i in range(n)]
    k = rng.randrange(0, 15)
    positive = [r for r in range(n) if score[r] > 0]
    want = sorted(positive, key=lambda r: (-score[r], ids[r] or ""))[:k]
    assert best_rows(score, k, ids).tolist() == want


def test_the_view_of_a_namespace_holds_only_that_namespace() -> None:
    eg = EntityGraph()
    eg.add_many("one", [("a", ["colby", "wallet"]), ("b", ["wallet", "base"])])
    eg.add_many("two", [("x", ["wallet", "base"]), ("y", ["base", "fees"])])
    space = eg.space("one")
    assert space is not None
    view: MemoryEntities = space.memo("bridges", MemoryEntities.of)
    assert set(view.row_of) == {"a", "b"} and view.size == 2
    walk = bridge_scores(view, view.rows_for(["a"]), np.array([1.0]), np.zeros(0, np.int64))
    assert [view.ids[r] for r in best_rows(walk, 10, view.ids)] == ["b"]
    assert space.memo("bridges", MemoryEntities.of) is view  # cached until the graph changes
    eg.add("one", "c", ["base"])
    assert space.memo("bridges", MemoryEntities.of) is not view


# -- the stage in rank ---------------------------------------------------------------------

IDS = ["a", "b", "c", "d", "e", "f"]
#   a: colby + wallet, the best first-pass hit;  b: wallet + base, the decision (few words
#   in common with the query);  c, d, e, f: distractors with other entities
ENTS = [[0, 1], [1, 2], [3], [4], [5], [6]]
DENSE = [0.9, 0.2, 0.5, 0.45, 0.4, 0.35]
CREATED = [0.0, 5.0, 1.0, 2.0, 3.0, 4.0]  # timeline a, c, d, e, f, b: b is nobody's context of a
TIMELINE = sorted(IDS, key=lambda m: CREATED[IDS.index(m)])


def _plan(bridge: float, context: bool = False) -> Plan:
    return Plan(
        weights=(0.0, 1.0, 0.0, 0.0),
        pool_min=4,
        pool_factor=1,
        recency_candidates=0,
        context_window=1 if context else 0,
        context_weight=0.5 if context else 0.0,
        context_gap=10.0,
        bridge_weight=bridge,
        bridge_seeds=1,
        bridge_candidates=2,
    )


def _whole_table(graph: MemoryEntities) -> Table:
    """A benchmark-style table: every memory of the namespace is a row."""
    n = len(IDS)
    scores = np.zeros((len(SIGNALS), 1, n))
    scores[SIGNALS.index("dense"), 0] = DENSE
    valid = np.ones((1, n), bool)
    return Table(
        scores=scores,
        proposed=np.stack([signal_ranks(scores[j], valid, None, s) for j, s in enumerate(SIGNALS)]),
        valid=valid,
        tie=None,
        size=np.array([n]),
        created=np.array([CREATED]),
        neighbours=lambda w, gap: _slots(IDS, w),
        ids=[IDS],
        entities=[BridgeInput(graph, graph.rows_for(IDS), np.zeros(0, np.int64))],
    )


def _slots(ids: list[str], window: int) -> list[np.ndarray]:
    """Neighbour slots of ``ids`` on the timeline, one second apart."""
    near = neighbour_map(TIMELINE, sorted(CREATED), window, 10.0)
    out = np.full((2 * window, 1, len(ids)), len(ids), np.int64)
    for r, m in enumerate(ids):
        found = [ids.index(x) for x in near.get(m, ()) if x in ids]
        out[: len(found), 0, r] = found
    return list(out)


def _search_table(graph: MemoryEntities, ids: list[str]) -> Table:
    """A search-style table: only ``ids`` are rows; ``extend`` adds rows (and logs them)."""
    rows = [IDS.index(m) for m in ids]
    n = len(ids)
    scores = np.zeros((len(SIGNALS), 1, n))
    scores[SIGNALS.index("dense"), 0] = [DENSE[r] for r in rows]
    proposed = np.full((len(SIGNALS), 1, n), NEVER, np.int32)
    order = sorted(range(len(IDS)), key=lambda r: -DENSE[r])
    for p, r in enumerate(order):
        if IDS[r] in ids:
            proposed[SIGNALS.index("dense"), 0, ids.index(IDS[r])] = p
    tie = np.empty(n, np.int64)
    tie[sorted(range(n), key=ids.__getitem__)] = np.arange(n)
    return Table(
        scores=scores,
        proposed=proposed,
        valid=np.ones((1, n), bool),
        tie=tie[None, :],
        size=np.array([len(IDS)]),
        created=np.array([[CREATED[r] for r in rows]]),
        neighbours=lambda w, gap: _slots(ids, w),
        ids=[ids],
        entities=[BridgeInput(graph, graph.rows_for(ids), np.zeros(0, np.int64))],
    )


@pytest.mark.parametrize("context", [False, True])
def test_the_stage_lifts_the_bridge_memory_into_the_top_k(context: bool) -> None:
    graph = _graph(ENTS, IDS)
    off = rank(_whole_table(graph), _plan(0.0, context), 3)
    on = rank(_whole_table(graph), _plan(0.5, context), 3)
    assert "b" not in off.ids(0)
    assert on.ids(0)[:2] == ["a", "b"]
    b = IDS.index("b")
    parts = on.explain(0, b)
    assert parts["bridges"] == pytest.approx(0.5) and parts["latest_wins"] == 0.0
    assert sum(parts.values()) == pytest.approx(float(on.score[0, b]))
    assert off.explain(0, IDS.index("a"))["bridges"] == 0.0


@pytest.mark.parametrize("context", [False, True])
def test_a_table_of_candidates_grows_by_the_bridge_memories_as_the_whole_one_ranks(
    context: bool,
) -> None:
    graph = _graph(ENTS, IDS)
    asked: list[list[str]] = []

    def extend(t: Table, wanted: np.ndarray, add: object = ()) -> Table:
        have = list(t.ids[0]) if t.ids else []
        near = {IDS[r] for r in np.flatnonzero(wanted[0])}
        extra = [x for m in near for x in _neighbours_of(m) if x not in have]
        extra += [m for m in (add[0] if add else ()) if m not in have]  # type: ignore[index]
        if add:
            asked.append(list(add[0]))  # type: ignore[index]
        return _search_table(graph, have + list(dict.fromkeys(extra)))

    plan = _plan(0.5, context)
    whole = rank(_whole_table(graph), plan, 3)
    start = ["a", "c", "d", "e"]  # what dense proposes with a pool of 4: not b
    part = rank(_search_table(graph, start), plan, 3, extend)
    assert asked and "b" in asked[0]
    assert part.ids(0) == whole.ids(0)
    got = [float(part.score[0, r]) for r in part.top(0)]
    assert got == pytest.approx([float(whole.score[0, r]) for r in whole.top(0)], abs=1e-12)
    with pytest.raises(ValueError, match="extend"):
        rank(_search_table(graph, start), plan, 3)


def _neighbours_of(m: str) -> list[str]:
    i = TIMELINE.index(m)
    return [TIMELINE[j] for j in (i - 1, i + 1) if 0 <= j < len(TIMELINE)]


def test_bridge_parameters_are_validated() -> None:
    with pytest.raises(InvalidInputError, match="bridge_weight"):
        NoraxConfig(bridge_weight=-0.1)
    with pytest.raises(InvalidInputError, match="bridge_seeds"):
        NoraxConfig(bridge_seeds=0)
    with pytest.raises(InvalidInputError, match="bridge_seed_gain"):
        NoraxConfig(bridge_seed_gain=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="bridge_skip_query"):
        NoraxConfig(bridge_skip_query="yes")  # type: ignore[arg-type]
    plan = Plan.of(Weights(1, 0, 0, 0, params={"bridge_weight": 0.3}), NoraxConfig())
    assert plan.bridge_weight == 0.3 and NoraxConfig().bridge_weight == 0.0
