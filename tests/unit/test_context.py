"""Context propagation: neighbours in time, the score update, and the engine path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from norax_core import NoraxConfig, NoraxMemory, Weights
from norax_core.embedders import CallableEmbedder
from norax_core.errors import InvalidInputError
from norax_core.signals.context import (
    batch_preceding,
    embedding_text,
    neighbour_map,
    preceding,
    propagate,
)
from norax_core.signals.temporal import TemporalSignal

T0 = 1_700_000_000.0


def test_neighbour_map_respects_window_and_session_gap() -> None:
    ids = ["a", "b", "c", "d", "e"]
    times = [T0, T0 + 10, T0 + 20, T0 + 10_000, T0 + 10_010]  # a-b-c | d-e
    near = neighbour_map(ids, times, 1, 3600)
    assert near == {"a": ("b",), "b": ("a", "c"), "c": ("b",), "d": ("e",), "e": ("d",)}
    near2 = neighbour_map(ids, times, 2, 3600, wanted=["a", "c", "zzz"])
    assert near2 == {"a": ("b", "c"), "c": ("b", "a")}
    assert neighbour_map(ids, times, 5, 1e9)["c"] == ("b", "a", "d", "e")


def test_propagate_borrows_from_the_best_neighbour_only_once() -> None:
    fused = {"a": 0.0, "b": 1.0, "c": 0.2}
    near = {"a": ("b",), "b": ("a", "c"), "c": ("b", "x")}  # x is not scored: counts 0
    out = propagate(fused, near, 0.5)
    assert out["a"] == pytest.approx((0.0 + 0.5 * 1.0) / 1.5)
    assert out["b"] == pytest.approx((1.0 + 0.5 * 0.2) / 1.5)  # from c's own score
    assert out["c"] == pytest.approx((0.2 + 0.5 * 1.0) / 1.5)
    assert all(0.0 <= v <= 1.0 for v in out.values())
    assert propagate(fused, near, 0.0) == fused
    assert fused == {"a": 0.0, "b": 1.0, "c": 0.2}  # the input is not mutated


def test_temporal_catalog_orders_by_time_then_id_and_forgets_on_write() -> None:
    cat = TemporalSignal(lambda kind: 30.0)
    for mid, ts in [("m3", T0 + 2), ("m1", T0), ("m2b", T0 + 1), ("m2a", T0 + 1)]:
        cat.add("ns", mid, ts, "episodic")
    assert cat.neighbours("ns", ["m1"], 3, 60) == {"m1": ("m2a", "m2b", "m3")}
    cat.remove("ns", "m2a")
    assert cat.neighbours("ns", ["m1"], 1, 60) == {"m1": ("m2b",)}
    assert cat.neighbours("other", ["m1"], 1, 60) == {}


def test_catalog_neighbours_among_allowed_memories_only() -> None:
    cat = TemporalSignal(lambda kind: 30.0)
    # a, x, b 50 s apart; c 100 s after b.
    for mid, ts in [("a", T0), ("x", T0 + 50), ("b", T0 + 100), ("c", T0 + 200)]:
        cat.add("ns", mid, ts, "episodic")
    assert cat.neighbours("ns", ["a", "b"], 1, 60) == {"a": ("x",), "b": ("x",)}
    allowed = frozenset({"a", "b", "c"})
    # x is not there: it takes no slot and does not bridge the 100 s step from a to b
    assert cat.neighbours("ns", ["a", "b"], 1, 60, allowed=allowed) == {"a": (), "b": ()}
    assert cat.neighbours("ns", ["a", "b"], 1, 120, allowed=allowed) == {
        "a": ("b",),
        "b": ("a", "c"),
    }
    # an excluded id asked for has no neighbours, and the cached timeline is untouched
    assert cat.neighbours("ns", ["x"], 1, 120, allowed=allowed) == {}
    assert cat.neighbours("ns", ["x"], 1, 120) == {"x": ("a", "b")}


@pytest.mark.parametrize(
    "bad",
    [
        {"context_window": -1},
        {"context_window": 1.5},
        {"context_weight": -0.1},
        {"context_gap_seconds": 0},
        {"embed_context": -1},
        {"embed_context": 1.0},
        {"embed_context": True},
    ],
)
def test_config_validates_context_fields(bad: dict[str, float]) -> None:
    with pytest.raises(InvalidInputError):
        NoraxConfig(**bad)  # type: ignore[arg-type]


def _bag_of_words(texts: Sequence[str]) -> np.ndarray:
    vocab = ["dog", "walk", "yes", "tuesday", "cat", "tea"]
    return np.array([[float(w in t.lower()) + 1e-3 for w in vocab] for t in texts])


def test_search_lifts_the_turn_after_a_matching_one() -> None:
    """'Yes, on Tuesday' answers the question turn before it; alone it matches nothing."""
    emb = CallableEmbedder(_bag_of_words, name="bow", dim=6)
    with NoraxMemory(embedder=emb, extractor=False) as mem:
        texts = ["Did you walk the dog?", "Yes, on Tuesday.", "I like tea.", "My cat sleeps."]
        mem.add(texts, ids=["q", "a", "t", "c"], created_at=[T0, T0 + 5, T0 + 10, T0 + 9_000])
        plain = Weights(1.0, 0.0, 0.0, 0.0)
        ctx = Weights(1.0, 0.0, 0.0, 0.0, params={"context_window": 1, "context_weight": 0.5})
        without = [r.id for r in mem.search("walk the dog", k=2, now=T0 + 9_100, weights=plain)]
        with_ctx = [r.id for r in mem.search("walk the dog", k=2, now=T0 + 9_100, weights=ctx)]
    assert without == ["q"]  # BM25 alone proposes only the matching turn
    assert with_ctx == ["q", "a"]  # its neighbour joins and borrows a third of its score
    # the cat turn is more than an hour later: another session, no context


def test_context_neighbours_come_only_from_the_memories_the_filter_allows() -> None:
    """An excluded memory neither lends its score nor takes a neighbour's place."""
    emb = CallableEmbedder(_bag_of_words, name="bow", dim=6)
    with NoraxMemory(embedder=emb, extractor=False) as mem:
        texts = ["Did you walk the dog?", "The dog walk was long.", "Yes, on Tuesday."]
        mem.add(
            texts,
            ids=["q", "x", "a"],
            created_at=[T0, T0 + 5, T0 + 10],
            metadata=[{"keep": True}, {"keep": False}, {"keep": True}],
        )
        ctx = Weights(1.0, 0.0, 0.0, 0.0, params={"context_window": 1, "context_weight": 0.5})
        got = mem.search("walk the dog", k=3, now=T0 + 100, weights=ctx, where={"keep": True})
        alone = Weights(1.0, 0.0, 0.0, 0.0)
        q_alone = mem.search("walk the dog", k=1, now=T0 + 100, weights=alone, where={"keep": True})
    # "x" is filtered out: "a" is "q"'s neighbour, and "q" borrows nothing from "x"
    assert [r.id for r in got] == ["q", "a"]
    assert got[0].score == pytest.approx(q_alone[0].score / 1.5)
    assert got[1].score == pytest.approx(0.5 * q_alone[0].score / 1.5)


