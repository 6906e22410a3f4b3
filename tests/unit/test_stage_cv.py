"""benchmarks/stage_cv.py: the stage grid rebuilds the shipped default, and the per-fold choice."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benchmarks.stage_cv import (
    SHIPPED_SHARE,
    STAGES,
    WEIGHTS,
    StageGrid,
    choose,
    grid,
    mix,
    strip_stages,
    with_choices,
)
from norax_core.config import NoraxConfig
from norax_core.presets import get_preset
from norax_core.query import Intent
from norax_core.ranking import Plan
from norax_core.weights import Weights


def test_the_grid_strips_and_rebuilds_the_shipped_default() -> None:
    shipped = get_preset("default")
    base = strip_stages(shipped, STAGES)
    assert "period_boost" not in base.params and not base.intents
    assert base.as_dict() == shipped.as_dict()
    # period 0.5; supersession 1.05 and latest wins' attribute rule (current_state); turns
    # opener 2.0 over a span of 20 and session spread 0.25 (coverage); bridges 0.1 (multi_hop,
    # entity) and 0.5 (decision)
    picks = {
        "period_boost": 2,
        "exchange": 1,
        "supersession": 2,
        "latest_wins": 1,
        "temporal_latest_wins": 1,
        "turns": 4,
        "session_spread": 1,
        "bridges": 2,
        "decision_bridges": 1,
        "lane": 1,
        "preference_lane": 2,
    }
    rebuilt = with_choices(base, picks, STAGES)
    cfg = NoraxConfig()
    for intent in (None, *Intent):
        assert Plan.of(rebuilt, cfg, intent) == Plan.of(shipped, cfg, intent), intent
    assert Plan.of(base, cfg, "current_state").supersede_weight == 0.0


class _Fake:
    """Recall and latest wins as functions of the chosen parameters (four questions).

    ``period_boost`` lifts questions 0 and 1; ``supersede_weight`` (for current-state
    questions) is their latest wins; ``speaker_boost`` there costs recall; ``opener_span``
    changes nothing.
    """

    def recall(self, w: Weights) -> np.ndarray:
        a = w.params.get("period_boost", 0.0)
        over = w.intents.get("current_state")
        cost = over.params.get("speaker_boost", 0.0) if over else 0.0
        return np.array([0.5 + a, 0.5 + a, 0.5, 0.5]) - cost

    def latest(self, w: Weights) -> np.ndarray:
        over = w.intents.get("current_state")
        b = over.params.get("supersede_weight", 0.0) if over else 0.0
        return np.array([b, b, np.nan, np.nan])


def test_each_stage_is_chosen_on_the_training_questions_only() -> None:
    lifts = grid("supersede_weight", 0.5, 1.0) + ({"supersede_weight": 2.0, "speaker_boost": 0.1},)
    stages = [
        StageGrid("a", grid("period_boost", 0.1, 0.2)),
        StageGrid("noop", grid("opener_span", 1.0)),
        StageGrid("b", lifts, intents=("current_state",), objective="latest_wins"),
    ]
    base = Weights(0.5, 0.5, 0.0, 0.0)
    ds = np.array(["x", "x", "y", "y"])
    fake: Any = _Fake()
    # trained on questions 0 and 2: "a" helps question 0, so its largest value wins
    got = choose(fake, base, np.array([True, False, True, False]), ds, stages)
    assert got == {"a": 2, "noop": 0, "b": 2}  # a tie keeps "off"; the 2.0 costs recall
    # trained without the questions "a" helps: it stays off
    got = choose(fake, base, np.array([False, False, True, True]), ds, stages)
    assert got["a"] == 0


def test_a_mix_stage_sets_its_intents_weights_and_strips_back_to_the_global_mix() -> None:
    shipped = get_preset("default")
    mixes = [StageGrid("mix_x", ({}, mix(0.9, 0.0)), intents=("current_state", "lookup"))]
    chosen = with_choices(shipped, {"mix_x": 1}, mixes)
    cfg = NoraxConfig()
    for intent in ("current_state", "lookup"):
        got = Plan.of(chosen, cfg, intent)
        assert got.weights == (0.1, 0.9, 0.0, 0.0), intent
    # the current_state override keeps its own params (supersession) under the new mix
    assert Plan.of(chosen, cfg, "current_state").supersede_weight == 1.05
    assert Plan.of(chosen, cfg, "lookup").supersede_weight == 0.0
    for intent in (None, "entity", "coverage"):
        assert Plan.of(chosen, cfg, intent) == Plan.of(shipped, cfg, intent), intent
    # stripping the mix stage puts the global weights back and drops an override left empty
    stripped = strip_stages(chosen, mixes)
    assert set(stripped.intents) == set(shipped.intents)
    for intent in (None, *Intent):
        assert Plan.of(stripped, cfg, intent) == Plan.of(shipped, cfg, intent), intent
    # the grid's mix stages are trials: the shipped stages alone rebuild the shipped default
    mix_stages = [s for s in STAGES if s.sets_weights]
    assert mix_stages and all(s.trial for s in mix_stages)
    kept = [s for s in STAGES if not s.trial]
    assert strip_stages(shipped, STAGES) == strip_stages(shipped, kept)
    # the shipped default's mix, as a setting
    assert mix(SHIPPED_SHARE, 0.1)[WEIGHTS] == {
        k: round(v, 6) for k, v in shipped.as_dict().items()
    }


def test_a_mix_needs_intents() -> None:
    with pytest.raises(ValueError, match="need intents"):
        StageGrid("global_mix", ({}, mix(0.5, 0.1)))
