"""The supersession stage: array form equals the reference, and rank applies it."""

from __future__ import annotations

import numpy as np
import pytest

from norax_core.ranking import NEVER, Plan, Table, rank
from norax_core.stages.supersede import supersede, supersede_arrays


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("weight", [0.5, 1.0, 1.5])
@pytest.mark.parametrize("pull", [True, False])
def test_arrays_equal_reference(seed: int, weight: float, pull: bool) -> None:
    rng = np.random.default_rng(seed)
    q, n, s = 3, 12, 2
    score = rng.random((q, n))
    cand = rng.random((q, n)) < 0.6
    top = cand & (rng.random((q, n)) < 0.5)
    newer = np.full((s, q, n), n)
    for i in range(q):
        for r in range(n):
            later = rng.choice(n, size=rng.integers(0, s + 1), replace=False)
            newer[: len(later), i, r] = later
    got_cand, got = supersede_arrays(score, cand, top, newer, weight, pull=pull)
    for i in range(q):
        ids = [str(r) for r in range(n)]
        nb = {str(r): [str(j) for j in newer[:, i, r] if j < n] for r in range(n)}
        c = [ids[r] for r in range(n) if cand[i, r]]
        t = [ids[r] for r in range(n) if top[i, r]]
        sc = dict(zip(ids, score[i], strict=True))
        want_cand, want = supersede(sc, c, t, nb, weight, pull=pull)
        assert set(want_cand) == {ids[r] for r in range(n) if got_cand[i, r]}
        for m in want_cand:
            assert got[i, int(m)] == pytest.approx(want[m], abs=1e-12)


def _table(scores: list[float], newer: dict[int, list[int]]) -> Table:
    n = len(scores)
    sc = np.zeros((4, 1, n))
    sc[1, 0] = scores  # dense only
    order = np.argsort(-np.asarray(scores), kind="stable")
    proposed = np.full((4, 1, n), NEVER, dtype=np.int32)
    proposed[1, 0, order] = np.arange(n)
    slots = np.full((2, 1, n), n)
    for o, later in newer.items():
        slots[: len(later), 0, o] = later
    return Table(sc, proposed, np.ones((1, n), bool), None, np.array([n]), newer=slots)


def test_rank_lifts_the_newer_above_the_older_and_explains_it() -> None:
    # row 3 (weak) supersedes row 0 (the best)
    table = _table([0.9, 0.8, 0.7, 0.2], {0: [3]})
    off = rank(table, Plan((0, 1, 0, 0)), 4)
    assert off.top() == [0, 1, 2, 3]
    on = rank(table, Plan((0, 1, 0, 0), supersede_weight=1.1), 4)
    assert on.top() == [3, 0, 1, 2]
    ex = on.explain(0, 3)
    assert ex["supersede"] == pytest.approx(1.1 * (0.9 - 0.2))
    assert sum(ex.values()) == pytest.approx(on.score[0, 3])
    assert on.explain(0, 0)["supersede"] == 0.0


def test_rank_pulls_a_newer_memory_no_signal_proposed() -> None:
    table = _table([0.9, 0.8, 0.7, 0.2], {0: [3]})
    # only the best two are proposed (pool of 2): row 3 is no candidate of its own
    plan = Plan((0, 1, 0, 0), pool_min=2, pool_factor=1, supersede_weight=1.1)
    got = rank(table, plan, 2)
    assert got.top() == [3, 0]


def test_rank_ignores_newer_of_candidates_below_the_depth() -> None:
    table = _table([0.9, 0.8, 0.7, 0.2], {2: [3]})
    got = rank(table, Plan((0, 1, 0, 0), supersede_weight=1.1, supersede_depth=2), 4)
    assert got.top() == [0, 1, 2, 3]


def test_without_pull_only_the_best_are_reordered() -> None:
    table = _table([0.9, 0.8, 0.7, 0.2], {0: [3, 1]})
    plan = Plan((0, 1, 0, 0), supersede_weight=1.1, supersede_depth=2, supersede_pull=False)
    assert rank(table, plan, 4).top() == [1, 0, 2, 3]


def test_rank_refuses_a_table_without_links() -> None:
    table = _table([0.9, 0.2], {})
    bare = Table(table.scores, table.proposed, table.valid, None, table.size)
    with pytest.raises(ValueError, match="superseding"):
        rank(bare, Plan((0, 1, 0, 0), supersede_weight=1.0), 2)
