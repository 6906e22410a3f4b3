"""Lazy eviction meets supersession links (issue 24, item 7).

Namespaces are evicted and reloaded while writes (adds, back-dated adds, upserts, deletes,
moves) create, change and remove supersession links in them, in one process and from a
second process over a ``chroma run`` server. Whatever was loaded when, the links, ``check()``,
the counts and the answers must be those of a store that never evicts anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _procs import OpenProc, Records, serving
from _support import open_store

from norax_core import NoraxConfig, NoraxMemory

TINY = NoraxConfig(index_cache_mb=0.0)  # every use of another namespace evicts the last
T0 = 1_700_000_000.0
DAY = 86_400.0
NAMESPACES = ("a", "b", "c")

# (op, id, namespace, text, created_at); "evict" reads another namespace (the lazy store
# then holds only that one). Texts restate a deadline or an owner with an update cue, so
# they supersede earlier memories of their namespace (and a write's links change others').
STEPS: list[tuple[str, str, str, str, float | None]] = [
    ("add", "a1", "a", "The Kestrel launch deadline is Monday", T0),
    ("add", "b1", "b", "The Harbor audit deadline is in June", T0),
    ("add", "a2", "a", "Priya owns the Kestrel budget review", T0 + DAY),
    ("evict", "", "b", "", None),
    ("add", "a3", "a", "The Kestrel launch deadline moved to Friday", T0 + 2 * DAY),
    ("add", "b2", "b", "The Harbor audit deadline moved to July", T0 + 2 * DAY),
    ("evict", "", "c", "", None),
    ("add", "a0", "a", "The Kestrel launch deadline is Sunday", T0 - DAY),  # back-dated
    ("add", "c1", "c", "Omar owns the Kestrel budget review", T0),
    ("evict", "", "b", "", None),
    ("upsert", "a2", "a", "Priya no longer owns the Kestrel budget review, Omar does", None),
    ("add", "a4", "a", "The Kestrel launch deadline was rescheduled to Thursday instead", None),
    ("evict", "", "c", "", None),
    ("delete", "a3", "a", "", None),
    ("add", "b3", "b", "The Harbor audit deadline switched back to June", None),
    ("evict", "", "a", "", None),
    ("upsert", "b2", "c", "The Harbor audit deadline moved to July, says Omar", None),  # a move
    ("add", "a5", "a", "The Kestrel launch deadline moved again, to next Monday", None),
    ("evict", "", "b", "", None),
    ("delete", "a1", "a", "", None),
]


def play(mem: NoraxMemory, steps: list[tuple[str, str, str, str, float | None]]) -> None:
    for i, (op, mid, ns, text, at) in enumerate(steps):
        when = at if at is not None else T0 + (10 + i) * DAY
        if op == "evict":
            mem.search("deadline", k=3, namespace=ns, now=T0 + 100 * DAY)
        elif op == "delete":
            assert mem.delete(mid) == 1
        elif op == "upsert":
            if mid in {m.id for m in mem.get([mid])}:
                mem.delete(mid)  # a move or a rewrite: drop it first, as a user would
            mem.add(text, ids=mid, namespace=ns, created_at=when)
        else:
            mem.add(text, ids=mid, namespace=ns, created_at=when)


def links(mem: NoraxMemory) -> dict[str, dict[str, tuple[str, ...]]]:
    out = {}
    for ns in NAMESPACES:
        mem.count(ns)  # loads it
        out[ns] = mem.store.indexes.supersede.links(ns)
    return out


def answers(mem: NoraxMemory) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for ns in NAMESPACES:
        got = mem.search(
            "Kestrel launch deadline Harbor audit", k=5, namespace=ns, now=T0 + 60 * DAY
        )
        out[ns] = [(h.id, round(h.score, 9)) for h in got]
    return out


@pytest.fixture
def reference() -> Iterator[NoraxMemory]:
    with open_store() as ref:  # the default budget: nothing is ever evicted
        play(ref, STEPS)
        yield ref


def test_links_survive_eviction_and_reload(tmp_path: Path, reference: NoraxMemory) -> None:
    want_links, want = links(reference), answers(reference)
    assert want_links["a"] and want_links["b"]  # the steps do make links: the test can fail
    with open_store(tmp_path / "s", config=TINY) as mem:
        play(mem, STEPS)
        assert mem.store.indexes.evictions >= 5
        assert links(mem) == want_links
        assert answers(mem) == want
        assert mem.check().ok
        assert [mem.count(ns) for ns in NAMESPACES] == [reference.count(ns) for ns in NAMESPACES]
    with open_store(tmp_path / "s", config=TINY) as again:  # reopened: snapshots, sidecar links
        assert links(again) == want_links
        assert answers(again) == want
        assert again.check().ok
        assert again.store.indexes.restored >= 1


@pytest.fixture
def server(chroma_url: str) -> Iterator[tuple[OpenProc, Records]]:
    with serving(chroma_url, "links") as srv:
        yield srv.open, srv.records


def _ids(records: Records) -> dict[str, list[str]]:
    """Each namespace's ids as Chroma itself holds them."""
    held = records()
    return {ns: sorted(m for m, (home, _) in held.items() if home == ns) for ns in NAMESPACES}


@pytest.mark.server
def test_links_of_another_process_writes_into_an_evicted_namespace(
    server: tuple[OpenProc, Records], reference: NoraxMemory
) -> None:
    """B (one process) writes every step; A (another, a tight budget) reads between them, so
    its namespaces are evicted and reloaded while B's writes reach it through its pulls."""
    open_proc, records = server
    a, b = open_proc(0.0, cache_mb=0.0), open_proc(3600.0)
    for i, (op, mid, ns, text, at) in enumerate(STEPS):
        when = at if at is not None else T0 + (10 + i) * DAY
        if op == "evict":
            a.ok("search", text="deadline", ns=ns)
        elif op == "delete":
            assert b.ok("delete", id=mid) == 1
        elif op == "upsert":
            b.ok("delete", id=mid)
            b.ok("add", text=text, id=mid, ns=ns, at=when)
        else:
            b.ok("add", text=text, id=mid, ns=ns, at=when)
        a.ok("links", ns=ns)  # A loads the written namespace (evicting the last)
    want_links = links(reference)
    got = {ns: {m: tuple(o) for m, o in a.ok("links", ns=ns).items()} for ns in NAMESPACES}
    assert got == want_links
    assert (a.ok("check"), b.ok("check")) == ([], [])  # deep: links derived from Chroma
    held = _ids(records)
    assert {ns: a.ok("indexed", ns=ns) for ns in NAMESPACES} == held
    assert [a.ok("count", ns=ns) for ns in NAMESPACES] == [len(held[ns]) for ns in NAMESPACES]


def test_a_client_keeps_the_links_of_a_namespace_it_reloads(tmp_path: Path) -> None:
    """A client's sidecar caches the loaded namespaces, links included: a namespace evicted
    and read back from Chroma must not look stale to ``check()`` (it held no links)."""
    import chromadb

    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    with open_store(client=client, collection="links", config=TINY) as mem:
        play(mem, STEPS[:5])  # a3 supersedes a1; a is then evicted by a read of b
        mem.search("deadline", k=3, namespace="b")
        assert mem.store.indexes.loaded() == ["b"]
        assert mem.check().ok  # reloads a from Chroma
        assert links(mem)["a"] == {"a3": ("a1",)}
