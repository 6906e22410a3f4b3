"""Agent-turn scenarios: what applies to a new request must come back with it (issue 21).

An agent searches its memory with the user's new request, not with a question about the
past. Each :class:`AgentScenario` is a small store written as a new user would write it
(text, ``role`` metadata and times only: no kinds), one request, a pinned ``now`` and the
memory that must come back. Four families, each of ten or more distinct templates
(:mod:`norax_core.bench.agent_templates`), filled from coherent variants and a pool of
people, with ages, distractors and writing order drawn from a seeded :class:`random.Random`:

* ``instruction``: a request a standing rule applies to ("Write me a Python function that
  ..." -> "Always add type hints to any code you write for me"), among rules for other
  tasks, preferences, and chatter and assistant replies that share the request's words;
* ``preference``: a request a stated preference constrains ("Plan dinner for Friday" ->
  "I'm vegetarian"), among the same kinds of distractors;
* ``current``: a "now / these days / at the moment / currently" question with a stale and a
  current fact about the same subject: the current one must rank above the stale one;
* ``tiny``: a two-memory store where the request names an exact keyword only one holds.

:func:`hits` scores one ``k = 3`` search (the lane never acts for ``k <= lane_slots`` and
lifts into the last place of the top k, so hit@3 is the lane's measure, hit@1 the
fusion's). ``benchmarks/agent_turns.py`` runs Norax and its peers over a generated set.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from norax_core.bench.agent_templates import CURRENT, INSTRUCTION, PREFERENCE, TINY, Turn
from norax_core.bench.data import BenchDataset, BenchMemory, BenchQuestion, Conversation
from norax_core.bench.scenario_templates import PEOPLE

if TYPE_CHECKING:
    from norax_core.engine import NoraxMemory
    from norax_core.presets import WeightsLike

__all__ = [
    "FAMILIES",
    "K",
    "AgentMemory",
    "AgentScenario",
    "dataset",
    "generate",
    "hits",
    "load",
    "search_ids",
    "templates",
]

FAMILIES = ("instruction", "preference", "current", "tiny")
"""The agent-turn families, in report order."""
K = 3
"""Results per search: one ``k = 3`` search per scenario."""

_TEMPLATES: dict[str, tuple[Turn, ...]] = {
    "instruction": INSTRUCTION,
    "preference": PREFERENCE,
    "current": CURRENT,
    "tiny": TINY,
}
_NOWS = (
    datetime(2026, 2, 11, 8, 15, tzinfo=timezone.utc),
    datetime(2026, 5, 20, 17, 40, tzinfo=timezone.utc),
    datetime(2026, 8, 3, 10, 5, tzinfo=timezone.utc),
    datetime(2026, 10, 27, 14, 30, tzinfo=timezone.utc),
)


@dataclass(frozen=True)
class AgentMemory:
    """One memory as a new user writes it: text, who wrote it (``role``) and when."""

    text: str
    role: str
    created_at: datetime


@dataclass(frozen=True)
class AgentScenario:
    """A small store, a request and the memory that must come back.

    Attributes:
        id: ``"<family>-<template>-<n>"``, unique within a generated set.
        family: One of :data:`FAMILIES`.
        template: The template's name.
        query: The request.
        memories: The store, in writing order.
        target: Index in ``memories`` of the memory that must come back.
        older: ``current`` only: index of the stale fact the target must rank above.
        now: The search's clock.
    """

    id: str
    family: str
    template: str
    query: str
    memories: tuple[AgentMemory, ...]
    target: int
    older: int | None
    now: datetime


def templates(family: str) -> tuple[Turn, ...]:
    """The templates of ``family`` (raises ``ValueError`` listing the families)."""
    if family not in _TEMPLATES:
        raise ValueError(f"unknown family {family!r}; valid: {list(FAMILIES)}")
    return _TEMPLATES[family]


def _build(t: Turn, family: str, rng: random.Random, n: int) -> AgentScenario:
    variant = t.variants[rng.randrange(len(t.variants))]
    p, q, r = rng.sample(PEOPLE, 3)
    slots = {**variant, "p": p, "q": q, "r": r}
    now = _NOWS[rng.randrange(len(_NOWS))]

    def at(lo_hi: tuple[float, float]) -> datetime:
        return now - timedelta(days=rng.uniform(*lo_hi))

    def memory(text: str, when: datetime) -> AgentMemory:
        role = "assistant" if text.startswith("A: ") else "user"
        return AgentMemory(text.removeprefix("A: ").format(**slots), role, when)

    distractors = list(t.distractors)
    rng.shuffle(distractors)
    items = [("target", memory(t.target, at(t.target_age)))]
    if t.older is not None:  # the stale fact: always older than the current one
        when = min(at(t.older_age), items[0][1].created_at - timedelta(days=1))
        items.append(("older", memory(t.older, when)))
    items += [("other", memory(d, at(t.other_age))) for d in distractors[: t.max_distractors]]
    order = sorted(range(len(items)), key=lambda i: items[i][1].created_at)  # written in order
    roles = [items[i][0] for i in order]
    return AgentScenario(
        id=f"{family}-{t.name}-{n}",
        family=family,
        template=t.name,
        query=t.query.format(**slots),
        memories=tuple(items[i][1] for i in order),
        target=roles.index("target"),
        older=roles.index("older") if "older" in roles else None,
        now=now,
    )


def generate(
    per_family: int = 50, seed: int = 0, families: Sequence[str] = FAMILIES
) -> list[AgentScenario]:
    """``per_family`` scenarios of each family, deterministic by ``seed``.

    Templates are used in turn (shuffled by the seed), so every template of a family is
    used before any repeats.

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
        out += [_build(ts[n % len(ts)], family, rng, n) for n in range(per_family)]
    return out


