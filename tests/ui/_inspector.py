"""The inspector's stores: the bundled demo sample, plus a second namespace and a hostile text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from norax_core import NoraxMemory
from norax_core.demo import DEMO_NOW, demo_records, load_demo

__all__ = ["DEMO_NOW", "XSS", "build_store", "demo_records"]

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> & <b>bold</b>'


def build_store(path: Path | None, embedder: Any, extractor: Any) -> NoraxMemory:
    """The demo sample in namespace ``demo``, two memories in ``other`` (one of them markup)."""
    mem = NoraxMemory(path, embedder=embedder, extractor=extractor)
    load_demo(mem)
    mem.add(
        [XSS, "Colby keeps a separate wallet for the other team."],
        ids=["x-1", "x-2"],
        created_at=["2026-11-01T10:00:00Z", "2026-11-02T10:00:00Z"],
        namespace="other",
    )
    return mem
