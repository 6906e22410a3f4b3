"""The write path under concurrency, failure and ties (issue 16, items 1, 5 and 11).

* Two writers into one session with ``embed_context`` (the ``chat`` preset): a turn written
  while another one is being embedded still ends up embedded with its real predecessors.
* An upsert split over several Chroma batches that fails in its second batch changes
  nothing: every replaced memory is back as it was, every new one is gone.
* Memories sharing a ``created_at`` follow the order they were written in (list order within
  a call, then call order), not their ids' string order, through a reopen, a store rebuilt
  from Chroma alone, ``check --repair`` and an export/import round trip.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import chromadb
import numpy as np
import pytest
from _support import _hash_bag, assert_context_vectors, open_store

from norax_core import CallableEmbedder, NoraxConfig, NoraxError, NoraxMemory, Weights
from norax_core import engine as engine_module
from norax_core.batch import SEQ_KEY
from norax_core.engine import SIDECAR_FILE
from norax_core.maintenance import export_jsonl, import_jsonl, repair_store

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


class Gate:
    """An embedder that stops the first time it embeds a text starting with ``prefix``
    until released, so a test can write something else while that write is embedding."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.entered = threading.Event()
        self.release = threading.Event()
        self._passed = False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not self._passed and any(t.startswith(self.prefix) for t in texts):
            self._passed = True
            self.entered.set()
            assert self.release.wait(30), "the gated write was never released"
        return _hash_bag(texts)

    def embedder(self) -> CallableEmbedder:
        return CallableEmbedder(self.embed, name="test:hash-bag-64", dim=64)


SESSION = {
    "t1": "Mel: I went to the pottery class zqpotx yesterday.",
    "t2": "Caroline: Oh nice, who did you go with?",
    "t3": "Mel: With my sister, she loved the wheel.",
}
LATE = "Caroline: That sounds like a lovely day out."


def _interlope(mem: NoraxMemory, how: str) -> list[str]:
    """Write into the session while the late turn t5 is being embedded; returns the
    session's final order."""
    if how == "add":
        mem.add("Mel: We are going back next week.", ids="t4", created_at=T0 + 3 * MINUTE)
        return ["t1", "t2", "t3", "t4", "t5"]
    if how == "upsert":
        mem.upsert("Mel: With my brother, actually.", ids="t3", created_at=T0 + 2 * MINUTE)
        return ["t1", "t2", "t3", "t5"]
    assert mem.delete("t3") == 1
    return ["t1", "t2", "t5"]


def _fill_session(mem: NoraxMemory) -> None:
    mem.add(
        list(SESSION.values()), ids=list(SESSION), created_at=[T0 + i * MINUTE for i in range(3)]
    )


@pytest.mark.parametrize("how", ["add", "upsert", "delete"])
def test_a_turn_written_while_another_embeds_is_in_its_context_threads(tmp_path, how):
    gate = Gate("Caroline: That sounds")
    with open_store(tmp_path / "s", embedder=gate.embedder(), weights="chat") as mem:
        assert mem.add_config.embed_context == 2
        _fill_session(mem)
        late = threading.Thread(
            target=mem.add, args=(LATE,), kwargs={"ids": "t5", "created_at": T0 + 4 * MINUTE}
        )
        late.start()
        assert gate.entered.wait(30)  # t5 is being embedded with t2 and t3 before it
        order = _interlope(mem, how)  # the lock is free meanwhile: this does not wait
        gate.release.set()
        late.join(30)
        assert not late.is_alive()
        assert_context_vectors(mem, order, before=2)
        assert mem.check().ok


@pytest.mark.parametrize("how", ["add", "upsert", "delete"])
async def test_a_turn_written_while_another_embeds_is_in_its_context_tasks(tmp_path, how):
    gate = Gate("Caroline: That sounds")
    with open_store(tmp_path / "s", embedder=gate.embedder(), weights="chat") as mem:
        _fill_session(mem)
        late = asyncio.create_task(mem.aadd(LATE, ids="t5", created_at=T0 + 4 * MINUTE))
        assert await asyncio.to_thread(gate.entered.wait, 30)
        order = await asyncio.to_thread(_interlope, mem, how)
        gate.release.set()
        assert await late == ["t5"]
        assert_context_vectors(mem, order, before=2)


