"""Weight fitting on synthetic pools: the fast evaluator, known optima, weights files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from norax_core.bench.fastrank import PoolBatch, Setting
from norax_core.bench.fit import FitResult, cross_validate, fit_pools
from norax_core.bench.pools import Pool, PoolRequest, PoolWords, rank_pool
from norax_core.config import NoraxConfig
from norax_core.models import SIGNALS
from norax_core.presets import get_preset
from norax_core.weights import Weights, load_weights

NOW = 1_800_000_000.0
VOCAB = ("rent", "flat", "cat", "moved", "sync", "weekly")
QUERY = frozenset({"rent", "flat"})
CUES = frozenset({"moved"})


def make_pool(
    rng: np.random.Generator,
    n: int,
    relevant: list[int],
    *,
    scores: np.ndarray | None = None,
    kinds: list[str] | None = None,
    group: str = "ns",
    ties: bool = False,
) -> Pool:
    ids = [f"m{i:04d}" for i in range(n)]
    s = rng.random((len(SIGNALS), n)) if scores is None else scores
    if ties:  # coarse scores: many exact ties, and zeros that BM25/graph do not propose
        s = np.round(s * 4) / 4
    # sessions of consecutive turns, a few seconds apart, days between sessions
    session = np.sort(rng.integers(0, 6, size=n))
    age = (6 - session) * 3.0 + (n - np.arange(n)) * 5 / 86_400
    kinds = kinds or ["episodic"] * n
    cfg = NoraxConfig()
    s = s.copy()
    s[SIGNALS.index("temporal")] = np.exp(-age / np.array([cfg.tau_days(k) for k in kinds]))
    variant = np.where(rng.random(n) < 0.3, 0.0, rng.random(n))
    if ties:
        variant = np.round(variant * 4) / 4
    # a separate generator, so the other draws (and the tests built on them) do not change
    pick = np.random.default_rng(n).integers(0, len(VOCAB), size=(n, 2))
    words = PoolWords(QUERY, [frozenset(VOCAB[j] for j in row) for row in pick], CUES, CUES)
    pool = Pool(
        request=PoolRequest(
            query="q", namespace=group, now=NOW, relevant=tuple(ids[i] for i in relevant)
        ),
        ids=ids,
        scores=s,
        age_days=age,
        kinds=kinds,
        created_at=NOW - age * 86_400,
        size=n,
        config=cfg,
        words=words,
    )
    pool.bm25_rows[(1.2, 0.3)] = variant
    return pool


def recall(pool: Pool, ranking: list[str], k: int) -> float:
    gold = set(pool.request.relevant)
    return len(gold.intersection(ranking[:k])) / len(gold) if gold else 1.0


WEIGHTINGS = [
    get_preset("seed"),
    get_preset("bm25"),
    get_preset("graph"),
    get_preset("temporal"),
    Weights(0.1, 0.6, 0.0, 0.3),
    Weights(0.2, 0.2, 0.4, 0.2, params={"pool_min": 10, "recency_candidates": 3}),
    Weights(0.3, 0.3, 0.2, 0.2, params={"decay_days": {"episodic": 2.0, "semantic": 500.0}}),
    Weights(0.3, 0.5, 0.05, 0.15, params={"context_window": 2, "context_weight": 0.75}),
    Weights(1.0, 0, 0, 0, params={"context_window": 1, "context_weight": 1.5, "pool_min": 3}),
    Weights(
        0.4,
        0.4,
        0.0,
        0.2,
        params={"bm25_k1": 1.2, "bm25_b": 0.3, "context_window": 2, "context_weight": 0.5},
    ),
    Weights(1.0, 0, 0, 0, params={"bm25_k1": 1.2, "bm25_b": 0.3, "pool_min": 4}),
    Weights(0.3, 0.5, 0.05, 0.15, params={"latest_wins_weight": 1.05, "latest_wins_shared": 1}),
    Weights(
        0.4,
        0.4,
        0.0,
        0.2,
        params={
            "latest_wins_weight": 2.0,
            "latest_wins_shared": 2,
            "latest_wins_depth": 30,
            "context_window": 1,
            "context_weight": 0.5,
            "pool_min": 5,
        },
    ),
]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("k", [1, 5, 10, 25])
@pytest.mark.parametrize("w", WEIGHTINGS, ids=lambda w: str(w.as_dict()))
def test_fast_recall_matches_reference(w: Weights, k: int, ties: bool) -> None:
    rng = np.random.default_rng(k)
    pools = []
    for _ in range(12):
        n = int(rng.integers(3, 120))
        kinds = [["episodic", "semantic"][j % 2] for j in range(n)]
        rel = sorted(set(rng.integers(0, n, size=int(rng.integers(0, 4))).tolist()))
        pools.append(make_pool(rng, n, rel, kinds=kinds, ties=ties))
    batch = PoolBatch(pools)
    from norax_core.bench.ascent import setting_from as _setting_from

    fast = batch.recall(_setting_from(w, batch), k)
    ref = [recall(p, rank_pool(p, w, k), k) for p in pools]
    np.testing.assert_allclose(fast, ref)


def planted(rng: np.random.Generator, signal: str, n_queries: int = 40) -> list[Pool]:
    """Pools where only ``signal`` knows the answer: the gold memory tops it, noise elsewhere."""
    out = []
    j = SIGNALS.index(signal)
    for q in range(n_queries):
        n = 80
        s = rng.random((len(SIGNALS), n)) * 0.9
        gold = int(rng.integers(0, n))
        s[j, gold] = 1.0
        out.append(make_pool(rng, n, [gold], scores=s, group=f"g{q % 4}"))
    return out


@pytest.mark.parametrize("signal", ["bm25", "dense", "graph"])
def test_fit_puts_the_weight_on_the_informative_signal(signal: str) -> None:
    pools = planted(np.random.default_rng(7), signal)
    res = fit_pools(pools, k=1, restarts=1, fit_params=False)
    w = res.weights.as_dict()
    assert max(w, key=w.get) == signal  # type: ignore[arg-type]
    assert res.score == pytest.approx(1.0)
    assert res.baseline < 0.8  # the seed weights could not find the planted memory


def test_fit_learns_tau_when_recency_decides() -> None:
    """Gold memories are the newest; with a long tau recency barely separates them."""
    rng = np.random.default_rng(3)
    pools = []
    for _ in range(30):
        n = 60
        p = make_pool(rng, n, [])
        newest = int(np.argmin(p.age_days))
        p.request = PoolRequest("q", "ns", NOW, (p.ids[newest],))
        pools.append(p)
    res = fit_pools(pools, k=1, restarts=0, start=Weights(0.4, 0.4, 0.1, 0.1))
    assert res.score == pytest.approx(1.0)
    assert res.weights.temporal > 0


def test_cross_validation_holds_groups_out() -> None:
    pools = planted(np.random.default_rng(11), "dense", n_queries=24)
    cv = cross_validate(
        pools, [p.request.namespace or "" for p in pools], k=1, restarts=0, fit_params=False
    )
    assert [f["held_out"] for f in cv.folds] == ["g0", "g1", "g2", "g3"]
    assert cv.test_recall.shape == (24,)
    assert cv.mean > 0.9
    assert all(max(f["weights"], key=f["weights"].get) == "dense" for f in cv.folds)


def test_fit_output_round_trips_through_a_weights_file(tmp_path: Path) -> None:
    pools = planted(np.random.default_rng(5), "bm25", n_queries=12)
    res = fit_pools(pools, k=5, restarts=0, name="mine")
    path = tmp_path / "w.json"
    res.save(path, trained_on="synthetic")
    loaded = load_weights(path)
    assert loaded == res.weights
    assert loaded.name == "mine"
    doc = json.loads(path.read_text())
    assert doc["fit"]["trained_on"] == "synthetic"
    assert doc["fit"]["train_recall@5"] == pytest.approx(res.score, abs=1e-4)
    # the parameters are real engine parameters
    cfg = NoraxConfig().with_params(loaded.params)
    assert cfg.pool_min == loaded.params["pool_min"]
    # and rank the same as the fitted setting
    batch = PoolBatch(pools)
    from norax_core.bench.ascent import setting_from as _setting_from

    again = batch.mean_recall(_setting_from(loaded, batch), 5)
    assert again == pytest.approx(res.score)


def test_fit_rejects_empty_input() -> None:
    from norax_core.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        fit_pools([])
    assert isinstance(FitResult(get_preset("seed"), 0.5, 0.4, 10, 3), FitResult)


def test_setting_params_are_engine_params() -> None:
    s = Setting((0.25, 0.25, 0.25, 0.25), {"episodic": 7.0}, 20, 10)
    cfg = NoraxConfig().with_params(s.params())
    assert cfg.tau_days("episodic") == 7.0 and cfg.pool_min == 20
    assert cfg.recency_candidates == 10


def test_query_time_bm25_parameters_equal_an_index_built_with_them() -> None:
    from norax_core.signals.base import Query
    from norax_core.signals.bm25 import BM25Index, BM25Signal
    from norax_core.tokenize import Tokenizer

    tok = Tokenizer()
    docs = ["the cat sat on the mat", "a dog and a cat", "dogs bark at night", "cat cat cat"]
    default, tuned = BM25Index(), BM25Index(k1=0.9, b=0.3)
    for i, d in enumerate(docs):
        default.add("ns", str(i), tok(d))
        tuned.add("ns", str(i), tok(d))
    q = Query("cat at night", "ns", NOW, tokens=tuple(tok("cat at night")))
    ids = [str(i) for i in range(len(docs))]
    view = BM25Signal(default, tok).with_params(0.9, 0.3)
    assert view.score(q, ids) == BM25Signal(tuned, tok).score(q, ids)
    assert BM25Signal(default, tok).with_params(1.5, 0.75).k1 == 1.5  # same params: itself


def test_fit_turns_context_on_when_answers_follow_matching_turns() -> None:
    """The gold memory is the turn right after the best keyword match, and scores low itself."""
    rng = np.random.default_rng(21)
    pools = []
    for _ in range(30):
        n = 60
        p = make_pool(rng, n, [])
        p.scores[[0, 1, 3]] *= 0.3  # weak noise in bm25, dense and graph
        order = np.argsort(p.created_at, kind="stable")
        j = int(rng.integers(1, n - 1))
        hit, gold = order[j], order[j + 1]
        p.created_at[order[:j]] -= 86_400.0  # the hit opens a session: gold is its only neighbour
        p.scores[[0, 1, 3], gold] = 0.01
        p.scores[SIGNALS.index("bm25"), hit] = 1.0
        p.scores[SIGNALS.index("dense"), hit] = 1.0
        p.request = PoolRequest("q", "ns", NOW, (p.ids[gold],))
        pools.append(p)
    res = fit_pools(pools, k=2, restarts=0)
    assert res.weights.params.get("context_weight", 0) > 0
    assert res.score > res.baseline


def test_fit_turns_latest_wins_on_when_updates_answer() -> None:
    """The gold memory updates the best-scored one, later; nothing else states the same."""
    rng = np.random.default_rng(5)
    pools = []
    for _ in range(30):
        n = 40
        p = make_pool(rng, n, [])
        p.scores[[0, 1, 3]] *= 0.5
        old, new = (int(x) for x in rng.choice(n, size=2, replace=False))
        p.created_at[new] = p.created_at[old] + 60.0
        p.scores[[0, 1, 3], old] = 1.0
        p.scores[[0, 1, 3], new] = 0.9
        assert p.words is not None
        rows = [frozenset({"cat"}) for _ in p.ids]  # holds none of the query's words
        rows[old], rows[new] = QUERY, QUERY | CUES
        p.words = replace(p.words, rows=rows)
        p.request = PoolRequest("q", "ns", NOW, (p.ids[new],))
        pools.append(p)
    res = fit_pools(pools, k=1, restarts=0)
    assert res.weights.params.get("latest_wins_weight", 0) > 1
    assert res.score == pytest.approx(1.0) and res.baseline == 0.0


def test_public_surface_of_the_bench_package() -> None:
    import norax_core.bench as bench

    assert bench.__all__ == ["CVResult", "Feedback", "FitResult", "cross_validate", "fit_weights"]
    assert all(hasattr(bench, name) for name in bench.__all__)
