"""The seed's own promises on small stores, through the shipped ``default`` (issue 13).

A generated set (``norax_core.bench.scenarios``: four scenarios per family, seed 13) is written
into one persistent store with the real ONNX embedder and spaCy pipeline, one namespace per
scenario (namespaces isolate every signal, so each ranks as a store of its own), and searched
with each scenario's pinned ``now``. ``benchmarks/seed_promises.py`` gives the same figures for
every preset on a larger set.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from norax_core import NoraxMemory
from norax_core.bench.scenarios import FAMILIES, Scenario, generate, indexes, load, passes, ranked

pytestmark = pytest.mark.integration

TARGET = 0.90
"""Issue 13: at least 90 % of the scenarios pass."""
FLOOR = 0.75
"""And no family below 3 of 4."""


@pytest.fixture(scope="module")
def outcomes(
    embedder, extractor, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, list[bool]]]:  # type: ignore[no-untyped-def]
    """Pass or fail of every scenario under the shipped default, by family."""
    scenarios: list[Scenario] = generate(4, seed=13)
    path: Path = tmp_path_factory.mktemp("promises")
    mem = NoraxMemory(path, embedder=embedder, extractor=extractor)  # the shipped default
    try:
        load(mem, scenarios)
        out: dict[str, list[bool]] = defaultdict(list)
        for s in scenarios:
            out[s.family].append(passes(s, indexes(ranked(mem, s))))
        yield dict(out)
    finally:
        mem.close()


def _rate(hits: list[bool]) -> float:
    return sum(hits) / len(hits)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the shipped default passes 0.34 of benchmarks/seed_promises.py's 100 scenarios "
        "(graph 0.00, recency 0.10, scratchpad 0.00, meaning 0.60, keywords 1.00): no second "
        "graph step from the first hits' entities (bridges), no per-intent weights or "
        "supersession for current-state questions, freshness off (kind decay never counts), "
        "and the embedding's thin margins on paraphrases (README: the seed's promises)"
    ),
)
def test_default_keeps_the_seed_promises(outcomes: dict[str, list[bool]]) -> None:
    everything = [h for hits in outcomes.values() for h in hits]
    rates = {f: _rate(outcomes[f]) for f in FAMILIES}
    assert _rate(everything) >= TARGET, rates
    assert min(rates.values()) >= FLOOR, rates


def test_every_family_was_run(outcomes: dict[str, list[bool]]) -> None:
    assert {f: len(h) for f, h in outcomes.items()} == {f: 4 for f in FAMILIES}


def test_exact_keywords_still_win(outcomes: dict[str, list[bool]]) -> None:
    """What the default already keeps (keywords 1.00 on the benchmark) must not regress."""
    assert all(outcomes["keywords"]), outcomes["keywords"]
