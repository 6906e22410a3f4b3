"""Context propagation: neighbours in time, the score update, and the engine path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from norax_core import NoraxConfig, NoraxMemory, Weights
from norax_core.embedders import CallableEmbedder
from norax_core.errors import InvalidInputError
from norax_core.signals.context import neighbour_map, propagate
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


@pytest.mark.parametrize(
    "bad",
    [
        {"context_window": -1},
        {"context_window": 1.5},
        {"context_weight": -0.1},
        {"context_gap_seconds": 0},
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