class _FailSecondUpsert:
    """Makes the second Chroma ``upsert`` call of one write raise (and, with ``after``, every
    later one too)."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, collection: object, after: bool = False
    ) -> None:
        self.calls = 0
        cls = type(collection)
        real = cls.upsert

        def upsert(col: object, *args: object, **kwargs: object) -> object:
            self.calls += 1
            if self.calls == 2 or (after and self.calls > 2):
                raise RuntimeError("Chroma went away in the second batch")
            return real(col, *args, **kwargs)

        monkeypatch.setattr(cls, "upsert", upsert)


def _snapshot(mem: NoraxMemory, ids: list[str]) -> dict[str, tuple]:
    vectors = mem.embeddings(ids)
    return {
        m.id: (m.text, m.created_at, dict(m.metadata), m.entities, vectors[m.id].tobytes())
        for m in mem.get(ids)
    }


def test_an_upsert_failing_in_its_second_chroma_batch_changes_nothing(tmp_path, monkeypatch):
    # Chroma takes at most ~5,000 ids per call, so a large upsert is split; three ids per
    # call here stand in for thousands.
    monkeypatch.setattr(engine_module, "CHROMA_BATCH", 3)
    ids = [f"u{i}" for i in range(7)]
    with open_store(tmp_path / "s") as mem:
        mem.add(
            [f"Old note zqold{i}x about Proj{i}Alpha" for i in range(7)],
            ids=ids,
            metadata=[{"v": 1, f"only_old_{i}": True} for i in range(7)],
            created_at=T0,
        )
        before = _snapshot(mem, [*ids, "n1", "n2"])
        failing = _FailSecondUpsert(monkeypatch, mem._collection)
        with pytest.raises(NoraxError, match="second batch"):
            mem.upsert(
                [f"New note zqnew{i}x about Proj{i}Beta" for i in range(7)] + ["new a", "new b"],
                ids=[*ids, "n1", "n2"],
                metadata={"v": 2},
                created_at=T0 + MINUTE,
            )
        assert failing.calls >= 2
        assert _snapshot(mem, [*ids, "n1", "n2"]) == before  # the first batch is undone too
        assert mem.count() == 7 and mem.check().ok
        assert mem.search("zqold0x", k=1, weights={"bm25": 1.0})[0].id == "u0"
        assert mem.search("zqnew0x", k=1, weights={"bm25": 1.0}) == []
    with open_store(tmp_path / "s") as mem:  # and it stays so
        assert _snapshot(mem, [*ids, "n1", "n2"]) == before and mem.check().ok


def test_an_upsert_that_cannot_be_undone_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_module, "CHROMA_BATCH", 3)
    ids = [f"u{i}" for i in range(7)]
    with open_store(tmp_path / "s") as mem:
        mem.add([f"Old note zqold{i}x" for i in range(7)], ids=ids, created_at=T0)
        _FailSecondUpsert(monkeypatch, mem._collection, after=True)  # the undo fails too
        with pytest.raises(NoraxError, match="previous versions back failed too") as err:
            mem.upsert([f"New note zqnew{i}x" for i in range(7)], ids=ids)
        assert "may hold the new version" in str(err.value)
        assert mem.check().ok  # the indexes follow whatever Chroma holds


TURNS = [f"D1:{i}" for i in range(1, 13)]


def _turn(mid: str) -> str:
    return f"Turn {mid} zq{mid.replace(':', 'c')}x of the first session."


def _written_in_order(path, **kwargs) -> NoraxMemory:
    """D1:1..D1:12 in one call with one time (as a chat log is often added), then A1 and A2
    in a second call with the same time: their ids sort before D1 but they came later."""
    mem = open_store(path, config=NoraxConfig(embed_context=1), **kwargs)
    mem.add([_turn(m) for m in TURNS], ids=TURNS, created_at=T0, namespace="chat")
    mem.add([_turn("A1"), _turn("A2")], ids=["A1", "A2"], created_at=T0, namespace="chat")
    return mem


ORDER = [*TURNS, "A1", "A2"]
CONTEXT = Weights(
    bm25=1.0,
    dense=0.0,
    temporal=0.0,
    graph=0.0,
    params={"context_window": 1, "context_weight": 1.0},
)


def _assert_conversation_order(mem: NoraxMemory) -> None:
    """Embeddings and context propagation both follow ORDER."""
    assert_context_vectors(mem, ORDER, before=1)
    # Only D1:9 holds the query's term; with context propagation its neighbours in the
    # conversation (D1:8 and D1:10) borrow its score, nobody else does.
    res = mem.search("zqD1c9x", k=5, namespace="chat", weights=CONTEXT, now=T0)
    assert {r.id for r in res if r.score > 0} == {"D1:8", "D1:9", "D1:10"}
    res = mem.search("zqD1c12x", k=5, namespace="chat", weights=CONTEXT, now=T0)
    assert {r.id for r in res if r.score > 0} == {"D1:11", "D1:12", "A1"}


def test_memories_sharing_a_time_follow_the_order_they_were_written_in(tmp_path):
    with _written_in_order(tmp_path / "s") as mem:
        _assert_conversation_order(mem)
        # an upsert keeps a memory's place in the conversation
        mem.upsert(_turn("D1:3") + " Edited.", ids="D1:3", created_at=T0, namespace="chat")
        _assert_conversation_order(mem)
    with open_store(tmp_path / "s", config=NoraxConfig(embed_context=1)) as mem:  # reopened
        _assert_conversation_order(mem)
    # client mode: no sidecar, the indexes are rebuilt from what Chroma stores
    client = chromadb.PersistentClient(path=str(tmp_path / "s"))
    try:
        with open_store(client=client, config=NoraxConfig(embed_context=1)) as mem:
            _assert_conversation_order(mem)
            mem.add(_turn("A3"), ids="A3", created_at=T0, namespace="chat")  # and it goes on
            assert_context_vectors(mem, [*ORDER, "A3"], before=1)
    finally:
        client.close()


def test_check_repair_restores_the_write_order(tmp_path):
    _written_in_order(tmp_path / "s").close()
    with sqlite3.connect(tmp_path / "s" / SIDECAR_FILE) as db:  # the sidecar loses the order
        db.execute("UPDATE memories SET seq = 0")
    with open_store(tmp_path / "s", reconcile=False) as mem:
        report = mem.check()
        assert not report.ok and set(report.namespaces[0].stale) == set(ORDER)
        repair_store(mem)
        _assert_conversation_order(mem)


def test_export_and_import_keep_the_order_of_memories_sharing_a_time(tmp_path):
    with _written_in_order(tmp_path / "a") as mem:
        # Chroma lists an upserted record last: the export must not follow that order
        mem.upsert(_turn("D1:3") + " Edited.", ids="D1:3", created_at=T0, namespace="chat")
        assert export_jsonl(mem, tmp_path / "x.jsonl") == len(ORDER)
    with open_store(tmp_path / "b", config=NoraxConfig(embed_context=1)) as mem:
        assert import_jsonl(mem, tmp_path / "x.jsonl") == len(ORDER)
        _assert_conversation_order(mem)


def test_an_export_keeps_the_order_of_a_store_written_before_write_order_was_kept(tmp_path):
    # Such a store orders memories sharing a time by id; Chroma lists them as written.
    with _written_in_order(tmp_path / "a") as mem:
        mem._collection.update(ids=ORDER, metadatas=[{SEQ_KEY: None}] * len(ORDER))
        repair_store(mem)
        legacy = mem._indexes.temporal.timeline("chat")[0]
        assert legacy == sorted(ORDER)
        export_jsonl(mem, tmp_path / "x.jsonl")
    with open_store(tmp_path / "b", config=NoraxConfig(embed_context=1)) as mem:
        import_jsonl(mem, tmp_path / "x.jsonl")
        assert mem._indexes.temporal.timeline("chat")[0] == legacy
