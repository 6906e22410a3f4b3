"""The payload of a published blob (:mod:`norax_core.published`), format 5, and its base64.

``<QQQ`` sizes, then the snapshot's float32 vectors as they are, its state zstd-compressed and
its rows (:func:`_pack_rows`) zstd-compressed. Measured on a 1k-memory namespace of the 10k
scale store (cold: each of 4 namespaces read once in a fresh client process, as a first
query reads it): its state is 1.05 MB, 0.21 MB compressed at level :data:`_LEVEL`, read in
1.1 ms; its rows 0.52 MB, 0.13 compressed, read in 1.7 ms (JSON rows read into tuples:
1.9; JSON columns zipped: 2.2). 2.5 MB of base64 in all. Format 3 used zlib level 1 (the
state and rows inflated in 1.6 + 1.4 ms, warm) over a state whose integer arrays were
narrowed and widened back when read: 0.19 MB at level 3, but 0.4 ms more to read cold than
the state inflated as it is. Levels 3 to 6 inflate as fast; 3 compresses in 2.7 + 1.7 ms,
6 in 12 + 5 (zlib level 1: 9). The vectors stay as they are (zstd took them to 0.92 of
their size, byte-shuffled 0.86, for 1.5 ms more to read). Base64 and JSON are read by
``pybase64`` and ``orjson`` (both chromadb's dependencies: 1 ms instead of 8 for 3.8 MB of
base64, a third of json's time). Nothing is unpickled.

Format 5 puts the vectors first, at :data:`VECTORS_AT`: their matrix stays a view of the
payload (:meth:`~norax_core.signals.vectors.NamespaceMatrix.from_arrays`). Format 4 put them
after the state, at an offset none of the four namespaces had aligned: 1.5 MB copied each
(0.16-0.24 ms, now 0.08 with the ids). It also keys the rows' text columns of few values
(namespace, kind, role, inferred kind: a byte per row), whose rows then share a string each,
and :func:`unpack`'s rows keep their columns (:class:`Rows`) for the restore's checks and sums.
Cold, as above (load 2): the rows read in 1.7-1.75 ms
instead of 1.8-1.9, with 220 minor page faults instead of 260 (the rows' strings and tuples,
about 1 MB: their objects, not the reading, cost most of that time); the restore
(:meth:`~norax_core.indexes.DerivedIndexes._restore_client`) 1.7 ms instead of 2.0-2.3.
Since then the rows are not made at all (:mod:`norax_core.lazy_rows`): :class:`Rows` keeps
the columns, its large text columns (tokens, entities, document, metadata: 0.48 MB of the
0.52) joined and checked, a row or a record built when read. Cold, as above (load 2-4): the
rows read in 0.55-0.77 ms with 30-45 minor page faults instead of 1.5-2.6 ms (3.8 once) with
235-470; a client's first query on each namespace 0.5-1 ms less CPU.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
from typing import Any

import zstandard

from norax_core.lazy_rows import COLUMNS, Rows, _Joined

__all__ = ["VECTORS_AT", "Rows", "b64decode", "b64encode", "pack", "unpack"]

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
VECTORS_AT = _HEAD.size
"""Where the vectors start in a payload: 24, a multiple of 8 (a ``bytes``' data is aligned
to 16), so that every array of their :func:`~norax_core.snapshots.pack_vectors` blob, each
aligned to 8 in it, is aligned in the payload too."""
_SIZE = struct.Struct("<Q")
_LEVEL = 3
"""zstd's level (see the module docstring)."""
_TEXT, _JSON, _KEYED = "t", "j", "k"
"""How a column of the rows travels: its texts joined by NUL, a JSON list, or keyed: a byte
per row, the index of its text among the column's distinct texts (joined by NUL after them),
for a column of at most :data:`_KEYS` distinct texts (a namespace, a kind, a role)."""
_KEYS = 256
_RECORD = frozenset({str, type(None)})
"""The types a record column holds (a document or metadata JSON, or ``None``)."""
_LAZY = frozenset({4, 5, 9, 10})
"""The text columns kept as UTF-8 until read (tokens, entities, document, metadata): a
restore reads none of them, a search its results' records (:mod:`norax_core.lazy_rows`)."""
_local = threading.local()


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
    """A zstd frame's bytes; a truncated or damaged frame, or bytes after it, raise.

    One decompressor per thread (one is not for concurrent use; making one costs 30 us).
    """
    zstd = getattr(_local, "zstd", None)
    if zstd is None:
        zstd = _local.zstd = zstandard.ZstdDecompressor()
    return bytes(zstd.decompress(frame, allow_extra_data=False))


def pack(state: bytes, vectors: bytes | None, rows: list[tuple[object, ...]]) -> bytes:
    """One payload of a snapshot's three parts.

    ``state``: a :func:`~norax_core.snapshots.capture` blob. The rows are the sidecar's
    stored rows, with their Chroma records (document and metadata
    JSON, ``None`` where a row holds none): a client that restores the namespace answers its
    searches from them (:mod:`norax_core.store.client_records`) without reading its results
    from Chroma. The vectors come first, right after the 24-byte head: at an offset aligned
    to 8, their matrix stays a view of the payload (:func:`unpack`).

    Raises:
        ValueError: A row of fewer than :data:`COLUMNS` columns.
    """
    zstd = zstandard.ZstdCompressor(level=_LEVEL)
    z_state, z_rows = zstd.compress(state), zstd.compress(_pack_rows(rows))
    vec = vectors or b""
    return _HEAD.pack(len(vec), len(z_state), len(z_rows)) + vec + z_state + z_rows


