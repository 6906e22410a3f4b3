"""Candidate-set scoring (norax_core.postprocess) against reference implementations, offline."""

from __future__ import annotations

import asyncio
import math
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pytest
import spacy

from norax_core import CallableEmbedder, NoraxConfig, NoraxMemory, Weights
from norax_core.entities import SpacyExtractor
from norax_core.errors import InvalidInputError
from norax_core.models import SIGNALS
from norax_core.postprocess import (
    ascore_candidate_set,
    lucene_idf,
    score_candidate_set,
    store_signal_scores,
    to_timestamp,
)
from norax_core.signals.base import Query
from norax_core.signals.bm25 import BM25Index, BM25Signal
from norax_core.tokenize import Tokenizer

try:  # `python -m pytest` puts the repo root on sys.path, tests/conftest.py puts tests/
    from tests.openai_server import fake_embedding
except ImportError:
    from openai_server import fake_embedding

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
DAY = 86_400.0


def toy_embedder(dim: int = 256) -> CallableEmbedder:
    """Hashed bag of words: deterministic, offline, texts sharing words are similar."""

    def fn(texts: list[str]) -> list[list[float]]:
        return [fake_embedding(t, dim).tolist() for t in texts]

    async def afn(texts: list[str]) -> list[list[float]]:
        return fn(texts)

    return CallableEmbedder(fn, afn=afn, name="toy", dim=dim)


@pytest.fixture(scope="module")
def ruler_extractor() -> SpacyExtractor:
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns(
        [
            {"label": "PERSON", "pattern": "Colby"},
            {"label": "PERSON", "pattern": "Priya"},
            {"label": "ORG", "pattern": "Base"},
            {"label": "PRODUCT", "pattern": "Redis"},
        ]
    )
    return SpacyExtractor(nlp)


def score(query, texts, ids=None, **kwargs):
    kwargs.setdefault("embedder", None)
    kwargs.setdefault("extractor", None)
    ids = ids or [f"d{i}" for i in range(len(texts))]
    return score_candidate_set(query, texts, ids, **kwargs)


# -- BM25 ------------------------------------------------------------------------------------


