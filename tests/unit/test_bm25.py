"""BM25Index and BM25Signal, checked against rank_bm25.BM25Okapi with Lucene's idf."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from norax_core.errors import DuplicateIdError, InvalidInputError
from norax_core.signals.base import Query, Signal
from norax_core.signals.bm25 import BM25Index, BM25Signal, lucene_idf, okapi_scores
from norax_core.tokenize import Tokenizer

TOKENIZER = Tokenizer()

CHAT = [
    "I moved to Lisbon last spring and I love the tram rides to work",
    "My sister Ana is a nurse at the Santa Maria hospital in Lisbon",
    "Remind me to renew my passport before the trip to Japan in October",
    "We migrated the backend from Django to FastAPI with TypeORM on the node side",
    "The deploy failed because the Postgres migration locked the users table",
    "I prefer dark roast coffee, no sugar, with a splash of oat milk",
    "Our cat Miso hates the vacuum cleaner and hides under the bed",
    "The quarterly report is due on Friday; Carlos owns the revenue section",
    "Use snake_case_name for Python variables and camelCase in TypeScript",
    "I'm allergic to peanuts and shellfish, please remember that for recipes",
    "The Kubernetes cluster autoscaler keeps adding nodes during the nightly batch",
    "Book a table for four at the Italian place near the river on Saturday",
    "My running goal this year is a half marathon under two hours",
    "Ana recommended a podcast about the history of Portuguese cuisine",
    "The flaky test in the payments service times out when Redis is slow",
    "I started learning Japanese on Duolingo, forty days streak so far",
    "We agreed to use trunk-based development and short-lived feature branches",
    "The dentist appointment moved from Tuesday to Thursday at 3pm",
    "Coffee with Carlos tomorrow to discuss the revenue forecast",
    "I run every morning along the river before work",
    "The Postgres replica lag spiked after the index rebuild on the orders table",
    "Don't schedule meetings before 10am, I do deep work in the morning",
    "The Redis cache hit rate dropped after we changed the key format",
    "Miso the cat needs her vaccine booster in March",
    "Our team retro: too many meetings, not enough focus time",
    "I'm reading a novel by Saramago, Blindness, in Portuguese",
    "The API rate limit is 100 requests per minute per token",
    "Passport photos must be taken against a white background",
    "The frontend uses React with Vite and the tests run on Vitest",
    "Lisbon is hilly, so I bought an electric bike for the commute",
]
DOCS = {f"m{i:02d}": TOKENIZER(text) for i, text in enumerate(CHAT)}

QUERIES = [
    "Lisbon tram",
    "postgres migration table",
    "coffee coffee with Carlos",  # repeated token
    "cat vaccine",
    "redis slow tests",
    "quantum chromodynamics",  # unknown terms only
    "Japan passport trip unknownword",  # mix of known and unknown
    "the",  # stop word: no tokens at all
    "running river morning",
]
PARAMS = [(1.5, 0.75), (1.2, 0.0), (2.0, 1.0), (0.5, 0.3)]


class LuceneOkapi(BM25Okapi):
    """rank_bm25's Okapi scorer with Lucene's idf ``log(1 + (N - n + 0.5) / (n + 0.5))``."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        n = self.corpus_size
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in nd.items()}


def reference(
    docs: dict[str, list[str]], query: list[str], k1: float, b: float
) -> dict[str, float]:
    ids = sorted(docs)
    scores = LuceneOkapi([docs[i] for i in ids], k1=k1, b=b).get_scores(query)
    return dict(zip(ids, scores.tolist(), strict=True))


def assert_parity(index: BM25Index, ns: str, docs: dict[str, list[str]], query: list[str]) -> None:
    expected = reference(docs, query, index.k1, index.b)
    got = index.scores(ns, query, list(docs))
    assert got.keys() == expected.keys()
    for doc_id, value in expected.items():
        assert got[doc_id] == pytest.approx(value, abs=1e-9), doc_id


def build(docs: dict[str, list[str]], k1: float = 1.5, b: float = 0.75, ns: str = "a") -> BM25Index:
    index = BM25Index(k1=k1, b=b)
    index.add_many(ns, docs.items())
    return index


# -- parity with rank_bm25 -------------------------------------------------------------


@pytest.mark.parametrize(("k1", "b"), PARAMS)
@pytest.mark.parametrize("text", QUERIES)
def test_scores_match_rank_bm25(text: str, k1: float, b: float) -> None:
    index = build(DOCS, k1, b)
    assert_parity(index, "a", DOCS, TOKENIZER(text))


