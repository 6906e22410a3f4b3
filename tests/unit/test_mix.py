"""The adaptive mix: each query's BM25 weight scaled by the embedding's agreement with BM25."""

from __future__ import annotations

import numpy as np
import pytest

from norax_core.config import NoraxConfig
from norax_core.errors import InvalidInputError
from norax_core.models import SIGNALS, Explanation
from norax_core.ranking import NEVER, STAGES, Plan, Table, rank, signal_ranks
from norax_core.stages.mix import MIX_DEPTH, agreement, mixed_weights, peakedness
from norax_core.weights import FusionMethod, Weights

_B, _D = SIGNALS.index("bm25"), SIGNALS.index("dense")
W = (0.3, 0.6, 0.0, 0.1)


def _agreement_one(dense: list[float], bm25: list[float], depth: int) -> float:
    """Plain reference for one query: mean dense of BM25's best over dense's best."""
    n = len(dense)
    by_b = sorted((i for i in range(n) if bm25[i] > 0), key=lambda i: (-bm25[i], i))[:depth]
    by_d = sorted(range(n), key=lambda i: (-dense[i], i))[: len(by_b)]
    if not by_b or not by_d:
        return float("nan")
    top = sum(dense[i] for i in by_d) / len(by_d)
    if top <= 0:
        return float("nan")
    return min(sum(dense[i] for i in by_b) / len(by_b) / top, 1.0)


def _peakedness_one(bm25: list[float], depth: int) -> float:
    """Plain reference for one query: 1 - mean of BM25's next best over its best."""
    top = sorted((v for v in bm25 if v > 0), reverse=True)[:depth]
    if len(top) < 2:
        return float("nan")
    return 1.0 - sum(top[1:]) / (len(top) - 1) / top[0]


def _table(scores: np.ndarray, valid: np.ndarray | None = None) -> Table:
    q, n = scores.shape[1:]
    ok = np.ones((q, n), dtype=bool) if valid is None else valid
    return Table(
        scores=scores,
        proposed=np.stack([signal_ranks(scores[j], ok, None, s) for j, s in enumerate(SIGNALS)]),
        valid=ok,
        tie=None,
        size=ok.sum(axis=1),
        ids=[[f"m{i}" for i in range(n)] for _ in range(q)],
    )


def _random(seed: int, q: int = 6, n: int = 30) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scores = rng.random((len(SIGNALS), q, n)).round(2)  # rounded: ties at the cut
    scores[_B] = np.where(rng.random((q, n)) < 0.4, 0.0, scores[_B])  # BM25 misses some
    scores[_B, 0] = 0.0  # a query no memory shares a word with
    return scores


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("depth", [1, 3, MIX_DEPTH])
def test_agreement_equals_the_plain_reference(seed: int, depth: int) -> None:
    scores = _random(seed)
    t = _table(scores)
    got = agreement(scores[_D], t.proposed[_B], t.proposed[_D], t.valid, depth)
    want = [_agreement_one(list(scores[_D, i]), list(scores[_B, i]), depth) for i in range(6)]
    assert np.allclose(got, want, equal_nan=True)
    assert np.isnan(got[0]) and np.all((got[1:] >= 0) & (got[1:] <= 1))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("depth", [1, 2, MIX_DEPTH])
def test_peakedness_equals_the_plain_reference(seed: int, depth: int) -> None:
    scores = _random(seed)
    scores[_B, 1, 1:] = 0.0  # one match only
    t = _table(scores)
    got = peakedness(scores[_B], t.proposed[_B], t.valid, depth)
    want = [_peakedness_one(list(scores[_B, i]), depth) for i in range(6)]
    assert np.allclose(got, want, equal_nan=True)
    assert np.isnan(got[:2]).all()


def test_the_weights_formula() -> None:
    w = np.array(W)
    got = mixed_weights(w, np.array([0.5, 0.9, 1.0, 0.0, np.nan]), 2.0, 0.9)
    assert got[:, 0] == pytest.approx([0.3 * 2**-0.8, 0.3, 0.3 * 2**0.2, 0.3 * 2**-1.8, 0.3])
    assert np.array_equal(got[:, 1:], np.tile(w[1:], (5, 1)))  # only BM25 moves
    peak = np.array([0.9, np.nan, 0.1, 0.5, 0.5])  # a stand-out match lifts BM25; NaN: no part
    both = mixed_weights(w, np.array([0.5, 0.9, 1.0, 0.0, np.nan]), 2.0, 0.9, peak, 1.0, 0.5)
    assert both[:, 0] == pytest.approx([0.3 * 2**-0.4, 0.3, 0.3 * 2**-0.2, 0.3 * 2**-1.8, 0.3])
    clipped = mixed_weights(w, np.array([0.0, 1.0]), 8.0, 0.5)[:, 0]
    assert clipped == pytest.approx([0.3 / 8, 0.3 * 4])  # between 1/8 and 4 times
    assert np.array_equal(mixed_weights(w, np.array([0.2, 1.0]), 0.0, 0.5), np.tile(w, (2, 1)))


