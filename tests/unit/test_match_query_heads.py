"""match_query skips n-grams that cannot name an entity: the same matches as trying them all.

An n-gram of several words is normalised and looked up only if the namespace has entities of
that many words and one starts with its first word (:meth:`NamespaceGraph.heads`). Here every
query is matched twice, with that shortcut and without it (every first word and length
admitted), over names and queries full of punctuation, case, apostrophes and determiners.
"""

from __future__ import annotations

import random

import pytest

from norax_core.signals.entity_graph import EntityGraph, NamespaceGraph, match_query

NS = "ns"
NAMES = [
    "new york", "new york city", "colby smith", "colby", "smith", "weather app", "app",
    "o'brien family", "rock 'n roll", "e-mail server", "c++ library", "the hague",
    "ms. jones", "jones", "-dash start", "(weird) name", "caf\u00e9 au lait", "wallet",
    "big data platform", "data", "x", "u.s. army", "york",
]  # fmt: skip
FILLER = ["the", "a", "my", "to", "did", "with", "and", "-", "...", "(", "it's", "new", "data"]


class _Everything(dict):  # type: ignore[type-arg]
    def __contains__(self, key: object) -> bool:
        return True


def _plain(text: str, space: NamespaceGraph, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    with monkeypatch.context() as m:
        m.setattr(space, "heads", lambda: _Everything())
        m.setattr(space, "lengths", _Everything(space.lengths))
        return match_query(text, space)


def _mangle(words: list[str], rng: random.Random) -> list[str]:
    """Random case; punctuation, an apostrophe or a plural around the whole."""
    out = [rng.choice([w, w.upper(), w.title(), w.capitalize()]) for w in words]
    out[0] = rng.choice(["", "", "", "(", '"', "'", "-", "\u2018"]) + out[0]
    out[-1] += rng.choice(["", "", "", ",", ".", "'s", "\u2019s", ")", "?", "s", "'"])
    return out


def queries(seed: int, count: int) -> list[str]:
    """Whole names (each word mangled) and loose words and fillers, 1-12 words."""
    rng = random.Random(seed)
    words = [w for name in NAMES for w in name.split(" ")] + FILLER
    out = []
    for _ in range(count):
        parts: list[str] = []
        while len(parts) < rng.randint(1, 12):
            chunk = rng.choice(NAMES).split(" ") if rng.random() < 0.4 else [rng.choice(words)]
            parts += _mangle(chunk, rng)
        out.append(" ".join(parts))
    return out


def test_heads_skip_only_what_cannot_match(monkeypatch: pytest.MonkeyPatch) -> None:
    g = EntityGraph()
    g.add_many(NS, [(f"m{i}", [name, NAMES[(i + 3) % len(NAMES)]]) for i, name in enumerate(NAMES)])
    space = g.space(NS)
    assert space is not None
    matched = 0
    for text in queries(0, 1500):
        fast = match_query(text, space)
        assert fast == _plain(text, space, monkeypatch), text
        matched += any(" " in e for e in fast)
    assert matched > 100  # many queries did name entities of several words


def test_heads_follow_writes() -> None:
    g = EntityGraph()
    g.add(NS, "a", ["new york", "colby smith"])
    space = g.space(NS)
    assert space is not None
    assert space.heads() == {"new": 1, "colby": 1}
    g.add(NS, "b", ["new jersey", "(odd) one", "solo"])
    g.remove(NS, "a")
    space = g.space(NS)
    assert space is not None
    assert space.heads() == {"new": 1, "odd": 1}
    assert g.match_query(NS, "New York or New Jersey?") == ["new jersey"]