# -- context in the embedding (embed_context) ------------------------------------------


def test_preceding_takes_the_session_s_earlier_memories_oldest_first() -> None:
    ids = ["a", "b", "c", "d", "e"]
    times = [T0, T0 + 10, T0 + 20, T0 + 10_000, T0 + 10_010]  # a-b-c | d-e
    got = preceding(ids, times, ids, 2, 3600)
    assert got == {"a": (), "b": ("a",), "c": ("a", "b"), "d": (), "e": ("d",)}
    assert preceding(ids, times, ["c"], 1, 3600) == {"c": ("b",)}


def _reference_preceding(
    stored: list[tuple[str, float, int]],
    batch: list[tuple[str, float, str, int]],
    before: int,
    gap: float,
) -> dict[str, tuple[str, ...]]:
    """Brute force: merge everything per namespace (the batch replaces same ids), then walk
    in conversation order (time, then write sequence, then id)."""
    out: dict[str, tuple[str, ...]] = {}
    for ns in {b[2] for b in batch}:
        mine = {m: (t, q) for m, t, s, q in batch if s == ns}
        known = {**{m: (t, q) for m, t, q in stored if m not in {b[0] for b in batch}}, **mine}
        order = sorted(known, key=lambda m: (*known[m], m))
        for m in mine:
            i = order.index(m)
            prev: list[str] = []
            while (
                i > 0 and len(prev) < before and known[order[i]][0] - known[order[i - 1]][0] <= gap
            ):
                i -= 1
                prev.insert(0, order[i])
            out[m] = tuple(prev)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_batch_preceding_matches_a_full_merge(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # few distinct times and sequence numbers: ties on both, broken by write order then id
    stored = [
        (f"s{i:02d}", float(T0 + rng.integers(0, 10) * 60), int(rng.integers(0, 4)))
        for i in range(25)
    ]
    reused = [m for m, _, _ in stored[:3]] if seed % 2 else []  # upserts: same ids, new times
    new = [f"b{i}" for i in range(int(rng.integers(1, 8)))]
    batch = [
        (m, float(T0 + rng.integers(0, 10) * 60), "ns", int(rng.integers(0, 6)))
        for m in reused + new
    ]
    stored_sorted = sorted(stored, key=lambda p: (p[1], p[2], p[0]))
    before, gap = int(rng.integers(1, 4)), float(rng.choice([90.0, 600.0, 1e9]))
    got = batch_preceding(
        [b[0] for b in batch],
        [b[1] for b in batch],
        [b[2] for b in batch],
        [b[3] for b in batch],
        lambda ns: tuple(map(list, zip(*stored_sorted, strict=True))),  # type: ignore[arg-type]
        before,
        gap,
    )
    assert got == _reference_preceding(stored, batch, before, gap)


def test_embedding_text_puts_the_memory_first_and_caps_the_length() -> None:
    assert embedding_text("Yes, with my sister!", ["Did you go?"], 100) == (
        "Yes, with my sister!\nDid you go?"
    )
    assert embedding_text("own", [], 100) == "own"
    assert embedding_text("own", ["x" * 50], 10) == "own\nxxxxxx"


def test_store_embeds_each_memory_with_the_ones_before_it() -> None:
    seen: list[str] = []

    def record(texts: Sequence[str]) -> np.ndarray:
        seen.extend(texts)
        return _bag_of_words(texts)

    emb = CallableEmbedder(record, name="rec", dim=6)
    with NoraxMemory(embedder=emb, extractor=False, config=NoraxConfig(embed_context=2)) as mem:
        mem.add(["a1", "a2"], ids=["1", "2"], created_at=[T0, T0 + 1], namespace="n")
        mem.add("a3", ids="3", created_at=T0 + 2, namespace="n")
        mem.add("other", ids="o", created_at=T0 + 3, namespace="elsewhere")
        mem.add("b1", ids="4", created_at=T0 + 7_200, namespace="n")  # a new session
        mem.add("a0", ids="0", created_at=T0 - 50, namespace="n")  # known now, earlier
        mem.upsert("a2 again", ids="2", created_at=T0 + 1.5, namespace="n")
        assert mem.get("2")[0].text == "a2 again"  # the stored text is the memory's own
    assert seen == [
        *("a1", "a2\na1", "a3\na1\na2", "other", "b1"),
        *("a0", "a1\na0", "a2\na0\na1"),  # a0 lands before 1 and 2: they are re-embedded
        *("a2 again\na0\na1", "a3\na1\na2 again"),  # and 3 follows the new text of 2
    ]
    seen.clear()
    with NoraxMemory(embedder=emb, extractor=False) as mem:  # off by default
        mem.add(["a1", "a2"], created_at=[T0, T0 + 1])
    assert seen == ["a1", "a2"]


def test_default_weights_may_set_embed_context() -> None:
    seen: list[str] = []

    def record(texts: Sequence[str]) -> np.ndarray:
        seen.extend(texts)
        return _bag_of_words(texts)

    emb = CallableEmbedder(record, name="rec", dim=6)
    w = Weights(0.5, 0.5, 0.0, 0.0, params={"embed_context": 1})
    with NoraxMemory(embedder=emb, extractor=False, weights=w) as mem:
        assert mem.add_config.embed_context == 1
        mem.add(["a1", "a2"], created_at=[T0, T0 + 1])
    assert seen == ["a1", "a2\na1"]
