"""``norax bench`` measures ``search``: the same top 10 on whole dev conversations.

One whole LoCoMo conversation (conv-30: 369 turns, 105 questions) and one whole BEAM 100K
chat (chat 1: 188 long messages, 18 questions) are ingested with the real ONNX embedder and
spaCy pipeline, exactly as ``norax bench`` ingests them. For every question and several
weightings (the shipped presets, single signals, RRF, context propagation, latest wins, the
bridge step, the period boost, supersession, the turns stage (session openers,
the user's own messages, read from the ``role`` metadata the benchmark stores, and order
questions spread over the sessions), a weights
file with per-intent overrides: each question ranked with its intent's weights), the
ids the benchmark ranks from its pools must be the ids a plain loop over
:meth:`NoraxMemory.search` returns, and the benchmark's per-question recall must be the
recall of those ids. Cold (no embedding cache) this embeds about 560 texts, 1-2 minutes.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from norax_core.bench.data import BenchDataset, load_beam, load_locomo
from norax_core.bench.harness import open_store, run_benchmark
from norax_core.bench.metrics import recall_at_k
from norax_core.bench.pools import plan_groups
from norax_core.presets import get_preset
from norax_core.ranking import Ranking, rank
from norax_core.weights import FusionMethod, Weights

pytestmark = pytest.mark.integration

DATA = Path(os.environ.get("NORAX_DATA_DIR", Path(__file__).parents[3] / "shared" / "data"))

DEFAULT = get_preset("default")
METHODS = {
    "default": DEFAULT,
    "project": get_preset("project"),
    "seed": get_preset("seed"),
    "rrf": get_preset("rrf"),
    "bm25": get_preset("bm25"),
    "dense": get_preset("dense"),
    "graph": get_preset("graph"),
    "temporal": get_preset("temporal"),
    "context2": Weights(
        0.3, 0.5, 0.05, 0.15, params={"context_window": 2, "context_weight": 1.0, "pool_min": 10}
    ),
    "latest": Weights(
        0.2,
        0.6,
        0.1,
        0.1,
        params={
            "context_window": 1,
            "context_weight": 0.5,
            "latest_wins_weight": 1.5,
            "latest_wins_shared": 1,
        },
    ),
    "period": dataclasses.replace(DEFAULT, **{"params": {**DEFAULT.params, "period_boost": 0.5}}),
    "turns": dataclasses.replace(
        DEFAULT,
        **{
            "params": {
                **DEFAULT.params,
                "opener_boost": 1.0,
                "opener_span": 5.0,
                "speaker_boost": 1.0,
                "session_spread": 0.5,
            },
        },
    ),
    "bridges": Weights(
        0.3,
        0.6,
        0.0,
        0.1,
        params={
            "pool_min": 10,
            "context_window": 1,
            "context_weight": 0.75,
            "bridge_weight": 0.2,
            "bridge_seeds": 5,
            "bridge_candidates": 10,
        },
    ),
    "staged": Weights(
        0.3,
        0.6,
        0.0,
        0.1,
        params={
            "context_window": 1,
            "context_weight": 0.5,
            "period_boost": 1.0,
            "latest_wins_weight": 1.5,
            "opener_boost": 0.5,
            "bridge_weight": 0.1,
            "bridge_seed_gain": True,
            "bridge_skip_query": True,
            "supersede_weight": 1.05,
            "supersede_depth": 5,
            "supersede_pull": False,
        },
    ),
    "supersede": dataclasses.replace(
        DEFAULT, **{"params": {**DEFAULT.params, "supersede_weight": 1.1}}
    ),
}
PER_INTENT = Weights(
    **get_preset("default").as_dict(),
    params=get_preset("default").params,
    name="per-intent",
    intents={
        "temporal": Weights(0.1, 0.4, 0.3, 0.2, params={"pool_min": 20, "bm25_k1": 2.0}),
        "multi_hop": Weights(0.4, 0.3, 0.0, 0.3, params={"context_window": 2}),
        "current_state": Weights(
            0.2,
            0.6,
            0.2,
            0.0,
            params={
                "latest_wins_weight": 1.5,
                "decay_days": {"episodic": 5},
                "supersede_weight": 1.1,
            },
        ),
        "coverage": Weights(
            0.0,
            1.0,
            0.0,
            0.0,
            method=FusionMethod.RRF,
            rrf_k=10.0,
            params={"opener_boost": 0.5},  # the openers for coverage questions only
        ),
    },
)
"""A per-intent weights file: each intent's questions ranked with its own weights."""
METHODS["per_intent"] = PER_INTENT
KS = (1, 5, 10, 25)


