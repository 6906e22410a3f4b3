"""NoraxStore against LangGraph's own InMemoryStore, op by op, over a real Chroma.

The same random sequences of put/delete/get/search/list_namespaces run on both stores; every
read must give the same items (search order aside: Norax ranks by its own signals and lists
by recency). Op semantics do not depend on ranking, so a small hashing embedder stands in for
the model here; the agent test (test_langgraph_agent.py) uses the real ones.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from norax_core import CallableEmbedder, InvalidInputError, NoraxError, NoraxMemory
from norax_langgraph import NoraxSearchItem, NoraxStore
from norax_langgraph import _codec as codec

DIM = 32
FIELDS = ["text"]


def _embed(texts: list[str]) -> list[list[float]]:
    out = []
    for t in texts:
        v = np.full(DIM, 0.01)
        for w in t.lower().split():
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % DIM] += 1.0
        out.append(v.tolist())
    return out


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return chromadb.PersistentClient(path=str(tmp_path_factory.mktemp("lg-chroma")))


def _memory(client: Any) -> NoraxMemory:
    return NoraxMemory(
        client=client,
        collection=f"lg-{uuid.uuid4().hex[:12]}",
        embedder=CallableEmbedder(_embed, name="test:hash-32", dim=DIM),
        extractor=False,
        sync_interval=0,
    )


@pytest.fixture
def pair(client: Any) -> Iterator[tuple[NoraxStore, InMemoryStore]]:
    mem = _memory(client)
    yield NoraxStore(mem, index={"fields": FIELDS}), _reference()
    mem.close()


class Reference(InMemoryStore):
    """InMemoryStore without two quirks the tests found (langgraph 1.2):

    - it keeps its items in a defaultdict, so a namespace that was only read, or whose items
      were all deleted, stays listed; LangGraph's Postgres store (and Norax) list the
      namespaces that hold items;
    - a put whose value has nothing to index keeps the vectors of the key's previous value,
      so the item still ranks for its old text; here a put replaces them.
    """

    def _extract_texts(self, put_ops: dict[Any, PutOp]) -> Any:
        for ns, key in put_ops:
            self._vectors[ns].pop(key, None)
        return super()._extract_texts(put_ops)

    def _handle_list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        for ns in [ns for ns, items in self._data.items() if not items]:
            del self._data[ns]
        return super()._handle_list_namespaces(op)


def _reference() -> InMemoryStore:
    return Reference(index={"dims": DIM, "embed": _embed, "fields": FIELDS})


# -- the random op sequences ------------------------------------------------------------

NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("b",), ("b", "a"), ("ü", "日本"), ("x", "b")]
KEYS = ["k1", "k2", "", "ключ", "k 3", "a.b/c"]
WORDS = ["tea", "coffee", "Base", "wallet", "Colby", "naïve", "東京", "deploy"]

values = st.fixed_dictionaries(
    {
        "text": st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
        "n": st.one_of(st.integers(-2, 3), st.sampled_from([0.5, 2.0])),
    },
    optional={
        "tag": st.sampled_from(["red", "blue", "Rot", ""]),
        "flag": st.booleans(),
        "m": st.integers(0, 2),
        "nested": st.fixed_dictionaries(
            {"x": st.integers(0, 2)}, optional={"y": st.sampled_from(["deep", "tea cup"])}
        ),
        "items": st.lists(
            st.integers(0, 2), max_size=2, unique=True
        ),  # InMemoryStore mis-embeds repeats
        "none": st.none(),
    },
)

filters = st.one_of(
    st.none(),
    st.fixed_dictionaries({"tag": st.sampled_from(["red", "blue", ""])}),
    st.fixed_dictionaries({"n": st.sampled_from([{"$gte": 1}, {"$lt": 0.5}, {"$gt": -1.5}])}),
    st.fixed_dictionaries({"n": st.sampled_from([2, 2.0, True, 0])}),
    st.fixed_dictionaries({"m": st.sampled_from([{"$ne": 1}, {"$eq": 0}, None])}),
    st.fixed_dictionaries({"flag": st.booleans()}),
    st.fixed_dictionaries({"nested": st.sampled_from([{"x": 1}, {}, {"y": "deep"}])}),
    st.fixed_dictionaries({"items": st.sampled_from([[], [1], [0, 2]])}),
    st.fixed_dictionaries({"none": st.none()}),
    st.fixed_dictionaries({"tag": st.just("red"), "n": st.just({"$lte": 1})}),
)

index_args = st.sampled_from([None, None, False, ["nested.y"], ["text", "items[*]"]])
prefixes = st.sampled_from([(), ("a",), ("a", "b"), ("b",), ("ü",), ("zzz",)])
paths = st.sampled_from([("a",), ("b",), ("*",), ("a", "*"), ("*", "b"), ("b", "a"), ("日本",)])

KINDS = ["semantic", "episodic", "procedural", "scratchpad"]
"""Each put goes through a store of one of these kinds (one memory, kinds decaying apart)."""

puts = st.tuples(
    st.just("put"),
    st.sampled_from(NAMESPACES),
    st.sampled_from(KEYS),
    values,
    index_args,
    st.sampled_from(KINDS),
)
ops = st.one_of(
    puts,
    puts,  # twice as likely: the reads need items to disagree about
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    st.tuples(st.just("get"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    st.tuples(
        st.just("list"),
        prefixes,
        filters,
        st.integers(0, 4),  # limit
        st.integers(0, 3),  # offset
    ),
    st.tuples(
        st.just("query"),
        prefixes,
        filters,
        st.sampled_from(WORDS),
        st.integers(1, 4),  # limit
        st.integers(0, 2),  # offset
    ),
    st.tuples(
        st.just("namespaces"),
        st.one_of(st.none(), paths),
        st.one_of(st.none(), paths),
        st.one_of(st.none(), st.integers(1, 3)),
        st.integers(0, 8),
        st.integers(0, 2),
    ),
)


def _triple(item: Item) -> tuple[tuple[str, ...], str, Any]:
    return (item.namespace, item.key, item.value)


def _by_recency(items: list[Any]) -> list[Any]:
    return sorted(items, key=lambda i: i.updated_at, reverse=True)


def _run(norax: NoraxStore, ref: InMemoryStore, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "put":
        _, ns, key, value, index, memory_kind = op
        NoraxStore(norax.memory, index={"fields": FIELDS}, kind=memory_kind).put(
            ns, key, value, index=index
        )
        ref.put(ns, key, value, index=index)
    elif kind == "delete":
        norax.delete(op[1], op[2])
        ref.delete(op[1], op[2])
    elif kind == "get":
        got, want = norax.get(op[1], op[2]), ref.get(op[1], op[2])
        assert (got is None) == (want is None), op
        if got is not None and want is not None:
            assert _triple(got) == _triple(want), op
            assert got.created_at <= got.updated_at
    elif kind == "list":
        _, prefix, flt, limit, offset = op
        got = norax.search(prefix, filter=flt, limit=limit, offset=offset)
        everything = ref.search(prefix, filter=flt, limit=10_000)
        # InMemoryStore lists in insertion order; Norax most recently updated first, whatever
        # the items' kinds: the order is compared, and the page is that order's slice.
        want = _by_recency(everything)[offset : offset + limit]
        assert [_triple(i) for i in got] == [_triple(i) for i in want], op
        assert [i.updated_at for i in got] == sorted((i.updated_at for i in got), reverse=True)
        assert all(i.score is None for i in got)
    elif kind == "query":
        _, prefix, flt, query, limit, offset = op
        got = norax.search(prefix, query=query, filter=flt, limit=limit, offset=offset)
        want = ref.search(prefix, query=query, filter=flt, limit=limit, offset=offset)
        assert len(got) == len(want), op
        # Search order aside: the items of a page depend on the ranking, so compare the page
        # sizes, the scored/unscored split and, over a page that holds everything, the sets.
        assert sum(i.score is None for i in got) == sum(i.score is None for i in want), op
        every = ref.search(prefix, query=query, filter=flt, limit=10_000)
        assert {(i.namespace, i.key) for i in got} <= {(i.namespace, i.key) for i in every}
        whole = norax.search(prefix, query=query, filter=flt, limit=10_000)
        assert sorted(map(repr, map(_triple, whole))) == sorted(map(repr, map(_triple, every)))
        for item in whole:
            assert isinstance(item, NoraxSearchItem)
            assert (item.score is None) == (item.signals == {})
    else:
        _, prefix, suffix, depth, limit, offset = op
        kw = {"prefix": prefix, "suffix": suffix, "max_depth": depth, "limit": limit}
        assert norax.list_namespaces(**kw, offset=offset) == ref.list_namespaces(
            **kw, offset=offset
        ), op


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=st.lists(ops, min_size=8, max_size=40))
def test_same_results_as_inmemorystore(client: Any, sequence: list[tuple[Any, ...]]) -> None:
    mem = _memory(client)
    try:
        norax, ref = NoraxStore(mem, index={"fields": FIELDS}), _reference()
        for op in sequence:
            _run(norax, ref, op)
        # and the final state, read both ways
        assert norax.list_namespaces(limit=1000) == ref.list_namespaces(limit=1000)
        assert sorted(map(repr, map(_triple, norax.search((), limit=1000)))) == sorted(
            map(repr, map(_triple, ref.search((), limit=1000)))
        )
    finally:
        mem.close()


# -- the edge cases, spelled out --------------------------------------------------------


def test_edge_cases_side_by_side(pair: tuple[NoraxStore, InMemoryStore]) -> None:
    norax, ref = pair
    for store in pair:
        assert store.get(("a",), "missing") is None
        assert store.search(("a",)) == []
        assert store.list_namespaces() == []
        store.delete(("a",), "missing")  # deleting what is not there is a no-op
        store.put(("a",), "k", {"text": "tea", "deep": {"list": [1, {"x": None}], "é": "ü"}})
        store.put(("a",), "k", {"text": "coffee"})  # overwrite
        store.put(("a", "b"), "k", {"text": "東京 tea"})
        store.delete(("a", "b"), "k")
        store.delete(("a", "b"), "k")  # twice
    for ns, key in [(("a",), "k"), (("a", "b"), "k")]:
        got, want = norax.get(ns, key), ref.get(ns, key)
        assert (got and _triple(got)) == (want and _triple(want))
    assert norax.list_namespaces() == ref.list_namespaces() == [("a",)]
    assert [_triple(i) for i in norax.search(("a",), query="coffee")] == [
        (("a",), "k", {"text": "coffee"})
    ]


def test_batch_reads_see_the_store_before_its_writes(
    pair: tuple[NoraxStore, InMemoryStore],
) -> None:
    results = []
    for store in pair:
        store.put(("a",), "k", {"text": "old"})
        results.append(
            store.batch(
                [
                    PutOp(("a",), "k", {"text": "new"}),
                    GetOp(("a",), "k"),
                    SearchOp(("a",)),
                    PutOp(("a",), "k2", {"text": "first"}),
                    PutOp(("a",), "k2", {"text": "last wins"}),
                    ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a",)),)),
                ]
            )
        )
        assert store.get(("a",), "k").value == {"text": "new"}  # type: ignore[union-attr]
        assert store.get(("a",), "k2").value == {"text": "last wins"}  # type: ignore[union-attr]
    (n_put, n_get, n_search, _, _, n_list), (_, r_get, r_search, _, _, r_list) = results
    assert n_put is None
    assert n_get.value == r_get.value == {"text": "old"}  # type: ignore[union-attr]
    assert [i.value for i in n_search] == [i.value for i in r_search]  # type: ignore[union-attr]
    assert n_list == r_list == [("a",)]


def test_created_at_survives_an_update_and_updated_at_moves(
    pair: tuple[NoraxStore, InMemoryStore],
) -> None:
    norax, _ = pair
    norax.put(("a",), "k", {"text": "one"})
    first = norax.get(("a",), "k")
    norax.put(("a",), "k", {"text": "two"})
    second = norax.get(("a",), "k")
    assert first is not None and second is not None
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    # and listing without a query puts the most recently updated first
    norax.put(("a",), "j", {"text": "three"})
    norax.put(("a",), "k", {"text": "four"})
    assert [i.key for i in norax.search(("a",))] == ["k", "j"]


def test_namespaces_are_isolated_tenants(pair: tuple[NoraxStore, InMemoryStore]) -> None:
    norax, _ = pair
    norax.put(("users", "alice"), "pref", {"text": "Alice drinks green tea"})
    norax.put(("users", "bob"), "pref", {"text": "Bob drinks black coffee"})
    alice = norax.get(("users", "alice"), "pref")
    assert alice is not None and alice.value == {"text": "Alice drinks green tea"}
    assert {i.namespace for i in norax.search(("users", "bob"), query="tea")} == {("users", "bob")}
    assert sorted(norax.memory.namespaces()) == ["lg:users.alice", "lg:users.bob"]
    norax.delete(("users", "bob"), "pref")
    assert norax.get(("users", "alice"), "pref") is not None


def test_search_items_explain_themselves(pair: tuple[NoraxStore, InMemoryStore]) -> None:
    norax, _ = pair
    norax.put(("a",), "1", {"text": "coffee deploy"})
    norax.put(("a",), "2", {"text": "tea wallet"})
    items = norax.search(("a",), query="coffee")
    assert isinstance(items[0], NoraxSearchItem)
    assert items[0].key == "1"
    assert set(items[0].signals) == {"bm25", "dense", "temporal", "graph"}
    assert items[0].dict()["signals"] == items[0].signals
    assert items[0].score is not None and items[0].score >= items[1].score  # type: ignore[operator]


def test_filters_apply_inside_the_ranking_not_after(pair: tuple[NoraxStore, InMemoryStore]) -> None:
    norax, _ = pair
    # 30 unfiltered items match the query better than the one that passes the filter: a
    # post-filter over the top hits would return nothing.
    for i in range(30):
        norax.put(("a",), f"noise{i}", {"text": "coffee coffee coffee", "tag": "noise"})
    norax.put(("a",), "wanted", {"text": "tea", "tag": "keep"})
    got = norax.search(("a",), query="coffee", filter={"tag": "keep"}, limit=1)
    assert [i.key for i in got] == ["wanted"]


def test_bad_input_is_refused_and_writes_nothing(pair: tuple[NoraxStore, InMemoryStore]) -> None:
    norax, _ = pair
    norax.put(("a",), "k", {"text": "kept"})
    bad_batches: list[list[Any]] = [
        [PutOp(("a",), "new", {"text": "ok"}), PutOp(("a",), "k", {"x": float("nan")})],
        [PutOp(("a",), "new", {"text": "ok"}), PutOp(("a",), "k", {"x": object()})],
        [PutOp(("a",), "new", {"text": "ok"}), PutOp(("a",), "k", {1: "int key"})],
        [PutOp(("a",), "new", {"text": "ok"}), PutOp((), "k", {"text": "no namespace"})],
        [PutOp(("a",), "new", {"text": "ok"}), PutOp(("a.b",), "k", {"text": "period"})],
        [PutOp(("a",), "new", {"text": "ok"}), PutOp(("a",), "k", {"text": "t"}, ttl=5.0)],
        [PutOp(("a",), "new", {"text": "ok"}), SearchOp(("a",), filter={"n": {"$in": [1]}})],
        [PutOp(("a",), "new", {"text": "ok"}), SearchOp(("a",), limit=-1)],
    ]
    for ops in bad_batches:
        with pytest.raises(NoraxError):
            norax.batch(ops)
    assert norax.get(("a",), "new") is None
    assert norax.get(("a",), "k").value == {"text": "kept"}  # type: ignore[union-attr]
    with pytest.raises(NotImplementedError):  # LangGraph's own refusal, before the batch
        norax.put(("a",), "k", {"text": "t"}, ttl=5.0)
    with pytest.raises(InvalidInputError):
        NoraxStore(norax.memory, index={"dims": 384, "embed": _embed})  # type: ignore[typeddict-item]
    assert norax.supports_ttl is False


def test_async_path_matches_sync(pair: tuple[NoraxStore, InMemoryStore]) -> None:
    norax, _ = pair

    async def scenario() -> list[Any]:
        await norax.aput(("a",), "1", {"text": "coffee"})
        await norax.aput(("b",), "2", {"text": "coffee tea"})
        await norax.aput(("b",), "3", {"text": "gone"})
        await norax.adelete(("b",), "3")
        return [
            await norax.aget(("a",), "1"),
            await norax.asearch((), query="coffee"),
            await norax.asearch(("b",)),
            await norax.alist_namespaces(),
        ]

    got, found, listed, spaces = asyncio.run(scenario())
    assert got == norax.get(("a",), "1")
    assert sorted(i.key for i in found) == ["1", "2"]
    assert [i.key for i in listed] == ["2"]
    assert spaces == [("a",), ("b",)]


def test_persists_across_reopen(tmp_path: Path) -> None:
    emb = CallableEmbedder(_embed, name="test:hash-32", dim=DIM)
    with NoraxMemory(tmp_path / "s", embedder=emb, extractor=False) as mem:
        NoraxStore(mem).put(("a",), "k", {"text": "persisted", "n": 1})
    with NoraxMemory(tmp_path / "s", embedder=emb, extractor=False) as mem:
        store = NoraxStore(mem)
        assert store.get(("a",), "k").value == {"text": "persisted", "n": 1}  # type: ignore[union-attr]
        assert [i.key for i in store.search(("a",), filter={"n": 1})] == ["k"]


def test_prefix_search_merges_namespaces(pair: tuple[NoraxStore, InMemoryStore]) -> None:
    norax, _ = pair
    for n, ns in enumerate([("u", "a"), ("u", "b"), ("u", "a"), ("u", "c"), ("u", "b")]):
        norax.put(ns, f"k{n}", {"text": f"coffee {'tea ' * n}"})
    # without a query: most recently updated first, across namespaces
    assert [i.key for i in norax.search(("u",), limit=10)] == ["k4", "k3", "k2", "k1", "k0"]
    assert [i.key for i in norax.search(("u",), limit=2, offset=1)] == ["k3", "k2"]
    # with one: each namespace's best, then each second best
    ranked = norax.search(("u",), query="coffee tea tea tea tea", limit=10)
    best = {
        ns: max((i for i in ranked if i.namespace == ns), key=lambda i: i.score or 0)
        for ns in {i.namespace for i in ranked}
    }
    assert {i.key for i in ranked[:3]} == {i.key for i in best.values()}
    assert [i.namespace for i in ranked[3:]] in ([("u", "a"), ("u", "b")], [("u", "b"), ("u", "a")])


def test_a_prefix_search_embeds_its_query_once(client: Any) -> None:
    # Issue 24 item 2: one search over several namespaces embedded the query once per namespace.
    queries: list[str] = []

    def counting(texts: list[str]) -> list[list[float]]:
        queries.extend(t for t in texts if t.startswith("coffee tea"))
        return _embed(texts)

    mem = NoraxMemory(
        client=client,
        collection=f"lg-{uuid.uuid4().hex[:12]}",
        embedder=CallableEmbedder(counting, name="test:hash-32", dim=DIM),
        extractor=False,
        sync_interval=0,
    )
    try:
        store = NoraxStore(mem, index={"fields": FIELDS})
        for n, ns in enumerate([("u", "a"), ("u", "b"), ("u", "c"), ("u", "d")]):
            store.put(ns, f"k{n}", {"text": f"coffee {'tea ' * n}"})
        queries.clear()
        found = store.search(("u",), query="coffee tea tea", limit=10)
        assert len(found) == 4 and queries == ["coffee tea tea"]
        queries.clear()
        assert asyncio.run(store.asearch(("u",), query="coffee tea tea", limit=10)) == found
        assert queries == ["coffee tea tea"]
        # the embedding passed in ranks exactly as the one computed inside
        vec = mem.embed_query("coffee tea")
        spaces = [codec.norax_namespace(("u", x)) for x in "ab"]
        for ns in spaces:
            inside = [(r.id, r.score) for r in mem.search("coffee tea", namespace=ns)]
            given = mem.search("coffee tea", namespace=ns, query_embedding=vec)
            assert [(r.id, r.score) for r in given] == inside
        for bad in ([1.0] * (DIM - 1), [0.0] * DIM, [float("nan")] * DIM, "coffee"):
            with pytest.raises(InvalidInputError, match="query_embedding"):
                mem.search("coffee tea", namespace=spaces[0], query_embedding=bad)
    finally:
        mem.close()


def test_listing_is_newest_first_across_kinds_and_pages(
    pair: tuple[NoraxStore, InMemoryStore],
) -> None:
    # A scratchpad item decays in a day, a procedural one in a year: ranked by recency per
    # kind, an older procedural item beat a newer scratchpad one and the page was the wrong
    # items before it was sorted.
    norax, _ = pair
    kinds = ["procedural", "scratchpad", "semantic", "episodic", "scratchpad", "procedural"]
    for n, kind in enumerate(kinds):
        NoraxStore(norax.memory, index={"fields": FIELDS}, kind=kind).put(
            ("a",) if n % 2 else ("a", "b"), f"k{n}", {"text": f"note {n}", "tag": "x"}
        )
    newest = ["k5", "k4", "k3", "k2", "k1", "k0"]
    assert [i.key for i in norax.search(("a",), limit=10)] == newest
    for offset in range(6):
        for limit in (1, 2, 4):
            page = norax.search(("a",), limit=limit, offset=offset, filter={"tag": "x"})
            assert [i.key for i in page] == newest[offset : offset + limit], (offset, limit)
    assert [i.key for i in norax.search(("a", "b"), limit=2)] == ["k4", "k2"]
    assert [i.key for i in norax.search(("a",), limit=3, offset=0)][0] == "k5"
