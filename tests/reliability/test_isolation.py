"""Tenant isolation: another namespace's memories never change a query's results or scores.

Namespaces are a security boundary. For each generated case, namespace A gets the same
memories in two stores; in the second store, namespace B also gets memories (written in
between A's, drawn from the same words and entities, some deleted again), so B shares
tokens, entities, graph edges and times with A. Every query on A must then give identical
answers in both stores: the same candidate pool in the same order, the same score from each
of the four signals for every candidate, the same matched entities, and the same fused
ranking (``search`` fuses exactly this pool), and the same results, scores and explanations
from ``search`` with every query-aware stage on (context, the period boost for the period
the query names, the turns stage's session openers, bridges). All four signals have
positive weights; the embedder is a fast hashed bag of words and entities come from the
rules extractor, so a case costs milliseconds.

The cases are drawn first and both stores then hold all of them (each case has its own
namespaces; one module-scoped pair of stores per property), so every query runs beside every
other case's namespaces: isolation from many tenants, not only from B.

A second property test does the same with namespaces of 257 to 600 memories, above the size
(256) up to which the dense signal used to search exactly: beyond it, it went through
Chroma's HNSW index, approximate and built over every namespace, so B's memories changed
which of A's it found. It now ranks every namespace over its own vectors.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from _support import hash_embedder, open_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from norax_core import Weights
from norax_core.fusion import fuse, rank

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
WEIGHTS = {"bm25": 0.3, "dense": 0.3, "temporal": 0.2, "graph": 0.2}
STAGED = Weights(
    **WEIGHTS,
    params={
        "context_window": 1,
        "context_weight": 0.5,
        "period_boost": 1.0,
        "opener_boost": 0.5,  # positions in B's sessions must never move A's memories
        # the bridge step walks the namespace's entity graph: B's entities and edges (the
        # same words) must never carry A's walk, join A's results or change a score
        "bridge_weight": 0.5,
        "bridge_seeds": 2,
        "bridge_candidates": 4,
    },
)
CASES = 1000
LARGE_CASES = 40
VOCAB = [
    "Colby",
    "Priya",
    "TypeORM",
    "PaymentService",
    "Base",
    "wallet",
    "deploy",
    "invoice",
    "review",
    "refund",
    "schema",
    "roadmap",
    "budget",
    "vendor",
    "the",
    "and",
    "fixed",
    "moved",
    "Tuesday",
    "staging",
]
KINDS = ["episodic", "semantic", "procedural", "scratchpad", "custom"]

memory = st.tuples(
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=8).map(" ".join),
    st.sampled_from(KINDS),
    st.integers(-2, 400),  # age in days (negative: a future time)
    st.sampled_from(["t1", "t2"]),
)
queries = st.lists(
    st.tuples(
        st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4).map(" ".join),
        st.integers(1, 8),
        st.booleans(),  # filter on metadata
    ),
    min_size=1,
    max_size=2,
)
case = st.fixed_dictionaries(
    {
        "a": st.lists(memory, min_size=1, max_size=6),
        "b": st.lists(memory, min_size=1, max_size=8),
        "b_deleted": st.integers(0, 3),
        "order": st.randoms(use_true_random=False),  # how A and B interleave
        "queries": queries,
    }
)


large_case = st.fixed_dictionaries(
    {
        "a": st.integers(257, 600),  # A's size
        "b": st.integers(1, 600),  # B's size
        "extra_a": st.lists(memory, max_size=3),  # hypothesis-shaped ones beside the bulk
        "extra_b": st.lists(memory, max_size=3),
        "b_deleted": st.integers(0, 60),
        # seeded generators: a hypothesis-backed Random would run out of data by hundreds
        "bulk": st.integers(0, 2**32 - 1).map(random.Random),  # texts, kinds, ages, topics
        "order": st.integers(0, 2**32 - 1).map(random.Random),
        "queries": queries,
    }
)


Memory = tuple[str, str, int, str]
"""``(text, kind, age in days, topic)``."""
Item = tuple[str, str, Memory]
"""``(id, namespace, memory)``."""


def bulk(rng: random.Random, n: int) -> list[Memory]:
    """``n`` memories like the strategy's, drawn from ``rng`` (cheap to generate by hundreds)."""
    return [
        (
            " ".join(rng.choices(VOCAB, k=rng.randint(1, 8))),
            rng.choice(KINDS),
            rng.randint(-2, 400),
            rng.choice(["t1", "t2"]),
        )
        for _ in range(n)
    ]


