"""The engine end to end, with a real persistent Chroma and the real local models."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone
from fractions import Fraction

import numpy as np
import pytest

from norax_core import (
    CallableEmbedder,
    DimensionMismatchError,
    DuplicateIdError,
    InvalidInputError,
    NoraxError,
    NoraxMemory,
    StoreLockedError,
    Weights,
)
from norax_core.engine import SIDECAR_FILE

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)

CORPUS = [
    (
        "m1",
        "The backend uses TypeORM with a Postgres database.",
        "semantic",
        40,
        {"topic": "backend"},
    ),
    (
        "m2",
        "Colby decided to use Base chain for all payments.",
        "episodic",
        50,
        {"topic": "payments"},
    ),
    ("m3", "Colby set up the team wallet on Base.", "episodic", 51, {"topic": "payments"}),
    (
        "m4",
        "Priya prefers short status updates in bullet points.",
        "semantic",
        100,
        {"topic": "people"},
    ),
    ("m5", "Deploys go through GitHub Actions after review.", "procedural", 200, {"topic": "ops"}),
    (
        "m6",
        "Scratch: the refund test is flaky when Redis is slow.",
        "scratchpad",
        1,
        {"topic": "tests"},
    ),
    (
        "m7",
        "We rejected Solana because nobody on the team writes Rust.",
        "episodic",
        52,
        {"topic": "payments"},
    ),
    (
        "m8",
        "The weekly sync moved from Monday to Tuesday morning.",
        "episodic",
        3,
        {"topic": "people"},
    ),
    (
        "m9",
        "The public API allows 100 requests per minute per key.",
        "semantic",
        120,
        {"topic": "api"},
    ),
    ("m10", "Lunch for the offsite: twelve vegetarian wraps.", "scratchpad", 2, {"topic": "misc"}),
]


def fill(mem: NoraxMemory, namespace: str = "team") -> None:
    mem.add(
        [t for _, t, _, _, _ in CORPUS],
        ids=[i for i, *_ in CORPUS],
        kind=[k for _, _, k, _, _ in CORPUS],
        created_at=[NOW - timedelta(days=d) for *_, d, _ in CORPUS],
        namespace=namespace,
        metadata=[m for *_, m in CORPUS],
    )


@pytest.fixture
def store(tmp_path, embedder, extractor):
    mem = NoraxMemory(tmp_path / "store", embedder=embedder, extractor=extractor, weights="seed")
    fill(mem)
    yield mem
    mem.close()


def ids(results):
    return [r.id for r in results]


def test_add_get_count_delete(store):
    assert store.count() == 10 and store.count("team") == 10 and store.count("nobody") == 0
    (m,) = store.get("m2")
    assert m.text.startswith("Colby decided")
    assert m.kind == "episodic" and m.namespace == "team"
    assert m.created_at == NOW - timedelta(days=50)
    assert m.created_at.tzinfo is not None
    assert m.metadata == {"topic": "payments"}
    assert "colby" in m.entities
    assert [x.id for x in store.get(["m3", "nope", "m1"])] == ["m3", "m1"]
    assert store.delete(["m2", "nope"]) == 1
    assert store.get("m2") == [] and store.count() == 9
    assert "m2" not in ids(
        store.search("Colby decided Base payments", k=10, namespace="team", now=NOW)
    )


def test_single_text_returns_one_generated_id(memory):
    (mid,) = memory.add("just one memory about TypeORM")
    assert len(mid) == 32 and memory.count() == 1


def test_search_results_carry_every_signal(store):
    res = store.search("What ORM does the backend use?", k=3, namespace="team", now=NOW)
    assert res[0].id == "m1"
    for r in res:
        assert set(r.signals) == {"bm25", "dense", "temporal", "graph"}
        assert all(0.0 <= v <= 1.0 for v in r.signals.values())
        assert r.score == pytest.approx(
            sum(w * r.signals[s] for s, w in Weights(0.25, 0.35, 0.2, 0.2).as_dict().items())
        )
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)


def test_keyword_only_hit_reaches_results_with_real_dense_score(store):
    res = store.search("TypeORM", k=1, namespace="team", now=NOW, weights={"bm25": 1.0})
    assert res[0].id == "m1" and res[0].signals["bm25"] == 1.0
    # every candidate gets the dense signal's real score, not a silent 0
    assert res[0].signals["dense"] > 0.1


def test_temporal_prefers_recent_and_honours_kind(store):
    res = store.search("anything", k=10, namespace="team", now=NOW, weights={"temporal": 1.0})
    t = {r.id: r.signals["temporal"] for r in res}
    assert t["m6"] == pytest.approx(math.exp(-1 / 1))  # scratchpad, 1 day, tau 1
    assert t["m5"] == pytest.approx(math.exp(-200 / 365))  # procedural, 200 days
    assert t["m8"] == pytest.approx(math.exp(-3 / 30))


def test_future_timestamps_clamp_to_full_recency(memory):
    memory.add("a note from the future", created_at=NOW + timedelta(days=3))
    (r,) = memory.search("note", k=1, now=NOW)
    assert r.signals["temporal"] == 1.0


def test_namespace_isolation(store):
    store.add("TypeORM migration notes for another tenant", namespace="other", ids="o1")
    res = store.search("TypeORM", k=10, namespace="team", now=NOW)
    assert "o1" not in ids(res)
    res = store.search("TypeORM", k=10, namespace="other", now=NOW)
    assert ids(res) == ["o1"]


@pytest.mark.parametrize("preset", ["seed", "rrf", "bm25", "dense", "temporal", "graph"])
def test_where_filter_applies_inside_every_signal(store, preset):
    res = store.search(
        "Colby payments wallet TypeORM",
        k=10,
        namespace="team",
        now=NOW,
        where={"topic": "payments"},
        weights=preset,
    )
    assert res, preset
    assert {r.metadata["topic"] for r in res} == {"payments"}
    assert set(ids(res)) <= {"m2", "m3", "m7"}


def test_filter_before_ranking_keeps_k_results(store):
    res = store.search("TypeORM backend", k=2, namespace="team", now=NOW, where={"topic": "people"})
    assert len(res) == 2 and {r.id for r in res} == {"m4", "m8"}


def test_k_larger_than_store_returns_what_there_is(store):
    assert len(store.search("anything", k=1000, namespace="team", now=NOW)) == 10
    assert store.search("anything", k=5, namespace="empty-ns", now=NOW) == []


def test_seed_example_ranks_decision_in_top3(store):
    res = store.search("What did we decide about the wallet?", k=3, namespace="team", now=NOW)
    assert "m2" in ids(res)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"texts": ""},
        {"texts": "   \n\t"},
        {"texts": []},
        {"texts": ["ok", 3]},
        {"texts": b"bytes"},
        {"texts": ["a", "b"], "ids": ["x", "x"]},
        {"texts": ["a", "b"], "ids": ["x"]},
        {"texts": "a", "ids": [""]},
        {"texts": "a", "created_at": math.nan},
        {"texts": "a", "created_at": math.inf},
        {"texts": "a", "created_at": "yesterday-ish"},
        {"texts": "a", "created_at": True},
        {"texts": "a", "created_at": 1e20},
        {"texts": "a", "created_at": 10**400},
        {"texts": "a", "created_at": np.bool_(True)},
        {"texts": "a", "created_at": np.float64("nan")},
        {"texts": ["a", "b"], "created_at": [1700000000, False]},
        {"texts": "a", "metadata": {"tags": ["x", "y"]}},
        {"texts": "a", "metadata": {"k": None}},
        {"texts": "a", "metadata": {"k": {"nested": 1}}},
        {"texts": "a", "metadata": {"k": math.nan}},
        {"texts": "a", "metadata": {"norax_kind": "x"}},
        {"texts": "a", "metadata": "topic=x"},
        {"texts": "a", "kind": ""},
        {"texts": "a", "namespace": ""},
        {"texts": "a", "namespace": 7},
        {"texts": ["a", "b"], "kind": ["x"]},
    ],
)
def test_bad_input_is_rejected_before_any_write(store, kwargs):
    before = store.count()
    texts = kwargs.pop("texts")
    with pytest.raises(InvalidInputError) as info:
        store.add(texts, **kwargs)
    assert isinstance(info.value, NoraxError) and str(info.value)
    assert store.count() == before
    assert len(store.search("a", k=50, namespace="team", now=NOW)) == before


def test_duplicate_existing_id_rejected_and_upsert_replaces(store):
    with pytest.raises(DuplicateIdError):
        store.add(["fresh text", "another"], ids=["new-1", "m1"], namespace="team")
    assert store.get("new-1") == []
    store.upsert("The backend now uses Prisma instead of TypeORM.", ids="m1", namespace="team")
    (m,) = store.get("m1")
    assert "Prisma" in m.text and store.count() == 10
    res = store.search("Prisma", k=1, namespace="team", now=NOW, weights="bm25")
    assert ids(res) == ["m1"]


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3", None])
def test_bad_k(store, k):
    with pytest.raises(InvalidInputError):
        store.search("x", k=k)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"query": ""},
        {"query": "  "},
        {"query": None},
        {"query": "x", "now": math.nan},
        {"query": "x", "now": "not a time"},
        {"query": "x", "where": {"$bogus": 1}},
        {"query": "x", "where": "topic"},
        {"query": "x", "weights": {"bm25": -1}},
        {"query": "x", "weights": "no-such-preset"},
    ],
)
def test_bad_search_input(store, kwargs):
    with pytest.raises(NoraxError):
        store.search(**kwargs)


@pytest.mark.parametrize(
    "when",
    [
        1700000000,
        np.int64(1700000000),
        np.float64(1700000000.0),
        Fraction(1700000000),
        "2023-11-14T22:13:20Z",
        datetime(2023, 11, 14, 22, 13, 20),
        [1700000000],
        (np.int64(1700000000),),
    ],
    ids=["int", "numpy.int64", "numpy.float64", "Fraction", "iso", "datetime", "[int]", "(int64,)"],
)
def test_every_time_form_gives_the_same_created_at(memory, when):
    (mid,) = memory.add("an epoch-second time", created_at=when)
    (m,) = memory.get(mid)
    assert m.created_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)


def test_a_date_is_its_midnight_utc(memory):
    ids_ = memory.add(["a dated note", "another"], created_at=[date(2024, 3, 1), date(2024, 3, 2)])
    assert [m.created_at for m in memory.get(ids_)] == [
        datetime(2024, 3, 1, tzinfo=timezone.utc),
        datetime(2024, 3, 2, tzinfo=timezone.utc),
    ]


@pytest.mark.parametrize("method", ["weighted_sum", "rrf"])
def test_huge_weights_rank_like_unit_weights(store, method):
    # 1e308 each once summed to inf: scores 0 and NaN, and the best match (NaN) ranked last
    def run(w: float) -> list[tuple[str, float]]:
        weights = Weights(w, w, w, w, method=method)
        res = store.search("wallet payments", k=5, namespace="team", now=NOW, weights=weights)
        return [(r.id, r.score) for r in res]

    huge, unit = run(1e308), run(1.0)
    assert all(math.isfinite(score) for _, score in huge)
    assert [i for i, _ in huge] == [i for i, _ in unit]
    assert [s for _, s in huge] == pytest.approx([s for _, s in unit])


def test_naive_datetimes_are_read_as_utc(memory):
    (mid,) = memory.add("naive time", created_at=datetime(2026, 1, 1, 12, 0))
    (m,) = memory.get(mid)
    assert m.created_at == datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def test_in_memory_stores_are_independent(embedder):
    a = NoraxMemory(embedder=embedder, extractor=False)
    b = NoraxMemory(embedder=embedder, extractor=False)
    a.add("only in a")
    assert a.count() == 1 and b.count() == 0
    assert b.search("only in a") == []
    a.close()
    b.close()


def test_reopen_in_new_process_gives_same_results(tmp_path, embedder, extractor):
    path = tmp_path / "store"
    with NoraxMemory(path, embedder=embedder, extractor=extractor, weights="seed") as mem:
        fill(mem)
        here = [
            (r.id, round(r.score, 6))
            for r in mem.search("Colby wallet payments", k=5, namespace="team", now=NOW)
        ]
    code = (
        "import json,sys\n"
        "from norax_core import NoraxMemory\n"
        f"m = NoraxMemory({str(path)!r}, weights='seed')\n"
        f"r = m.search('Colby wallet payments', k=5, namespace='team', now={NOW.isoformat()!r})\n"
        "print(json.dumps([(x.id, round(x.score, 6)) for x in r]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert [tuple(x) for x in json.loads(out.stdout)] == here


def test_sidecar_missing_or_stale_is_rebuilt_from_chroma(tmp_path, embedder, extractor):
    path = tmp_path / "store"
    with NoraxMemory(path, embedder=embedder, extractor=extractor, weights="seed") as mem:
        fill(mem)
        before = [
            (r.id, r.score) for r in mem.search("Base wallet", k=5, namespace="team", now=NOW)
        ]
    # stale: a row is lost and a ghost row is added
    con = sqlite3.connect(path / SIDECAR_FILE)
    con.execute("DELETE FROM memories WHERE id = 'm3'")
    con.execute(
        "INSERT INTO memories (id, namespace, kind, created_at, tokens, entities, seq)"
        " VALUES ('ghost', 'team', 'episodic', 0, '[\"wallet\"]', '[]', 0)"
    )
    con.commit()
    con.close()
    with NoraxMemory(path, embedder=embedder, extractor=extractor, weights="seed") as mem:
        assert mem.count() == 10
        after = [(r.id, r.score) for r in mem.search("Base wallet", k=5, namespace="team", now=NOW)]
    assert [a for a, _ in after] == [b for b, _ in before]
    assert [s for _, s in after] == pytest.approx([s for _, s in before])
    (path / SIDECAR_FILE).unlink()
    with NoraxMemory(path, embedder=embedder, extractor=extractor, weights="seed") as mem:
        assert mem.count() == 10
        again = [r.id for r in mem.search("Base wallet", k=5, namespace="team", now=NOW)]
    assert again == [b for b, _ in before]


def test_dimension_mismatch_is_a_clear_error(tmp_path, embedder):
    path = tmp_path / "store"
    with NoraxMemory(path, embedder=embedder, extractor=False) as mem:
        mem.add("hello")
    tiny = CallableEmbedder(lambda texts: [[1.0] * 8 for _ in texts], name="tiny", dim=8)
    with pytest.raises(DimensionMismatchError, match="384"):
        NoraxMemory(path, embedder=tiny, extractor=False)


def test_second_open_of_an_embedded_store_fails_loudly(tmp_path, embedder):
    path = tmp_path / "store"
    with (
        NoraxMemory(path, embedder=embedder, extractor=False),
        pytest.raises(StoreLockedError, match="chroma run"),
    ):
        NoraxMemory(path, embedder=embedder, extractor=False)
    NoraxMemory(path, embedder=embedder, extractor=False).close()  # free again after close


async def test_async_api_does_not_block_the_loop(memory):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    t = asyncio.create_task(ticker())
    ids_ = await memory.aadd([f"async memory number {i} about TypeORM" for i in range(64)])
    res = await memory.asearch("TypeORM memory", k=3)
    t.cancel()
    assert len(ids_) == 64 and len(res) == 3
    assert ticks > 5


def test_http_client_store(chroma_url, embedder, extractor):
    import chromadb

    host, port = chroma_url.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port))
    import uuid

    name = f"t-{uuid.uuid4().hex[:8]}"
    mem = NoraxMemory(client=client, collection=name, embedder=embedder, extractor=extractor)
    fill(mem)
    res = mem.search("TypeORM", k=1, namespace="team", now=NOW)
    assert ids(res) == ["m1"]
    mem.close()
    # a second Norax over the same server collection rebuilds its indexes from Chroma
    other = NoraxMemory(client=client, collection=name, embedder=embedder, extractor=extractor)
    assert other.count() == 10
    assert ids(other.search("TypeORM", k=1, namespace="team", now=NOW)) == ["m1"]
    other.close()
    client.delete_collection(name)


def test_server_store_keeps_its_preset_for_every_client(chroma_url, embedder):
    import uuid

    import chromadb

    host, port = chroma_url.removeprefix("http://").split(":")
    name = f"t-{uuid.uuid4().hex[:8]}"
    first = chromadb.HttpClient(host=host, port=int(port))
    with NoraxMemory(
        client=first, collection=name, embedder=embedder, extractor=False, weights="chat"
    ) as mem:
        mem.add(["Did you go to the lake?", "Yes, with my sister!"], created_at=[NOW, NOW])
    second = chromadb.HttpClient(host=host, port=int(port))  # another process, say
    with NoraxMemory(client=second, collection=name, embedder=embedder, extractor=False) as mem:
        assert mem.weights.name == "chat"
        assert mem.add_config.embed_context == 2
    second.delete_collection(name)


def test_upsert_cannot_move_a_memory_into_another_namespace(store):
    with pytest.raises(InvalidInputError, match="another namespace"):
        store.upsert(["hijacked", "fine"], ids=["m1", "fresh"], namespace="attacker")
    (m,) = store.get("m1")
    assert m.namespace == "team" and "TypeORM" in m.text
    assert store.get("fresh") == [] and store.count("attacker") == 0
