"""The exchange stage: partners from the timeline and roles, and the array form vs the reference."""

from __future__ import annotations

import numpy as np
import pytest

from norax_core.stages import exchange as stage
from norax_core.stages.exchange import exchange, exchange_arrays, exchange_slots, partner_rows


def test_a_user_message_and_its_reply_are_partners_and_chat_turns_without_roles_are_not() -> None:
    # rows 0..3 one session in order: user, assistant, user, assistant; row 4 has no neighbour
    n = 5
    prev = np.array([[n, 0, 1, 2, n]])
    nxt = np.array([[1, 2, 3, n, n]])
    slots = [np.where(prev < n, prev, nxt), np.where(prev < n, nxt, n)]
    position = np.array([[0, 1, 2, 3, 0]])
    user = np.array([[True, False, True, False, False]])
    assert partner_rows(slots, position, user).tolist() == [[1, 0, 3, 2, n]]
    nobody = np.zeros((1, n), dtype=bool)
    assert partner_rows(slots, position, nobody).tolist() == [[n] * n]


def test_the_partner_of_a_top_candidate_joins_right_after_it() -> None:
    score = np.array([[0.9, 0.2, 0.5, 0.1]])
    cand = np.ones((1, 4), dtype=bool)
    top = np.array([[True, False, True, False]])
    partner = np.array([[1, 0, 3, 2]])
    got = exchange_arrays(score, cand, top, partner, 0.99)
    ref = exchange({"a": 0.9, "b": 0.2, "c": 0.5, "d": 0.1}, ["a", "c"], {"a": "b", "c": "d"}, 0.99)
    assert got.tolist() == [[ref["a"], ref["b"], ref["c"], ref["d"]]]
    assert got[0].tolist() == [0.9, 0.891, 0.5, 0.495]
    assert exchange_arrays(score, cand, top, partner, 0.0) is score
    # a partner that is not a candidate stays out
    out = exchange_arrays(score, np.array([[True, False, True, True]]), top, partner, 0.99)
    assert out[0, 1] == 0.2


@pytest.mark.parametrize("few", [0, 256])
def test_reading_the_anchors_partners_equals_the_whole_array_form(
    few: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """exchange_slots (anchor by anchor, or whole arrays past _FEW) equals exchange_arrays."""
    monkeypatch.setattr(stage, "_FEW", few)
    rng = np.random.default_rng(7)
    lifted = 0
    for _ in range(200):
        q, n = int(rng.integers(1, 4)), int(rng.integers(2, 30))
        order = np.argsort(rng.random((q, n)), axis=1)  # each query's timeline
        prev, nxt = np.full((q, n), n), np.full((q, n), n)
        for i in range(q):
            line = order[i]
            prev[i, line[1:]], nxt[i, line[:-1]] = line[:-1], line[1:]
        first = rng.random((q, n)) < 0.5  # which neighbour fills the first slot
        slots = [np.where(first, prev, nxt), np.where(first, nxt, prev)]
        position = np.argsort(order, axis=1) % 4  # sessions of four
        user = rng.random((q, n)) < 0.5
        score = np.round(rng.random((q, n)), 2)
        cand = rng.random((q, n)) < 0.8
        top = cand & (rng.random((q, n)) < 0.3)
        want = exchange_arrays(score, cand, top, partner_rows(slots, position, user), 0.97)
        got = exchange_slots(score, cand, top, slots, position, user, 0.97)
        assert got.tolist() == want.tolist()
        lifted += int((got != score).sum())
    assert lifted > 50  # partners were lifted, not only left alone
