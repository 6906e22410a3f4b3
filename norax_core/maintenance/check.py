"""The consistency check and repair behind ``norax check [--repair]``.

Chroma holds the truth; the sidecar rows and the in-memory BM25, temporal, graph and id
catalog indexes are derived from it. :func:`check_store` compares them, namespace by
namespace: the ids every source holds, and (``deep``) whether each sidecar row still
matches what Chroma's record derives (namespace, kind, time, tokens, entities, write
sequence number).
:func:`repair_store` re-derives what disagrees. Both run on the memory's
:class:`~norax_core.store.Store` (:mod:`norax_core.store.consistency`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from norax_core.store import consistency
from norax_core.store.consistency import SOURCES, CheckReport, NamespaceCheck, RepairReport

if TYPE_CHECKING:
    from norax_core.engine import NoraxMemory

__all__ = [
    "SOURCES",
    "CheckReport",
    "NamespaceCheck",
    "RepairReport",
    "check_store",
    "repair_store",
]


def check_store(memory: NoraxMemory, *, deep: bool = True) -> CheckReport:
    """:func:`norax_core.store.consistency.check` on ``memory``'s store (the public entry)."""
    return consistency.check(memory.store, deep=deep)


def repair_store(memory: NoraxMemory) -> RepairReport:
    """:func:`norax_core.store.consistency.repair` on ``memory``'s store (the public entry)."""
    return consistency.repair(memory.store)
