"""The payload of a published blob (:mod:`norax_core.published`), format 4, and its base64.

``<QQQ`` sizes, then the snapshot's state compacted and zstd-compressed, its float32 vectors
as they are and its rows with their records as JSON columns, zstd-compressed. Compacted:
each integer array of the state (:mod:`norax_core.snapshot_format`) in the smallest integer
type that holds its values, and widened back when read, to the same arrays. Half of a
state's bytes are int64 arrays of small values: the state of a 1k-memory namespace of the
10k scale store is 1.05 MB, 0.51 MB compacted, which zstd (level :data:`_LEVEL`) takes to
0.19 MB and inflates in 0.37 ms, plus 0.35 to widen; its rows are 0.63 MB, 0.13 compressed,
inflated in 0.37 ms. Format 3 used zlib level 1: 0.23 + 0.16 MB, inflated in 1.6 + 1.4 ms,
and compressed in about as much time as zstd level 6 (levels 3 to 6 inflate as fast; 3
compresses in a third of 6's time). The vectors stay as they are (zstd took them to 0.92
of their size, byte-shuffled 0.86, for 1.5 ms more to read). 2.5 MB of base64 in all.

The rows travel as their 11 columns (one JSON list each): read back as the stored rows'
tuples by one ``zip`` (in C; the columns must be of one length), instead of a tuple built
per row from a list per row. Base64 and JSON are read by ``pybase64`` and ``orjson`` (both
chromadb's dependencies: 1 ms instead of 8 for 3.8 MB of base64, a third of json's time for
the rows). The vectors are read in place (their matrix is copied once, by
:meth:`~norax_core.signals.vectors.NamespaceMatrix.from_arrays`). Nothing is unpickled.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import numpy as np
import zstandard

from norax_core import snapshot_format as fmt

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - an older chromadb
    _orjson = json

_b64: Any
try:
    import pybase64 as _b64
except ImportError:  # pragma: no cover - an older chromadb
    _b64 = base64

_HEAD = struct.Struct("<QQQ")
_COLUMNS = 11
"""Columns of a stored row (:data:`norax_core.sidecar._FULL`), the last two its record."""
_LEVEL = 3
"""zstd's level (see the module docstring)."""
_RECORD = frozenset({str, type(None)})
"""The types a record column holds (a document or metadata JSON, or ``None``)."""


def b64encode(payload: bytes) -> str:
    """A payload as base64 text (a metadata string)."""
    return str(_b64.b64encode(payload).decode())


def b64decode(text: str) -> bytes:
    """The bytes of :func:`b64encode`.

    Raises:
        ValueError: Not base64 (``binascii.Error`` is a ``ValueError``).
    """
    return bytes(_b64.b64decode(text, validate=True))


def _loads(raw: bytes) -> Any:
    """``json.loads``, by orjson when it can.

    orjson refuses some of what json reads: a lone surrogate escaped in a memory's text,
    integers of more than 64 bits.
    """
    try:
        return _orjson.loads(raw)
    except ValueError:  # orjson.JSONDecodeError is one
        return json.loads(raw)


def _inflate(frame: memoryview) -> bytes:
    """A zstd frame's bytes; a truncated or damaged frame, or bytes after it, raise."""
    return bytes(zstandard.ZstdDecompressor().decompress(frame, allow_extra_data=False))


def pack(state: bytes, vectors: bytes | None, rows: list[tuple[object, ...]]) -> bytes:
    """One payload of a snapshot's three parts.

    ``state``: a :func:`~norax_core.snapshots.capture` blob. The rows are the sidecar's
    stored rows, with their Chroma records (document and metadata
    JSON, ``null`` where a row holds none): a client that restores the namespace answers its
    searches from them (:mod:`norax_core.store.client_records`) without reading its results
    from Chroma.

    Raises:
        ValueError: A row of fewer than :data:`_COLUMNS` columns.
    """
    if any(len(r) < _COLUMNS for r in rows):
        raise ValueError("rows of another shape")
    columns = [[r[i] for r in rows] for i in range(_COLUMNS)]
    raw_rows = json.dumps(columns, separators=(",", ":")).encode()
    zstd = zstandard.ZstdCompressor(level=_LEVEL)
    z_state, z_rows = zstd.compress(_compact(state)), zstd.compress(raw_rows)
    vec = vectors or b""
    return _HEAD.pack(len(z_state), len(vec), len(z_rows)) + z_state + vec + z_rows


def unpack(payload: bytes) -> tuple[bytes, memoryview | None, list[tuple[object, ...]]]:
    """The parts of :func:`pack`; the rows as a client's sidecar stores them.

    Raises:
        ValueError: The payload is not such parts (rows of another shape included).
    """
    try:
        a, b, c = _HEAD.unpack_from(payload)
        if _HEAD.size + a + b + c != len(payload):
            raise ValueError("lengths disagree")
        view = memoryview(payload)
        state = _widen(_inflate(view[_HEAD.size : _HEAD.size + a]))
        vec = view[_HEAD.size + a : _HEAD.size + a + b]  # no copy: the matrix is one
        out = _rows(_loads(_inflate(view[_HEAD.size + a + b :])))
    except Exception as exc:  # any unreadable blob: the namespace loads from Chroma
        raise ValueError(f"unreadable published snapshot: {exc}") from exc
    return state, vec or None, out


def _rows(columns: Any) -> list[tuple[object, ...]]:
    """The stored rows of :func:`pack`'s columns.

    Raises:
        ValueError: Not :data:`_COLUMNS` lists of one length, or a record column holding
            something other than text or ``None`` (rows of another shape).
    """
    if (
        type(columns) is not list
        or len(columns) != _COLUMNS
        or not all(type(c) is list for c in columns)
        or not set(map(type, columns[-2])) <= _RECORD
        or not set(map(type, columns[-1])) <= _RECORD
    ):
        raise ValueError("rows of another shape")
    try:
        return list(zip(*columns, strict=True))
    except ValueError as exc:  # columns of different lengths
        raise ValueError(f"rows of another shape: {exc}") from exc


_NARROW = [np.dtype(t) for t in ("i1", "u1", "<i2", "<u2", "<i4", "<u4")]


def _narrow(arr: np.ndarray) -> np.ndarray:
    """``arr`` in the smallest integer type that holds its values (itself if none is smaller)."""
    if arr.dtype.kind not in "iu" or arr.dtype.itemsize == 1 or not arr.size:
        return arr
    lo, hi = int(arr.min()), int(arr.max())
    for kind in _NARROW:
        if kind.itemsize >= arr.dtype.itemsize:
            break
        info = np.iinfo(kind)
        if info.min <= lo and hi <= info.max:
            return arr.astype(kind)
    return arr


def _compact(state: bytes) -> bytes:
    """A snapshot blob with its integer arrays narrowed, and their types (for :func:`_widen`)."""
    meta, arrays = fmt.unpack(state)
    narrow = {name: _narrow(arr) for name, arr in arrays.items()}
    wide = {name: arr.dtype.str for name, arr in arrays.items() if narrow[name] is not arr}
    return fmt.pack({"meta": meta, "wide": wide}, narrow)


def _widen(compact: bytes) -> bytes:
    """The snapshot blob of :func:`_compact`: the same meta and arrays."""
    head, arrays = fmt.unpack(compact)
    wide = head["wide"]
    return fmt.pack(
        head["meta"],
        {name: arr.astype(wide[name]) if name in wide else arr for name, arr in arrays.items()},
    )
