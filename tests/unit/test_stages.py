"""The period boost stage: its math, and what it does inside ``rank``."""

from __future__ import annotations

import numpy as np
import pytest

from norax_core.models import SIGNALS
from norax_core.query import Intent, Period, QueryPlan
from norax_core.ranking import STAGES, Plan, Table, rank, signal_ranks
from norax_core.signals.context import session_numbers
from norax_core.stages.period import boost, boost_one, inside, inside_one

DAY = 86_400.0
GAP = 3600.0
DENSE = (0.0, 1.0, 0.0, 0.0)


def _table(dense: list[float], times: list[float], periods: tuple[Period, ...] = ()) -> Table:
    """One query over rows ``m00, m01, ...`` scored by the dense signal alone."""
    n = len(dense)
    scores = np.zeros((len(SIGNALS), 1, n))
    scores[SIGNALS.index("dense"), 0] = dense
    valid = np.ones((1, n), dtype=bool)
    created = np.array([times], dtype=np.float64)

    def sessions(gap: float) -> np.ndarray:
        order = sorted(range(n), key=lambda i: (times[i], i))
        out = np.empty((1, n), dtype=np.int64)
        out[0, order] = session_numbers([times[i] for i in order], gap)
        return out

    plan = QueryPlan("q", 100 * DAY, Intent.LOOKUP, ((Intent.LOOKUP, 1.0),), periods)
    return Table(
        scores=scores,
        proposed=np.stack([signal_ranks(scores[j], valid, None, s) for j, s in enumerate(SIGNALS)]),
        valid=valid,
        tie=None,
        size=np.array([n]),
        created=created,
        ids=[[f"m{i:02d}" for i in range(n)]],
        plans=[plan],
        sessions=sessions,
    )


# -- period boost ---------------------------------------------------------------------------


def test_inside_is_one_in_the_period_only() -> None:
    times = np.array([[5.0, 10.0, 19.9, 20.0, 25.0, 30.0, 0.0, np.nan]])
    starts, ends = np.array([[10.0]]), np.array([[20.0]])
    step = inside(times, starts, ends)
    assert step.tolist() == [[0, 1, 1, 0, 0, 0, 0, 0]]  # [start, end): the end is outside
    for t, u in zip(times[0], step[0], strict=True):
        assert inside_one(float(t), [(10.0, 20.0)]) == u


def test_inside_takes_the_best_of_several_periods_and_zero_without_any() -> None:
    times = np.array([[5.0, 15.0, 35.0], [5.0, 15.0, 35.0]])
    starts = np.array([[10.0, 30.0], [np.nan, np.nan]])
    ends = np.array([[20.0, 40.0], [np.nan, np.nan]])
    assert inside(times, starts, ends).tolist() == [[0, 1, 1], [0, 0, 0]]


def test_boost_only_raises_and_is_off_at_zero() -> None:
    score = np.array([[0.5, 0.2, 0.0]])
    u = np.array([[1.0, 0.5, 1.0]])
    assert boost(score, u, 0.0) is score
    assert boost(score, u, 1.0).tolist() == [[1.0, 0.30000000000000004, 0.0]]
    ref = boost_one({"a": 0.5, "b": 0.2}, {"a": 15.0, "b": 0.0}, [(10.0, 20.0)], 1.0)
    assert ref == {"a": 1.0, "b": 0.2}


def test_a_memory_inside_the_named_period_rises() -> None:
    june = Period(30 * DAY, 60 * DAY, "in june")
    dense = [0.9, 0.8, 0.7, 0.6]
    times = [10 * DAY, 20 * DAY, 45 * DAY, 70 * DAY]  # only m02 was created in June
    off = rank(_table(dense, times, (june,)), Plan(DENSE), 4)
    on = rank(_table(dense, times, (june,)), Plan(DENSE, period_boost=0.5), 4)
    assert off.ids() == ["m00", "m01", "m02", "m03"]
    assert on.ids() == ["m02", "m00", "m01", "m03"]
    parts = on.explain(0, 2)
    assert parts["period"] == pytest.approx(0.35) and parts["fused"] == pytest.approx(0.7)
    assert all(on.explain(0, r)["period"] == 0 for r in (0, 1, 3))


def test_a_wrong_period_empties_nothing() -> None:
    """A period no memory falls in (a wrong parse) leaves the ranking as it was."""
    wrong = Period(500 * DAY, 530 * DAY, "in may")
    dense = [0.9, 0.8, 0.7, 0.6, 0.5]
    times = [10 * DAY, 20 * DAY, 45 * DAY, 70 * DAY, 80 * DAY]
    plain = rank(_table(dense, times), Plan(DENSE), 5)
    plan = Plan(DENSE, period_boost=2.0)
    got = rank(_table(dense, times, (wrong,)), plan, 5)
    assert got.ids() == plain.ids() and len(got.ids()) == 5
    assert np.array_equal(got.score, plain.score)


def test_explain_names_every_stage() -> None:
    got = rank(_table([0.5, 0.4], [0.0, 1.0]), Plan(DENSE), 2)
    assert list(got.explain(0, 0)) == ["fused", *STAGES]
