"""Per-intent fitting on synthetic pools: overrides where an intent's questions want them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from norax_core.bench import ascent
from norax_core.bench.ascent import neighbours, setting_from
from norax_core.bench.fastrank import PoolBatch, Setting
from norax_core.bench.fit import cross_validate, fit_pools
from norax_core.bench.intentfit import intents_of, override_of, recall_by_intent
from norax_core.bench.pools import Pool, PoolRequest, rank_pool
from norax_core.config import NoraxConfig
from norax_core.models import SIGNALS
from norax_core.query import plan_query
from norax_core.weights import Weights, load_weights

NOW = 1_800_000_000.0


def make_pool(rng: np.random.Generator, n: int, relevant: list[int], **kw: object) -> Pool:
    """A pool of ``n`` episodic memories in six sessions (as tests/unit/test_fit.py builds)."""
    ids = [f"m{i:04d}" for i in range(n)]
    s = np.asarray(kw.get("scores", rng.random((len(SIGNALS), n))), dtype=float).copy()
    session = np.sort(rng.integers(0, 6, size=n))
    age = (6 - session) * 3.0 + (n - np.arange(n)) * 5 / 86_400
    cfg = NoraxConfig()
    s[SIGNALS.index("temporal")] = np.exp(-age / cfg.tau_days("episodic"))
    group = str(kw.get("group", "ns"))
    return Pool(
        request=PoolRequest("q", group, NOW, tuple(ids[i] for i in relevant)),
        ids=ids,
        scores=s,
        age_days=age,
        kinds=["episodic"] * n,
        created_at=NOW - age * 86_400,
        size=n,
        config=cfg,
    )


CURRENT = "What is my current rent?"  # current_state
OTHER = "When did I sign the rent contract?"  # lookup


def _planted(rng: np.random.Generator, query: str, signal: str, n_queries: int) -> list[Pool]:
    """Pools of ``query`` whose gold memory only ``signal`` finds (the others: noise)."""
    out = []
    j = SIGNALS.index(signal)
    for q in range(n_queries):
        n = 60
        s = rng.random((len(SIGNALS), n)) * 0.9
        gold = int(rng.integers(0, n))
        s[j, gold] = 1.0
        p = make_pool(rng, n, [gold], scores=s, group=f"g{q % 4}")
        p.request = replace(p.request, query=query)
        out.append(p)
    return out


def _two_intents(seed: int = 3, n: int = 32) -> list[Pool]:
    rng = np.random.default_rng(seed)
    return _planted(rng, CURRENT, "dense", n) + _planted(rng, OTHER, "bm25", n)


def test_the_synthetic_queries_have_two_intents() -> None:
    assert plan_query(CURRENT, NOW).intent.value == "current_state"
    assert plan_query(OTHER, NOW).intent.value == "lookup"
    assert [len(v) for v in intents_of(_two_intents()).values()] == [32, 32]


def test_per_intent_fit_learns_each_intent_s_signal() -> None:
    pools = _two_intents()
    plain = fit_pools(pools, k=1, restarts=0, fit_params=False)
    per = fit_pools(pools, k=1, restarts=0, fit_params=False, per_intent=True)
    # one weighting cannot serve both: dense for one intent, BM25 for the other
    assert plain.score < 0.9
    assert per.global_score == pytest.approx(plain.score)
    assert per.score == pytest.approx(1.0) and per.score > plain.score
    assert per.weights.as_dict() == plain.weights.as_dict()  # the global part is the same
    for intent, signal in (("current_state", "dense"), ("lookup", "bm25")):
        chosen = per.weights.for_intent(intent).as_dict()
        if intent in per.weights.intents:  # an intent the global weights already serve keeps them
            assert max(chosen, key=chosen.get) == signal  # type: ignore[arg-type]
        assert per.intents[intent]["n_questions"] == 32
        assert per.intents[intent]["train_own"] == pytest.approx(1.0)
    assert per.weights.intents  # at least one intent got its own weights
    # what the fitter measured is what the one ranking (search's, per intent) gives
    assert recall_by_intent(pools, per.weights, 1).mean() == pytest.approx(per.score)
    tops = [rank_pool(p, per.weights, 1) for p in pools]
    assert all(t == list(p.request.relevant) for t, p in zip(tops, pools, strict=True))


def test_intents_with_too_few_questions_keep_the_global_weights() -> None:
    pools = _two_intents(n=12)
    per = fit_pools(pools, k=1, restarts=0, fit_params=False, per_intent=True)
    assert not per.weights.intents
    assert per.score == per.global_score
    assert {i: f["own_weights"] for i, f in per.intents.items()} == {
        "current_state": False,
        "lookup": False,
    }
    some = fit_pools(
        pools, k=1, restarts=0, fit_params=False, per_intent=True, min_intent_questions=10
    )
    assert some.weights.intents and some.score > per.score


def test_per_intent_fit_round_trips_through_a_weights_file(tmp_path: Path) -> None:
    pools = _two_intents()
    res = fit_pools(pools, k=1, restarts=0, per_intent=True, name="mine")
    path = tmp_path / "w.json"
    res.save(path)
    loaded = load_weights(path)
    assert loaded == res.weights and loaded.intents
    assert recall_by_intent(pools, loaded, 1).mean() == pytest.approx(res.score)


def test_an_override_merged_over_the_global_params_gives_the_intent_s_setting() -> None:
    base = NoraxConfig()
    start = Setting((0.5, 0.5, 0.0, 0.0), {"episodic": 30.0, "semantic": 90.0}, 20, 5, 1, 0.5)
    own = replace(
        start,
        weights=(0.1, 0.2, 0.7, 0.0),
        decay_days={"episodic": 2.0, "semantic": 90.0},
        context_weight=0.0,  # off for this intent although on globally
        latest_wins_weight=1.5,
    )
    glob = Weights(*start.weights, params=start.params())
    over = override_of(own, start, base)
    assert over.params["decay_days"] == {"episodic": 2.0}  # only the kind that changed
    chosen = replace(glob, intents={"temporal": over}).for_intent("temporal")
    assert chosen.applied(base) == base.with_params(own.params(base))
    assert not chosen.applied(base).context_on and chosen.applied(base).latest_on


def test_cross_validation_refits_per_intent_inside_each_fold() -> None:
    pools = _two_intents(n=48)
    groups = [p.request.namespace or "" for p in pools]
    cv = cross_validate(
        pools, groups, k=1, restarts=0, fit_params=False, per_intent=True, min_intent_questions=20
    )
    assert len(cv.folds) == 4 and cv.test_recall_global is not None
    assert cv.mean > 0.9 > float(cv.test_recall_global.mean())
    assert all(f["intents"] for f in cv.folds)  # each fold's own overrides
    assert set(cv.global_of) == set(cv.weights_of) == {"g0", "g1", "g2", "g3"}


def test_stage_grid_is_one_line_per_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        ascent, "STAGE_GRID", {"latest_wins_depth": (10, 3), "not_a_config_field": (1, 2)}
    )
    pools = _two_intents(n=4)
    batch = PoolBatch(pools)
    start = setting_from(Weights(), batch)
    assert dict(start.extra) == {"latest_wins_depth": 10}
    moves = [m for m in neighbours(start, [], True, 10, 10) if m.extra != start.extra]
    assert [dict(m.extra) for m in moves] == [{"latest_wins_depth": 3}]
    assert moves[0].plan(batch.config).latest_depth == 3
    assert moves[0].params()["latest_wins_depth"] == 3


def test_pool_requests_default_to_lookup_free_text() -> None:
    # a pool's intent is read from its query as a search reads it, not from its category
    p = make_pool(np.random.default_rng(0), 5, [0])
    p.request = PoolRequest(CURRENT, "ns", NOW, ("m0000",), category="knowledge_update")
    assert p.plan.intent.value == "current_state"
