"""The payload of a published blob (:mod:`norax_core.published`), format 2, and its base64.

``<QQQ`` sizes, then the snapshot's state zlib-compressed, its float32 vectors as they are
(zlib took them to 0.93 of their size only) and its rows with their records as JSON,
zlib-compressed: a 1k-memory namespace of the 10k scale store has 1.05 MB of state and
0.63 MB of rows, which become 0.27 and 0.16 MB; 2.6 MB of base64 in all, against 3.8 in
format 1 (whose rows held no records). Base64 and JSON are read by ``pybase64`` and
``orjson`` (both chromadb's dependencies: 1 ms instead of 8 for 3.8 MB of base64, a third
of json's time for the rows). Nothing is unpickled.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

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
_LEVEL = 1
"""zlib's level: 1 compresses the state to 0.26 (6: 0.23) in a fifth of the time."""


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


def pack(state: bytes, vectors: bytes | None, rows: list[tuple[object, ...]]) -> bytes:
    """One payload of a snapshot's three parts.

    The rows are the sidecar's stored rows, with their Chroma records (document and metadata
    JSON, ``null`` where a row holds none): a client that restores the namespace answers its
    searches from them (:mod:`norax_core.store.client_records`) without reading its results
    from Chroma.
    """
    raw_rows = json.dumps([list(r[:_COLUMNS]) for r in rows], separators=(",", ":")).encode()
    z_state, z_rows = zlib.compress(state, _LEVEL), zlib.compress(raw_rows, _LEVEL)
    vec = vectors or b""
    return _HEAD.pack(len(z_state), len(vec), len(z_rows)) + z_state + vec + z_rows


def unpack(payload: bytes) -> tuple[bytes, bytes | None, list[tuple[object, ...]]]:
    """The parts of :func:`pack`; the rows as a client's sidecar stores them.

    Raises:
        ValueError: The payload is not such parts.
    """
    try:
        a, b, c = _HEAD.unpack_from(payload)
        if _HEAD.size + a + b + c != len(payload):
            raise ValueError("lengths disagree")
        view = memoryview(payload)
        state = zlib.decompress(view[_HEAD.size : _HEAD.size + a])
        vec = payload[_HEAD.size + a : _HEAD.size + a + b]
        rows = _loads(zlib.decompress(view[_HEAD.size + a + b :]))
        out = [tuple(r) for r in rows]
        if not all(len(r) == _COLUMNS and _record(r[9]) and _record(r[10]) for r in out):
            raise ValueError("rows of another shape")
    except Exception as exc:  # any unreadable blob: the namespace loads from Chroma
        raise ValueError(f"unreadable published snapshot: {exc}") from exc
    return state, vec or None, out


def _record(value: object) -> bool:
    return value is None or type(value) is str
