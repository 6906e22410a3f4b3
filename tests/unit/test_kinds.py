"""The inferred-kind rule (norax_core.kinds) and the lane's reserved places (stages.lane)."""

from __future__ import annotations

import numpy as np
import pytest

from norax_core.kinds import INFERRED_KINDS, STANDING, given_kind, infer_kind, inferred_kinds
from norax_core.stages.lane import lane_picks, reserve

INSTRUCTIONS = [
    "Always include version numbers when I ask about software dependencies.",
    "Never use semicolons in the JavaScript you write for me.",
    "From now on, answer in British English.",
    "Please don't suggest paid tools.",
    "Make sure to add type hints to every function.",
    "Going forward, keep the answers under 200 words.",
    "I want you to always cite your sources.",
    "Whenever I ask about deadlines, give the dates as month-day-year.",
]
PREFERENCES = [
    "I prefer simple, minimal dependencies.",
    "I'd rather use Postgres than MySQL.",
    "I'm trying to keep my bundle under 100KB.",
    "I can't stand long meetings.",
    "I'm allergic to peanuts.",
    "I'm vegetarian, so no meat in the recipes.",
    "I really dislike running, but I enjoy cycling.",
    "I don't drink alcohol, so count me out of the wine.",
    "I'm really into minimalist designs.",
]
NEITHER = [
    ("I've never written a Flask route before.", "fact"),  # "never" about the past
    ("He's always late to the standup.", "fact"),
    ("I'll make sure to test it tomorrow.", "event"),  # a promise, not a rule
    ("Can you help me write a login form?", "scratchpad"),
    ("Yesterday I went to the dentist.", "event"),
    ("Our staging server runs Ubuntu 22.04.", "fact"),
    ("How can I avoid losing the application fee?", "scratchpad"),
    ("I'd like to add a category column to the transactions table.", "fact"),  # a request
]


@pytest.mark.parametrize("text", INSTRUCTIONS)
def test_standing_rules_are_instructions(text: str) -> None:
    assert infer_kind(text, "user") == "instruction"
    assert infer_kind(text) == "instruction"  # no role: possibly the user's


@pytest.mark.parametrize("text", PREFERENCES)
def test_stated_tastes_are_preferences(text: str) -> None:
    assert infer_kind(text, "user") == "preference"


@pytest.mark.parametrize(("text", "kind"), NEITHER)
def test_look_alikes_are_not_standing(text: str, kind: str) -> None:
    assert infer_kind(text, "user") == kind


@pytest.mark.parametrize("role", ["assistant", "AI", "system", "tool"])
def test_only_the_users_words_are_their_instructions(role: str) -> None:
    for text in INSTRUCTIONS + PREFERENCES:
        assert infer_kind(text, role) not in STANDING


def test_a_given_kind_settles_it_and_episodic_does_not() -> None:
    assert given_kind(None) is None and given_kind("episodic") is None
    assert given_kind("procedural") == "instruction"
    assert given_kind("semantic") == "fact"
    assert given_kind("preference") == "preference"
    assert given_kind("my-custom-kind") is None
    got = inferred_kinds(
        ["Always be brief.", "Always be brief.", "Always be brief.", "notes"],
        [None, "episodic", "semantic", "scratchpad"],
        [{}, {"role": "user"}, {}, {}],
    )
    assert got == ["instruction", "instruction", "fact", "scratchpad"]
    assert set(got) <= set(INFERRED_KINDS)


def test_lane_picks_the_best_matches_above_the_threshold() -> None:
    match = np.array([[0.0, 0.5, 0.2, 0.6, 0.45], [0.1, 0.0, 0.0, 0.0, 0.0]])
    assert lane_picks(match, 0.3, 2).tolist() == [
        [False, True, False, True, False],
        [False] * 5,
    ]
    assert not lane_picks(match, 0.3, 0).any()
    assert not lane_picks(np.zeros((1, 3)), 0.0, 2).any()  # a zero match never counts


