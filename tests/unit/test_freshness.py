"""Freshness: scores scaled by each memory's decay, as a stage of the one ranking."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from norax_core.config import NoraxConfig
from norax_core.errors import InvalidInputError
from norax_core.models import SIGNALS
from norax_core.ranking import STAGES, Plan, Table, rank, signal_ranks
from norax_core.stages.freshness import freshness
from norax_core.weights import Weights

_T = SIGNALS.index("temporal")


def test_the_formula() -> None:
    s, f = np.array([0.8, 0.7, 0.0]), np.array([0.0, 0.9, 1.0])
    assert np.allclose(freshness(s, f, 0.3), [0.56, 0.7 * 0.97, 0.0])
    assert np.array_equal(freshness(s, f, 0.0), s)
    assert np.allclose(freshness(s, f, 1.0), s * f)


def _table(fused: list[float], fresh: list[float], kinds: list[str] | None = None) -> Table:
    """One query; the dense signal carries the relevance, the temporal one the freshness."""
    n = len(fused)
    kinds = kinds or ["scratchpad"] * n
    scores = np.zeros((len(SIGNALS), 1, n))
    scores[SIGNALS.index("dense"), 0] = fused
    scores[_T, 0] = fresh
    valid = np.ones((1, n), dtype=bool)
    return Table(
        scores=scores,
        proposed=np.stack([signal_ranks(scores[j], valid, None, s) for j, s in enumerate(SIGNALS)]),
        valid=valid,
        tie=None,
        size=np.array([n]),
        ids=[[f"m{i}" for i in range(n)]],
        kinds=np.array([kinds]),
    )


def test_a_stale_memory_falls_below_a_fresh_one_only_with_the_stage() -> None:
    # m0: the better match, months old (freshness 0); m1: a little less relevant, fresh.
    table = _table([0.80, 0.70, 0.10], [0.0, 0.95, 1.0])
    off = rank(table, Plan(weights=(0.0, 1.0, 0.0, 0.0)), 3)
    on = rank(table, Plan(weights=(0.0, 1.0, 0.0, 0.0), freshness=0.3), 3)
    assert off.ids() == ["m0", "m1", "m2"]
    assert on.ids() == ["m1", "m0", "m2"]  # reorders the relevant ones ...
    assert on.candidates.sum() == off.candidates.sum()  # ... and proposes nothing new
    for r in on.top():
        parts = on.explain(0, r)
        assert set(parts) == {"fused", *STAGES}
        assert "freshness" in STAGES
        assert sum(parts.values()) == pytest.approx(float(on.score[0, r]))
        assert parts["freshness"] <= 0
    assert off.explain(0, 0)["freshness"] == 0.0


def test_an_irrelevant_fresh_memory_is_not_lifted() -> None:
    table = _table([0.80, 0.05], [0.5, 1.0])
    on = rank(table, Plan(weights=(0.0, 1.0, 0.0, 0.0), freshness=0.5), 2)
    assert on.ids() == ["m0", "m1"]


def test_weights_params_set_it_and_bad_values_are_refused() -> None:
    w = Weights(0.3, 0.7, 0.0, 0.0, params={"freshness_weight": 0.25})
    assert Plan.of(w, NoraxConfig()).freshness == 0.25
    assert Plan.of(Weights(0.3, 0.7, 0.0, 0.0), NoraxConfig()).freshness == 0.0
    for bad in (-0.1, 1.5, True, "0.2"):
        with pytest.raises(InvalidInputError, match="freshness_weight"):
            NoraxConfig(freshness_weight=bad)  # type: ignore[arg-type]


def test_only_the_listed_kinds_are_scaled() -> None:
    # m0 an old episodic turn, m1 a stale scratch note, m2 a fresh scratch note
    table = _table([0.80, 0.78, 0.70], [0.01, 0.0, 0.99], ["episodic", "scratchpad", "scratchpad"])
    on = rank(table, Plan(weights=(0.0, 1.0, 0.0, 0.0), freshness=0.5), 3)
    assert on.ids() == ["m0", "m2", "m1"]
    assert on.explain(0, 0)["freshness"] == 0.0  # the episodic turn is untouched
    assert on.explain(0, 1)["freshness"] < 0
    every = Plan(weights=(0.0, 1.0, 0.0, 0.0), freshness=0.5, freshness_kinds=("episodic",))
    assert rank(table, every, 3).ids() == ["m1", "m2", "m0"]  # now only the turn is scaled


def test_kinds_come_from_the_config_and_a_table_without_them_is_refused() -> None:
    w = Weights(0.3, 0.7, 0.0, 0.0, params={"freshness_weight": 0.2})
    assert Plan.of(w, NoraxConfig()).freshness_kinds == ("scratchpad",)
    w2 = Weights(0.3, 0.7, 0.0, 0.0, params={"freshness_kinds": ["scratchpad", "working"]})
    assert Plan.of(w2, NoraxConfig()).freshness_kinds == ("scratchpad", "working")
    for bad in ("scratchpad", [""], [3], None):
        with pytest.raises(InvalidInputError, match="freshness_kinds"):
            NoraxConfig(freshness_kinds=bad)  # type: ignore[arg-type]
    bare = replace(_table([0.5, 0.4], [1.0, 0.0]), kinds=None)
    with pytest.raises(ValueError, match="kinds"):
        rank(bare, Plan(weights=(0.0, 1.0, 0.0, 0.0), freshness=0.5), 2)
    assert rank(bare, Plan(weights=(0.0, 1.0, 0.0, 0.0)), 2).ids() == ["m0", "m1"]
