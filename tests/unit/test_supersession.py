"""The supersession link rule and index (pure logic: hand-made rows, the real tokenizer)."""

from __future__ import annotations

import random

import pytest

from norax_core.sidecar import IndexRow
from norax_core.supersession import (
    NUMBER_WORDS,
    LinkRule,
    SupersessionIndex,
    derive_links,
    link_score,
    quantities,
    value_changed,
)
from norax_core.tokenize import Tokenizer

TOK = Tokenizer(stem=True, stopwords="english")


def row(mid: str, text: str, entities: str, t: float, ns: str = "ns", seq: int = 0) -> IndexRow:
    return IndexRow(mid, ns, "episodic", t, tuple(TOK(text)), tuple(entities.split()), seq)


MONDAY = row("monday", "The project deadline is Monday", "project deadline monday", 1.0)
FRIDAY = row("friday", "The project deadline moved to Friday", "project deadline friday", 2.0)
BUDGET = row("budget", "The project budget increased to 5000 dollars", "project budget", 3.0)
LUNCH = row("lunch", "Lunch with Alice on Monday", "alice lunch monday", 4.0)


def test_a_moved_deadline_supersedes_the_old_one() -> None:
    idx = SupersessionIndex(TOK)
    idx.add("ns", [MONDAY, FRIDAY])
    assert idx.links("ns") == {"friday": ("monday",)}
    assert idx.newer("ns", ["monday", "friday"]) == {"monday": ("friday",)}


def test_same_entity_other_attribute_is_no_link() -> None:
    # the budget changed, the deadline did not: they share "project" only
    idx = SupersessionIndex(TOK)
    idx.add("ns", [MONDAY, BUDGET])
    assert idx.links("ns") == {}


def test_no_update_cue_is_no_link() -> None:
    again = row("again", "The project deadline is Monday, remember", "project deadline monday", 2.0)
    idx = SupersessionIndex(TOK)
    idx.add("ns", [MONDAY, again])
    assert idx.links("ns") == {}


def test_unrelated_memory_is_no_link() -> None:
    idx = SupersessionIndex(TOK)
    idx.add("ns", [MONDAY, FRIDAY, LUNCH])
    assert idx.links("ns") == {"friday": ("monday",)}


def test_only_older_memories_are_superseded() -> None:
    # written in the other order, the link still points from the newer to the older
    idx = SupersessionIndex(TOK)
    idx.add("ns", [FRIDAY])
    idx.add("ns", [MONDAY])
    assert idx.links("ns") == {"friday": ("monday",)}


def test_links_never_cross_namespaces() -> None:
    idx = SupersessionIndex(TOK)
    other = row("friday", "The project deadline moved to Friday", "project deadline friday", 2.0)
    idx.add("a", [MONDAY])
    idx.add("b", [other])
    assert idx.links("a") == {} and idx.links("b") == {}


def test_deleting_the_newer_unsupersedes_the_older() -> None:
    idx = SupersessionIndex(TOK)
    idx.add("ns", [MONDAY, FRIDAY])
    changed = idx.remove("ns", ["friday"])
    assert changed == {"friday": ()}
    assert idx.newer("ns", ["monday"]) == {}


def test_deleting_the_older_relinks_to_the_next_best() -> None:
    earliest = row("tuesday", "The project deadline is Tuesday", "project deadline tuesday", 0.5)
    idx = SupersessionIndex(TOK, LinkRule(max_links=1))
    idx.add("ns", [earliest, MONDAY, FRIDAY])
    assert idx.links("ns") == {"friday": ("monday",)}
    idx.remove("ns", ["monday"])
    assert idx.links("ns") == {"friday": ("tuesday",)}


def test_upsert_with_changed_text_rederives() -> None:
    idx = SupersessionIndex(TOK)
    idx.add("ns", [MONDAY, FRIDAY])
    changed = idx.add("ns", [row("friday", "Lunch moved to noon", "lunch noon", 2.0)])
    assert changed["friday"] == ()
    assert idx.links("ns") == {}


