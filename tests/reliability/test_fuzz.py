"""Hostile and bad input: every call either works or raises a NoraxError, and a rejection
writes nothing.

Property-based fuzzing of ``add``, ``search``, ``get`` and ``delete`` with arbitrary
unicode (lone surrogates included), control characters and NUL bytes, index and SQL syntax,
odd ids, namespaces, kinds, times, metadata, filters, weights and ``k``. Accepted writes must
read back exactly; after a rejection the store's ids and counts are unchanged; Chroma and
every index agree at the end. The distinct rejection messages are printed (``pytest -s``)
so a reader can judge that each one says what to fix. Then 1 MB texts with the real models.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections import Counter
from datetime import timezone

import pytest
from _support import open_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from norax_core import NoraxError, NoraxMemory
from norax_core.models import DEFAULT_NAMESPACE, SIGNALS

EXAMPLES = 400
HOSTILE = [
    '" OR NEAR( * -',
    "'; DROP TABLE memories; --",
    "Robert'); DELETE FROM embeddings;--",
    "\x00",
    "a\x00b",
    "\x01\x1f\x7f\x1b[31m",
    "\u202eevil\u202c",
    "\ufeff",
    "\u200b",
    "\U0001f4a5 \U0001f469\u200d\U0001f4bb",
    "e\u0301\u0301\u0301",
    "\ud800",
    "x\udfffy",
    "NEAR/3 AND OR NOT *:* ~2 ^3",
    "%s %n {0} ${x}",
    "$and",
    "#document",
    "chroma:document",
    "norax_kind",
    "../../etc/passwd",
    "\n\r\t\v\f",
    " ",
    "",
    "TypeORM",
    "colby",
]
SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

any_char = st.characters(exclude_categories=())  # surrogates included
text = st.one_of(
    st.text(any_char, max_size=60),
    st.sampled_from(HOSTILE),
    st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=5).map(" ".join),
)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """Valid (if odd) values three times out of four, so that most calls get far."""
    return st.sampled_from([good, good, good, bad]).flatmap(lambda strategy: strategy)


# Valid but hostile: any unicode but lone surrogates, always with one visible word.
good_text = st.tuples(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40), st.sampled_from(HOSTILE)
).map(lambda p: f"{p[0]} note {p[1]}")
good_name = st.one_of(st.sampled_from(["default", "t1", "t2"]), good_text.map(lambda t: t[:200]))
texts = mostly(
    st.one_of(good_text, st.lists(good_text, min_size=1, max_size=3)),
    st.one_of(text, st.lists(text, max_size=4), junk),
)
ids = mostly(st.none(), st.one_of(text, st.lists(text, max_size=4), junk))
names = mostly(st.one_of(st.none(), good_name), st.one_of(text, st.lists(text, max_size=3), junk))
good_times = st.one_of(
    st.none(),
    st.floats(-6e10, 2.5e11),
    st.datetimes(timezones=st.sampled_from([None, timezone.utc])),
    st.sampled_from(["2026-11-29", "0001-01-01T00:00:00Z", "2026-01-01T10:00:00+14:00"]),
)
times = mostly(
    good_times,
    st.one_of(
        st.floats(),
        st.integers(-(10**20), 10**20),
        text,
        st.sampled_from(["2026-11-29", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-23:59", "now"]),
        st.booleans(),
    ),
)
good_meta = st.dictionaries(
    good_text.map(lambda t: "k" + t[:30]),
    st.one_of(
        good_text,
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
    ),
    max_size=3,
)
metadata = mostly(
    st.one_of(st.none(), good_meta),
    st.one_of(
        st.dictionaries(st.one_of(text, st.integers()), st.one_of(text, junk), max_size=3),
        st.lists(st.dictionaries(text, st.integers(), max_size=1), max_size=3),
        junk,
    ),
)
ks = mostly(
    st.one_of(st.integers(1, 12), st.sampled_from([10**9, 10**30])),
    st.one_of(st.integers(-3, 0), st.sampled_from([-(10**9)]), st.floats(), junk, text),
)
where = st.one_of(
    st.none(),
    st.none(),
    st.none(),
    st.dictionaries(text, st.one_of(text, st.integers(), st.floats(), junk), max_size=2),
    st.sampled_from(
        [
            {"$and": []},
            {"$or": [{"topic": "a"}]},
            {"topic": {"$in": []}},
            {"topic": {"$regex": "("}},
            {"topic": {"$ne": None}},
            {"norax_namespace": "other"},
            {"topic": "a"},
        ]
    ),
    junk,
)
weights = mostly(
    st.one_of(
        st.none(),
        st.sampled_from(["default", "seed", "rrf", "bm25"]),
        st.fixed_dictionaries({s: st.floats(0.01, 1e6) for s in SIGNALS}),
    ),
    st.one_of(
        st.sampled_from(["no-such-preset", ""]),
        st.dictionaries(st.sampled_from([*SIGNALS, "x"]), st.floats(), max_size=4),
        junk,
    ),
)
queries = mostly(good_text, st.one_of(text, junk))


def shape(exc: BaseException) -> str:
    """A rejection message with the quoted values removed: one line per kind of message."""
    msg = re.sub(r"'[^']*'|\"[^\"]*\"|\b\d+\b", "_", str(exc).split(", got ")[0])
    return f"{type(exc).__name__}: {msg[:110]}"


@pytest.fixture(scope="module")
def store():
    mem = open_store()
    mem.add(
        ["Colby moved TypeORM to the ops repo", "Priya reviews PaymentService", "Base fees"],
        ids=["seed-1", "seed-2", "seed-3"],
        metadata={"topic": "a"},
    )
    yield mem
    report = mem.check()
    mem.close()
    assert report.ok, report.format()


@pytest.fixture(scope="module")
def messages():
    seen: Counter[str] = Counter()
    yield seen
    print(f"\nfuzz: {sum(seen.values())} rejections, {len(seen)} distinct messages:")
    for msg, n in sorted(seen.items(), key=lambda kv: -kv[1]):
        print(f"  {n:4d} x {msg}")


def snapshot(mem: NoraxMemory) -> tuple[frozenset[str], int]:
    return frozenset(mem.store.indexes.namespace_of), mem.store.collection.count()


def test_add_accepts_or_rejects_cleanly(store, messages):
    stats: Counter[str] = Counter()

    @SETTINGS
    @given(t=texts, i=ids, kind=names, ns=names, when=times, meta=metadata)
    def run(t, i, kind, ns, when, meta) -> None:
        stats["examples"] += 1
        kwargs = {"ids": i, "namespace": ns, "created_at": when, "metadata": meta}
        if kind is not None:
            kwargs["kind"] = kind
        before = snapshot(store)
        try:
            out = store.add(t, **kwargs)
        except NoraxError as exc:
            assert str(exc).strip(), "an empty error message"
            messages[shape(exc)] += 1
            assert snapshot(store) == before, "a rejected add wrote something"
            return
        stats["accepted"] += 1
        written = [t] if isinstance(t, str) else list(t)
        got = store.get(out)
        assert [m.text for m in got] == written  # NULs, controls and RTL marks included
        spaces = ns if isinstance(ns, list) else [ns] * len(written)
        assert [m.namespace for m in got] == [s or DEFAULT_NAMESPACE for s in spaces]
        assert store.count() == len(before[0]) + len(written)

    run()
    print(f"\nfuzz add: {stats['examples']} examples, {stats['accepted']} accepted, 0 crashes")
    assert stats["accepted"] > 10 and stats["examples"] >= EXAMPLES


def test_search_answers_or_rejects_cleanly(store, messages):
    stats: Counter[str] = Counter()

    @SETTINGS
    @given(q=queries, k=ks, ns=names, flt=where, now=times, w=weights)
    def run(q, k, ns, flt, now, w) -> None:
        stats["examples"] += 1
        before = snapshot(store)
        try:
            res = store.search(q, k=k, namespace=ns, where=flt, now=now, weights=w)
        except NoraxError as exc:
            assert str(exc).strip()
            messages[shape(exc)] += 1
        else:
            stats["answered"] += 1
            assert len(res) <= k and len({r.id for r in res}) == len(res)
            for r in res:
                assert r.namespace == (ns or DEFAULT_NAMESPACE)
                assert math.isfinite(r.score) and 0.0 <= r.score <= 1.0 + 1e-9
                assert all(0.0 <= v <= 1.0 for v in r.signals.values())
        assert snapshot(store) == before, "a search wrote something"

    run()
    print(f"\nfuzz search: {stats['examples']} examples, {stats['answered']} answered, 0 crashes")
    assert stats["answered"] > 10


def test_get_and_delete_reject_cleanly(store, messages):
    @SETTINGS
    @given(i=ids, op=st.sampled_from(["get", "delete", "count"]))
    def run(i, op) -> None:
        before = snapshot(store)
        try:
            if op == "count":
                store.count(i)
            else:
                getattr(store, op)(i)
        except NoraxError as exc:
            assert str(exc).strip()
            messages[shape(exc)] += 1
        if op != "delete":
            assert snapshot(store) == before

    store.add("kept out of the delete fuzzing", ids="keep-me", namespace="safe")
    run()
    assert store.get("keep-me")  # no generated id names it


MB = 1_000_000


def _mb_texts() -> dict[str, str]:
    rng = random.Random(7)
    words = ["wallet", "Colby", "deploy", "TypeORM", "refund", "Priya", "schema", "budget"]
    prose = " ".join(rng.choice(words) for _ in range(MB // 6))[:MB]
    return {
        "words": prose,
        "one-token": "a" * MB,
        "controls": ("\x00\x01 wallet \x1b[0m\u202e " * (MB // 20))[:MB],
        "cjk": ("记忆检索系统" * (MB // 6))[:MB],
    }


def test_one_megabyte_texts_with_the_real_models(embedder, extractor):
    mem = NoraxMemory(embedder=embedder, extractor=extractor)
    timings = {}
    try:
        for name, big in _mb_texts().items():
            before = snapshot(mem)
            start = time.perf_counter()
            try:
                (mid,) = mem.add(big, ids=f"big-{name}")
            except NoraxError as exc:  # a clean rejection is allowed too
                timings[name] = f"rejected in {time.perf_counter() - start:.1f}s: {exc}"
                assert snapshot(mem) == before
                continue
            took = time.perf_counter() - start
            timings[name] = f"accepted in {took:.1f}s"
            assert mem.get(mid)[0].text == big
            res = mem.search("wallet Colby refund", k=4, namespace=DEFAULT_NAMESPACE)
            assert mid in {r.id for r in res} or name in ("one-token", "cjk")
            # batch.MODEL_CHARS caps what the models read: was 12-23 s per text before
            assert took < 30, f"a 1 MB {name} text took {took:.0f}s"
        assert mem.check().ok
    finally:
        mem.close()
    print("\n1 MB texts (real models): " + "; ".join(f"{k}: {v}" for k, v in timings.items()))
