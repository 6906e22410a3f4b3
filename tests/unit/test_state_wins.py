"""Latest wins' attribute rule: the newer statement of the same attribute of the same subject."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from norax_core.config import NoraxConfig
from norax_core.errors import InvalidInputError
from norax_core.latest import NOW_WORDS, SHIFT_WORDS, Statements, same_attribute, state_wins
from norax_core.link_rule import CHANGE_CUE_WORDS, CUE_WORDS
from norax_core.ranking import Plan, Table, rank
from norax_core.tokenize import Tokenizer

TOK = Tokenizer()
CUES = frozenset(TOK(CUE_WORDS))
CHANGE = frozenset(TOK(CHANGE_CUE_WORDS))


def _w(text: str) -> frozenset[str]:
    return frozenset(TOK(text))


QUERY = _w("How many commits have been merged into the main branch?")
OLD = _w("Tagged release v1.0.0 and pushed it with 150 commits and 12 branches merged.")
NEW = _w("The number of commits merged into the main branch has grown to 165.")
OTHER = _w("I want to add rate limiting to the login endpoint, it is new.")


def test_same_attribute_needs_the_query_words_in_both() -> None:
    assert same_attribute(QUERY, OLD, NEW, 2)
    assert not same_attribute(QUERY, OLD, OTHER, 2)
    # a short query: all of its words are enough
    sync = _w("When is the weekly sync?")
    assert same_attribute(sync, _w("The weekly sync is on Monday"), _w("move the weekly sync"), 3)
    assert not same_attribute(sync, _w("The weekly sync is on Monday"), _w("the weekly demo"), 3)
    assert not same_attribute(frozenset(), OLD, NEW, 3)


def test_the_newer_statement_passes_the_older_one_and_keeps_its_order() -> None:
    # old (best), other (unrelated, newer, with a cue), new (newest, with a cue)
    score = [0.9, 0.7, 0.5]
    out = state_wins(score, [1.0, 2.0, 3.0], [OLD, OTHER, NEW], [False] * 3, QUERY, CUES, 2, 1.05)
    assert out[2] == pytest.approx(0.9 + 0.05 * 0.5)
    assert out[:2] == [0.9, 0.7]  # unrelated: unchanged
    # two newer statements both pass the old one, in their own order
    two = state_wins(
        [0.9, 0.6, 0.5], [1.0, 2.0, 3.0], [OLD, NEW, NEW], [False] * 3, QUERY, CUES, 2, 1.05
    )
    assert two[1] > two[2] > two[0]


@pytest.mark.parametrize(
    ("times", "words", "replies", "cues", "weight"),
    [
        ([3.0, 2.0], [OLD, NEW], [False, False], CUES, 1.05),  # the better one is the newer
        ([1.0, 2.0], [OLD, NEW - CUES], [False, False], CUES, 1.05),  # no update cue
        ([1.0, 2.0], [OLD, NEW], [False, True], CUES, 1.05),  # a reply updates nothing
        ([1.0, 2.0], [OLD, NEW], [True, False], CUES, 1.05),  # nor is it updated
        ([1.0, 2.0], [OLD, NEW], [False, False], CHANGE, 1.05),  # "grown" is no outright cue
        ([1.0, 2.0], [OLD, NEW], [False, False], CUES, 1.0),  # weight 1: off
    ],
)
def test_nothing_moves_without_a_newer_update_of_the_same_attribute(
    times: list[float],
    words: list[frozenset[str]],
    replies: list[bool],
    cues: frozenset[str],
    weight: float,
) -> None:
    assert state_wins([0.9, 0.5], times, words, replies, QUERY, cues, 2, weight) == [0.9, 0.5]


def _table(score: list[float], words: list[frozenset[str]], query: frozenset[str]) -> Table:
    n = len(score)
    sc = np.zeros((4, 1, n))
    sc[1, 0] = score
    proposed = np.full((4, 1, n), np.iinfo(np.int32).max, dtype=np.int32)
    proposed[1, 0] = np.argsort(np.argsort(-np.asarray(score)))
    return Table(
        sc,
        proposed,
        np.ones((1, n), bool),
        None,
        np.array([n]),
        created=np.arange(n, dtype=np.float64)[None, :],
        statements=Statements(
            query=[query],
            words=lambda _, rows: [words[r] for r in rows],
            replies=lambda wanted=None: np.zeros((1, n), bool),
            cues=CUES,
            change=CHANGE,
        ),
    )


def test_rank_applies_the_rule_within_its_depth_and_explains_it() -> None:
    table = _table([0.9, 0.8, 0.5, 0.4], [OLD, OTHER, OTHER, NEW], QUERY)
    cfg = NoraxConfig(latest_wins_weight=1.05, latest_wins_shared=2, latest_wins_depth=4)
    plan = Plan((0.0, 1.0, 0.0, 0.0), **_plan_fields(cfg))
    got = rank(table, plan, 4)
    assert got.top(0) == [3, 0, 1, 2]
    assert got.explain(0, 3)["latest_wins"] == pytest.approx(0.9 + 0.05 * 0.4 - 0.4)
    shallow = rank(table, Plan((0.0, 1.0, 0.0, 0.0), **_plan_fields(cfg, latest_wins_depth=3)), 4)
    assert shallow.top(0) == [0, 1, 2, 3]  # the update is not among the best 3
    bare = replace(table, statements=None)
    with pytest.raises(ValueError, match="statements"):  # the rule reads the rows' words
        rank(bare, plan, 4)


def _plan_fields(cfg: NoraxConfig, **over: object) -> dict[str, object]:
    c = NoraxConfig(**{**cfg.__dict__, **over})  # type: ignore[arg-type]
    return {
        "latest_weight": c.latest_wins_weight,
        "latest_depth": c.latest_wins_depth,
        "latest_shared": c.latest_wins_shared,
        "latest_cues": c.latest_wins_cues,
        "pool_min": 4,
    }


def test_the_config_checks_the_rule_parameters() -> None:
    with pytest.raises(InvalidInputError, match="latest_wins_shared"):
        NoraxConfig(latest_wins_shared=0)
    with pytest.raises(InvalidInputError, match="latest_wins_cues"):
        NoraxConfig(latest_wins_cues="any")


def test_an_outright_change_of_the_subject_is_enough_only_when_asked() -> None:
    query = _w("Where does Kenji live now?")
    old = _w("Kenji lives in Osaka and works at a robotics startup.")
    moved = _w("Kenji moved to Sapporo last spring.")
    likes = _w("Kenji likes hiking.")
    assert not same_attribute(query, old, moved, 3)
    assert same_attribute(query, old, moved, 3, CHANGE)
    assert not same_attribute(query, old, likes, 3, CHANGE)  # no change cue
    assert not same_attribute(query, likes, moved, 3, CHANGE)  # the older lacks the attribute
    args = ([0.9, 0.5], [1.0, 2.0], [old, moved], [False, False], query, CUES, 3, 1.05)
    assert state_wins(*args) == [0.9, 0.5]
    assert state_wins(*args, CHANGE)[1] == pytest.approx(0.9 + 0.05 * 0.5)


SHIFT = frozenset(TOK(SHIFT_WORDS))
NOW_ = frozenset(TOK(NOW_WORDS))


@pytest.mark.parametrize(
    ("query", "old", "new"),
    [
        # the attribute in a word the two share beside the subject, not the question's word
        (
            "Who is Aiko's manager?",
            "Aiko reports to Farah.",
            "After the reorg Aiko reports to Rosa.",
        ),
        # the older holds two of the question's words, the newer says it changed outright
        (
            "What database does the orders service use?",
            "The orders service stores everything in MySQL.",
            "The orders service was switched over to Postgres.",
        ),
        # a change verb too common to link at write time: "took over", "sold", "migrated"
        (
            "Who is on call for payments?",
            "Rosa is on call for payments.",
            "Jonas took over the payments on-call rotation from Rosa.",
        ),
        (
            "What car does Dmitri drive?",
            "Dmitri drives an old Corolla.",
            "Dmitri sold the Corolla.",
        ),
        ("Where does staging run?", "Staging runs on staging-1.", "We migrated staging to Fly.io."),
        # a paraphrased attribute: the older holds two of the question's three words
        (
            "Which city is Kenji living in?",
            "Kenji lives in Osaka and works at a robotics startup.",
            "Kenji moved to Sapporo last spring.",
        ),
    ],
)
def test_a_change_of_the_subject_in_other_words_is_the_same_attribute(
    query: str, old: str, new: str
) -> None:
    assert same_attribute(_w(query), _w(old), _w(new), 3, CHANGE | SHIFT)


def test_a_shared_subject_alone_is_not_the_same_attribute() -> None:
    query = _w("Who is Aiko's manager?")
    old = _w("Aiko reports to Farah.")
    cues = CHANGE | SHIFT
    assert not same_attribute(query, old, _w("After the reorg Aiko reports to Lu."), 3)  # no cues
    assert not same_attribute(query, old, _w("Aiko likes the reorg plan."), 3, cues)
    assert not same_attribute(query, old, _w("After the reorg Aiko moved desks."), 3, cues)
    assert not same_attribute(query, old, _w("Jonas took over the rotation."), 3, cues)


def test_rank_reads_the_question_without_its_now_words_and_the_shift_cues() -> None:
    """The question's "these days" is not what it asks about; "migrated" says a change."""
    query = _w("Where does staging run these days?")
    old, new = (
        _w("Staging runs on staging-1 in our own rack."),
        _w("We migrated staging to Fly.io."),
    )
    table = _table([0.9, 0.8, 0.5], [old, OTHER, new], query)
    st = table.statements
    assert st is not None
    now = replace(table, statements=replace(st, now=NOW_, shift=SHIFT))
    cfg = NoraxConfig(latest_wins_weight=1.05, latest_wins_depth=3, latest_wins_subject=True)
    plan = Plan((0.0, 1.0, 0.0, 0.0), **_plan_fields(cfg), latest_subject=True)
    assert rank(now, plan, 3).top(0) == [2, 0, 1]
    assert rank(table, plan, 3).top(0) == [0, 1, 2]  # "day" counts as a query word: no pair
