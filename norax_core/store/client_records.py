"""A client's search results, read from the records its sidecar holds for loaded namespaces.

A client of a Chroma server caches the rows of the namespaces it has loaded in an in-memory
sidecar (:class:`~norax_core.indexes.DerivedIndexes`), kept as current as the loaded indexes:
its own writes, the writes it pulls from the change log (:mod:`norax_core.sync`), a
reconcile, and the namespace's eviction or reload all replace or drop them. A namespace
restored from a snapshot keeps its rows as the snapshot gave them until SQL needs them
(:meth:`~norax_core.sidecar.Sidecar.cache`); :meth:`~norax_core.sidecar.Sidecar.records`
reads them there. Each row holds
the memory's record (document, metadata) when the row came from Chroma, so a search reads
its results there rather than from Chroma: records are exactly as current as the indexes
that ranked them, and their bytes are charged to the index budget.

A namespace loaded from a snapshot (the shared file or a published blob) comes with the
records its publisher's rows held; rows without one (a client's own write holds none until
a pull or reconcile reads it, and a snapshot made before records were kept) lack them. Its
searches that need some read them from Chroma by id, as before, until they have made as
many reads as reading every record its rows lack takes (:func:`fill`, by id, 256 a
``get``: 4 reads, about 35 ms, for 1,000 memories over ``chroma run``; at least one); the
next one fills them, and the namespace stops asking Chroma. Rent, then buy: a namespace
searched a few times per load never spends more than about twice what it did before, one
searched often stops paying.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from norax_core.models import DEFAULT_NAMESPACE, Memory
from norax_core.sidecar import record_json
from norax_core.signals.dense import NAMESPACE_KEY

Decode = Callable[[str, str | None, dict[str, Any]], Memory]
"""Builds a memory from a record (id, document, metadata)."""

FILL_MAX = 4_096
"""A namespace whose rows lack more records than this is not filled (about 0.15 s of reads
in one search, and memory its budget may not have): its searches read their results by id."""
FILL_IDS = 256
"""Records per ``get`` of :func:`fill` (as a client reads a namespace's rows,
:data:`~norax_core.store.chroma.ROWS_PER_GET`)."""


def client_records(
    collection: Any,
    indexes: Any,
    lock: Any,
    ids: Sequence[str],
    namespace: str,
    decode: Decode,
) -> tuple[dict[str, Memory], bool]:
    """The records of ``ids`` in ``namespace`` and whether they may be kept between searches.

    From the sidecar's rows where they hold one, else from Chroma (after a :func:`fill` if
    the namespace is due one). ``decode(id, document, metadata)`` builds a memory from a
    record. ``lock``: the store's, held to look at the loaded indexes. Nothing is kept
    unless the namespace was loaded at the start (an eviction since counts as a write for
    the caller's :meth:`~norax_core.sidecar.Sidecar.kept_records`).
    """
    sidecar = indexes.sidecar
    with lock:
        keep = indexes.holds(namespace)
    out: dict[str, Memory] = {}
    if keep:
        out = held(sidecar, ids, decode)
        rest = [m for m in ids if m not in out]
        if rest and fill(collection, indexes, lock, namespace, missed=True):
            out |= held(sidecar, rest, decode)
    rest = [m for m in ids if m not in out]
    if rest:
        got = collection.get(ids=rest, include=["documents", "metadatas"])
        out |= {
            mid: decode(mid, doc, dict(meta or {}))
            for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        }
    return out, keep


def held(sidecar: Any, ids: Sequence[str], decode: Decode) -> dict[str, Memory]:
    """The memories of ``ids`` whose record (document, metadata JSON) ``sidecar`` holds."""
    return {m: decode(m, d, json.loads(j)) for m, (d, j) in sidecar.records(ids).items()}


def fill(collection: Any, indexes: Any, lock: Any, namespace: str, missed: bool = False) -> int:
    """Read the records loaded ``namespace``'s rows lack from Chroma into them.

    ``missed``: for a search that found some of its results without a record; it counts it
    in ``indexes.record_reads`` and fills only once the namespace's earlier such searches
    (since it loaded) are at least as many as the fill's ``get`` calls (one at least).
    Not if they lack more than :data:`FILL_MAX`; else by id, :data:`FILL_IDS` a ``get``, so
    that one decoded response stays small whatever the namespace's size. A part is not
    filled if any row changed during its read (:meth:`~norax_core.sidecar.Sidecar.fill_records`)
    or the namespace was evicted, and a record that names another namespace (moved by another
    process, not pulled yet) is left out: a record is never older than the row it joins.
    Returns the bytes filled (charged to the index budget).
    """
    sidecar = indexes.sidecar
    with lock:
        if not indexes.holds(namespace):
            return 0
        lacking = sidecar.lacking_records(namespace)
        reads = indexes.record_reads.get(namespace, 0)
        if missed:
            indexes.record_reads[namespace] = reads + 1
    parts = -(-len(lacking) // FILL_IDS)
    if not lacking or len(lacking) > FILL_MAX or (missed and reads < max(parts, 1)):
        return 0
    filled = 0
    for s in range(0, len(lacking), FILL_IDS):
        with lock:
            if not indexes.holds(namespace):
                return filled
            writes = sidecar.writes
        got = collection.get(ids=lacking[s : s + FILL_IDS], include=["documents", "metadatas"])
        records = {
            mid: (doc or "", record_json(meta))
            for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
            if meta is not None and meta.get(NAMESPACE_KEY, DEFAULT_NAMESPACE) == namespace
        }
        del got
        with lock:
            if not indexes.holds(namespace):
                return filled
            part = int(sidecar.fill_records(namespace, records, writes))
            indexes.records_kept(namespace, part)
        filled += part
    return filled
