"""The inspector's stores: the bundled demo sample, plus a second namespace and a hostile text."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from norax_core import NoraxMemory

DEMO_NOW = "2026-11-29T12:00:00Z"
XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> & <b>bold</b>'


def demo_records() -> list[dict[str, Any]]:
    text = (resources.files("norax_core") / "data" / "demo_memories.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def build_store(path: Path | None, embedder: Any, extractor: Any) -> NoraxMemory:
    """The demo sample in namespace ``demo``, two memories in ``other`` (one of them markup)."""
    mem = NoraxMemory(path, embedder=embedder, extractor=extractor)
    records = demo_records()
    mem.upsert(
        [r["text"] for r in records],
        ids=[r["id"] for r in records],
        kind=[r.get("kind") for r in records],
        created_at=[r["created_at"] for r in records],
        namespace="demo",
        metadata=[r["metadata"] for r in records],
    )
    mem.add(
        [XSS, "Colby keeps a separate wallet for the other team."],
        ids=["x-1", "x-2"],
        created_at=["2026-11-01T10:00:00Z", "2026-11-02T10:00:00Z"],
        namespace="other",
    )
    return mem
