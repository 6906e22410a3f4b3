"""The seed's own promises as small generated stores (issue 13, last target).

Each :class:`Scenario` is a store of 5-10 memories, one query, a pinned ``now`` and the memory
that must come back: in the top 3, and for the recency families also above the older memory
it replaces. Five families, each written as ten or more distinct templates (different
sentences, not one sentence with names swapped), every template filled from its own coherent
variants and from a pool of people, with times, kinds and memory order drawn from a seeded
:class:`random.Random`, so :func:`generate` is deterministic by seed:

* ``graph``: a decision that never names the query's object, linked to it only through other
  memories that name both ("What did we decide about the wallet?" -> "Colby decided to use
  Base chain for all payments", beside "Colby set up the team wallet on Base chain");
* ``recency``: the newer of two facts about the same thing, for a "current / now / these
  days / still" question (target in the top 3 and above the older fact);
* ``scratchpad``: a fresh scratchpad note above a months-old note on the same task (memory
  kinds decay at different rates: scratchpad in a day, episodic in a month);
* ``meaning``: the answer shares no word with the question ("where do we keep credentials"
  -> "API keys live in Vault");
* ``keywords``: an exact rare term ("TypeORM") among memories that mean nearly the same.

Distractors are honest: they share the query's words ("we decided ...", the object's name,
"credentials" in another sense) and are plausible notes of the same team.
:func:`passes` is the criterion; ``benchmarks/seed_promises.py`` runs every preset over a
generated set and ``tests/integration/test_seed_promises.py`` holds the shipped default to it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from norax_core.bench.scenario_templates import (
    GRAPH,
    KEYWORDS,
    MEANING,
    PEOPLE,
    RECENCY,
    SCRATCHPAD,
    Template,
)

if TYPE_CHECKING:
    from norax_core.engine import NoraxMemory
    from norax_core.models import SearchResult
    from norax_core.presets import WeightsLike

__all__ = [
    "FAMILIES",
    "Memory",
    "Scenario",
    "generate",
    "indexes",
    "load",
    "passes",
    "ranked",
    "templates",
]

FAMILIES = ("graph", "recency", "scratchpad", "meaning", "keywords")
"""The scenario families, in report order."""

_NOWS = (
    datetime(2026, 3, 17, 9, 30, tzinfo=timezone.utc),
    datetime(2026, 6, 4, 15, 0, tzinfo=timezone.utc),
    datetime(2026, 9, 22, 11, 45, tzinfo=timezone.utc),
    datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc),
)


@dataclass(frozen=True)
class Memory:
    """One memory of a scenario's store.

    Attributes:
        text: The memory's text.
        kind: Its kind (decay rate; see the README's kinds).
        created_at: When it was written.
    """

    text: str
    kind: str
    created_at: datetime


@dataclass(frozen=True)
class Scenario:
    """A small store, a query and the memory that must come back.

    Attributes:
        id: ``"<family>-<template>-<n>"``, unique within a generated set.
        family: One of :data:`FAMILIES`.
        template: The template's name.
        query: The question.
        memories: The store, in writing order.
        target: Index in ``memories`` of the memory that must be in the top 3.
        older: Index of the memory the target must rank above (the fact it replaces, the
            months-old note), or ``None``.
        now: The search's clock.
    """

    id: str
    family: str
    template: str
    query: str
    memories: tuple[Memory, ...]
    target: int
    older: int | None
    now: datetime


def passes(scenario: Scenario, ranked: Sequence[int], top: int = 3) -> bool:
    """Whether a ranking (indexes into ``memories``, best first) keeps the seed's promise.

    The target is among the first ``top``; with an ``older`` memory, the target also ranks
    above it (an older memory missing from ``ranked`` counts as below).
    """
    pos = {m: i for i, m in enumerate(ranked)}
    t = pos.get(scenario.target)
    if t is None or t >= top:
        return False
    if scenario.older is None:
        return True
    return t < pos.get(scenario.older, len(ranked))


_TEMPLATES: dict[str, tuple[Template, ...]] = {
    "graph": GRAPH,
    "recency": tuple(replace(t, target_age=(0.5, 20.0)) for t in RECENCY),
    "scratchpad": tuple(
        replace(
            t,
            target_kind="scratchpad",
            older_kind="scratchpad",
            target_age=(0.02, 0.3),
            older_age=(60.0, 200.0),
            other_kinds=("semantic", "episodic", "procedural"),
        )
        for t in SCRATCHPAD
    ),
    "meaning": MEANING,
    "keywords": KEYWORDS,
}


def templates(family: str) -> tuple[Template, ...]:
    """The templates of ``family`` (raises ``ValueError`` listing the families)."""
    if family not in _TEMPLATES:
        raise ValueError(f"unknown family {family!r}; valid: {list(FAMILIES)}")
    return _TEMPLATES[family]


def _fill(text: str, slots: dict[str, str]) -> str:
    return text.format(**slots)


def _build(t: Template, family: str, rng: random.Random, n: int) -> Scenario:
    variant = t.variants[rng.randrange(len(t.variants))]
    p, q, r = rng.sample(PEOPLE, 3)
    slots = {**variant, "p": p, "q": q, "r": r}
    now = _NOWS[rng.randrange(len(_NOWS))]

    def at(lo_hi: tuple[float, float]) -> datetime:
        return now - timedelta(days=rng.uniform(*lo_hi))

    distractors = list(t.distractors)
    rng.shuffle(distractors)
    distractors = distractors[: t.max_distractors]
    items: list[tuple[str, Memory]] = [
        ("target", Memory(_fill(t.target, slots), t.target_kind, at(t.target_age)))
    ]
    if t.older is not None:
        # the fact the target replaces: always older than it
        older_at = min(at(t.older_age), items[0][1].created_at - timedelta(days=1))
        items.append(("older", Memory(_fill(t.older, slots), t.older_kind, older_at)))
    for b in t.bridges:
        items.append(("bridge", Memory(_fill(b, slots), "semantic", at(t.other_age))))
    for d in distractors:
        kind = t.other_kinds[rng.randrange(len(t.other_kinds))]
        items.append(("other", Memory(_fill(d, slots), kind, at(t.other_age))))
    rng.shuffle(items)
    roles = [role for role, _ in items]
    # written in time order, as an agent would have written them
    order = sorted(range(len(items)), key=lambda i: items[i][1].created_at)
    memories = tuple(items[i][1] for i in order)
    roles = [roles[i] for i in order]
    return Scenario(
        id=f"{family}-{t.name}-{n}",
        family=family,
        template=t.name,
        query=_fill(t.query, slots),
        memories=memories,
        target=roles.index("target"),
        older=roles.index("older") if "older" in roles else None,
        now=now,
    )


def load(memory: NoraxMemory, scenarios: Sequence[Scenario]) -> None:
    """Write each scenario's store into ``memory``, one namespace per scenario.

    Namespaces isolate every signal (BM25 statistics, entity graph, dense ranking), so a
    scenario's namespace ranks as a store of its own. Memory ids are ``<scenario id>:<index>``
    (ids are unique across a store's namespaces).
    """
    for s in scenarios:
        memory.add(
            [m.text for m in s.memories],
            ids=[f"{s.id}:{i}" for i in range(len(s.memories))],
            kind=[m.kind for m in s.memories],
            created_at=[m.created_at for m in s.memories],
            namespace=s.id,
        )


def ranked(
    memory: NoraxMemory, scenario: Scenario, weights: WeightsLike = None
) -> list[SearchResult]:
    """The search results of ``scenario``'s query over its namespace, all memories, best first."""
    return memory.search(
        scenario.query,
        k=len(scenario.memories),
        namespace=scenario.id,
        now=scenario.now,
        weights=weights,
    )


def indexes(results: Sequence[SearchResult]) -> list[int]:
    """The memory indexes of search results (ids ``<scenario id>:<index>``), best first."""
    return [int(r.id.rsplit(":", 1)[1]) for r in results]


def generate(
    per_family: int = 10, seed: int = 0, families: Sequence[str] = FAMILIES
) -> list[Scenario]:
    """``per_family`` scenarios of each family, deterministic by ``seed``.

    Templates are used in turn (shuffled by the seed), so ten per family covers ten
    distinct templates; each draw picks a variant, three people, a clock, ages, kinds of
    the other memories, a subset of distractors and the writing order.

    Raises:
        ValueError: An unknown family or a negative count.
    """
    if per_family < 0:
        raise ValueError(f"per_family must be >= 0, got {per_family}")
    rng = random.Random(seed)
    out = []
    for family in families:
        ts = list(templates(family))
        rng.shuffle(ts)
        for n in range(per_family):
            out.append(_build(ts[n % len(ts)], family, rng, n))
    return out