@pytest.mark.parametrize("method", [FusionMethod.WEIGHTED_SUM, FusionMethod.RRF])
def test_rank_fuses_each_query_with_its_own_weights(method: FusionMethod) -> None:
    scores = _random(7)
    t = _table(scores)
    mix = {"mix_strength": 3.0, "mix_center": 0.8, "mix_peak_strength": 2.0, "mix_peak_center": 0.3}
    on = rank(t, Plan(weights=W, method=method, pool_min=10, **mix), 5)  # type: ignore[arg-type]
    agree = agreement(scores[_D], t.proposed[_B], t.proposed[_D], t.valid)
    peak = peakedness(scores[_B], t.proposed[_B], t.valid)
    per_query = mixed_weights(np.array(W), agree, 3.0, 0.8, peak, 2.0, 0.3)
    assert not np.allclose(per_query[:, 0], W[0])  # the mix really moved some weights
    for i in range(scores.shape[1]):
        one = _table(scores[:, i : i + 1])
        fixed = Plan(weights=tuple(per_query[i]), method=method, pool_min=10)  # type: ignore[arg-type]
        alone = rank(one, fixed, 5)
        assert on.ids(i) == alone.ids(0)
        assert np.allclose(on.fused[i], alone.fused[0])


def test_look_alikes_fall_below_the_meaning_only_with_the_mix() -> None:
    # "where do we keep credentials?": m0..m3 share the query's words but not its meaning,
    # m4 ("API keys live in Vault") shares its meaning and no word.
    n = 12
    scores = np.zeros((len(SIGNALS), 1, n))
    scores[_B, 0, :4] = [1.0, 0.9, 0.85, 0.8]
    scores[_D, 0, :5] = [0.30, 0.28, 0.27, 0.25, 0.70]
    scores[_D, 0, 5:] = 0.2
    t = _table(scores)
    off = rank(t, Plan(weights=W), 3)
    on = rank(t, Plan(weights=W, mix_strength=4.0, mix_center=0.9), 3)
    assert off.ids()[0] == "m0" and "m4" in off.ids()
    assert on.ids()[0] == "m4"
    parts = on.explain(0, 4)
    assert set(parts) == {"fused", *STAGES} and STAGES[0] == "mix"
    assert parts["fused"] == pytest.approx(float(off.fused[0, 4]))  # the fixed mix's score
    assert parts["mix"] > 0 and on.explain(0, 0)["mix"] < 0
    assert sum(parts.values()) == pytest.approx(float(on.score[0, 4]))
    assert off.explain(0, 4)["mix"] == 0.0 and off.plain is None
    assert Explanation(**parts).to_dict() == {k: parts[k] for k in Explanation(0).to_dict()}


def test_without_bm25_or_dense_nothing_moves() -> None:
    scores = _random(3)
    t = _table(scores)
    for w in ((0.0, 0.9, 0.0, 0.1), (0.5, 0.0, 0.5, 0.0)):
        off, on = rank(t, Plan(weights=w), 5), rank(t, Plan(weights=w, mix_strength=8.0), 5)
        assert np.array_equal(on.score, off.score)


def test_weights_files_carry_the_mix_and_bad_values_are_refused() -> None:
    mix = {
        "mix_strength": 2.0,
        "mix_center": 0.85,
        "mix_peak_strength": 4.0,
        "mix_peak_center": 0.3,
    }
    plan = Plan.of(Weights(*W, params=mix), NoraxConfig())
    assert {k: getattr(plan, k) for k in mix} == mix
    assert Plan.of(Weights(*W), NoraxConfig()).mix_strength == 0.0  # off by default
    bad_values = (
        {"mix_strength": -1.0},
        {"mix_center": 1.5},
        {"mix_strength": float("nan")},
        {"mix_peak_strength": -2.0},
        {"mix_peak_center": -0.1},
    )
    for bad in bad_values:
        with pytest.raises(InvalidInputError):
            NoraxConfig().with_params(bad)
    assert NEVER > MIX_DEPTH