@pytest.mark.parametrize(("k1", "b"), PARAMS)
@pytest.mark.parametrize("text", QUERIES)
def test_parity_after_removing_replacing_and_re_adding(text: str, k1: float, b: float) -> None:
    index = build(DOCS, k1, b)
    docs = dict(DOCS)
    for doc_id in ("m00", "m04", "m07", "m19", "m29"):
        assert index.remove("a", doc_id)
        del docs[doc_id]
    assert_parity(index, "a", docs, TOKENIZER(text))

    docs["m00"] = DOCS["m00"]  # re-add a removed doc
    index.add("a", "m00", DOCS["m00"])
    docs["m01"] = TOKENIZER("Ana now works at a clinic in Porto, not Lisbon")  # replace
    index.add("a", "m01", docs["m01"])
    assert index.count("a") == len(docs)
    assert_parity(index, "a", docs, TOKENIZER(text))


def test_parity_through_compaction() -> None:
    index = build(DOCS)
    docs = dict(DOCS)
    for doc_id in sorted(DOCS)[:20]:  # well past the 30 % tombstone threshold
        index.remove("a", doc_id)
        del docs[doc_id]
        for text in QUERIES:
            assert_parity(index, "a", docs, TOKENIZER(text))
    assert index.ids("a") == set(docs)


def test_random_writes_keep_parity() -> None:
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(30)]
    index, docs = BM25Index(), {}
    for _ in range(400):
        if docs and rng.random() < 0.3:
            doc_id = rng.choice(sorted(docs))
            assert index.remove("a", doc_id)
            del docs[doc_id]
        else:
            doc_id = f"d{rng.randrange(60)}"
            docs[doc_id] = [
                rng.choice(vocab[: rng.randint(1, 30)]) for _ in range(rng.randint(1, 9))
            ]
            index.add("a", doc_id, docs[doc_id])
        if docs:
            assert_parity(index, "a", docs, [rng.choice(vocab + ["zz"]) for _ in range(4)])


def test_term_in_more_than_half_the_docs_still_scores() -> None:
    docs = {
        "1": ["meeting", "monday", "budget"],
        "2": ["meeting", "tuesday"],
        "3": ["meeting", "lunch", "carlos"],
        "4": ["dentist", "friday"],
    }
    index = build(docs)
    assert_parity(index, "a", docs, ["meeting"])
    assert_parity(index, "a", docs, ["meeting", "budget"])
    # Robertson's idf is negative here (log(1.5) - log(3.5)); Lucene's stays positive.
    assert lucene_idf(4, np.array([3]))[0] > 0
    assert index.scores("a", ["meeting"], ["2"])["2"] > 0
    assert index.scores("a", ["meeting"], ["4"])["4"] == 0


def test_the_only_memory_holding_a_keyword_in_a_two_memory_store_scores() -> None:
    # Okapi's idf log((N - n + 0.5) / (n + 0.5)) is log(1.5 / 1.5) = 0 here: "TypeORM" was
    # worth nothing in an agent's first two memories.
    tok = Tokenizer()
    texts = {"m1": "We use TypeORM for the database layer", "m2": "Deploys go out on Fridays"}
    index = BM25Index()
    index.add_many("a", [(m, tok(t)) for m, t in texts.items()])
    got = index.scores("a", tok("TypeORM migration"), list(texts))
    assert got["m1"] > 0 and got["m2"] == 0
    assert index.top("a", tok("TypeORM"), 5)[0][0] == "m1"


def test_lucene_idf_formula() -> None:
    n, df = 10, np.array([1, 5, 10])
    expected = [math.log(1 + (n - f + 0.5) / (f + 0.5)) for f in df]
    assert lucene_idf(n, df).tolist() == pytest.approx(expected, abs=1e-12)
    assert np.all(np.diff(lucene_idf(n, np.arange(1, 11))) < 0)  # rarer terms first


def test_empty_namespace_and_unknown_terms() -> None:
    index = BM25Index()
    assert index.scores("nobody", ["coffee"], ["m00"]) == {"m00": 0.0}
    assert index.top("nobody", ["coffee"], 5) == []
    index = build(DOCS)
    assert index.top("a", ["zzzz", "qqqq"], 5) == []
    assert set(index.scores("a", ["zzzz"], list(DOCS)).values()) == {0.0}
    assert index.top("a", [], 5) == []


def test_emptied_namespace_disappears() -> None:
    index = build({"1": ["a"], "2": ["b"]})
    assert index.remove_ids(["1", "2", "missing"]) == 2
    assert index.namespaces() == set()
    assert len(index) == 0
    assert index.top("a", ["a"], 3) == []


