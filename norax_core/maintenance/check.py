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
    """Compare Chroma with every derived index of ``memory``.

    Runs under the store's lock, so it sees one consistent state (writes wait). The cost is
    one pass over Chroma (plus re-tokenising every document when ``deep``).

    Args:
        memory: An open store.
        deep: Also compare each sidecar row's namespace, kind, time, tokens and entities
            (and write sequence number) with what Chroma's record derives; otherwise compare
            ids only.

    Returns:
        The report; ``report.ok`` tells whether everything agrees.
    """
    return consistency.check(memory.store, deep=deep)


def repair_store(memory: NoraxMemory) -> RepairReport:
    """Make every derived index agree with Chroma again, re-deriving only what disagrees.

    Sidecar rows that are missing, stale, extra or pending are fixed from Chroma's records;
    if any in-memory index disagreed, the in-memory indexes are rebuilt from the repaired
    sidecar (graph communities are kept when the graph is unchanged).

    Returns:
        What was found and done.

    Raises:
        IndexInconsistentError: The store still disagrees after the repair.
    """
    return consistency.repair(memory.store)
