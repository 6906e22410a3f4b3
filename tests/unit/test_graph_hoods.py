"""The kept neighbourhoods (signals/graph_hoods.py) against the plain computation.

``plain_tables`` builds a query's neighbourhood, edges and scores from scratch, entity by
entity, as :class:`GraphSignal` did before its per-seed blocks: the kept blocks, the one-seed
edges and the per-version IDFs must give the same tables bit for bit.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from test_graph import random_corpus

from norax_core.signals.entity_graph import EntityGraph, NamespaceGraph
from norax_core.signals.graph import GraphConfig, GraphSignal, personalized_pagerank

NS = "ns"
CONFIGS = [
    GraphConfig(),
    GraphConfig(min_hub_df=5, hub_fraction=0.05),  # several hubs, as seeds and neighbours
    GraphConfig(neighbours=3, second_hop=2, community=0.0),
    GraphConfig(neighbours=0),
]


def _idf(df: np.ndarray | float, n: int) -> np.ndarray:
    return np.log1p((n - np.asarray(df, np.float64) + 0.5) / (np.asarray(df, np.float64) + 0.5))


def _best(space: NamespaceGraph, e: int, k: int, hub_df: float) -> list[int]:
    dfs, n = space.df, len(space.slot)
    if k <= 0 or dfs[e] > hub_df:
        return []
    nb, w = space.neighbours(e)
    ok = dfs[nb] <= hub_df
    nb, w = nb[ok], w[ok]
    score = w * _idf(dfs[nb], n)
    if len(score) > k:
        keep = score >= np.partition(score, len(score) - k)[len(score) - k]
        nb, score = nb[keep], score[keep]
    return nb[np.lexsort((space.tie[nb], -score))[:k]].tolist()


def plain_tables(sig: GraphSignal, space: NamespaceGraph, entities: tuple[str, ...]) -> dict:
    """Direct, peer and near logs and every row's total, computed without any kept state."""
    cfg, n = sig.config, len(space.slot)
    seeds = list(dict.fromkeys(space.eid[q] for q in entities if q in space.eid))
    hub_df = max(cfg.hub_fraction * n, cfg.min_hub_df)
    local = dict.fromkeys(seeds)
    for q in seeds:
        first = _best(space, q, cfg.neighbours, hub_df)
        local.update(dict.fromkeys(first))
        for u in first[: cfg.second_hop]:
            local.update(dict.fromkeys(_best(space, u, cfg.second_hop, hub_df)))
    ents = list(local)
    s, m = len(seeds), len(ents)
    idf = _idf(space.df[ents], n)
    nu = idf / _idf(1.0, n)
    direct = np.zeros(m)
    direct[:s] = nu[:s] / s
    log_peer, log_near = np.zeros(m), np.zeros(m)
    if m > s:
        at = {e: i for i, e in enumerate(ents)}
        src, dst, wts = [], [], []
        for i, e in enumerate(ents):  # each entity's neighbours inside L, in the order of L
            for b, w in zip(*space.neighbours(e), strict=True):
                if int(b) in at:
                    src.append(i), dst.append(at[int(b)]), wts.append(w)
        restart = np.zeros(m)
        restart[:s] = idf[:s] / idf[:s].sum()
        pi = personalized_pagerank(
            m, np.array(src), np.array(dst), np.array(wts, np.float64), restart,
            damping=cfg.damping, max_iter=cfg.max_iter, tol=cfg.tol,
        )  # fmt: skip
        rel = pi * nu
        near = np.minimum(rel / rel.max(), 1.0 - 1e-12) if rel.max() > 0 else np.zeros(m)
        comm = space.comm[ents].tolist()
        share: dict[int, float] = {}
        for c, v in zip(comm[:s], restart[:s].tolist(), strict=True):
            share[c] = share.get(c, 0.0) + v
        peer = np.array([share.get(c, 0.0) for c in comm]) * nu
        peer[:s] = 0.0
        log_peer, log_near = np.log1p(-np.minimum(peer, 1.0 - 1e-12)), np.log1p(-near)
    totals: dict[int, float] = {}
    for row, row_ents in enumerate(space.ents):
        d = lc = lp = 0.0
        held = False
        for k, e in enumerate(ents):  # a row's sums add its entities in the order of L
            if e in row_ents:
                held = True
                d, lc, lp = d + direct[k], lc + log_peer[k], lp + log_near[k]
        if held:
            totals[row] = float(sig._combine(d, lc, lp))
    return {"ents": ents, "direct": direct, "peer": log_peer, "near": log_near, "rows": totals}


def assert_same(sig: GraphSignal, space: NamespaceGraph, entities: tuple[str, ...]) -> None:
    t = sig._tables(space, entities)
    want = plain_tables(sig, space, entities)
    if not want["ents"]:
        assert t is None
        return
    assert t is not None
    assert t.ents.tolist() == want["ents"]
    assert np.array_equal(t.direct, want["direct"])
    assert np.array_equal(t.log_peer, want["peer"])
    assert np.array_equal(t.log_near, want["near"])
    assert dict(zip(t.cand.tolist(), t.total.tolist(), strict=True)) == pytest.approx(
        want["rows"], abs=1e-12
    )


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("config", CONFIGS)
def test_tables_equal_the_plain_computation(seed: int, config: GraphConfig) -> None:
    """One seed, several, repeated seeds (kept blocks reused), hub seeds, and after writes."""
    g = EntityGraph()
    g.add_many(NS, random_corpus(seed, 300, 90).items())
    sig = GraphSignal(g, config)
    rng = random.Random(seed)
    vocab = [f"e{i}" for i in range(95)]  # a few unknown names too
    for step in range(60):
        if step % 20 == 19:  # a write: new version, nothing kept may leak into it
            g.add(NS, f"w{step}", rng.sample(vocab[:90], 3))
            g.remove(NS, f"m{rng.randrange(300)}")
        space = g.space(NS)
        assert space is not None
        ents = tuple(rng.sample(vocab, rng.choice([1, 1, 2, 3, 5])))
        assert_same(sig, space, ents)
        assert_same(sig, space, ents[:1])  # its first seed alone: the kept one-seed edges
