"""The lane's place (stages.lane ``place``): the memories it lifts can lead the top k."""

from __future__ import annotations

import numpy as np

from norax_core.config import NoraxConfig
from norax_core.errors import InvalidInputError
from norax_core.stages.lane import lane_picks, pickable, reserve


def _order(joined: np.ndarray, out: np.ndarray) -> list[int]:
    return np.argsort(-np.where(joined, out, -np.inf)[0], kind="stable").tolist()


def test_place_one_puts_the_lifted_memory_first() -> None:
    score = np.array([[0.9, 0.8, 0.7, 0.1]])
    cand = np.ones((1, 4), dtype=bool)
    match = np.array([[0.0, 0.0, 0.0, 0.5]])
    joined, out = reserve(score, cand, None, np.array([3]), match, 0.4, 1, place=1)
    assert _order(joined, out)[:3] == [3, 0, 1]  # first; the others keep their order
    assert out[0, 0] == 0.9 and out[0, 1] == 0.8  # and their scores
    assert out[0, 3] == np.nextafter(0.9, np.inf)  # just above the result it passes
    # place 0 (the default): the last place of the top k, as before
    joined, out = reserve(score, cand, None, np.array([3]), match, 0.4, 1)
    assert _order(joined, out)[:3] == [0, 1, 3]


def test_place_moves_a_lane_memory_already_in_the_top_k_up_to_it() -> None:
    score = np.array([[0.9, 0.8, 0.7, 0.6]])
    cand = np.ones((1, 4), dtype=bool)
    match = np.array([[0.0, 0.0, 0.45, 0.0]])
    joined, out = reserve(score, cand, None, np.array([3]), match, 0.4, 1, place=1)
    assert _order(joined, out)[:3] == [2, 0, 1]
    # with place 0 it stays where it is
    _, out = reserve(score, cand, None, np.array([3]), match, 0.4, 1)
    assert (out == score).all()


def test_place_two_keeps_the_best_result_first_and_orders_by_match() -> None:
    score = np.array([[0.9, 0.8, 0.7, 0.2, 0.1]])
    cand = np.ones((1, 5), dtype=bool)
    match = np.array([[0.0, 0.0, 0.0, 0.5, 0.6]])
    joined, out = reserve(score, cand, None, np.array([4]), match, 0.4, 2, place=2)
    assert _order(joined, out)[:4] == [0, 4, 3, 1]  # best match at 2, then the other


def test_place_leaves_small_searches_and_unmatched_queries_alone() -> None:
    score = np.array([[0.9, 0.1]])
    cand = np.ones((1, 2), dtype=bool)
    match = np.array([[0.0, 0.6]])
    _, out = reserve(score, cand, None, np.array([1]), match, 0.3, 1, place=1)
    assert (out == score).all()  # k = 1: the best result stays first
    _, out = reserve(score, cand, None, np.array([2]), np.zeros((1, 2)), 0.3, 1, place=1)
    assert (out == score).all()  # nothing matches: nothing moves
    # a lane memory already first keeps its score
    _, out = reserve(
        np.array([[0.9, 0.1]]), cand, None, np.array([2]), np.array([[0.6, 0.0]]), 0.3, 1, place=1
    )
    assert out.tolist() == [[0.9, 0.1]]


def test_lane_place_is_validated() -> None:
    assert NoraxConfig(lane_place=1).lane_place == 1
    for bad in (-1, 1.5, True):
        try:
            NoraxConfig(lane_place=bad)  # type: ignore[arg-type]
        except InvalidInputError as e:
            assert "lane_place" in str(e)
        else:
            raise AssertionError(f"lane_place={bad!r} was accepted")


def test_more_slots_than_places_still_leave_the_best_result_one() -> None:
    """Three slots in a top 3: the two best matches take places 1 and 2, the best result 3."""
    score = np.array([[0.9, 0.8, 0.7, 0.3, 0.2, 0.1]])
    cand = np.ones((1, 6), dtype=bool)
    match = np.array([[0.0, 0.0, 0.0, 0.35, 0.6, 0.5]])
    joined, out = reserve(score, cand, None, np.array([3]), match, 0.3, 3, place=1)
    assert _order(joined, out)[:3] == [4, 5, 0]
    assert out[0, 3] == 0.3  # the third pick found no place and keeps its score
    joined, out = reserve(score, cand, None, np.array([3]), match, 0.3, 3)
    assert _order(joined, out)[:3] == [0, 4, 5]  # place 0: the last two places


def test_with_params_reaches_every_intent_override() -> None:
    from norax_core.presets import get_preset

    default = get_preset("default")
    assert default.for_intent("preference").params["lane_slots"] == 3  # its own override
    off = default.with_params(lane_slots=0)
    assert off.params["lane_slots"] == 0
    assert all(off.for_intent(i).params["lane_slots"] == 0 for i in default.intents)
    # the overrides' other params are theirs still
    assert off.for_intent("preference").params["exchange_depth"] == 10
    assert default.params["lane_slots"] == 1  # the original is not changed


def test_standing_memories_outside_pickable_change_no_pick() -> None:
    rng = np.random.default_rng(4)
    for _ in range(400):
        n = int(rng.integers(1, 30))
        standing = rng.random(n) < 0.6
        match = np.where(standing, rng.choice([0.0, 0.05, 0.12, 0.2, 0.3, 0.45, 0.6], n), 0.0)
        slots, threshold = int(rng.integers(1, 4)), float(rng.choice([0.3, 0.4]))
        margin, floor = float(rng.choice([0.0, 0.1])), 0.1
        full = lane_picks(match[None, :], threshold, slots, margin, floor)[0]
        given = standing & (rng.random(n) < 0.3)  # rows the table holds anyway (proposed)
        rest = np.flatnonzero(standing & ~given)
        keep = np.ones(n, dtype=bool)
        keep[rest] = pickable(match[rest], threshold, slots)
        lean = lane_picks(match[None, keep], threshold, slots, margin, floor)[0]
        assert not full[~keep].any()  # a memory left out is never one the lane picks
        np.testing.assert_array_equal(lean, full[keep])  # and the picks stay the same
