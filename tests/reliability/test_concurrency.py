"""Concurrency: threads and tasks mixing writes and reads on one store; one process per store.

Eight threads (then eight asyncio tasks) add, upsert, search and delete on one persistent
store for a few seconds. Afterwards: no exception was raised, every acknowledged write that
was not deleted is there with its last text, every acknowledged delete is gone, every search
answered from its own namespace only, and ``check_store`` finds Chroma and every index in
agreement. A second *process* opening the same embedded store fails loudly.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _support import assert_context_vectors, open_store

from norax_core import Weights

HERE = Path(__file__).resolve().parent
WORKERS = 8
# Every worker runs at least MIN_OPS operations, however slow the machine, so the checks
# below always see interleaved writes and reads (a count, not a timing assertion).
MIN_OPS = 4
SECONDS = 3.0
NAMESPACES = ("red", "green", "blue")
WORDS = [
    "wallet",
    "deploy",
    "invoice",
    "review",
    "migration",
    "refund",
    "cache",
    "schema",
    "roadmap",
    "budget",
]


@dataclass
class Ledger:
    """What one worker had acknowledged."""

    live: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (namespace, text)
    deleted: set[str] = field(default_factory=set)
    ops: int = 0
    searches: int = 0


def text_for(tag: str, rng: random.Random) -> str:
    return f"Worker note zq{tag}x on Proj{tag}Alpha about {rng.choice(WORDS)}."


def step(mem, rng: random.Random, wid: int, n: int, ledger: Ledger) -> None:
    """One random operation, recorded once it returned."""
    roll = rng.random()
    ledger.ops += 1
    if roll < 0.45 or not ledger.live:
        ns = rng.choice(NAMESPACES)
        ids = [f"w{wid}-{n}-{i}" for i in range(rng.randint(1, 3))]
        texts = [text_for(i.replace("-", "n"), rng) for i in ids]
        mem.add(texts, ids=ids, namespace=ns)
        ledger.live.update({i: (ns, t) for i, t in zip(ids, texts, strict=True)})
    elif roll < 0.55:
        mid = rng.choice(sorted(ledger.live))
        ns = ledger.live[mid][0]
        text = text_for(f"{wid}u{n}", rng)
        mem.upsert(text, ids=mid, namespace=ns)
        ledger.live[mid] = (ns, text)
    elif roll < 0.7:
        mid = rng.choice(sorted(ledger.live))
        assert mem.delete(mid) == 1
        del ledger.live[mid]
        ledger.deleted.add(mid)
    else:
        ns = rng.choice(NAMESPACES)
        res = mem.search(f"{rng.choice(WORDS)} worker note", k=5, namespace=ns)
        assert all(r.namespace == ns for r in res)
        ledger.searches += 1


def verify(mem, ledgers: list[Ledger]) -> tuple[int, int]:
    live = {k: v for ledger in ledgers for k, v in ledger.live.items()}
    deleted = set().union(*(ledger.deleted for ledger in ledgers))
    got = {m.id: (m.namespace, m.text) for m in mem.get(sorted(live))}
    assert got == live, "a write was lost or came back changed"
    assert not mem.get(sorted(deleted)), "an acknowledged delete came back"
    assert mem.count() == len(live)
    report = mem.check()
    assert report.ok, report.format()
    before = mem.add_config.embed_context
    if before:
        verify_context(mem, sorted(live), before)
    for mid in rng_sample(live, 10):  # and they are findable, not merely stored
        ns, text = live[mid]
        if not before:  # with context each vector is checked exactly above
            assert mem.search(text, k=1, namespace=ns, weights={"dense": 1.0})[0].id == mid
    return len(live), len(deleted)


def verify_context(mem, ids: list[str], before: int) -> None:
    """With embed_context (the chat preset), each memory holds the vector of its text and the
    ``before`` texts just before it in its namespace, whatever the interleaving of writers:
    the order is the times the writers gave, then the position within an add call (ids
    ``w<worker>-<call>-<position>``), worked out here, not by the engine."""
    records = mem.get(ids)
    for ns in NAMESPACES:
        mine = sorted(
            (m for m in records if m.namespace == ns),
            key=lambda m: (m.created_at, int(m.id.split("-")[2]) if m.id.count("-") == 2 else 0),
        )
        assert_context_vectors(mem, [m.id for m in mine], before)


def rng_sample(live: dict, n: int) -> list[str]:
    return random.Random(0).sample(sorted(live), min(n, len(live)))


# The chat preset embeds each memory with the two before it (embed_context 2): concurrent
# writers into one namespace must still leave every vector with its real predecessors.
# With the bridge step on, searches walk each namespace's entity graph while writers change
# it: the walk's view of the graph is cached per graph version and read under the lock.
BRIDGED = Weights(
    0.3,
    0.3,
    0.2,
    0.2,
    params={"pool_min": 2, "pool_factor": 1, "bridge_weight": 0.5, "bridge_seeds": 3},
    name="bridged",
)
WEIGHTS = pytest.mark.parametrize(
    "weights", [None, "chat", BRIDGED], ids=["four-signals", "chat", "bridges"]
)


@WEIGHTS
def test_eight_threads_mixing_writes_and_reads(tmp_path, weights):
    errors: list[BaseException] = []
    ledgers = [Ledger() for _ in range(WORKERS)]
    with open_store(tmp_path / "s", **({"weights": weights} if weights else {})) as mem:
        start = threading.Barrier(WORKERS)
        deadline = time.monotonic() + SECONDS + 5  # the barrier waits for the slowest start

        def work(wid: int) -> None:
            rng = random.Random(wid)
            try:
                start.wait()
                stop = time.monotonic() + SECONDS
                n = 0
                while n < MIN_OPS or time.monotonic() < min(stop, deadline):
                    step(mem, rng, wid, n, ledgers[wid])
                    n += 1
            except BaseException as exc:  # reported below, with the worker's id
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        live, deleted = verify(mem, ledgers)
    ops = sum(ledger.ops for ledger in ledgers)
    searches = sum(ledger.searches for ledger in ledgers)
    print(
        f"\nthreads: {WORKERS} x {SECONDS:.0f}s, {ops} operations ({searches} searches), "
        f"0 exceptions, {live} live and {deleted} deleted ids verified, check OK"
    )


@WEIGHTS
async def test_async_tasks_mixing_writes_and_reads(tmp_path, weights):
    ledgers = [Ledger() for _ in range(WORKERS)]
    with open_store(tmp_path / "s", **({"weights": weights} if weights else {})) as mem:

        async def work(wid: int) -> None:
            rng = random.Random(100 + wid)
            stop = time.monotonic() + SECONDS
            n = 0
            while n < MIN_OPS or time.monotonic() < stop:
                ledger = ledgers[wid]
                roll = rng.random()
                ledger.ops += 1
                if roll < 0.5 or not ledger.live:
                    ns = rng.choice(NAMESPACES)
                    mid = f"a{wid}-{n}"
                    text = text_for(f"a{wid}n{n}", rng)
                    assert await mem.aadd(text, ids=mid, namespace=ns) == [mid]
                    ledger.live[mid] = (ns, text)
                elif roll < 0.65:
                    mid = rng.choice(sorted(ledger.live))
                    assert await asyncio.to_thread(mem.delete, mid) == 1
                    del ledger.live[mid]
                    ledger.deleted.add(mid)
                else:
                    ns = rng.choice(NAMESPACES)
                    res = await mem.asearch(f"{rng.choice(WORDS)} note", k=5, namespace=ns)
                    assert all(r.namespace == ns for r in res)
                    ledger.searches += 1
                n += 1

        await asyncio.gather(*(work(w) for w in range(WORKERS)))
        live, deleted = verify(mem, ledgers)
    ops = sum(ledger.ops for ledger in ledgers)
    print(
        f"\nasync: {WORKERS} tasks x {SECONDS:.0f}s on one loop, {ops} operations, "
        f"0 exceptions, {live} live and {deleted} deleted ids verified, check OK"
    )


OPENER = """
import sys
sys.path.insert(0, sys.argv[2])
import pytest
from _support import assert_context_vectors, open_store
from norax_core import StoreLockedError
try:
    mem = open_store(sys.argv[1])
except StoreLockedError as exc:
    print("locked:", exc)
    sys.exit(3)
mem.add("zebra quokka narwhal from the second process", ids="p2")
mem.close()
print("opened")
"""


def _second_process(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", OPENER, str(path), str(HERE)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_second_process_on_an_embedded_store_fails_loudly(tmp_path):
    path = tmp_path / "s"
    with open_store(path) as mem:
        mem.add("held by the first process", ids="p1")
        out = _second_process(path)
        assert out.returncode == 3, out.stderr
        assert "open in another process" in out.stdout and "chroma run" in out.stdout
        assert mem.count() == 1 and mem.check().ok  # nothing touched
    out = _second_process(path)  # free once the first one closed
    assert out.returncode == 0 and "opened" in out.stdout, out.stderr
    # Reopened in this process: it must see what the other one wrote (before close() closed
    # the Chroma client, a cached Chroma system served a stale HNSW index here).
    with open_store(path) as mem:
        assert sorted(m.id for m in mem.get(["p1", "p2"])) == ["p1", "p2"]
        assert mem.search("zebra quokka narwhal", k=1, weights={"dense": 1.0})[0].id == "p2"
