"""The dev datasets' own question categories, mapped to query intents.

The categories say what a question needs, not how it is worded, so the mapping is many to one
and some of it is a judgement, stated here once:

* LoCoMo asks about two named people: its single-hop (4), open-domain (3, inference about a
  person) and adversarial (5, a single-hop question about the wrong person, worded the same)
  questions are :attr:`~Intent.ENTITY`; multi-hop (1) gathers several turns
  (:attr:`~Intent.MULTI_HOP`); temporal (2) is :attr:`~Intent.TEMPORAL`.
* BEAM: knowledge_update and contradiction_resolution both turn on a newer statement of the
  same thing (:attr:`~Intent.CURRENT_STATE`); event_ordering and summarization span the
  conversations (:attr:`~Intent.COVERAGE`); preference_following and instruction_following
  need the user's standing preferences (:attr:`~Intent.PREFERENCE`); multi_session_reasoning
  is :attr:`~Intent.MULTI_HOP`; information_extraction and abstention are plain
  :attr:`~Intent.LOOKUP`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from norax_core.bench.data import load_locomo, parse_beam_date
from norax_core.errors import InvalidInputError
from norax_core.query.intents import Intent

__all__ = [
    "BEAM_INTENTS",
    "LOCOMO_INTENTS",
    "LabelledQuestion",
    "beam_questions",
    "locomo_questions",
]

LOCOMO_INTENTS: dict[str, Intent] = {
    "multi_hop": Intent.MULTI_HOP,
    "temporal": Intent.TEMPORAL,
    "open_domain": Intent.ENTITY,
    "single_hop": Intent.ENTITY,
    "adversarial": Intent.ENTITY,
}
"""LoCoMo category name (:data:`~norax_core.bench.data.LOCOMO_CATEGORIES`) to intent."""

BEAM_INTENTS: dict[str, Intent] = {
    "abstention": Intent.LOOKUP,
    "contradiction_resolution": Intent.CURRENT_STATE,
    "event_ordering": Intent.COVERAGE,
    "information_extraction": Intent.LOOKUP,
    "instruction_following": Intent.PREFERENCE,
    "knowledge_update": Intent.CURRENT_STATE,
    "multi_session_reasoning": Intent.MULTI_HOP,
    "preference_following": Intent.PREFERENCE,
    "summarization": Intent.COVERAGE,
    "temporal_reasoning": Intent.TEMPORAL,
}
"""BEAM probing-question type to intent."""


@dataclass(frozen=True)
class LabelledQuestion:
    """A dev question with its dataset category and the intent that category maps to.

    Attributes:
        conversation: Its conversation (the unit of leave-one-out).
        text: The question.
        category: The dataset's own label.
        intent: ``category`` mapped through :data:`LOCOMO_INTENTS` / :data:`BEAM_INTENTS`.
        now: When it is asked, epoch seconds: LoCoMo, right after the last turn; BEAM, the
            day after the last session's date.
    """

    conversation: str
    text: str
    category: str
    intent: Intent
    now: float


def locomo_questions(path: str | Path) -> list[LabelledQuestion]:
    """Every LoCoMo question of ``path``, labelled."""
    return [
        LabelledQuestion(c.name, q.text, q.category, LOCOMO_INTENTS[q.category], c.now)
        for c in load_locomo(path).conversations
        for q in c.questions
    ]


def beam_questions(directory: str | Path) -> list[LabelledQuestion]:
    """Every probing question of a BEAM size folder, abstention included, labelled."""
    root = Path(directory)
    folders = sorted((p for p in root.iterdir() if (p / "chat.json").is_file()), key=_natural)
    if not folders:
        raise InvalidInputError(f"{root}: no BEAM chat folders found")
    out = []
    for folder in folders:
        chat = json.loads((folder / "chat.json").read_text("utf-8"))
        anchors = [
            m["time_anchor"]
            for batch in chat
            for turn in batch.get("turns", [])
            for m in turn
            if m.get("time_anchor")
        ]
        now = max(parse_beam_date(a) for a in anchors) + 86400.0 if anchors else 0.0
        probing = json.loads((folder / "probing_questions.json").read_text("utf-8"))
        name = f"beam-{root.name}-{folder.name}"
        for category, items in probing.items():
            for q in items:
                out.append(
                    LabelledQuestion(
                        name, str(q["question"]), category, BEAM_INTENTS[category], now
                    )
                )
    return out


def _natural(p: Path) -> tuple[int, str]:
    return (int(p.name), "") if p.name.isdigit() else (1 << 30, p.name)
