"""Plain-text rendering of search results with their per-signal breakdown."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from norax_core.models import SIGNALS, SearchResult

REASONS = {
    "lane": "lane: a standing {kind} that applies to this request",
    "latest_wins": "latest wins: the newer statement of what the query asks about",
    "supersede": "supersedes an older memory (linked when it was written)",
}
"""The stages a result line explains in words, when they moved it up."""


def reasons(result: SearchResult) -> list[str]:
    """Why a result ranks where it does, in words: the stages that lifted it."""
    if result.explanation is None:
        return []
    moved = result.explanation.to_dict()
    kind = result.inferred_kind or result.kind
    return [text.format(kind=kind) for stage, text in REASONS.items() if moved[stage] > 0]


def format_results(results: Sequence[SearchResult], width: int = 72) -> str:
    """A numbered list: fused score, each signal's score, the text, entities and reasons.

    The kind column shows the kind given at write time and, after a slash, the one the store
    inferred (:mod:`norax_core.kinds`); a ``why:`` line names the ranking stages that lifted
    the result (the lane, latest wins, supersession).
    """
    if not results:
        return "(no results)"
    lines = []
    head = "  ".join(f"{s:>8}" for s in SIGNALS)
    lines.append(f"{'#':>2}  {'score':>6}  {head}  kind / inferred / created")
    for i, r in enumerate(results, start=1):
        sig = "  ".join(f"{r.signals.get(s, 0.0):8.3f}" for s in SIGNALS)
        inferred = r.inferred_kind or "-"
        lines.append(
            f"{i:>2}  {r.score:6.3f}  {sig}  {r.kind} / {inferred} / {r.created_at:%Y-%m-%d}"
        )
        for t in textwrap.wrap(r.text, width) or [""]:
            lines.append(f"    {t}")
        if r.matched_entities:
            lines.append(f"    entities: {', '.join(r.matched_entities)}")
        for why in reasons(r):
            lines.append(f"    why: {why}")
    return "\n".join(lines)
