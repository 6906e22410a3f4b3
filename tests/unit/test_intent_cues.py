"""A current-state cue outweighs the classifier's pull towards names (issue 13, seed promises)."""

from __future__ import annotations

import pytest

from norax_core.query import Intent, plan_query
from norax_core.query.intents import CUE_WEIGHT, with_cues

NOW = "2026-11-29T12:00:00Z"


@pytest.mark.parametrize(
    "query",
    [
        "Who is on call right now?",
        "Which Postgres version does production run now?",
        "What is the current Postgres version in production?",
        "Which editor does Colby use nowadays?",
        "When is the standup these days?",
        "Who is Priya's manager at the moment?",
    ],
)
def test_plain_current_state_questions_read_as_current_state(query: str) -> None:
    assert plan_query(query, NOW).intent is Intent.CURRENT_STATE


def test_no_cue_leaves_the_model_alone() -> None:
    probs = {i: 1 / len(Intent) for i in Intent}
    assert with_cues("Who is Priya?", probs) == probs


def test_a_cue_mixes_in_a_point_mass_and_stays_a_distribution() -> None:
    probs = {i: 0.0 for i in Intent} | {Intent.ENTITY: 0.9, Intent.LOOKUP: 0.1}
    got = with_cues("What's Mia's address these days?", probs)
    assert got[Intent.CURRENT_STATE] == pytest.approx(CUE_WEIGHT)
    assert got[Intent.ENTITY] == pytest.approx(0.9 * (1 - CUE_WEIGHT))
    assert sum(got.values()) == pytest.approx(1.0)


def test_cues_are_words_not_substrings() -> None:
    probs = {i: 1 / len(Intent) for i in Intent}
    assert with_cues("Who knows the currency of Norway?", probs) == probs


@pytest.mark.parametrize(
    "query",
    [
        "Summarize how the Postgres upgrade went.",
        "Give me a timeline of the database upgrade.",
        "In what order did Colby and Priya raise the billing bugs?",
    ],
)
def test_summary_and_order_questions_read_as_coverage(query: str) -> None:
    assert plan_query(query, NOW).intent is Intent.COVERAGE


def test_the_first_cue_wins() -> None:
    probs = {i: 1 / len(Intent) for i in Intent}
    got = with_cues("Summarize my current setup.", probs)
    assert max(got, key=lambda i: got[i]) is Intent.COVERAGE