def reference_bm25(query: list[str], docs: list[list[str]], k1: float, b: float) -> list[float]:
    """BM25 with Lucene's idf, term by term in plain Python, divided by the best score."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    raw = []
    for doc in docs:
        total = 0.0
        for term in query:
            tf = doc.count(term)
            if tf:
                df = sum(term in d for d in docs)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        raw.append(total)
    best = max(raw)
    return [r / best if best > 0 else 0.0 for r in raw]


CORPORA = [
    (
        "What does error E4711 mean?",
        [
            "E4711 is raised by the licence checker.",
            "When the app shows an error code, look it up in the error catalogue.",
            "Database errors during the migration were caused by a missing index.",
            "Lunch for the offsite: twelve vegetarian wraps.",
        ],
    ),
    (
        "standup standup time",
        ["The standup is at nine.", "Standup moved to 10:30.", "Design review on Thursday."],
    ),
    ("nothing matches here", ["alpha beta", "gamma delta", "epsilon"]),
    ("wallet", ["Colby set up the team wallet on Base.", "wallets wallets wallets", "no"]),
]


@pytest.mark.parametrize(("query", "texts"), CORPORA)
@pytest.mark.parametrize(("k1", "b"), [(1.5, 0.75), (1.2, 0.0), (0.9, 1.0)])
def test_bm25_matches_reference(query: str, texts: list[str], k1: float, b: float) -> None:
    cfg = NoraxConfig(bm25_k1=k1, bm25_b=b)
    tok = Tokenizer(stem=cfg.stem, stopwords=cfg.stopwords)
    expected = reference_bm25(tok(query), [tok(t) for t in texts], k1, b)
    got = score(query, texts, config=cfg)["bm25"]
    assert list(got.values()) == pytest.approx(expected)


def test_a_term_in_half_the_candidates_still_counts() -> None:
    # Robertson's idf scores a term found in exactly half of the documents 0; Lucene's,
    # which the store and the candidate set both use, keeps it positive.
    texts = ["The standup is at nine.", "Standup moved to 10:30.", "Design review.", "Lunch."]
    tok = Tokenizer()
    index = BM25Index()
    index.add_many("ns", [(str(i), tok(t)) for i, t in enumerate(texts)])
    query = Query(text="standup", namespace="ns", now=0.0, tokens=tuple(tok("standup")))
    store = BM25Signal(index, tok).score(query, ["0", "1"])
    assert store["0"] > 0 and store["1"] > 0

    got = score("standup", texts, ids=["0", "1", "2", "3"])["bm25"]
    assert got["0"] > 0 and got["1"] > 0
    assert got["2"] == got["3"] == 0.0


def test_lucene_idf_is_positive_and_decreasing() -> None:
    idf = lucene_idf(10, np.arange(1, 11))
    assert (idf > 0).all() and (np.diff(idf) < 0).all()


# -- temporal --------------------------------------------------------------------------------


def test_temporal_decays_per_kind_and_missing_time_scores_zero() -> None:
    times = [NOW - timedelta(days=10)] * 3 + [None, NOW + timedelta(days=3)]
    kinds = ["procedural", "episodic", "scratchpad", "episodic", "episodic"]
    got = score("q", ["a", "b", "c", "d", "e"], times=times, kinds=kinds, now=NOW)["temporal"]
    assert got["d0"] == pytest.approx(math.exp(-10 / 365))
    assert got["d1"] == pytest.approx(math.exp(-10 / 30))
    assert got["d2"] == pytest.approx(math.exp(-10 / 1))
    assert got["d3"] == 0.0  # no time
    assert got["d4"] == 1.0  # future times are clamped to age 0


def test_temporal_uses_config_decay() -> None:
    cfg = NoraxConfig(decay_days={"episodic": 10.0})
    got = score("q", ["a"], times=[NOW - timedelta(days=10)], now=NOW, config=cfg)["temporal"]
    assert got["d0"] == pytest.approx(math.exp(-1))


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 19, 12, tzinfo=timezone.utc),
        datetime(2026, 11, 19, 12),  # naive: UTC
        "2026-11-19T12:00:00Z",
        "2026-11-19T13:00:00+01:00",
        (NOW - timedelta(days=10)).timestamp(),
        int((NOW - timedelta(days=10)).timestamp()),
    ],
)
def test_time_formats_agree(value: object) -> None:
    got = score("q", ["a"], times=[value], now=NOW.isoformat())["temporal"]
    assert got["d0"] == pytest.approx(math.exp(-10 / 30))


def test_a_date_is_midnight_utc() -> None:
    assert (
        to_timestamp(date(2026, 11, 29)) == datetime(2026, 11, 29, tzinfo=timezone.utc).timestamp()
    )
    assert to_timestamp(None) is None


def test_default_clock_is_now() -> None:
    recent = datetime.now(timezone.utc) - timedelta(days=1)
    got = score("q", ["a"], times=[recent])["temporal"]
    assert got["d0"] == pytest.approx(math.exp(-1 / 30), rel=1e-3)


# -- dense -----------------------------------------------------------------------------------


def test_dense_is_clipped_cosine_and_skips_blank_texts() -> None:
    vectors = {"q": [1.0, 0.0], "same": [2.0, 0.0], "diag": [1.0, 1.0], "opposite": [-1.0, 0.0]}
    seen: list[list[str]] = []

    def fn(texts: list[str]) -> list[list[float]]:
        seen.append(list(texts))
        return [vectors.get(t, [0.0, 1.0]) for t in texts]

    emb = CallableEmbedder(fn, name="fixed", dim=2)
    texts = ["same", "diag", "opposite", "   "]
    got = score("q", texts, embedder=emb)["dense"]
    assert list(got.values()) == pytest.approx([1.0, math.sqrt(0.5), 0.0, 0.0])
    assert seen[-1] == ["q", "same", "diag", "opposite"]  # one batch, query first, no blank


def test_without_embedder_or_extractor_those_signals_are_zero() -> None:
    got = score("Colby", ["Colby and Priya", "nobody"])
    assert set(got["dense"].values()) == {0.0} and set(got["graph"].values()) == {0.0}


def test_similar_text_scores_higher_dense() -> None:
    got = score("team wallet on Base", ["the team wallet", "lunch wraps"], embedder=toy_embedder())
    assert got["dense"]["d0"] > got["dense"]["d1"]


# -- graph -----------------------------------------------------------------------------------


def test_graph_favours_candidates_sharing_query_entities(ruler_extractor: SpacyExtractor) -> None:
    texts = [
        "Colby set up the wallet on Base.",
        "Priya likes Redis.",
        "Colby and Priya met for lunch.",
        "Nothing to see.",
    ]
    got = score("What did Colby do on Base?", texts, extractor=ruler_extractor)["graph"]
    assert got["d0"] > got["d2"] > got["d1"] >= 0.0
    assert got["d3"] == 0.0


# -- shape, validation, async ----------------------------------------------------------------


def test_every_signal_scores_every_id_in_unit_range(ruler_extractor: SpacyExtractor) -> None:
    texts = ["Colby set up the wallet on Base.", "Priya likes Redis.", "", "Base wallets"]
    ids = ["w", "p", "blank", "b"]
    times = [NOW, None, "2026-01-01", 1.7e9]
    got = score_candidate_set(
        "Colby wallet",
        texts,
        ids,
        times,
        embedder=toy_embedder(),
        extractor=ruler_extractor,
        now=NOW,
    )
    assert set(got) == set(SIGNALS)
    for signal in SIGNALS:
        assert list(got[signal]) == ids
        assert all(0.0 <= v <= 1.0 for v in got[signal].values())
    assert got["bm25"]["blank"] == got["dense"]["blank"] == got["graph"]["blank"] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": "  "}, "query"),
        ({"ids": ["a", "a"]}, "more than once"),
        ({"ids": ["a"]}, "2 texts but 1 ids"),
        ({"ids": ["a", ""]}, "non-empty"),
        ({"times": [None]}, "1 times but 2 ids"),
        ({"times": ["yesterday", None]}, "time of 'a'"),
        ({"kinds": ["episodic"]}, "kinds"),
        ({"texts": ["x", 3]}, "not a string"),
        ({"texts": "xy"}, "sequences"),
        ({"now": "soon"}, "now"),
    ],
)
def test_bad_input_raises(kwargs: dict, message: str) -> None:
    args = {"query": "q", "texts": ["x", "y"], "ids": ["a", "b"], **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        score_candidate_set(**args, embedder=None, extractor=None)


def test_async_matches_sync(ruler_extractor: SpacyExtractor) -> None:
    texts = ["Colby set up the wallet on Base.", "Priya likes Redis.", "Base wallets"]
    ids = ["a", "b", "c"]
    kw = {"embedder": toy_embedder(), "extractor": ruler_extractor, "now": NOW}
    times = [NOW - timedelta(days=d) for d in (1, 5, 50)]
    sync = score_candidate_set("Colby wallet", texts, ids, times, **kw)
    asyn = asyncio.run(ascore_candidate_set("Colby wallet", texts, ids, times, **kw))
    assert asyn == sync


# -- scores read from a store ----------------------------------------------------------------


@pytest.fixture
def toy_store(ruler_extractor: SpacyExtractor):
    mem = NoraxMemory(embedder=toy_embedder(), extractor=ruler_extractor, weights="seed")
    mem.add(
        [
            "Colby set up the team wallet on Base.",
            "Priya prefers short status updates.",
            "The refund test is flaky when Redis is slow.",
            "Colby decided to use Base for payments.",
        ],
        ids=["m1", "m2", "m3", "m4"],
        created_at=[NOW - timedelta(days=d) for d in (1, 20, 3, 60)],
        namespace="team",
    )
    mem.add("Colby's private note about Base.", ids="other", namespace="alice", created_at=NOW)
    yield mem
    mem.close()


def test_store_scores_equal_search_signals(toy_store: NoraxMemory) -> None:
    query = "What did Colby do with the wallet?"
    ids = ["m3", "m1", "unknown", "other"]
    for ns, held in [("team", {"m1", "m3"}), ("alice", {"other"}), (None, set())]:
        got = store_signal_scores(toy_store, query, ids, namespace=ns, now=NOW)
        assert set(got["bm25"]) == held  # unknown ids and other namespaces' are left out
        want = {r.id: r.signals for r in toy_store.search(query, k=4, namespace=ns, now=NOW)}
        for mid in held:
            assert {s: got[s][mid] for s in SIGNALS} == pytest.approx(dict(want[mid]))


def test_store_scores_only_for_the_stored_text(toy_store: NoraxMemory) -> None:
    ids = ["m1", "m3", "m1"]
    texts = ["Colby set up the team wallet on Base.", "Something else entirely.", "other"]
    got = store_signal_scores(toy_store, "wallet", ids, namespace="team", texts=texts, now=NOW)
    assert set(got["bm25"]) == {"m1"}  # m3 is another text under a known id
    with pytest.raises(InvalidInputError):
        store_signal_scores(toy_store, "wallet", ids, namespace="team", texts=texts[:2])


def test_store_scores_use_learned_decay(toy_store: NoraxMemory) -> None:
    slow = Weights(1, 1, 1, 1, params={"decay_days": {"episodic": 1000.0}})
    base = store_signal_scores(toy_store, "wallet", ["m4"], namespace="team", now=NOW)
    learned = store_signal_scores(
        toy_store, "wallet", ["m4"], namespace="team", now=NOW, weights=slow
    )
    assert base["temporal"]["m4"] == pytest.approx(math.exp(-60 / 30))
    assert learned["temporal"]["m4"] == pytest.approx(math.exp(-60 / 1000))
