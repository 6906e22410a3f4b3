"""Namespace snapshots: a loaded namespace's derived state in one blob, loaded in one read.

Loading a namespace from its rows costs work in proportion to its memories: decoding every
row, then building its BM25 postings, recency catalog, entity graph (interning, postings,
co-occurrence edges) and supersession rows, then reading its vectors from Chroma, which an
embedded Chroma serves from its HNSW index (read whole, for the whole store, at the first
such read). Measured on a 1,000-memory namespace of a 10k store, the index building alone
is about 60 % of a cold first query's CPU. A snapshot holds the finished structures
instead: each index exports its namespace as flat arrays (:meth:`_Partition.to_arrays` and
friends) and :func:`capture` packs them together (:mod:`norax_core.snapshot_format`: numpy
arrays, no pickled object graphs); :func:`restore` hands them back, after checking that they
agree on the ids. Restoring builds few Python objects: the ids every index packs alike are
decoded once (:class:`~norax_core.snapshot_format.Strings`), BM25 keeps its postings as
arrays until a write and its vocabulary packed until a use other than a search's, the
supersession rows are built at their first use. The vectors, as read
from Chroma (never as a write sent them: Chroma may store a vector one float32 ulp off), are
a second blob, added once they have been read. The entity graph keeps its postings and
edges as arrays until something other than a search needs them
(:mod:`norax_core.signals.graph_arrays`).

Snapshots live in the embedded store's sidecar (:mod:`norax_core.snapshot_table`, which
deletes a namespace's snapshot in the transaction of any write to it) and are written when
a namespace leaves memory (eviction, close) or its vectors are first read. No object is
unpickled from a sidecar snapshot (a client's rows, :func:`pack_rows`, still are; like
Chroma's own index metadata in the same folder, whoever can write the file can already run
code through Chroma's files). :func:`layout` names the format; a snapshot of another layout
(other code) is ignored and the namespace loads from its rows.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from norax_core import snapshot_format as fmt
from norax_core.lazy_rows import COLUMNS, Rows
from norax_core.sidecar import IndexRow, column
from norax_core.signals import graph_arrays
from norax_core.signals.bm25 import BM25Index, _Partition
from norax_core.signals.entity_graph import STATE_VERSION, EntityGraph, NamespaceGraph
from norax_core.signals.temporal import TemporalSignal, _Namespace
from norax_core.signals.vectors import NamespaceMatrix
from norax_core.supersession import SupersessionIndex, _Space

FORMAT = "4"
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


def _prefixed(prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {f"{prefix}.{k}": v for k, v in arrays.items()}


def _parts(arrays: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """``arrays`` of :func:`_prefixed` names, by prefix (one pass over the names)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for k, v in arrays.items():
        prefix, dot, name = k.partition(".")
        if dot:
            out.setdefault(prefix, {})[name] = v
    return out


def capture(
    namespace: str,
    bm25: BM25Index,
    temporal: TemporalSignal,
    graph: EntityGraph,
    supersede: SupersessionIndex,
    nbytes: int,
) -> bytes:
    """The namespace's state in every index, packed (``nbytes``: its estimated size)."""
    part, recency, space = (
        bm25.export(namespace),
        temporal.export(namespace),
        supersede.export(namespace),
    )
    if not isinstance(recency, tuple) or not isinstance(recency[0], _Namespace):
        raise ValueError(f"namespace {namespace!r} is not loaded")
    meta: dict[str, Any] = {"nbytes": nbytes, "kinds": recency[1]}
    arrays = _prefixed("temporal", recency[0].to_arrays())
    if isinstance(part, _Partition):
        meta["bm25"], got = part.to_arrays()
        arrays.update(_prefixed("bm25", got))
    if isinstance(space, _Space):
        meta["supersede"], got = space.to_arrays()
        arrays.update(_prefixed("supersede", got))
    shape = graph.export(namespace)
    if shape is not None:
        meta["graph"], got = graph_arrays.to_arrays(shape[0])
        meta["graph_saved"] = shape[1]
        arrays.update(_prefixed("graph", got))
    return fmt.pack(meta, arrays)


