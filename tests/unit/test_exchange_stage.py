"""The exchange stage: partners from the timeline and roles, and the array form vs the reference."""

from __future__ import annotations

import numpy as np

from norax_core.stages.exchange import exchange, exchange_arrays, partner_rows


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
