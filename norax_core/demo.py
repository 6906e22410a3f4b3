"""``norax demo``: build a small store from the bundled sample and show ranked results."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from norax_core.display import format_results

if TYPE_CHECKING:
    from norax_core.engine import NoraxMemory

DEMO_NOW = "2026-11-29T12:00:00Z"
DEMO_QUERIES = (
    "What did we decide about the wallet?",
    "How do I run the TypeORM migrations?",
    "When is the weekly sync?",
    "What was I debugging in the tests?",
    "Add a last_login column to the user_profiles table with a migration.",
)


def demo_records() -> list[dict[str, Any]]:
    """The bundled sample, one record a memory (id, text, kind, created_at, metadata)."""
    lines = (resources.files("norax_core") / "data" / "demo_memories.jsonl").read_text()
    return [json.loads(line) for line in lines.splitlines() if line.strip()]


def load_demo(mem: NoraxMemory, namespace: str = "demo") -> int:
    """Upsert the sample into ``mem``'s ``namespace``; returns how many memories it holds."""
    records = demo_records()
    mem.upsert(
        [r["text"] for r in records],
        ids=[r["id"] for r in records],
        kind=[r.get("kind") for r in records],  # none given: the store infers it
        created_at=[r["created_at"] for r in records],
        namespace=namespace,
        metadata=[r["metadata"] for r in records],
    )
    return len(records)


def run_demo(store: Path) -> int:
    """Upsert the sample into ``store`` (namespace ``demo``) and print a few searches."""
    from norax_core.engine import NoraxMemory

    print(
        f"Building the demo store in {store} ({len(demo_records())} memories, namespace 'demo') ..."
    )
    with NoraxMemory(store) as mem:
        load_demo(mem)
        print(f"Store holds {mem.count('demo')} demo memories. Clock: {DEMO_NOW}\n")
        for q in DEMO_QUERIES:
            print(f"Query: {q}")
            print(format_results(mem.search(q, k=3, namespace="demo", now=DEMO_NOW)))
            print()
    return 0
