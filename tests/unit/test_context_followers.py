"""With embed_context, a memory's vector depends on the store, not on the order of writes."""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from norax_core import NoraxConfig, NoraxMemory
from norax_core.embedders import CallableEmbedder
from norax_core.signals.context import following

T0 = 1_700_000_000.0
DIM = 32


def _embed(texts: Sequence[str]) -> np.ndarray:
    """Order-sensitive and deterministic: each line hashes into its own bucket pattern."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    out[:, 0] = 0.1
    for i, text in enumerate(texts):
        for pos, line in enumerate(text.split("\n")):
            h = zlib.crc32(f"{pos}:{line}".encode())
            out[i, 1 + h % (DIM - 1)] += 1.0 + pos
    return out


def _store(embed_context: int = 2, calls: list[str] | None = None) -> NoraxMemory:
    def embed(texts: Sequence[str]) -> np.ndarray:
        if calls is not None:
            calls.extend(texts)
        return _embed(texts)

    return NoraxMemory(
        embedder=CallableEmbedder(embed, name="ordered-bag", dim=DIM),
        extractor=False,
        config=NoraxConfig(embed_context=embed_context),
    )


def _vectors(mem: NoraxMemory) -> dict[str, np.ndarray]:
    ids = [m for ns in mem.namespaces() for m in mem._indexes.temporal.ids(ns)]
    return mem.embeddings(ids)


def test_following_walks_forward_within_the_session() -> None:
    ordered = ["a", "b", "c", "d", "e"]
    stamps = [0.0, 10.0, 20.0, 5_000.0, 5_010.0]  # a b c | d e

    def timeline(ns: str) -> tuple[list[str], list[float], list[int]]:
        return (ordered, stamps, [0] * len(ordered)) if ns == "n" else ([], [], [])

    assert following(["x"], [5.0], ["n"], [0], timeline, 2, 3600, {"x"}) == ["b", "c"]
    assert following(["x"], [25.0], ["n"], [0], timeline, 2, 3600, {"x"}) == []  # session ends
    assert following(["b"], [10.0], ["n"], [0], timeline, 2, 3600, {"b"}) == ["c"]
    # an excluded memory (written too) is skipped, not counted
    assert following(["a"], [0.0], ["n"], [0], timeline, 1, 3600, {"a", "b"}) == ["c"]
    assert following(["x"], [5.0], ["other"], [0], timeline, 2, 3600, {"x"}) == []


@pytest.mark.parametrize("seed", range(12))
def test_vectors_do_not_depend_on_write_order(seed: int) -> None:
    rng = random.Random(seed)
    memories = []
    for ns in ("n1", "n2"):
        t = T0
        for i in range(14):
            t += rng.choice([30.0, 60.0, 7_200.0 if i % 5 == 4 else 45.0])  # a few sessions
            memories.append((f"{ns}-{i}", ns, t, f"turn {i} of {ns} {rng.random():.3f}"))
    final: dict[str, tuple[str, float, str]] = {m: (ns, t, x) for m, ns, t, x in memories}
    with _store() as shuffled:
        order = memories[:]
        rng.shuffle(order)
        while order:  # random batches, in random order
            batch, order = order[: rng.randint(1, 4)], order[rng.randint(1, 4) :]
            batch = [b for b in batch if b[0] not in set(shuffled._indexes.namespace_of)]
            if batch:
                shuffled.add(
                    [b[3] for b in batch],
                    ids=[b[0] for b in batch],
                    namespace=[b[1] for b in batch],
                    created_at=[b[2] for b in batch],
                )
        missing = [m for m in memories if m[0] not in shuffled._indexes.namespace_of]
        for m, ns, t, x in missing:
            shuffled.add(x, ids=m, namespace=ns, created_at=t)
        for m in rng.sample(sorted(final), 4):  # new texts, some at new times
            ns, t, _ = final[m]
            t2 = t + rng.choice([0.0, 15.0, -20.0])
            x2 = f"edited {m} {rng.random():.3f}"
            shuffled.upsert(x2, ids=m, namespace=ns, created_at=t2)
            final[m] = (ns, t2, x2)
        for m in rng.sample(sorted(final), 5):
            shuffled.delete(m)
            del final[m]
        got = _vectors(shuffled)
    with _store() as in_order:  # the same final memories, added once each in time order
        for m, (ns, t, x) in sorted(final.items(), key=lambda kv: (kv[1][1], kv[0])):
            in_order.add(x, ids=m, namespace=ns, created_at=t)
        want = _vectors(in_order)
    assert sorted(got) == sorted(want)
    for m in want:
        np.testing.assert_allclose(got[m], want[m], rtol=0, atol=1e-6, err_msg=m)


def test_appending_in_order_embeds_each_memory_once() -> None:
    calls: list[str] = []
    with _store(calls=calls) as mem:
        for i in range(6):
            mem.add(f"t{i}", created_at=T0 + i, namespace="n")
    assert len(calls) == 6


def test_deleting_a_memory_removes_its_text_from_the_next_ones() -> None:
    calls: list[str] = []
    with _store(embed_context=1, calls=calls) as mem:
        mem.add(
            ["secret plan", "reply", "later"], ids=["s", "r", "l"], created_at=[T0, T0 + 1, T0 + 2]
        )
        assert calls == ["secret plan", "reply\nsecret plan", "later\nreply"]
        calls.clear()
        mem.delete("s")
        assert calls == ["reply"]  # re-embedded without the deleted text
        np.testing.assert_allclose(
            mem.embeddings(["r"])["r"], _unit(_embed(["reply"])[0]), atol=1e-6
        )


def test_an_embedder_failure_on_followers_writes_nothing() -> None:
    fail = {"on": False}

    def embed(texts: Sequence[str]) -> np.ndarray:
        if fail["on"]:
            raise RuntimeError("embedder down")
        return _embed(texts)

    emb = CallableEmbedder(embed, name="flaky", dim=DIM)
    with NoraxMemory(embedder=emb, extractor=False, config=NoraxConfig(embed_context=1)) as mem:
        mem.add(["a", "b"], ids=["a", "b"], created_at=[T0, T0 + 10])
        fail["on"] = True
        with pytest.raises(Exception, match="embedder down"):
            mem.delete("a")
        assert mem.count() == 2 and mem.get("a")[0].text == "a"


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_followers_an_interrupted_write_left_are_re_embedded_at_the_next_open(
    tmp_path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def open_store() -> NoraxMemory:
        emb = CallableEmbedder(_embed, name="ordered-bag", dim=DIM)
        config = NoraxConfig(embed_context=1)
        return NoraxMemory(tmp_path, embedder=emb, extractor=False, config=config)

    with open_store() as mem:
        mem.add(["a", "b"], ids=["a", "b"], created_at=[T0, T0 + 10])
        collection_type = type(mem._collection)

        def dies(self, *args, **kwargs):  # as if the process died before the update
            raise RuntimeError("killed")

        monkeypatch.setattr(collection_type, "update", dies)
        assert mem.delete("a") == 1  # the delete itself is done and acknowledged
        monkeypatch.undo()
        stale = mem.embeddings(["b"])["b"]
        np.testing.assert_allclose(stale, _unit(_embed(["b\na"])[0]), atol=1e-6)
    assert "could not re-embed" in caplog.text
    with open_store() as mem:
        np.testing.assert_allclose(mem.embeddings(["b"])["b"], _unit(_embed(["b"])[0]), atol=1e-6)
        assert mem._indexes.sidecar.get_meta("restate_pending") == "[]"


def test_an_upsert_that_changes_nothing_re_embeds_nobody() -> None:
    calls: list[str] = []
    with _store(calls=calls) as mem:
        mem.add(["a", "b", "c"], ids=["a", "b", "c"], created_at=[T0, T0 + 1, T0 + 2])
        calls.clear()
        mem.upsert("a", ids="a", created_at=T0)  # the same memory again
        assert calls == ["a"]  # its own embedding only: b and c keep their context
        mem.upsert("a2", ids="a", created_at=T0)
        assert calls == ["a", "a2", "b\na2", "c\na2\nb"]


def test_following_places_a_write_among_memories_sharing_its_time_by_write_order() -> None:
    ordered = ["D1:1", "D1:2", "D1:10"]  # one time, written in this order (seq 1, 2, 3)

    def timeline(ns: str) -> tuple[list[str], list[float], list[int]]:
        return ordered, [0.0, 0.0, 0.0], [1, 2, 3]

    # rewriting D1:2 changes the context of D1:10 (after it), never of D1:1 (before it)
    assert following(["D1:2"], [0.0], ["n"], [2], timeline, 1, 3600, {"D1:2"}) == ["D1:10"]
    assert following(["D1:1"], [0.0], ["n"], [1], timeline, 2, 3600, {"D1:1"}) == [
        "D1:2",
        "D1:10",
    ]
