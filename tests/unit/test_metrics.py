"""Benchmark metrics and loaders on tiny hand-made cases."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from norax_core.bench.data import (
    flatten_ids,
    load_beam,
    load_locomo,
    normalize_evidence,
    parse_beam_date,
    parse_locomo_date,
    strip_beam_marker,
)
from norax_core.bench.metrics import latest_wins, mean, mean_by, recall_at_k
from norax_core.errors import InvalidInputError


def ts(*args: int) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


# -- recall ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ranking", "gold", "k", "expected"),
    [
        (["a", "b", "c"], ["a"], 1, 1.0),
        (["a", "b", "c"], ["c"], 2, 0.0),
        (["a", "b", "c"], ["c"], 3, 1.0),
        (["a", "b", "c"], ["a", "c"], 2, 0.5),
        (["a", "b"], ["a", "x"], 10, 0.5),  # a gold id the ranking never holds is a miss
        (["a", "b"], ["a", "a"], 1, 1.0),  # repeated gold counts once
        ([], ["a"], 5, 0.0),
    ],
)
def test_recall_at_k(ranking: list[str], gold: list[str], k: int, expected: float) -> None:
    assert recall_at_k(ranking, gold, k) == pytest.approx(expected)


def test_question_without_evidence_counts_one() -> None:
    assert recall_at_k(["a", "b"], [], 1) == 1.0
    assert recall_at_k([], (), 10) == 1.0


def test_recall_rejects_k_below_one() -> None:
    with pytest.raises(ValueError, match="k must be"):
        recall_at_k(["a"], ["a"], 0)


def test_mean_and_mean_by() -> None:
    assert mean([]) == 0.0
    assert mean([1.0, 0.0, 0.5]) == pytest.approx(0.5)
    assert mean_by([1.0, 0.0, 0.5], ["b", "a", "b"]) == {"a": 0.0, "b": 0.75}
    with pytest.raises(ValueError):
        mean_by([1.0], ["a", "b"])


# -- latest wins ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ranking", "original", "updated", "expected"),
    [
        (["u", "o"], ["o"], ["u"], True),
        (["o", "u"], ["o"], ["u"], False),
        (["x", "u2", "o1", "u1"], ["o1", "o2"], ["u1", "u2"], True),  # best of each group
        (["u"], ["o"], ["u"], True),  # an unranked original ranks below
        (["o"], ["o"], ["u"], False),
        (["x"], ["o"], ["u"], False),  # neither ranked: the update does not win
        (["m"], ["m"], ["m"], False),  # the same message in both groups: a tie, no win
        (["u"], [], ["u"], None),  # skipped: a group is missing
        (["u"], ["o"], [], None),
    ],
)
def test_latest_wins(
    ranking: list[str], original: list[str], updated: list[str], expected: bool | None
) -> None:
    assert latest_wins(ranking, original, updated) is expected


# -- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", ts(2023, 5, 8, 13, 56)),
        ("10:04 am on 20 January, 2023", ts(2023, 1, 20, 10, 4)),
        ("12:09 am on 1 June, 2023", ts(2023, 6, 1, 0, 9)),
        ("12:30 pm on 1 June 2023", ts(2023, 6, 1, 12, 30)),
    ],
)
def test_parse_locomo_date(text: str, expected: float) -> None:
    assert parse_locomo_date(text) == expected


@pytest.mark.parametrize("bad", ["", "8 May 2023", "1:56 pm on 8 Mayo, 2023", "25:00"])
def test_parse_locomo_date_rejects(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_locomo_date(bad)


def test_parse_beam_date() -> None:
    assert parse_beam_date("March-15-2024") == ts(2024, 3, 15)
    assert parse_beam_date("april-5-2024") == ts(2024, 4, 5)
    with pytest.raises(InvalidInputError):
        parse_beam_date("2024-03-15")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Plan my sprint ->-> 1,1", "Plan my sprint"),
        ("Two lines\nsecond ->-> 12,3", "Two lines\nsecond"),
        ("odd marker ->-> 4,N/A", "odd marker"),
        ("spaced ->->  2,2", "spaced"),
        ("no marker here", "no marker here"),
        ("arrows -> inside -> text", "arrows -> inside -> text"),
    ],
)
def test_strip_beam_marker(text: str, expected: str) -> None:
    assert strip_beam_marker(text) == expected


def test_normalize_evidence_repairs_typing_slips() -> None:
    assert normalize_evidence(["D1:3"]) == ("D1:3",)
    assert normalize_evidence(["D8:6; D9:17"]) == ("D8:6", "D9:17")
    assert normalize_evidence(["D9:1 D4:4 D4:6"]) == ("D9:1", "D4:4", "D4:6")
    assert normalize_evidence(["D:11:26"]) == ("D11:26",)
    assert normalize_evidence(["D", "D2:1", "D2:1"]) == ("D2:1",)
    assert normalize_evidence([]) == ()


def test_flatten_beam_ids() -> None:
    assert flatten_ids([4, 8]) == ("4", "8")
    assert flatten_ids({"original_info": [86], "updated_info": [114, 86]}) == ("86", "114")
    assert flatten_ids({"first_event": [2], "second_event": [[0, 2]]}) == ("2", "0")
    assert flatten_ids(None) == ()
    assert flatten_ids([]) == ()


# -- loaders -------------------------------------------------------------------------------


def _locomo_file(tmp_path: Path) -> Path:
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a dog"},
            ],
            "session_2_date_time": "9:00 am on 10 May, 2023",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "The cat is Tom."}],
            "session_3_date_time": "9:00 am on 12 May, 2023",
            "session_3": [],
        },
        "qa": [
            {"question": "Pet?", "answer": "cat", "evidence": ["D1:1", "D2:1"], "category": 1},
            {"question": "Nothing?", "adversarial_answer": "x", "evidence": [], "category": 5},
        ],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    return path


def test_load_locomo(tmp_path: Path) -> None:
    ds = load_locomo(_locomo_file(tmp_path))
    (conv,) = ds.conversations
    assert ds.name == "locomo" and ds.n_questions == 2
    assert conv.name == "conv-x"
    assert [m.id for m in conv.memories] == ["D1:1", "D1:2", "D2:1"]
    assert conv.memories[0].text == "Ann: I adopted a cat."
    assert conv.memories[1].text == "Bo: Look! (shared a photo: a dog)"
    # stamped with the session date, in order within the session
    assert conv.memories[0].created_at == ts(2023, 5, 8, 13, 56)
    assert conv.memories[1].created_at == ts(2023, 5, 8, 13, 56) + 1
    assert conv.memories[2].session == 2
    assert conv.now == ts(2023, 5, 10, 9, 0) + 1  # right after the last message
    q1, q2 = conv.questions
    assert q1.gold == ("D1:1", "D2:1") and q1.category == "multi_hop"
    assert q2.gold == () and q2.category == "adversarial"


def test_load_beam(tmp_path: Path) -> None:
    chat = [
        {
            "batch_number": 1,
            "time_anchor": None,
            "turns": [
                [
                    {
                        "role": "user",
                        "id": 0,
                        "time_anchor": "March-15-2024",
                        "content": "Hi ->-> 1,1",
                    },
                    {"role": "assistant", "id": 1, "content": "Hello"},
                ]
            ],
        },
        {
            "batch_number": 2,
            "turns": [
                [
                    {
                        "role": "user",
                        "id": 2,
                        "time_anchor": "April-05-2024",
                        "content": "Now 250ms ->-> 2,1",
                    }
                ]
            ],
        },
    ]
    probing = {
        "abstention": [{"question": "Unknown?", "source_chat_ids": None}],
        "knowledge_update": [
            {"question": "Latency?", "source_chat_ids": {"original_info": [0], "updated_info": [2]}}
        ],
        "information_extraction": [{"question": "Hi?", "source_chat_ids": [0, 1]}],
        "preference_following": [{"question": "No gold", "source_chat_ids": []}],
    }
    folder = tmp_path / "100K" / "3"
    folder.mkdir(parents=True)
    (folder / "chat.json").write_text(json.dumps(chat))
    (folder / "probing_questions.json").write_text(json.dumps(probing))
    ds = load_beam(tmp_path / "100K")
    (conv,) = ds.conversations
    assert conv.name == "beam-100K-3"
    assert [(m.id, m.text) for m in conv.memories] == [
        ("0", "Hi"),
        ("1", "Hello"),
        ("2", "Now 250ms"),
    ]
    assert conv.memories[1].created_at == ts(2024, 3, 15) + 1
    assert conv.memories[2].created_at == ts(2024, 4, 5)
    assert conv.now == ts(2024, 4, 5) + 1
    cats = {q.category: q for q in conv.questions}
    assert set(cats) == {
        "knowledge_update",
        "information_extraction",
    }  # abstention, no-gold skipped
    ku = cats["knowledge_update"]
    assert ku.gold == ("0", "2") and ku.original == ("0",) and ku.updated == ("2",)


def test_loaders_reject_missing_or_malformed(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="not found"):
        load_locomo(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InvalidInputError, match="list"):
        load_locomo(tmp_path / "bad.json")
    with pytest.raises(InvalidInputError, match="no BEAM chat"):
        load_beam(tmp_path)