def _one(ds: BenchDataset, name: str) -> BenchDataset:
    return BenchDataset(ds.name, [c for c in ds.conversations if c.name == name])


def _whole(kind: str) -> BenchDataset:
    if kind == "locomo":
        path = DATA / "locomo" / "locomo10_dev.json"
        if not path.is_file():
            pytest.skip(f"LoCoMo dev data not found at {path}")
        return _one(load_locomo(path), "conv-30")
    path = DATA / "beam" / "100K"
    if not path.is_dir():
        pytest.skip(f"BEAM 100K not found at {path}")
    return _one(load_beam(path), "beam-100K-1")


@pytest.mark.parametrize("kind", ["locomo", "beam"])
def test_bench_rankings_are_search_results_on_a_whole_conversation(
    kind: str, tmp_path: Path
) -> None:
    ds = _whole(kind)
    conv = ds.conversations[0]
    assert len(conv.memories) > 150 and conv.questions
    with open_store(tmp_path / "cache") as mem:
        run, pools = run_benchmark(ds, METHODS, KS, memory=mem, progress=False)
        assert all(len(p.ids) == len(conv.memories) for p in pools)  # whole namespace
        moved = {
            "context2": 0,
            "latest": 0,
            "period": 0,
            "turns": 0,
            "bridges": 0,
            "supersede": 0,
        }
        overridden: set[str] = set()
        for name, w in METHODS.items():
            # the queries grouped by the weights their intent selects (one group without
            # per-intent overrides), each group ranked by the one ranking function
            for idx, table, plan in plan_groups(pools, w, mem.config):
                for k in KS if name in ("default", "per_intent") else (10,):
                    bench = rank(table, plan, k)
                    for j, i in enumerate(idx):
                        req = pools[i].request
                        got = mem.search(
                            req.query, k=k, namespace=req.namespace, now=req.now, weights=w
                        )
                        ids = [r.id for r in got]
                        assert bench.ids(j) == ids, (name, k, req.qid, req.query)
                        scores = [float(bench.score[j, r]) for r in bench.top(j)]
                        assert scores == pytest.approx([r.score for r in got], abs=1e-12), (
                            name,
                            k,
                            req.qid,
                        )
                        assert run.recall[name][k][i] == recall_at_k(ids, req.relevant, k)
                        info = got[0].query_plan if got else None
                        if name == "per_intent" and info is not None and info.weights_intent:
                            overridden.add(info.weights_intent)
                        if name in moved and k == 10:
                            before, after = _stage(bench, name)
                            moved[name] += int((before[j] != after[j])[bench.top(j)].any())
                            if name in ("bridges", "turns"):  # the part search explains
                                top = bench.top(j)
                                want = sorted(float(after[j, r] - before[j, r]) for r in top)
                                parts = sorted(getattr(r.explanation, name) for r in got)
                                assert parts == pytest.approx(want, abs=1e-12)
        # the context, latest-wins (and on LoCoMo period) stages really acted
        assert moved["context2"] > 0 and moved["latest"] > 0
        assert moved["bridges"] > 0 and moved["supersede"] > 0
        assert moved["turns"] > 0
        if kind == "beam":  # the speaker boost read the same roles in both (chat 1 asks it)
            asks = [i for i, p in enumerate(pools) if p.plan.own_words]
            assert asks and all(p.roles and "user" in p.roles for p in pools)
            assert any(p.plan.ordering for p in pools)  # and the session spread applied
        assert moved["period"] > 0 or kind == "beam"  # BEAM chat 1 names no period
        # and overrides really ranked some questions, visibly in their results
        assert overridden, "no question of this conversation had an overridden intent"


def _stage(ranking: Ranking, method: str) -> tuple[np.ndarray, np.ndarray]:
    """The scores before and after the stage ``method`` turns on."""
    if method == "period":
        return ranking.after["bridges"], ranking.after["period"]
    if method == "bridges":
        return ranking.context, ranking.after["bridges"]
    if method == "turns":
        return ranking.after["supersede"], ranking.after["turns"]
    if method == "supersede":
        return ranking.after["latest_wins"], ranking.after["supersede"]
    return ranking.fused, ranking.context