def test_formula_function() -> None:
    got = okapi_scores(np.array([1.0, 3.0]), np.array([5.0, 10.0]), 7.0, 0.8, 1.2, 0.75)
    k1, b = 1.2, 0.75
    expected = [
        0.8 * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / 7.0)) for tf, dl in ((1, 5), (3, 10))
    ]
    assert got.tolist() == pytest.approx(expected, abs=1e-12)


# -- namespaces, filters, ordering -----------------------------------------------------


def test_namespaces_are_isolated() -> None:
    index = build(DOCS)
    queries = [TOKENIZER(q) for q in QUERIES]
    before = [index.scores("a", q, list(DOCS)) for q in queries]
    before_top = [index.top("a", q, 10) for q in queries]

    # Flood B with the same vocabulary: in a shared corpus this would move every idf of A.
    index.add_many(
        "b", ((f"b{i}", TOKENIZER("Lisbon coffee Postgres Redis cat")) for i in range(50))
    )
    index.add("b", "b-extra", DOCS["m00"])
    index.remove("b", "b3")

    assert [index.scores("a", q, list(DOCS)) for q in queries] == before
    assert [index.top("a", q, 10) for q in queries] == before_top
    assert index.count("a") == len(DOCS)
    assert index.count("b") == 50
    assert index.namespaces() == {"a", "b"}
    assert len(index) == len(DOCS) + 50
    # B's ids are invisible from A.
    assert index.scores("a", TOKENIZER("Lisbon"), ["b1"]) == {"b1": 0.0}
    assert all(doc_id in DOCS for doc_id, _ in index.top("a", TOKENIZER("Lisbon coffee"), 100))


def test_id_of_another_namespace_is_rejected_and_nothing_is_written() -> None:
    index = build({"1": ["x"]}, ns="a")
    with pytest.raises(DuplicateIdError):
        index.add_many("b", [("2", ["y"]), ("1", ["y"])])
    assert index.namespaces() == {"a"}
    assert index.ids("a") == {"1"}