def test_lane_picks_a_clear_leader_below_the_bar_by_its_lead() -> None:
    # rows: a clear leader (0.25 vs 0.05), a close call (0.25 vs 0.2), a lone rule (0.15),
    # a leader under the floor (0.08), and two slots (0.3, 0.28 lead the third, 0.1)
    match = np.array(
        [
            [0.0, 0.25, 0.05, 0.0],
            [0.0, 0.25, 0.2, 0.0],
            [0.15, 0.0, 0.0, 0.0],
            [0.08, 0.0, 0.0, 0.0],
        ]
    )
    got = lane_picks(match, 0.4, 1, margin=0.1, floor=0.1)
    assert got.tolist() == [
        [False, True, False, False],
        [False] * 4,  # the runner-up is too close: no rule clearly applies
        [True, False, False, False],  # no runner-up: the lead is the match itself
        [False] * 4,  # below the floor
    ]
    assert not lane_picks(match, 0.4, 1).any()  # without a margin only the bar counts
    # the absolute bar still admits a close call
    assert lane_picks(np.array([[0.5, 0.45]]), 0.4, 1, 0.1, 0.1).tolist() == [[True, False]]
    # with two slots the lead is over the third best
    two = lane_picks(np.array([[0.3, 0.28, 0.1]]), 0.4, 2, 0.1, 0.1)
    assert two.tolist() == [[True, True, False]]


def test_reserve_lifts_a_clear_leader_only_with_a_margin() -> None:
    score = np.array([[0.9, 0.8, 0.7, 0.1]])
    cand = np.ones((1, 4), dtype=bool)
    match = np.array([[0.0, 0.0, 0.0, 0.2]])  # below the bar 0.4, alone in the namespace
    _, out = reserve(score, cand, None, np.array([2]), match, 0.4, 1)
    assert (out == score).all()
    _, out = reserve(score, cand, None, np.array([2]), match, 0.4, 1, 0.1, 0.1)
    assert out[0, 3] > out[0, 1] == 0.8  # lifted into the second place


def test_reserve_lifts_into_the_last_places_and_moves_nothing_else() -> None:
    score = np.array([[0.9, 0.8, 0.7, 0.6, 0.1, 0.05]])
    cand = np.array([[True, True, True, True, True, False]])
    match = np.array([[0.0, 0.0, 0.0, 0.0, 0.5, 0.6]])  # two standing memories, low scores
    joined, out = reserve(score, cand, None, np.array([3]), match, 0.3, 2)
    order = np.argsort(-np.where(joined, out, -np.inf)[0], kind="stable").tolist()
    # the best first result keeps its place; the two standing ones take places 2 and 3
    assert order[:3] == [0, 5, 4]
    assert joined[0, 5]  # a non-candidate the lane lifts joins the candidates
    assert out[0, 0] == 0.9 and out[0, 1] == 0.8  # results it does not displace keep scores
    assert out[0, 5] > out[0, 4] > 0.8  # best match above, both just above what they pass


def test_reserve_leaves_a_standing_memory_already_in_the_top_k_alone() -> None:
    score = np.array([[0.9, 0.8, 0.7]])
    cand = np.ones((1, 3), dtype=bool)
    match = np.array([[0.0, 0.5, 0.0]])
    joined, out = reserve(score, cand, None, np.array([2]), match, 0.3, 1)
    assert (out == score).all() and (joined == cand).all()
    # and one below the threshold is never lifted
    _, out = reserve(score, cand, None, np.array([1]), np.array([[0.0, 0.0, 0.2]]), 0.3, 1)
    assert (out == score).all()


def test_reserve_never_takes_every_place() -> None:
    score = np.array([[0.9, 0.1]])
    cand = np.ones((1, 2), dtype=bool)
    match = np.array([[0.0, 0.6]])
    _, out = reserve(score, cand, None, np.array([1]), match, 0.3, 1)
    assert (out == score).all()  # k = 1: the best result stays first
    _, out = reserve(score, cand, None, np.array([2]), match, 0.3, 1)
    assert (out == score).all()  # both fit anyway