def ids_of(blob: bytes) -> tuple[dict[str, Any], set[str]]:
    """Read a :func:`capture` and check that its indexes hold the same ids.

    Raises:
        ValueError: The blob is not a snapshot, or its indexes disagree.
    """
    meta, arrays = fmt.unpack(blob)
    strs = fmt.Strings()  # the ids, packed alike by every index, decoded once
    try:
        parts = _parts(arrays)
        recency = _Namespace.from_arrays(parts.get("temporal", {}), strs)
        part = (
            _Partition.from_arrays(meta["bm25"], parts.get("bm25", {}), strs)
            if "bm25" in meta
            else None
        )
        space = (
            _Space.from_arrays(meta["supersede"], parts.get("supersede", {}), strs)
            if "supersede" in meta
            else None
        )
        graph = None
        if "graph" in meta:
            space_graph = graph_arrays.from_arrays(meta["graph"], parts.get("graph", {}), strs)
            saved = meta.get("graph_saved")
            graph = (space_graph, dict(saved) if isinstance(saved, dict) else None)
        kinds = [str(k) for k in meta["kinds"]]
        nbytes = int(meta["nbytes"])
    except Exception as exc:  # any unreadable blob: the namespace loads from its rows
        raise ValueError(f"unreadable snapshot: {exc}") from exc
    if graph is not None and not (
        isinstance(graph, tuple) and isinstance(graph[0], NamespaceGraph)
    ):
        raise ValueError("not a namespace snapshot")
    # the same ids in every index: their id maps' keys compared as sets, none copied
    held = recency.slot.keys()
    ids = set(held)
    if (
        (part is not None and part.slot_of.keys() != held)
        or (graph is not None and graph[0].slot.keys() != held)
        or (space is not None and (len(space.ids()) != len(ids) or set(space.ids()) != ids))
    ):
        raise ValueError("the snapshot's indexes disagree")
    state = {
        "bm25": part,
        "temporal": (recency, kinds),
        "graph": graph,
        "supersede": space,
        "nbytes": nbytes,
        "strings": strs,
    }
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
    """A namespace's matrix as raw float32 rows and their ids."""
    meta, arrays = block.to_arrays()
    return fmt.pack(meta, arrays)


def unpack_vectors(
    blob: bytes | memoryview, ids: set[str], strs: fmt.Strings | None = None
) -> NamespaceMatrix | None:
    """The matrix of :func:`pack_vectors` if it holds exactly ``ids``, else ``None``.

    ``strs``: the string decoder of the state (:func:`ids_of`'s ``"strings"``): ids packed
    in the same order are decoded once.
    """
    try:
        meta, arrays = fmt.unpack(blob)
        block = NamespaceMatrix.from_arrays(meta, arrays, strs)
    except Exception:  # noqa: BLE001 - unreadable: read the vectors from Chroma again
        return None
    if set(block.ids) != ids or len(block.ids) != len(ids):
        return None
    return block


def pack_rows(records: list[tuple[object, ...]]) -> bytes:
    """A namespace's :meth:`~norax_core.sidecar.Sidecar.namespace_records`, pickled.

    Plain tuples of the stored columns (JSON undecoded): a client's sidecar caches them as
    they are, and unpickling builds no objects beyond them.
    """
    return pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_rows(blob: bytes, ids: set[str], namespace: str) -> Sequence[tuple[object, ...]]:
    """The records of :func:`pack_rows` if they are exactly ``ids``, all of ``namespace``.

    Raises:
        ValueError: The blob is not such records, or holds other ids or namespaces.
    """
    try:
        rows = pickle.loads(blob)  # noqa: S301 - see the module docstring
    except Exception as exc:  # any unreadable blob: the namespace loads from Chroma
        raise ValueError(f"unreadable snapshot rows: {exc}") from exc
    return check_rows(rows, ids, namespace)


def check_rows(rows: Any, ids: set[str], namespace: str) -> Sequence[tuple[object, ...]]:
    """``rows`` if they are stored rows of exactly ``ids``, all of ``namespace``.

    Raises:
        ValueError: They are not such rows, or hold other ids or namespaces.
    """
    if not isinstance(rows, (list, Rows)):
        raise ValueError("not snapshot rows")
    if not rows:
        if ids:
            raise ValueError("the snapshot's rows and indexes disagree")
        return rows
    # column by column, in C: tuples of the stored columns, all of the namespace; a
    # published payload's rows are such rows (kept as their columns)
    if not isinstance(rows, Rows) and (
        set(map(type, rows)) != {tuple} or set(map(len, rows)) != {COLUMNS}
    ):
        raise ValueError("not snapshot rows")
    try:
        spaces = set(column(rows, 1))
    except TypeError as exc:  # an unhashable namespace
        raise ValueError("not snapshot rows") from exc
    if len(spaces) != 1 or spaces.pop() != namespace:
        raise ValueError("not snapshot rows")
    try:
        held = set(column(rows, 0))
    except TypeError as exc:
        raise ValueError("the snapshot's rows and indexes disagree") from exc
    if len(rows) != len(ids) or held != ids:
        raise ValueError("the snapshot's rows and indexes disagree")
    return rows