def write(mem, items) -> None:
    """One batch: ``(id, namespace, (text, kind, age, topic))`` items, in this order."""
    mem.add(
        [t for _, _, (t, *_) in items],
        ids=[i for i, _, _ in items],
        kind=[k for _, _, (_, k, _, _) in items],
        created_at=[NOW - timedelta(days=d) for _, _, (_, _, d, _) in items],
        namespace=[ns for _, ns, _ in items],
        metadata=[{"topic": m} for _, _, (*_, m) in items],
    )


def answer(mem, ns: str, query: str, k: int, filtered: bool):
    """The candidate pool with every signal's scores, and the fused top k (as search())."""
    where = {"topic": "t1"} if filtered else None
    cands = mem.candidates(query, k=k, namespace=ns, where=where, now=NOW)
    fused = fuse(cands.signals, cands.ids, mem.weights)
    staged = mem.search(
        f"{query} from the past 3 months", k=k, namespace=ns, where=where, now=NOW, weights=STAGED
    )
    return (
        cands.k,
        cands.ids,
        cands.signals,
        cands.matched,
        [(i, fused[i]) for i in rank(fused, k)],
        [(r.id, r.score, r.explanation) for r in staged],
    )


Case = tuple[list[Memory], list[Memory], list[bool], int, list[tuple[str, int, bool]]]
"""A's memories, B's, how they interleave (True: A's next), how many of B's are deleted
again, the queries."""