def hits(scenario: AgentScenario, ranked: Sequence[int]) -> tuple[bool, bool]:
    """``(hit@1, hit@3)`` of a ranking (memory indexes, best first).

    The target is first / among the first three; for ``current`` it must also rank above
    the stale fact (a stale fact missing from ``ranked`` counts as below).
    """
    pos = {m: i for i, m in enumerate(ranked)}
    t = pos.get(scenario.target)
    if t is None:
        return False, False
    if scenario.older is not None and pos.get(scenario.older, len(ranked)) < t:
        return False, False
    return t == 0, t < K


def load(
    memory: NoraxMemory,
    scenarios: Sequence[AgentScenario],
    kinds: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Write each scenario's store into ``memory``, one namespace per scenario.

    As a new user would: text, ``role`` metadata and ``created_at`` only (no ``kind``), unless
    ``kinds`` gives a scenario's memories their kinds (by scenario id, in memory order).
    Memory ids are ``<scenario id>:<index>``.
    """
    for s in scenarios:
        memory.add(
            [m.text for m in s.memories],
            ids=[f"{s.id}:{i}" for i in range(len(s.memories))],
            created_at=[m.created_at for m in s.memories],
            namespace=s.id,
            metadata=[{"role": m.role} for m in s.memories],
            kind=None if kinds is None else list(kinds[s.id]),
        )


def search_ids(
    memory: NoraxMemory, scenario: AgentScenario, weights: WeightsLike = None
) -> list[int]:
    """Memory indexes of one ``k = 3`` search of ``scenario``'s request, best first."""
    got = memory.search(
        scenario.query, k=K, namespace=scenario.id, now=scenario.now, weights=weights
    )
    return [int(r.id.rsplit(":", 1)[1]) for r in got]


def dataset(scenarios: Sequence[AgentScenario]) -> BenchDataset:
    """The scenarios as a :class:`BenchDataset`, for retrievers that read one.

    One conversation per scenario, memory ids ``"0"``, ``"1"``, ..., the request as its one
    question.
    """
    convs = []
    for s in scenarios:
        mems = [
            BenchMemory(str(i), m.text, m.created_at.timestamp(), 1, m.role, m.role)
            for i, m in enumerate(s.memories)
        ]
        question = BenchQuestion(s.id, s.query, s.family, (str(s.target),))
        convs.append(Conversation(s.id, mems, [question], s.now.timestamp()))
    return BenchDataset("agent_turns", convs)