def unpack(payload: bytes | bytearray | memoryview) -> tuple[bytes, memoryview | None, Rows]:
    """The parts of :func:`pack`; the rows as a client's sidecar stores them.

    The vectors are a view of ``payload`` at offset :data:`VECTORS_AT` when it is ``bytes``
    (immutable: their matrix keeps it, see
    :meth:`~norax_core.signals.vectors.NamespaceMatrix.from_arrays`), else of a copy (a
    buffer its caller may reuse or change).

    Raises:
        ValueError: The payload is not such parts (rows of another shape included).
    """
    try:
        b, a, c = _HEAD.unpack_from(payload)
        if VECTORS_AT + a + b + c != len(payload):
            raise ValueError("lengths disagree")
        view = memoryview(payload)
        vec = view[VECTORS_AT : VECTORS_AT + b]  # no copy: aligned, the matrix is a view
        if type(payload) is not bytes:
            vec = memoryview(bytes(vec))
        state = _inflate(view[VECTORS_AT + b : VECTORS_AT + b + a])
        rows = _unpack_rows(_inflate(view[VECTORS_AT + b + a :]))
    except Exception as exc:  # any unreadable blob: the namespace loads from Chroma
        raise ValueError(f"unreadable published snapshot: {exc}") from exc
    return state, vec or None, rows


def _pack_rows(rows: list[tuple[object, ...]]) -> bytes:
    """The rows column by column, for :func:`_unpack_rows`.

    A ``<Q`` size, a JSON head (the row count, each column's form and size), then each
    column: keyed when it holds only text (without NUL or lone surrogate) of at most
    :data:`_KEYS` distinct values, at most one per two rows; else its texts joined by NUL
    when it holds only such text; else a JSON list (numbers, ``None``). Read back as
    columns (:class:`Rows`): the small text columns split in C, a keyed column's rows
    sharing its few strings, the large ones (:data:`_LAZY`) kept joined until read.
    """
    if any(len(r) < COLUMNS for r in rows):
        raise ValueError("rows of another shape")
    columns, bodies = [], []
    for i in range(COLUMNS):
        column = [r[i] for r in rows]
        text = _joined(column)
        keys = list(dict.fromkeys(column)) if text is not None else []
        if text is not None and 0 < len(keys) <= min(_KEYS, len(column) // 2):
            at = {k: j for j, k in enumerate(keys)}
            form, body = _KEYED, bytes(map(at.__getitem__, column)) + _joined(keys)  # type: ignore[operator]
        elif text is not None:
            form, body = _TEXT, text
        else:
            form, body = _JSON, json.dumps(column, separators=(",", ":")).encode()
        columns.append([form, len(body)])
        bodies.append(body)
    head = json.dumps({"n": len(rows), "columns": columns}, separators=(",", ":")).encode()
    return b"".join([_SIZE.pack(len(head)), head, *bodies])


def _joined(column: list[object]) -> bytes | None:
    """A column's texts joined by NUL in UTF-8, if it holds only texts that can be."""
    if not set(map(type, column)) <= {str}:
        return None
    text = "\0".join(column)  # type: ignore[arg-type]  # all str, checked above
    if text.count("\0") != max(len(column) - 1, 0):
        return None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None


def _unpack_rows(raw: bytes) -> Rows:
    """The rows of :func:`_pack_rows`, as their columns (:class:`Rows`).

    The text columns of :data:`_LAZY` stay UTF-8 (checked: one text per row, valid UTF-8)
    until read.

    Raises:
        ValueError: Not :data:`COLUMNS` columns of the stated row count, or a record
            column holding something other than text or ``None`` (rows of another shape).
    """
    (size,) = _SIZE.unpack_from(raw)
    head = json.loads(raw[_SIZE.size : _SIZE.size + size])
    if type(head) is not dict:
        raise ValueError("rows of another shape")
    n, forms = head.get("n"), head.get("columns")
    if type(n) is not int or n < 0 or type(forms) is not list or len(forms) != COLUMNS:
        raise ValueError("rows of another shape")
    view, at, columns = memoryview(raw), _SIZE.size + size, []
    for i, (form, length) in enumerate(forms):
        if type(length) is not int or length < 0 or at + length > len(raw):
            raise ValueError("lengths disagree")
        column: Any
        if form == _TEXT and i in _LAZY:  # read when read (checked now)
            column = _Joined(raw, at, length, n)
        elif form == _TEXT:
            text = str(view[at : at + length], "utf-8")
            column = text.split("\0") if text or n else []
        elif form == _KEYED:
            if length < n:  # a byte per row, then the keys
                raise ValueError("rows of another shape")
            keys = str(view[at + n : at + length], "utf-8").split("\0")
            if len(keys) > _KEYS:
                raise ValueError("rows of another shape")
            # an index past the keys is an IndexError: unreadable
            column = list(map(keys.__getitem__, raw[at : at + n]))
        elif form == _JSON:
            column = _loads(raw[at : at + length])
        else:
            raise ValueError(f"a column of unknown form {form!r}")
        if type(column) is not _Joined and (type(column) is not list or len(column) != n):
            raise ValueError("rows of another shape")
        columns.append(column)
        at += length
    if at != len(raw):
        raise ValueError("lengths disagree")
    for c in columns[-2:]:  # a record column: texts, or JSON of texts and None
        if type(c) is list and not set(map(type, c)) <= _RECORD:
            raise ValueError("rows of another shape")
    return Rows.from_columns(n, columns)