def test_filter_keeps_only_allowed_newer() -> None:
    idx = SupersessionIndex(TOK)
    idx.add("ns", [MONDAY, FRIDAY])
    assert idx.newer("ns", ["monday"], allowed=frozenset({"monday"})) == {}


COVERAGE = row("c65", "The API module test coverage is 65 percent", "api module coverage", 1.0)


def test_a_value_cue_links_when_the_quantity_changes() -> None:
    newer = row(
        "c78", "The API module test coverage recently improved to 78 percent", "api module", 2.0
    )
    idx = SupersessionIndex(TOK)
    idx.add("ns", [COVERAGE, newer])
    assert idx.links("ns") == {"c78": ("c65",)}


def test_a_value_cue_without_a_changed_value_is_no_link() -> None:
    # "new" and "improved" alone: a reply about the same module, not a new coverage figure
    for text in (
        "The new API module test coverage report looks good",
        "The API module test coverage improved, still 65 percent",
    ):
        idx = SupersessionIndex(TOK)
        idx.add("ns", [COVERAGE, row("reply", text, "api module coverage", 2.0)])
        assert idx.links("ns") == {}, text
    # with every cue enough alone (the former rule) the first one links
    idx = SupersessionIndex(TOK, LinkRule(cues=LinkRule().cues + " new", value_cues=""))
    idx.add("ns", [COVERAGE, row("reply", "The new API module test coverage", "api module", 2.0)])
    assert idx.links("ns") == {"reply": ("c65",)}


def test_a_count_in_words_changes_value() -> None:
    older = row("five", "The platform team has five people.", "platform team people", 1.0)
    newer = row("seven", "With two new hires the platform team is seven people.", "team", 2.0)
    idx = SupersessionIndex(TOK)
    idx.add("ns", [older, newer])
    assert idx.links("ns") == {"seven": ("five",)}


def test_the_memory_written_just_before_is_not_superseded() -> None:
    older = row("monday", "The project deadline is Monday", "project deadline monday", 1.0, seq=5)
    reply = row("friday", "The project deadline moved to Friday", "project deadline", 1.0, seq=6)
    later = row("friday", "The project deadline moved to Friday", "project deadline", 1.0, seq=7)
    for rule, newer, linked in (
        (LinkRule(), reply, False),
        (LinkRule(), later, True),
        (LinkRule(skip_reply=False), reply, True),
    ):
        idx = SupersessionIndex(TOK, rule)
        idx.add("ns", [older, newer])
        assert (idx.links("ns") == {"friday": ("monday",)}) is linked


def test_quantities_pair_numbers_with_their_unit_and_attribute() -> None:
    got = quantities(TOK("Zotero now holds 52 sources, up from 45 sources"))
    assert got["u:sourc"] == frozenset({"52", "45"})
    assert value_changed(quantities(TOK("52 sources")), quantities(TOK("45 sources")))
    assert not value_changed(quantities(TOK("52 sources")), quantities(TOK("52 sources")))
    assert not value_changed(quantities(TOK("52 sources")), quantities(TOK("3 chapters")))
    words = frozenset(TOK(NUMBER_WORDS))
    assert value_changed(
        quantities(TOK("seven people"), numbers=words),
        quantities(TOK("five people"), numbers=words),
    )
    # cue words are neither unit nor attribute: "increased 7" says nothing of "increased"
    assert "a:increas" not in quantities(TOK("mentees increased 7"), frozenset(TOK("increased")))


def test_link_score_is_pairwise_jaccard() -> None:
    a, b = frozenset({"x", "y"}), frozenset({"y", "z"})
    assert link_score(a, b, frozenset(), frozenset()) == pytest.approx(1 / 6)


