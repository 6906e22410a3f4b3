"""Namespace snapshots: a loaded namespace's derived state in one blob, loaded in one read.

Loading a namespace from its rows costs work in proportion to its memories: decoding every
row, then building its BM25 postings, recency catalog, entity graph (interning, postings,
co-occurrence edges) and supersession rows, then reading its vectors from Chroma, which an
embedded Chroma serves from its HNSW index (read whole, for the whole store, at the first
such read). Measured on a 1,000-memory namespace of a 10k store, the index building alone
is about 60 % of a cold first query's CPU. A snapshot holds the finished structures
instead: each index exports its namespace as it is (:meth:`BM25Index.export` and friends)
and :func:`capture` pickles them together; :func:`restore` hands them back, after checking
that they agree on the ids. The vectors, as read from Chroma (never as a write sent them:
Chroma may store a vector one float32 ulp off), are a second blob, added once they have been
read.

Snapshots live in the embedded store's sidecar (:mod:`norax_core.snapshot_table`, which
deletes a namespace's snapshot in the transaction of any write to it) and are written when
a namespace leaves memory (eviction, close) or its vectors are first read. They use pickle,
like Chroma's own index metadata in the same folder: whoever can write the store's folder
can already run code through Chroma's files, so this adds no new trust. :func:`layout` names
the format; a snapshot of another layout (other code) is ignored and the namespace loads from
its rows.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import pickle
from typing import Any

from norax_core.sidecar import IndexRow
from norax_core.signals.bm25 import BM25Index, _Partition
from norax_core.signals.entity_graph import STATE_VERSION, EntityGraph, NamespaceGraph
from norax_core.signals.temporal import TemporalSignal, _Namespace
from norax_core.signals.vectors import NamespaceMatrix
from norax_core.supersession import SupersessionIndex, _Space

FORMAT = "2"
"""Bumped when what a snapshot holds changes in a way the attribute names do not show."""


@functools.cache
def layout() -> str:
    """The snapshot format of this code.

    :data:`FORMAT` and the attribute names of every exported structure: a field added
    anywhere makes old snapshots unreadable, not wrong.
    """
    parts = [FORMAT, str(STATE_VERSION), ",".join(f.name for f in dataclasses.fields(IndexRow))]
    for obj in (_Partition(), _Namespace(), NamespaceGraph(), _Space(), NamespaceMatrix()):
        parts.append(f"{type(obj).__qualname__}:{','.join(sorted(vars(obj)))}")
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def capture(
    namespace: str,
    bm25: BM25Index,
    temporal: TemporalSignal,
    graph: EntityGraph,
    supersede: SupersessionIndex,
    nbytes: int,
) -> bytes:
    """The namespace's state in every index, pickled (``nbytes``: its estimated size)."""
    state = {
        "bm25": bm25.export(namespace),
        "temporal": temporal.export(namespace),
        "graph": graph.export(namespace),
        "supersede": supersede.export(namespace),
        "nbytes": nbytes,
    }
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def ids_of(blob: bytes) -> tuple[dict[str, Any], set[str]]:
    """Unpickle a :func:`capture` and check that its indexes hold the same ids.

    Raises:
        ValueError: The blob is not a snapshot, or its indexes disagree.
    """
    try:
        state = pickle.loads(blob)  # noqa: S301 - see the module docstring
    except Exception as exc:  # any unreadable blob: the namespace loads from its rows
        raise ValueError(f"unreadable snapshot: {exc}") from exc
    if not isinstance(state, dict) or not isinstance(state.get("temporal"), tuple):
        raise ValueError("not a namespace snapshot")
    recency = state["temporal"][0]
    if not isinstance(recency, _Namespace):
        raise ValueError("not a namespace snapshot")
    ids = set(recency.slot)
    held = [
        set(state["bm25"].slot_of) if isinstance(state["bm25"], _Partition) else None,
        set(state["graph"][0].slot) if state["graph"] is not None else None,
        set(state["supersede"].rows) if isinstance(state["supersede"], _Space) else None,
    ]
    if any(h != ids for h in held):
        raise ValueError("the snapshot's indexes disagree")
    return state, ids


def restore(
    namespace: str,
    state: dict[str, Any],
    bm25: BM25Index,
    temporal: TemporalSignal,
    graph: EntityGraph,
    supersede: SupersessionIndex,
) -> None:
    """Hand a checked snapshot (:func:`ids_of`) to every index; BM25 first (it may refuse)."""
    bm25.restore(namespace, state["bm25"])
    temporal.restore(namespace, state["temporal"])
    if state["graph"] is not None:
        graph.restore(namespace, state["graph"])
    supersede.restore(namespace, state["supersede"])


def pack_vectors(block: NamespaceMatrix) -> bytes:
    """A namespace's matrix, pickled (the rows in use)."""
    return pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_vectors(blob: bytes, ids: set[str]) -> NamespaceMatrix | None:
    """The matrix of :func:`pack_vectors` if it holds exactly ``ids``, else ``None``."""
    try:
        block = pickle.loads(blob)  # noqa: S301 - see the module docstring
    except Exception:  # noqa: BLE001 - unreadable: read the vectors from Chroma again
        return None
    if not isinstance(block, NamespaceMatrix) or block.stale or set(block.ids) != ids:
        return None
    return block


def pack_rows(rows: list[IndexRow]) -> bytes:
    """A namespace's rows, pickled (a client's sidecar caches them; every field rides along)."""
    return pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_rows(blob: bytes, ids: set[str]) -> list[IndexRow]:
    """The rows of :func:`pack_rows` if they are exactly ``ids``.

    Raises:
        ValueError: The blob is not such rows, or holds other ids.
    """
    try:
        rows = pickle.loads(blob)  # noqa: S301 - see the module docstring
    except Exception as exc:  # any unreadable blob: the namespace loads from Chroma
        raise ValueError(f"unreadable snapshot rows: {exc}") from exc
    if not isinstance(rows, list) or not all(isinstance(r, IndexRow) for r in rows):
        raise ValueError("not snapshot rows")
    if {r.id for r in rows} != ids or len(rows) != len(ids):
        raise ValueError("the snapshot's rows and indexes disagree")
    return rows
