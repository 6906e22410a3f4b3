"""The turns stage and its cues: the cues, the math, and what ``rank`` does."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from norax_core.config import NoraxConfig
from norax_core.errors import InvalidInputError
from norax_core.models import SIGNALS
from norax_core.query import Intent, QueryPlan, plan_query
from norax_core.query.cues import asks_order, asks_own_words
from norax_core.ranking import Plan, Table, rank, signal_ranks
from norax_core.signals.context import session_numbers, session_positions
from norax_core.stages.turns import opener_weight, spread_factor, spread_one, turns_factor

GAP = 3600.0
DENSE = (0.0, 1.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("text", "order", "own"),
    [
        ("Can you list the order in which I brought up different aspects of my app?", 1, 1),
        ("In what order did I mention the database, the UI and the tests?", 1, 1),
        ("Walk me through, in order, the parts I discussed across our conversations", 1, 1),
        ("List chronologically what we decided about the wallet", 1, 0),
        ("Summarize how my budget tracker progressed, including the development timeline", 0, 0),
        ("What did I do in order to fix the login bug?", 0, 0),
        ("Give me a recap of the security work", 0, 0),
        ("What did Caroline say about the adoption agency?", 0, 0),
        ("Did I ask you about rate limits before?", 0, 1),
    ],
)
def test_the_cues_tell_ordering_and_own_words_apart(text: str, order: int, own: int) -> None:
    assert asks_order(text) is bool(order)
    assert asks_own_words(text) is bool(own)
    plan = plan_query(text, 0.0)
    assert (plan.ordering, plan.own_words) == (bool(order), bool(own))
    assert plan.to_dict()["ordering"] is bool(order)


def test_session_positions_count_from_each_session_start() -> None:
    times = [0.0, 10.0, 20.0, 10_000.0, 10_001.0, 30_000.0]
    assert session_positions(times, GAP) == [0, 1, 2, 0, 1, 0]
    assert session_positions([], GAP) == []
    # the same split as session_numbers
    numbers = session_numbers(times, GAP)
    assert all(
        (p == 0) == (i == 0 or numbers[i] != numbers[i - 1])
        for i, p in enumerate([0, 1, 2, 0, 1, 0])
    )


def test_opener_weight_falls_by_e_per_span_and_is_zero_when_unknown() -> None:
    got = opener_weight(np.array([[0, 5, 10, -1]]), 5.0)
    assert got[0].tolist() == pytest.approx([1.0, math.exp(-1), math.exp(-2), 0.0])


def test_turns_factor_matches_its_formula() -> None:
    rng = random.Random(3)
    q, n = 3, 7
    pos = np.array([[rng.randrange(-1, 12) for _ in range(n)] for _ in range(q)])
    user = np.array([[rng.random() < 0.5 for _ in range(n)] for _ in range(q)])
    own = np.array([True, False, True])
    got = turns_factor((q, n), pos, user, own, 0.8, 4.0, 1.5)
    for i in range(q):
        for j in range(n):
            lead = math.exp(-pos[i, j] / 4.0) if pos[i, j] >= 0 else 0.0
            want = (1 + 0.8 * lead) * (1 + 1.5 * (user[i, j] and own[i]))
            assert got[i, j] == pytest.approx(want)
    assert (turns_factor((q, n), None, None, own, 0.8, 4.0, 1.5) == 1).all()


def _plan(text: str) -> QueryPlan:
    p = plan_query(text, 0.0)
    return QueryPlan(
        p.text,
        0.0,
        Intent.COVERAGE,
        ((Intent.COVERAGE, 1.0),),
        ordering=p.ordering,
        own_words=p.own_words,
    )


def _table(dense: list[float], times: list[float], users: list[bool], texts: list[str]) -> Table:
    """Queries ``texts`` over the same rows ``m00, m01, ...``, scored by dense alone."""
    n, q = len(dense), len(texts)
    scores = np.zeros((len(SIGNALS), q, n))
    scores[SIGNALS.index("dense")] = dense
    valid = np.ones((q, n), dtype=bool)
    order = sorted(range(n), key=lambda i: (times[i], i))

    def by_time(values: list[int]) -> np.ndarray:
        out = np.empty((q, n), dtype=np.int64)
        out[:, order] = values
        return out

    return Table(
        scores=scores,
        proposed=np.stack([signal_ranks(scores[j], valid, None, s) for j, s in enumerate(SIGNALS)]),
        valid=valid,
        tie=None,
        size=np.full(q, n),
        created=np.array([times] * q, dtype=np.float64),
        ids=[[f"m{i:02d}" for i in range(n)]] * q,
        plans=[_plan(t) for t in texts],
        sessions=lambda gap: by_time(session_numbers([times[i] for i in order], gap)),
        positions=lambda gap, wanted=None: by_time(
            session_positions([times[i] for i in order], gap)
        ),
        users=lambda wanted=None: np.array([users] * q, dtype=bool),
    )


# rows: two sessions; m00 / m03 open them (user), replies follow
DENSE_SCORES = [0.50, 0.70, 0.90, 0.55, 0.80, 0.60]
TIMES = [0.0, 1.0, 2.0, 10_000.0, 10_001.0, 10_002.0]
USERS = [True, False, True, True, False, True]
ORDER_Q = "In what order did I bring up the parts of the app?"
SUMMARY_Q = "Summarize how the app went"


def _ids(
    plan: Plan, texts: list[str], k: int = 6, dense: list[float] = DENSE_SCORES
) -> list[list[str]]:
    got = rank(_table(dense, TIMES, USERS, texts), plan, k)
    return [got.ids(i) for i in range(len(texts))]


def test_the_speaker_boost_lifts_the_users_memories_for_own_words_queries_only() -> None:
    plain = Plan(DENSE)
    boosted = Plan(DENSE, speaker_boost=1.0)
    before = _ids(plain, [ORDER_Q, SUMMARY_Q])
    after = _ids(boosted, [ORDER_Q, SUMMARY_Q])
    assert before[0] == ["m02", "m04", "m01", "m05", "m03", "m00"]
    assert after[0] == ["m02", "m05", "m03", "m00", "m04", "m01"]  # the user's first
    assert after[1] == before[1]  # a summary question does not ask for the user's words


def test_the_opener_boost_lifts_the_first_turns_of_each_session() -> None:
    got = rank(
        _table(DENSE_SCORES, TIMES, USERS, [SUMMARY_Q]),
        Plan(DENSE, opener_boost=1.0, opener_span=1.0),
        6,
    )
    # m03 opens its session: 0.55 * 2 = 1.1 passes m02 (third turn) 0.9 * (1 + e^-2) = 1.02
    assert got.ids(0)[:3] == ["m03", "m04", "m02"]
    assert got.explain(0, 3)["turns"] == pytest.approx(0.55)
    assert sum(got.explain(0, 3).values()) == pytest.approx(got.score[0, 3])


def test_the_config_refuses_bad_turns_parameters() -> None:
    for bad in ({"opener_boost": -1.0}, {"opener_span": 0.0}, {"speaker_boost": float("nan")}):
        with pytest.raises(InvalidInputError):
            NoraxConfig(**bad)  # type: ignore[arg-type]


def test_spread_factor_matches_its_reference() -> None:
    rng = random.Random(7)
    q, n = 4, 12
    score = np.array([[round(rng.random(), 2) for _ in range(n)] for _ in range(q)])
    cand = np.array([[rng.random() < 0.8 for _ in range(n)] for _ in range(q)])
    sessions = np.array([[rng.randrange(-1, 3) for _ in range(n)] for _ in range(q)])
    on = np.array([True, True, False, True])
    ids = [f"m{j:02d}" for j in range(n)]
    got = score * spread_factor(score, cand, sessions, None, on, 0.4)
    for i in range(q):
        live = [j for j in range(n) if cand[i, j]]
        want = spread_one(
            {ids[j]: float(score[i, j]) for j in live},
            {ids[j]: int(sessions[i, j]) for j in live},
            0.4 if on[i] else 0.0,
        )
        assert [got[i, j] for j in live] == pytest.approx([want[ids[j]] for j in live])
    assert (got[~cand] == score[~cand]).all()  # non-candidates keep their scores
    assert (spread_factor(score, cand, sessions, None, on, 0.0) == 1).all()


def test_spread_one_puts_each_sessions_best_before_any_sessions_second() -> None:
    scores = {"a1": 0.9, "a2": 0.8, "a3": 0.7, "b1": 0.6, "c1": 0.5, "x": 0.4}
    sessions = {"a1": 0, "a2": 0, "a3": 0, "b1": 1, "c1": 2}  # x: session unknown
    got = spread_one(scores, sessions, 0.5)
    assert sorted(got, key=lambda m: -got[m]) == ["a1", "b1", "c1", "a2", "x", "a3"]
    assert got["a2"] == pytest.approx(0.4) and got["a3"] == pytest.approx(0.175)
    assert got["x"] == 0.4  # an unknown session is not spread


def test_the_session_spread_spreads_order_questions_over_sessions_only() -> None:
    # one session holds the four best memories; an order question's top 3 takes each
    # session's best first, a summary question keeps the plain order
    dense = [0.90, 0.85, 0.80, 0.75, 0.50, 0.40]
    times = [0.0, 1.0, 2.0, 3.0, 10_000.0, 20_000.0]
    users = [True] * 6
    table = _table(dense, times, users, [ORDER_Q, SUMMARY_Q])
    plain = rank(table, Plan(DENSE), 3)
    spread = rank(table, Plan(DENSE, session_spread=0.5), 3)
    assert [plain.ids(i) for i in (0, 1)] == [["m00", "m01", "m02"]] * 2
    assert spread.ids(0) == ["m00", "m04", "m01"]
    assert spread.ids(1) == plain.ids(1)
    # the turns stage explains the change: m01 keeps half its score
    assert spread.explain(0, 1)["turns"] == pytest.approx(-0.425)
    assert sum(spread.explain(0, 1).values()) == pytest.approx(spread.score[0, 1])


def test_the_config_refuses_a_bad_session_spread() -> None:
    for bad in (-0.1, 1.0, True, float("nan")):
        with pytest.raises(InvalidInputError):
            NoraxConfig(session_spread=bad)  # type: ignore[arg-type]
    assert NoraxConfig(session_spread=0.5).session_spread == 0.5
