"""The conversation convention (norax_core.conversation): pure functions."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

import pytest

from norax_core.conversation import (
    TURN_STEP,
    Turn,
    role_set,
    turn_id,
    turn_metadata,
    turn_text,
    turn_times,
)
from norax_core.errors import InvalidInputError

T0 = datetime(2026, 9, 1, 10, 0, tzinfo=timezone.utc).timestamp()


def test_messages_without_times_follow_each_other_from_the_default() -> None:
    assert turn_times([None, None, None], T0) == pytest.approx(
        [T0, T0 + TURN_STEP, T0 + 2 * TURN_STEP]
    )


def test_default_is_the_current_time() -> None:
    before = time.time()
    (t,) = turn_times([None])
    assert before <= t <= time.time()


def test_explicit_times_are_kept_and_ties_spaced() -> None:
    got = turn_times([T0, T0, T0 + 60, None], T0 - 3600)
    assert got[0] == T0 and got[1] == pytest.approx(T0 + TURN_STEP) and got[2] == T0 + 60
    assert got[3] == pytest.approx(T0 + 60 + TURN_STEP)  # never before the message before it
    assert all(b > a for a, b in zip(got, got[1:], strict=False))


def test_floor_puts_a_later_batch_after_an_earlier_one() -> None:
    first = turn_times([None, None], T0)
    second = turn_times([None, None], T0, floor=first[-1])
    assert second[0] > first[-1] and second[1] > second[0]
    assert turn_times([None], T0 + 20, floor=first[-1]) == [T0 + 20]
    # an explicit time is the message's own and ignores the floor
    assert turn_times(["2026-01-01T00:00:00Z"], T0, floor=T0)[0] < T0


def test_backwards_or_malformed_times_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="message 2 is dated before message 0"):
        turn_times([T0, None, T0 - 1])
    with pytest.raises(InvalidInputError, match="message 1's time"):
        turn_times([T0, "tomorrow"])
    with pytest.raises(InvalidInputError):
        turn_times([None], float("nan"))


def test_text_and_metadata() -> None:
    turn = Turn("Hi!", "assistant", "Melanie", session_id="d1", metadata={"attachments": "image"})
    assert turn_text(turn) == "Melanie: Hi!" and turn_text(turn, speaker_in_text=False) == "Hi!"
    assert turn_metadata(turn) == {
        "attachments": "image",
        "role": "assistant",
        "speaker": "Melanie",
        "session_id": "d1",
    }
    unnamed = Turn("Hi", "user", "user")  # a role is no name: the bare text
    assert turn_text(unnamed) == "Hi" and "session_id" not in turn_metadata(unnamed)
    numbered = Turn("Hi", "user", "ana", session_id="d1", turn=7, message_id="m-7")
    assert turn_metadata(numbered) == {
        "role": "user",
        "speaker": "ana",
        "session_id": "d1",
        "turn": 7,
        "message_id": "m-7",
    }


@pytest.mark.parametrize(
    ("given", "role"),
    [("human", "user"), ("ai", "assistant"), ("chatbot", "assistant"), ("model", "assistant")],
)
def test_framework_roles_get_the_shared_name(given: str, role: str) -> None:
    turn = Turn("Hi", given, given)
    assert (turn.role, turn.speaker, turn.named) == (role, role, False)
    assert Turn("Hi", given, "Ana").speaker == "Ana"
    assert role_set([given]) == {role}


def test_role_set() -> None:
    assert role_set(None) is None
    assert role_set("tool") == {"tool"}
    assert role_set(("user", "human", "system")) == {"user", "system"}
    with pytest.raises(InvalidInputError, match=r"unknown message roles \['asistant'\]"):
        role_set(("user", "asistant"))


def test_ids_are_session_and_turn_else_short_random() -> None:
    assert turn_id(Turn("Hi", "user", "user", session_id="d1", turn=12)) == "d1:000012"
    a, b = (turn_id(Turn("Hi", "user", "user", session_id="d1")) for _ in range(2))
    assert re.fullmatch("[0-9a-f]{16}", a) and a != b