@pytest.mark.parametrize("seed", range(5))
def test_incremental_index_equals_a_rebuild(seed: int) -> None:
    """Any order of adds, upserts and deletes leaves what a rebuild from the rows derives."""
    rng = random.Random(seed)
    words = [
        "deadline",
        "budget",
        "project",
        "sprint",
        "moved",
        "increased",
        "now",
        "report",
        "alice",
        "bob",
        "api",
    ]
    cues = ["moved", "increased", "updated", "", "increased 7", "new 3 api"]
    rows: dict[str, IndexRow] = {}
    idx = SupersessionIndex(TOK)
    for _step in range(120):
        mid = f"m{rng.randrange(30)}"
        if mid in rows and rng.random() < 0.3:
            idx.remove("ns", [mid])
            del rows[mid]
            continue
        batch = {}
        for extra in range(rng.choice([1, 1, 2, 3])):  # batches too, in any time order
            bid = mid if extra == 0 else f"m{rng.randrange(30)}"
            picked = rng.sample(words, 4)
            text = " ".join([*picked, rng.choice(cues)])
            text += f" {rng.randrange(3)} budget" if rng.random() < 0.5 else ""
            t, seq = float(rng.randrange(10)), rng.randrange(4)  # seq: replies one apart
            batch[bid] = row(bid, text, " ".join(picked[:2]), t, seq=seq)
        rows.update(batch)
        idx.add("ns", list(batch.values()))
    assert idx.links("ns") == derive_links(rows.values(), TOK).get("ns", {})


def test_a_client_load_reads_quantities_only_where_a_link_needs_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Loading a namespace from rows (a client's load) derives each link once and reads a
    memory's quantities only for pairs whose newer memory has value cues alone: they cost
    most of a cold client load (issue 22), and most memories never need them."""
    import norax_core.supersession as sup

    calls: list[tuple[str, ...]] = []

    def counted(tokens, ignore=frozenset(), numbers=frozenset()):  # type: ignore[no-untyped-def]
        calls.append(tuple(tokens))
        return quantities(tokens, ignore, numbers)

    monkeypatch.setattr(sup, "quantities", counted)
    filler = [row(f"f{i}", f"Alice met Bob on topic {i}", "alice bob", i) for i in range(50)]
    old = row("old", "The test coverage is 65 percent", "coverage", 60.0)
    new = row("new", "The test coverage recently improved to 78 percent", "coverage", 61.0)
    rows = [MONDAY, FRIDAY, BUDGET, LUNCH, *filler, old, new]
    idx = SupersessionIndex(TOK)
    idx.loaded("ns", rows, None)
    # "recently" is a value cue alone: that pair, and only it, compares quantities (the
    # filler's numbers are never read), each memory's once
    assert sorted(calls) == sorted([tuple(old.tokens), tuple(new.tokens)])
    links = {"friday": ("monday",), "new": ("old",)}
    assert idx.links("ns") == derive_links(rows, TOK)["ns"] == links


def test_quantities_of_a_memory_without_numbers_are_empty() -> None:
    assert quantities(list(TOK("the deadline moved to friday")), frozenset(), frozenset()) == {}


def test_a_restored_namespace_answers_a_search_without_building_its_rows() -> None:
    """A namespace restored from a snapshot's arrays gives a search each candidate's words
    and newer memories as the built index does, without building its rows (about 3 ms of a
    cold 1k namespace's first query, issue 22); a write then builds them."""
    from norax_core.supersession import _Space

    built = SupersessionIndex(TOK)
    built.add("ns", [MONDAY, FRIDAY, BUDGET, LUNCH])
    meta, arrays = built.export("ns").to_arrays()  # type: ignore[union-attr]
    restored = SupersessionIndex(TOK)
    restored.restore("ns", _Space.from_arrays(meta, arrays))
    ids = ["friday", "monday", "nobody", "lunch", "monday"]
    assert restored.words("ns", ids) == built.words("ns", ids)
    assert restored.words("ns", ids)[0] is restored.words("ns", ids)[0]  # made once
    assert restored.newer("ns", ids) == built.newer("ns", ids) == {"monday": ("friday",)}
    assert restored.newer("ns", ids, frozenset({"lunch"})) == {}
    space = restored.export("ns")
    assert "_packed" in vars(space)  # nothing built yet
    restored.remove("ns", ["friday"])  # a write builds the rows
    assert "_packed" not in vars(space) and "_tokens" not in vars(space)
    assert restored.newer("ns", ["monday"]) == {}
    assert restored.words("ns", ["monday"]) == built.words("ns", ["monday"])
