"""Plain-text rendering of search results with their per-signal breakdown."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from norax_core.models import SIGNALS, SearchResult


def format_results(results: Sequence[SearchResult], width: int = 72) -> str:
    """A numbered list: fused score, each signal's score, the text and matched entities."""
    if not results:
        return "(no results)"
    lines = []
    head = "  ".join(f"{s:>8}" for s in SIGNALS)
    lines.append(f"{'#':>2}  {'score':>6}  {head}  kind / created")
    for i, r in enumerate(results, start=1):
        sig = "  ".join(f"{r.signals.get(s, 0.0):8.3f}" for s in SIGNALS)
        lines.append(f"{i:>2}  {r.score:6.3f}  {sig}  {r.kind} / {r.created_at:%Y-%m-%d}")
        for t in textwrap.wrap(r.text, width) or [""]:
            lines.append(f"    {t}")
        if r.matched_entities:
            lines.append(f"    entities: {', '.join(r.matched_entities)}")
    return "\n".join(lines)
