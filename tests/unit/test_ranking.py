"""The ranking function against a plain reference built from the dict-based formulas.

:func:`norax_core.ranking.rank` works on arrays, a batch of queries at once; the reference
below ranks one query with :mod:`norax_core.fusion`, :func:`~norax_core.signals.context.
propagate` and :func:`~norax_core.latest.state_wins`, step by step as the README describes
them (the way networkx tests ``pagerank`` against ``_pagerank_python``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from norax_core.fusion import fuse
from norax_core.fusion import rank as rank_dict
from norax_core.latest import Statements, state_wins
from norax_core.models import SIGNALS
from norax_core.query import Intent, Period, QueryPlan
from norax_core.ranking import (
    CONTEXT_SEEDS,
    POSITIVE_ONLY,
    Plan,
    Table,
    proposal_sizes,
    rank,
    signal_ranks,
)
from norax_core.signals.context import neighbour_map, propagate
from norax_core.stages.period import boost_one
from norax_core.weights import FusionMethod, Weights

GAP = 100.0
VOCAB = ("kenji", "live", "osaka", "sync", "moved", "updated", "weekly")
CUES = frozenset({"moved", "updated"})
CHANGE = frozenset({"moved"})


def _query(rng: random.Random, n: int) -> dict[str, object]:
    ids = sorted(f"m{rng.randrange(10**6):06d}" for _ in range(n))
    ids = sorted(set(ids))
    levels = [0.0, 0.0, 0.25, 0.5, 0.5, 0.75, 1.0]  # coarse values: many exact ties
    scores = {s: {m: rng.choice(levels) * rng.random() ** 0 for m in ids} for s in SIGNALS}
    for s in ("dense", "temporal"):
        scores[s] = {m: round(rng.random(), 2) for m in ids}
    times = {m: rng.choice([0.0, 30.0, 60.0, 500.0]) + rng.randrange(40) for m in ids}
    words = {m: frozenset(rng.sample(VOCAB, rng.randrange(1, 5))) for m in ids}
    replies = {m: rng.random() < 0.2 for m in ids}
    query = frozenset(rng.sample(VOCAB, rng.randrange(1, 4)))
    periods = []
    for _ in range(rng.choice([0, 1, 1, 2])):
        start = rng.choice([0.0, 20.0, 45.0, 480.0])
        periods.append((start, start + rng.choice([10.0, 30.0, 100.0])))
    return {
        "ids": ids,
        "scores": scores,
        "times": times,
        "words": words,
        "replies": replies,
        "query": query,
        "periods": periods,
    }


def _reference(d: dict[str, object], plan: Plan, k: int) -> list[str]:
    ids: list[str] = d["ids"]  # type: ignore[assignment]
    scores: dict[str, dict[str, float]] = d["scores"]  # type: ignore[assignment]
    times: dict[str, float] = d["times"]  # type: ignore[assignment]
    k = min(k, len(ids))
    w = Weights(*plan.weights, method=plan.method, rrf_k=plan.rrf_k)
    cand: dict[str, None] = {}
    for s, n in proposal_sizes(plan, k, len(ids)).items():
        own = [m for m in ids if s not in POSITIVE_ONLY or scores[s][m] > 0]
        cand.update(dict.fromkeys(sorted(own, key=lambda m, s=s: (-scores[s][m], m))[:n]))
    fused = fuse(scores, list(cand), w)
    ordered = sorted(ids, key=lambda m: (times[m], m))
    stamps = [times[m] for m in ordered]
    if plan.context_on:
        seeds = rank_dict(fused, CONTEXT_SEEDS * k)
        near = neighbour_map(ordered, stamps, plan.context_window, GAP, wanted=seeds)
        extra = [x for s in seeds for x in near[s] if x not in cand]
        cand.update(dict.fromkeys(extra))
        fused = fuse(scores, list(cand), w)
        near = neighbour_map(ordered, stamps, plan.context_window, GAP, wanted=list(cand))
        fused = propagate(fused, near, plan.context_weight)
    if plan.period_boost > 0:
        periods: list[tuple[float, float]] = d["periods"]  # type: ignore[assignment]
        fused = boost_one(fused, times, periods, plan.period_boost)
    query: frozenset[str] = d["query"] - CUES  # type: ignore[operator]
    if plan.latest_weight > 1 and query:
        top = rank_dict(fused, plan.latest_depth)
        words: dict[str, frozenset[str]] = d["words"]  # type: ignore[assignment]
        replies: dict[str, bool] = d["replies"]  # type: ignore[assignment]
        lifted = state_wins(
            [fused[m] for m in top],
            [times[m] for m in top],
            [words[m] for m in top],
            [replies[m] for m in top],
            query,
            CHANGE if plan.latest_cues == "change" else CUES,
            plan.latest_shared,
            plan.latest_weight,
            CHANGE if plan.latest_subject else None,
        )
        fused = {**fused, **dict(zip(top, lifted, strict=True))}
    return rank_dict(fused, k)


def _table(queries: list[dict[str, object]]) -> Table:
    q, n = len(queries), max(len(d["ids"]) for d in queries)  # type: ignore[arg-type]
    scores = np.zeros((len(SIGNALS), q, n))
    valid = np.zeros((q, n), dtype=bool)
    created = np.zeros((q, n))
    slots: dict[int, np.ndarray] = {}
    for i, d in enumerate(queries):
        ids: list[str] = d["ids"]  # type: ignore[assignment]
        for j, s in enumerate(SIGNALS):
            scores[j, i, : len(ids)] = [d["scores"][s][m] for m in ids]  # type: ignore[index]
        valid[i, : len(ids)] = True
        created[i, : len(ids)] = [d["times"][m] for m in ids]  # type: ignore[index]

    def neighbours(window: int, gap: float) -> list[np.ndarray]:
        out = np.full((2 * window, q, n), n, dtype=np.int64)
        for i, d in enumerate(queries):
            ids: list[str] = d["ids"]  # type: ignore[assignment]
            times: dict[str, float] = d["times"]  # type: ignore[assignment]
            ordered = sorted(ids, key=lambda m: (times[m], m))
            near = neighbour_map(ordered, [times[m] for m in ordered], window, gap)
            for m, found in near.items():
                out[: len(found), i, ids.index(m)] = [ids.index(x) for x in found]
        slots[window] = out
        return list(out)

    def words(i: int, rows: Sequence[int]) -> list[frozenset[str]]:
        ids: list[str] = queries[i]["ids"]  # type: ignore[assignment]
        return [queries[i]["words"][ids[r]] for r in rows]  # type: ignore[index]

    replies = np.zeros((q, n), dtype=bool)
    for i, d in enumerate(queries):
        replies[i, : len(d["ids"])] = [d["replies"][m] for m in d["ids"]]  # type: ignore[index, arg-type, union-attr]

    return Table(
        scores=scores,
        proposed=np.stack([signal_ranks(scores[j], valid, None, s) for j, s in enumerate(SIGNALS)]),
        valid=valid,
        tie=None,
        size=valid.sum(axis=1),
        created=created,
        neighbours=neighbours,
        statements=Statements(
            query=[d["query"] for d in queries],  # type: ignore[misc]
            words=words,
            replies=lambda wanted=None: replies,
            cues=CUES,
            change=CHANGE,
        ),
        ids=[d["ids"] for d in queries],  # type: ignore[misc]
        plans=[_query_plan(d["periods"]) for d in queries],  # type: ignore[arg-type]
    )


def _query_plan(periods: list[tuple[float, float]]) -> QueryPlan:
    named = tuple(Period(s, e, f"period {i}") for i, (s, e) in enumerate(periods))
    return QueryPlan("q", 600.0, Intent.LOOKUP, ((Intent.LOOKUP, 1.0),), named)


def _plan(rng: random.Random) -> Plan:
    weights = [rng.choice([0.0, 0.1, 0.3, 1.0]) for _ in SIGNALS]
    if sum(weights) == 0:
        weights[1] = 1.0
    ctx = rng.random() < 0.6
    return Plan(
        weights=tuple(weights),  # type: ignore[arg-type]
        method=FusionMethod.RRF if rng.random() < 0.3 else FusionMethod.WEIGHTED_SUM,
        pool_min=rng.choice([1, 3, 8]),
        pool_factor=rng.choice([1, 3]),
        recency_candidates=rng.choice([0, 2, 5]),
        context_window=rng.choice([1, 2]) if ctx else 0,
        context_weight=rng.choice([0.5, 1.0]) if ctx else 0.0,
        context_gap=GAP,
        latest_weight=rng.choice([0.0, 0.0, 1.05, 2.0]),
        latest_depth=rng.choice([2, 5, 10]),
        latest_shared=rng.choice([1, 2, 3]),
        latest_cues=rng.choice(["update", "change"]),
        latest_subject=rng.random() < 0.5,
        period_boost=rng.choice([0.0, 0.0, 0.5, 3.0]),
    )


@pytest.mark.parametrize("seed", range(40))
def test_rank_equals_the_step_by_step_reference(seed: int) -> None:
    rng = random.Random(seed)
    queries = [_query(rng, rng.randrange(1, 30)) for _ in range(4)]
    table = _table(queries)
    for _ in range(5):
        plan = _plan(rng)
        for k in (1, 3, 10):
            got = rank(table, plan, k)  # the batch, padded to the longest query
            for i, d in enumerate(queries):
                assert got.ids(i) == _reference(d, plan, k), (plan, k, i)
                alone = rank(_table([d]), plan, k)  # a batch of one: the same
                assert alone.ids(0) == got.ids(i)


@pytest.mark.parametrize("scale", [1e308, 1e-300])
@pytest.mark.parametrize("seed", range(4))
def test_the_scale_of_the_weights_changes_nothing(seed: int, scale: float) -> None:
    rng = random.Random(seed)
    table = _table([_query(rng, 25) for _ in range(3)])
    for _ in range(5):
        plan = _plan(rng)
        scaled = replace(plan, weights=tuple(w * scale for w in plan.weights))
        for k in (1, 5):
            got, want = rank(table, scaled, k), rank(table, plan, k)
            assert np.isfinite(got.score[got.candidates]).all()
            assert [got.ids(i) for i in range(3)] == [want.ids(i) for i in range(3)], plan


def test_explain_splits_the_score_into_its_stages() -> None:
    rng = random.Random(7)
    d = _query(rng, 25)
    plan = Plan(
        weights=(0.5, 0.5, 0.0, 0.0),
        context_window=1,
        context_weight=1.0,
        context_gap=GAP,
        latest_weight=1.5,
    )
    got = rank(_table([d]), plan, 5)
    for r in got.top(0):
        parts = got.explain(0, r)
        assert sum(parts.values()) == pytest.approx(float(got.score[0, r]))
    assert any(got.explain(0, r)["context"] != 0 for r in got.top(0))


def test_top_is_read_once_per_query_and_explained_matches_explain() -> None:
    rng = random.Random(11)
    queries = [_query(rng, 25), _query(rng, 18)]
    plan = Plan(weights=(0.5, 0.5, 0.0, 0.0), context_window=1, context_weight=1.0, context_gap=GAP)
    got = rank(_table(queries), plan, 5)
    first, second = got.top(0), got.top(1)
    assert first == got.order[0, :5].tolist() and second == got.order[1, :5].tolist()
    first.append(99)  # the caller's list: what top keeps for the next call is its own
    assert got.top(0) == got.order[0, :5].tolist() and got.top(1) == second
    rows = got.top(1)
    assert got.explained(1, rows) == [got.explain(1, r) for r in rows]
    for r, parts in zip(rows, got.explained(1, rows), strict=True):
        assert sum(parts.values()) == pytest.approx(float(got.score[1, r]))