def test_bad_input_is_rejected() -> None:
    index = BM25Index()
    with pytest.raises(InvalidInputError):
        index.add("a", "1", "a string is not a token list")
    with pytest.raises(InvalidInputError):
        index.add("a", 1, ["x"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="b must be"):
        BM25Index(b=1.5)


def test_allowed_filter_applies_before_top_n() -> None:
    index = build(DOCS)
    query = TOKENIZER("Postgres table Redis")
    unfiltered = [doc_id for doc_id, _ in index.top("a", query, 30)]
    allowed = frozenset(unfiltered[2:])  # exclude the two best matches
    filtered = index.top("a", query, 2, allowed=allowed)
    assert [doc_id for doc_id, _ in filtered] == unfiltered[2:4]
    assert index.top("a", query, 5, allowed=frozenset({"m05", "nope"})) == []


def test_top_is_sorted_and_ties_break_by_id() -> None:
    docs = {doc_id: ["coffee", "oat"] for doc_id in ("z9", "b2", "m5", "a1", "q0")}
    docs["best"] = ["coffee", "coffee", "oat"]
    docs.update({f"other{i}": ["tea", "biscuit"] for i in range(8)})  # keep coffee's idf > 0
    index = build(docs)
    for n in range(1, 7):
        got = index.top("a", ["coffee"], n)
        assert got == index.top("a", ["coffee"], n)
        ids = [doc_id for doc_id, _ in got]
        assert ids == (["best", "a1", "b2", "m5", "q0", "z9"])[:n]
    # The tie at the cut-off is resolved by id, not by insertion order.
    assert [doc_id for doc_id, _ in index.top("a", ["coffee"], 2)] == ["best", "a1"]


def test_top_scores_are_the_raw_scores() -> None:
    index = build(DOCS)
    query = TOKENIZER("Lisbon coffee morning")
    top = index.top("a", query, 30)
    expected = reference(DOCS, query, 1.5, 0.75)
    assert [s for _, s in top] == sorted((s for s in expected.values() if s > 0), reverse=True)
    for doc_id, score in top:
        assert score == pytest.approx(expected[doc_id], abs=1e-9)


# -- the signal --------------------------------------------------------------------------


def make_query(text: str, ns: str = "a", allowed: frozenset[str] | None = None) -> Query:
    return Query(text=text, namespace=ns, now=0.0, allowed=allowed, tokens=tuple(TOKENIZER(text)))


def test_signal_protocol_and_normalisation() -> None:
    signal = BM25Signal(build(DOCS), TOKENIZER)
    assert isinstance(signal, Signal)
    assert signal.name == "bm25"
    query = make_query("Postgres migration table")
    top = signal.top(query, 5)
    assert max(top.values()) == 1.0
    assert all(0.0 < v <= 1.0 for v in top.values())
    assert list(top.values()) == sorted(top.values(), reverse=True)
    scored = signal.score(query, list(DOCS))
    assert scored.keys() == DOCS.keys()
    assert all(0.0 <= v <= 1.0 for v in scored.values())
    for doc_id, value in top.items():
        assert scored[doc_id] == value
    raw = reference(DOCS, list(query.tokens), 1.5, 0.75)
    best = max(raw.values())
    assert scored == pytest.approx({k: max(v, 0.0) / best for k, v in raw.items()}, abs=1e-9)


def test_signal_normalises_by_best_allowed_document() -> None:
    signal = BM25Signal(build(DOCS), TOKENIZER)
    full = make_query("Postgres migration table")
    best_id = next(iter(signal.top(full, 1)))
    allowed = frozenset(DOCS) - {best_id}
    query = make_query("Postgres migration table", allowed=allowed)
    top = signal.top(query, 3)
    assert best_id not in top
    assert max(top.values()) == 1.0
    scored = signal.score(query, [best_id, *top])
    assert best_id not in scored  # outside the filter: never returned
    assert scored == top


def test_signal_with_no_match_scores_zero() -> None:
    signal = BM25Signal(build(DOCS), TOKENIZER)
    query = make_query("quantum chromodynamics")
    assert signal.top(query, 5) == {}
    assert signal.score(query, ["m00", "m01"]) == {"m00": 0.0, "m01": 0.0}
    empty = make_query("anything", ns="empty")
    assert signal.top(empty, 5) == {}
    assert signal.score(empty, ["m00"]) == {"m00": 0.0}


def test_signal_caches_the_last_query_until_the_next_write(monkeypatch: pytest.MonkeyPatch) -> None:
    index = build(DOCS)
    signal = BM25Signal(index, TOKENIZER)
    calls = []
    original = index.search

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(index, "search", counting)
    query = make_query("Redis cache")
    signal.top(query, 3)
    signal.score(query, ["m22", "m14"])
    assert len(calls) == 1
    signal.score(make_query("Redis cache", allowed=frozenset({"m22"})), ["m22"])
    assert len(calls) == 2  # another filter is another query
    index.add("a", "new", TOKENIZER("Redis cache Redis cache warmup"))
    top = signal.top(make_query("Redis cache", allowed=frozenset({"m22"})), 3)
    assert len(calls) == 3  # the write invalidated the cache
    assert top == {"m22": 1.0}
    assert next(iter(signal.top(query, 1))) == "new"


def test_signal_tokenizes_text_when_query_has_no_tokens() -> None:
    signal = BM25Signal(build(DOCS), TOKENIZER)
    query = Query(text="Miso the cat", namespace="a", now=0.0)
    assert set(signal.top(query, 2)) == {"m06", "m23"}


def _per_term_scores(part, tokens, k1, b):
    """raw_scores as a loop over the query's terms: the reference of its one-pass form."""
    from collections import Counter

    n_docs = len(part.slot_of)
    avgdl = part.total_len / n_docs
    scores = np.zeros(len(part.id_at))
    for term, count in Counter(tokens).items():
        tid = part.vocab.get(term)
        if tid is None or part.df[tid] == 0:
            continue
        slots, tfs = part.postings(tid)
        idf = float(lucene_idf(n_docs, part.df[tid]))
        scores[slots] += count * okapi_scores(tfs, part.doc_len[slots], avgdl, idf, k1, b)
    return scores * part.alive[: scores.size] if part.dead else scores


@pytest.mark.parametrize("seed", range(3))
def test_raw_scores_equal_a_loop_over_the_query_terms(seed):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)]
    index = BM25Index()
    for i in range(300):
        index.add("ns", f"d{i}", list(rng.choice(words, size=int(rng.integers(0, 15)))))
    for i in rng.choice(300, size=60, replace=False):
        index.remove("ns", f"d{i}")  # tombstones (dead slots)
    part = index.export("ns")
    for _ in range(200):
        query = list(rng.choice([*words, "absent"], size=int(rng.integers(1, 9))))  # repeats
        for k1, b in ((1.5, 0.75), (1.2, 1.0), (0.5, 0.0)):
            got = part.raw_scores(query, k1, b)
            want = _per_term_scores(part, query, k1, b)
            if got is None:
                assert not want.any()
            else:
                assert np.array_equal(got, want)  # the same sums, bit for bit
