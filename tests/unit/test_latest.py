"""Latest wins: its config and the engine path (the rule itself: test_state_wins.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from norax_core import NoraxConfig, NoraxMemory, Weights
from norax_core.embedders import CallableEmbedder
from norax_core.errors import InvalidInputError

T0 = 1_700_000_000.0


@pytest.mark.parametrize(
    "bad",
    [
        {"latest_wins_weight": -0.5},
        {"latest_wins_weight": float("nan")},
        {"latest_wins_shared": 0},
        {"latest_wins_shared": 1.5},
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
            "Coverage has increased to 78 percent.",
            "Nice weather today.",
        ]
        mem.add(texts, ids=["old", "d", "new", "w"], created_at=[T0, T0 + 10, T0 + 20, T0 + 30])
        plain = Weights(0.0, 1.0, 0.0, 0.0)
        latest = Weights(
            0.0,
            1.0,
            0.0,
            0.0,
            params={"latest_wins_weight": 1.05, "latest_wins_shared": 2},
        )
        q = "What is the API tests coverage percent?"
        without = [r.id for r in mem.search(q, k=3, now=T0 + 100, weights=plain)]
        with_rule = [r.id for r in mem.search(q, k=3, now=T0 + 100, weights=latest)]
    assert without[:2] == ["old", "new"]
    assert with_rule[:2] == ["new", "old"]
