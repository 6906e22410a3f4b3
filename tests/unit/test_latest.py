"""Latest wins: the score update, its config, and the engine path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from norax_core import NoraxConfig, NoraxMemory, Weights
from norax_core.embedders import CallableEmbedder
from norax_core.errors import InvalidInputError
from norax_core.latest import latest_wins, pair_cosines

T0 = 1_700_000_000.0


def _unit(rows: list[list[float]]) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float64)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_the_newer_restatement_passes_the_older_one() -> None:
    fused = {"old": 0.9, "new": 0.5, "other": 0.7, "tail": 0.1}
    top = ["old", "other", "new"]
    times = [1.0, 2.0, 3.0]
    # old ~ new; other is unrelated to both
    sim = pair_cosines(_unit([[1, 0.1, 0], [0, 0, 1], [1, 0, 0]]))
    out = latest_wins(fused, top, times, sim, threshold=0.9, weight=1.5)
    assert out["new"] == pytest.approx(0.5 + 1.5 * 0.4)  # passed "old" by half the gap
    assert out["old"] == 0.9 and out["other"] == 0.7 and out["tail"] == 0.1
    assert sorted(out, key=lambda m: -out[m]) == ["new", "old", "other", "tail"]
    assert fused == {"old": 0.9, "new": 0.5, "other": 0.7, "tail": 0.1}  # not mutated


@pytest.mark.parametrize(
    ("times", "threshold", "weight"),
    [
        ([3.0, 2.0, 1.0], 0.9, 1.5),  # the better-scored one is the newer: nothing to do
        ([1.0, 2.0, 3.0], 0.999, 1.5),  # not similar enough
        ([1.0, 2.0, 3.0], 0.9, 0.0),  # off
        ([1.0, 2.0, 1.0], 0.9, 1.5),  # same time: neither is newer
    ],
)
def test_nothing_moves_without_a_newer_similar_memory(
    times: list[float], threshold: float, weight: float
) -> None:
    fused = {"old": 0.9, "other": 0.7, "new": 0.5}
    top = ["old", "other", "new"]
    sim = pair_cosines(_unit([[1, 0.1, 0], [0, 0, 1], [1, 0, 0]]))
    assert latest_wins(fused, top, times, sim, threshold, weight) == fused


def test_weight_below_one_closes_part_of_the_gap_and_the_best_older_counts() -> None:
    fused = {"a": 0.8, "b": 0.6, "c": 0.2}
    top = ["a", "b", "c"]
    sim = np.ones((3, 3))
    out = latest_wins(fused, top, [1.0, 2.0, 3.0], sim, threshold=0.5, weight=0.5)
    assert out["b"] == pytest.approx(0.7)
    assert out["c"] == pytest.approx(0.5)  # from the best older one, a, before any lift
    assert out["a"] == 0.8


def test_pair_cosines_do_not_depend_on_the_batch() -> None:
    rng = np.random.default_rng(3)
    v = rng.normal(size=(12, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    whole = pair_cosines(v)
    idx = [7, 2, 9]
    sub = pair_cosines(v[idx])
    batched = pair_cosines(np.stack([v[idx], v[[0, 1, 2]]]))
    assert np.array_equal(sub, whole[np.ix_(idx, idx)])
    assert np.array_equal(batched[0], sub)
    np.testing.assert_allclose(np.diag(whole), 1.0, atol=1e-6)


@pytest.mark.parametrize(
    "bad",
    [
        {"latest_wins_weight": -0.5},
        {"latest_wins_weight": float("nan")},
        {"latest_wins_similarity": 1.5},
        {"latest_wins_depth": 1},
        {"latest_wins_depth": 2.5},
        {"latest_wins_depth": True},
    ],
)
def test_config_validates_latest_fields(bad: dict[str, float]) -> None:
    with pytest.raises(InvalidInputError):
        NoraxConfig(**bad)  # type: ignore[arg-type]


def _bag_of_words(texts: Sequence[str]) -> np.ndarray:
    vocab = ["coverage", "tests", "percent", "api", "deploy", "weather"]
    return np.array([[float(w in t.lower()) + 1e-3 for w in vocab] for t in texts])


def test_search_puts_the_update_first() -> None:
    """The update matches the question less well than the original but ranks first."""
    emb = CallableEmbedder(_bag_of_words, name="bow", dim=6)
    with NoraxMemory(embedder=emb, extractor=False) as mem:
        texts = [
            "The API tests coverage is 65 percent.",
            "We deploy on Fridays.",
            "Coverage went up to 78 percent.",
            "Nice weather today.",
        ]
        mem.add(texts, ids=["old", "d", "new", "w"], created_at=[T0, T0 + 10, T0 + 20, T0 + 30])
        plain = Weights(0.0, 1.0, 0.0, 0.0)
        latest = Weights(
            0.0,
            1.0,
            0.0,
            0.0,
            params={"latest_wins_weight": 1.05, "latest_wins_similarity": 0.6},
        )
        q = "What is the API tests coverage percent?"
        without = [r.id for r in mem.search(q, k=3, now=T0 + 100, weights=plain)]
        with_rule = [r.id for r in mem.search(q, k=3, now=T0 + 100, weights=latest)]
    assert without[:2] == ["old", "new"]
    assert with_rule[:2] == ["new", "old"]
