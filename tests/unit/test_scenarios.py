"""The seed-promise scenario generator: deterministic, varied, honest, and its criterion."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from norax_core.bench.scenario_templates import PEOPLE
from norax_core.bench.scenarios import FAMILIES, Memory, Scenario, generate, passes, templates
from norax_core.tokenize import Tokenizer

TOK = Tokenizer()
NAMES = {t for p in PEOPLE for t in TOK(p)}
SCENARIOS = generate(30, seed=7)


def _tokens(text: str) -> set[str]:
    return set(TOK(text))


def test_deterministic_by_seed() -> None:
    assert generate(5, seed=3) == generate(5, seed=3)
    assert generate(5, seed=3) != generate(5, seed=4)


def test_ten_distinct_templates_per_family() -> None:
    for family in FAMILIES:
        ts = templates(family)
        assert len(ts) >= 10
        assert len({t.target for t in ts}) == len(ts)  # different sentences, not names swapped
        assert len({t.query for t in ts}) == len(ts)
    first_ten = generate(10, seed=0)
    for family in FAMILIES:
        assert len({s.template for s in first_ten if s.family == family}) == 10


def test_unknown_family_is_refused() -> None:
    with pytest.raises(ValueError, match="graph"):
        templates("gossip")


def test_small_stores_with_unique_ids() -> None:
    assert len({s.id for s in SCENARIOS}) == len(SCENARIOS)
    for s in SCENARIOS:
        assert 5 <= len(s.memories) <= 10, s.id
        times = [m.created_at for m in s.memories]
        assert times == sorted(times)  # written in time order
        assert all(t <= s.now for t in times), s.id


@pytest.mark.parametrize("family", FAMILIES)
def test_distractors_share_the_querys_words(family: str) -> None:
    for s in (s for s in SCENARIOS if s.family == family):
        q = _tokens(s.query) - NAMES
        others = [m for i, m in enumerate(s.memories) if i not in (s.target, s.older)]
        assert any(q & _tokens(m.text) for m in others), s.id


def test_meaning_answers_share_no_word_but_a_name() -> None:
    for s in (s for s in SCENARIOS if s.family == "meaning"):
        shared = _tokens(s.query) & _tokens(s.memories[s.target].text)
        assert shared <= NAMES, (s.id, shared)


def test_graph_decisions_never_name_the_object() -> None:
    for s in (s for s in SCENARIOS if s.family == "graph"):
        words = {"decid", "decis", "settl"}  # the question's verb may recur, the object not
        shared = _tokens(s.query) & _tokens(s.memories[s.target].text) - words
        assert not shared, (s.id, shared)
        linked = [m for m in s.memories if _tokens(m.text) & _tokens(s.memories[s.target].text)]
        assert len(linked) >= 2, s.id  # some other memory shares a name with the decision


def test_keyword_answers_carry_the_exact_term() -> None:
    for s in (s for s in SCENARIOS if s.family == "keywords"):
        assert _tokens(s.query) & _tokens(s.memories[s.target].text) - NAMES, s.id


def test_recency_families_pair_a_newer_and_an_older_memory() -> None:
    for s in (s for s in SCENARIOS if s.family in ("recency", "scratchpad")):
        assert s.older is not None
        new, old = s.memories[s.target], s.memories[s.older]
        assert new.created_at > old.created_at
        if s.family == "scratchpad":
            assert new.kind == "scratchpad"
            assert (s.now - new.created_at).days < 1 and (s.now - old.created_at).days >= 60


def _scenario(older: int | None) -> Scenario:
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return Scenario("x-y-0", "recency", "y", "q?", (Memory("a", "episodic", t),) * 5, 2, older, t)


def test_passes_needs_the_top_3_and_the_newer_first() -> None:
    plain, paired = _scenario(None), _scenario(4)
    assert passes(plain, [0, 1, 2, 3, 4])
    assert not passes(plain, [0, 1, 3, 2, 4])
    assert not passes(plain, [0, 1])  # not returned at all
    assert passes(paired, [2, 0, 4])
    assert not passes(paired, [4, 2, 0])  # in the top 3 but below the memory it replaces
    assert passes(paired, [0, 1, 2])  # the older one not returned counts as below