def generate(strategy, cases: int, members) -> list[Case]:
    """The property's cases, drawn by hypothesis (derandomized: the same ones every run).

    ``members(drawn) -> (A's memories, B's memories)``. Drawn first and written after, all
    at once: a Chroma write costs about the same for a few memories as for thousands, and
    one per case (three per case, with B's deletes) was most of the test's time.
    """
    out: list[Case] = []

    @settings(
        max_examples=cases,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(c=strategy)
    def draw(c) -> None:
        mem_a, mem_b = members(c)
        slots = [True] * len(mem_a) + [False] * len(mem_b)  # A keeps its order; B in between
        c["order"].shuffle(slots)
        out.append((mem_a, mem_b, slots, c["b_deleted"], c["queries"]))

    draw()
    return out


class Stores:
    """The two stores of a property, holding every case: A's memories alone (``alone``),
    A's with B's written in between and some of B's deleted again (``mixed``)."""

    def __init__(self, cases: list[Case], label: str, batch: int = 3000) -> None:
        self.cases, self.label = cases, label
        self.alone = open_store(weights=WEIGHTS)
        self.mixed = open_store(weights=WEIGHTS)
        alone: list[Item] = []
        mixed: list[Item] = []
        deleted: list[str] = []
        for n, (mem_a, mem_b, slots, b_deleted, _) in enumerate(cases):
            a = [(f"a{n}-{i:04d}", self.ns(n, "a"), m) for i, m in enumerate(mem_a)]
            b = [(f"b{n}-{i:04d}", self.ns(n, "b"), m) for i, m in enumerate(mem_b)]
            alone += a
            ia, ib = iter(a), iter(b)
            mixed += [next(ia) if is_a else next(ib) for is_a in slots]
            deleted += [i for i, _, _ in b[:b_deleted]]
        for s in range(0, len(alone), batch):
            write(self.alone, alone[s : s + batch])
        for s in range(0, len(mixed), batch):
            write(self.mixed, mixed[s : s + batch])
        if deleted:
            self.mixed.delete(deleted)

    def ns(self, n: int, tenant: str) -> str:
        return f"{self.label}-{tenant}-{n}"

    def close(self) -> None:
        self.alone.close()
        self.mixed.close()


def check_isolation(stores: Stores, cases: int) -> None:
    """Every query of every case gives A the same answer in both stores."""
    stats: Counter[str] = Counter()
    alone, mixed, label = stores.alone, stores.mixed, stores.label
    try:
        for n, (mem_a, mem_b, _, _, queries) in enumerate(stores.cases):
            stats["cases"] += 1
            ns_a, ns_b = stores.ns(n, "a"), stores.ns(n, "b")
            stats["b_memories"] += len(mem_b)
            stats["largest_a"] = max(stats["largest_a"], len(mem_a))
            for query, k, filtered in queries:
                stats["queries"] += 1
                want = answer(alone, ns_a, query, k, filtered)
                got = answer(mixed, ns_a, query, k, filtered)
                if got != want:
                    stats["leaks"] += 1
                assert got == want, f"namespace {ns_b} changed {ns_a}'s answer to {query!r}"
                stats["results"] += len(want[4])
                stats["period"] += sum(e.period != 0 for _, _, e in want[5])
                stats["turns"] += sum(e.turns != 0 for _, _, e in want[5])
                stats["bridges"] += sum(e.bridges != 0 for _, _, e in want[5])
                stats["candidates"] += len(want[1])
    finally:
        print(
            f"\nisolation ({label}): {stats['cases']} generated cases (namespaces of up to "
            f"{stats['largest_a']} memories), {stats['queries']} queries "
            f"({stats['candidates']} candidates x 4 signals, {stats['results']} fused results) "
            f"compared, {stats['b_memories']} memories in the "
            f"other namespaces, {stats['leaks']} leaks; stores of {alone.count()} and "
            f"{mixed.count()} memories; staged results moved by the period boost "
            f"{stats['period']}, by the openers {stats['turns']}, by bridges {stats['bridges']}"
        )
    assert stats["cases"] >= cases and stats["leaks"] == 0
    assert stats["period"] > 0 and stats["turns"] > 0 and stats["bridges"] > 0  # they acted


@pytest.fixture(scope="module")
def small() -> Iterator[Stores]:
    stores = Stores(generate(case, CASES, lambda c: (c["a"], c["b"])), "small")
    yield stores
    stores.close()


@pytest.fixture(scope="module")
def large() -> Iterator[Stores]:
    def members(c):
        rng = c["bulk"]
        return bulk(rng, c["a"]) + c["extra_a"], bulk(rng, c["b"]) + c["extra_b"]

    stores = Stores(generate(large_case, LARGE_CASES, members), "large")
    yield stores
    stores.close()


def test_other_namespaces_never_change_a_namespaces_answers(small: Stores) -> None:
    check_isolation(small, CASES)


def test_other_namespaces_never_change_a_large_namespaces_answers(large: Stores) -> None:
    """Namespaces of 257 to 600 memories (B as large), drawn from the same words."""
    check_isolation(large, LARGE_CASES)


def test_a_dense_score_does_not_depend_on_how_it_was_computed():
    """The leak the property test found: Chroma's distances (``top``) and a float32 product
    (``score`` of other candidates) rounded one memory's similarity differently, and which
    path scored it depended on the rest of the collection. Both paths now agree exactly."""
    import numpy as np

    from norax_core.signals.base import Query

    with open_store() as mem:
        texts = [f"wallet {w} refund Colby {i}" for i, w in enumerate(VOCAB)]
        mem.add(texts, ids=[f"d{i}" for i in range(len(texts))], namespace="n")
        dense = mem.store.dense
        emb = mem.embedder.embed(["Colby refund budget"])[0]
        via_top = dense.top(Query("q", "n", 0.0, embedding=emb), len(texts))
        other = Query("q", "n", 0.0, embedding=np.array(emb))  # not the search top answered
        via_get = dense.score(other, sorted(via_top))
        assert via_get == via_top and len(via_top) == len(texts)


def test_small_tenants_find_all_their_memories_in_a_big_shared_collection():
    """Chroma's filtered HNSW search misses small namespaces' memories once many tenants
    store near-duplicate texts; the dense signal searches small namespaces exactly."""
    import random

    from norax_core.signals.dense import chroma_where

    rng = random.Random(5)
    phrases = [f"the user prefers {a} answers" for a in VOCAB[4:14]]  # ten, shared by all
    with open_store() as mem:
        items = [
            (f"t{t}", rng.choice(phrases)) for t in range(2500) for _ in range(rng.randint(1, 4))
        ]
        for s in range(0, len(items), 500):
            batch = items[s : s + 500]
            mem.add(
                [text for _, text in batch],
                ids=[f"m{s + i}" for i in range(len(batch))],
                namespace=[ns for ns, _ in batch],
            )
        chroma_misses = norax_misses = 0
        for t in range(0, 2500, 5):
            ns, size = f"t{t}", mem.count(f"t{t}")
            q = mem.embedder.embed([rng.choice(phrases)])[0]
            raw = mem.store.collection.query(
                query_embeddings=[q.tolist()], n_results=size, where=chroma_where(ns, None)
            )
            chroma_misses += len(raw["ids"][0]) < size
            res = mem.search("the user prefers", k=size, namespace=ns, weights={"dense": 1.0})
            norax_misses += len(res) < size
        print(
            f"\nshared collection of {mem.count()} memories, 500 tenants searched: Chroma's "
            f"filtered HNSW missed memories for {chroma_misses}, the dense signal for "
            f"{norax_misses}"
        )
        assert norax_misses == 0


def test_one_tenant_cannot_read_or_delete_anothers_memory(tmp_path, capsys, monkeypatch):
    """Ids are unique in a store, but an id is no key to another namespace: every entry point
    that reads or deletes by id, given a tenant's namespace, acts on that tenant only."""
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, TextNode

    from norax_core import DuplicateIdError, InvalidInputError
    from norax_core.cli import main
    from norax_langchain import NoraxRetriever as LangChainRetriever
    from norax_langchain import add_documents
    from norax_llamaindex import NoraxPostprocessor, add_nodes
    from norax_llamaindex import NoraxRetriever as LlamaIndexRetriever

    secret = "Alice's salary is 91k, paid from the Base wallet."
    path = tmp_path / "store"
    mem = open_store(path)
    mem.add(secret, ids="a1", namespace="alice", created_at=NOW)
    mem.add("Bob's standup is at ten.", ids="b1", namespace="bob", created_at=NOW)
    try:
        # the core API
        assert mem.get("a1", namespace="bob") == []
        assert [m.id for m in mem.get(["a1", "b1"], namespace="bob")] == ["b1"]
        assert mem.delete("a1", namespace="bob") == 0
        assert [m.text for m in mem.get("a1", namespace="alice")] == [secret]
        assert mem.count("alice") == 1
        # searches: bob's never see alice's memory, whatever the query
        for search in (
            lambda q: [r.id for r in mem.search(q, k=5, namespace="bob", now=NOW)],
            lambda q: [d.id for d in LangChainRetriever(memory=mem, namespace="bob").invoke(q)],
            lambda q: [
                n.node.node_id for n in LlamaIndexRetriever(mem, namespace="bob").retrieve(q)
            ],
        ):
            assert "a1" not in search(secret)
        # the LlamaIndex postprocessor scoped to bob: alice's node is a foreign node
        post = NoraxPostprocessor(memory=mem, namespace="bob", extractor=False, now=NOW)
        node = TextNode(id_="a1", text=secret)  # no time: a foreign node scores 0 on recency
        (got,) = post.postprocess_nodes([NodeWithScore(node=node)], query_str="salary")
        assert got.node.metadata["signals"]["temporal"] == 0.0
        # writing through the adapters cannot take over alice's id
        with pytest.raises(InvalidInputError):
            add_documents(
                mem, [Document(page_content="mine", id="a1")], namespace="bob", upsert=True
            )
        with pytest.raises(InvalidInputError):
            add_nodes(mem, [TextNode(id_="a1", text="mine")], namespace="bob", upsert=True)
        with pytest.raises(DuplicateIdError):
            add_nodes(mem, [TextNode(id_="a1", text="mine")], namespace="bob")
        assert [m.text for m in mem.get("a1")] == [secret]
    finally:
        mem.close()
    # the command line (with the store's stand-in embedder: no model loads)
    monkeypatch.setattr("norax_core.embedders.default_embedder", hash_embedder)
    assert main(["--store", str(path), "delete", "--namespace", "bob", "a1", "b1"]) == 0
    assert "deleted 1 of 2" in capsys.readouterr().out
    mem = open_store(path)
    try:
        assert [m.id for m in mem.get(["a1", "b1"])] == ["a1"]
        assert mem.delete("a1", namespace="alice") == 1 and mem.count() == 0
    finally:
        mem.close()


def test_a_closed_store_leaves_nothing_in_the_next_stores_memories():
    """In-memory stores share one Chroma database per process. Chroma's ``delete_collection``
    leaves list-valued metadata behind (chroma-core/chroma#7594, open in 1.5) under internal
    row ids that the next records written, in any collection, reuse: after a store was
    closed, the next store's memories carried its entities (``get`` showed them, ``check``
    found the rows stale, and a repair would have put them in the graph). Closing an
    in-memory store deletes its records before dropping its collection."""
    n = 20
    with open_store() as gone:
        gone.add(
            [f"Alice moved the Base wallet of PaymentService {i}" for i in range(n)],
            ids=[f"gone-{i}" for i in range(n)],
            namespace="alice",
        )
        assert all(
            "paymentservice" in m.entities for m in gone.get([f"gone-{i}" for i in range(n)])
        )
    assert gone.collection_name not in {c.name for c in gone.store.client.list_collections()}
    with open_store() as mem:
        texts = [f"ok {i}" for i in range(n)]
        assert mem.extractor.extract(texts) == [[]] * n  # memories without entities
        ids = mem.add(texts, metadata={"topic": "t"})
        got = mem.get(ids)
        assert [(m.entities, m.metadata) for m in got] == [((), {"topic": "t"})] * n
        report = mem.check()
        assert report.ok, report.format()
