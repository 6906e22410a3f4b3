"""The byte form of a namespace snapshot: named numpy arrays and a little JSON, no pickle.

A snapshot (:mod:`norax_core.snapshots`) is read at a namespace's first use, so reading it
must cost little CPU and create few Python objects: every object a load creates is one more
for the garbage collector to scan at its next full collection of the process (spaCy, ONNX and
Chroma objects included). The indexes therefore export their namespace as flat arrays
(postings as CSR arrays, ids as one string and its offsets) and restore from read-only views
of the blob (``numpy.frombuffer``), building dicts and lists only where a search needs
them.

Layout: an 8-byte little-endian header length, the JSON header (``meta`` and, per array, its
name, dtype, shape and offset), then each array's raw bytes at an offset aligned to 8.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

Arrays = dict[str, np.ndarray]

_ALIGN = 8


def pack(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> bytes:
    """``meta`` (JSON values) and ``arrays`` in one blob, for :func:`unpack`."""
    table: list[list[Any]] = []
    chunks: list[bytes] = []
    at = 0
    for name, arr in arrays.items():
        data = np.ascontiguousarray(arr)
        if data.dtype.hasobject:
            raise TypeError(f"array {name!r} holds Python objects")
        raw = data.tobytes()
        table.append([name, data.dtype.str, list(data.shape), at])
        pad = -len(raw) % _ALIGN
        chunks.append(raw + b"\0" * pad)
        at += len(raw) + pad
    header = json.dumps({"meta": dict(meta), "arrays": table}, separators=(",", ":")).encode()
    header += b" " * (-(len(header) + 8) % _ALIGN)
    return b"".join([struct.pack("<Q", len(header)), header, *chunks])


def unpack(blob: bytes | memoryview) -> tuple[dict[str, Any], Arrays]:
    """``(meta, arrays)`` of a :func:`pack` blob; the arrays are read-only views of ``blob``.

    Raises:
        ValueError: The blob is not of this form.
    """
    try:
        (size,) = struct.unpack_from("<Q", blob, 0)
        header = json.loads(bytes(blob[8 : 8 + size]))
        base = 8 + size
        arrays: Arrays = {}
        for name, dtype, shape, at in header["arrays"]:
            kind = _DTYPES.get(dtype)
            if kind is None:
                kind = np.dtype(dtype)
                if kind.hasobject:
                    raise ValueError("an object array")
            count = math.prod(shape)  # 1 for a scalar; Python ints: no numpy call per array
            got = np.frombuffer(blob, dtype=kind, count=count, offset=base + at)
            arrays[name] = got if len(shape) == 1 else got.reshape(shape)
        meta = header["meta"]
    except Exception as exc:  # any malformed blob
        raise ValueError(f"not a snapshot blob: {exc}") from exc
    if not isinstance(meta, dict):
        raise ValueError("not a snapshot blob: no meta")
    return meta, arrays


def pack_strs(items: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as ``(utf-8 bytes, offsets)``, for :func:`unpack_strs`.

    Joined by NUL when none holds one (offsets ``[-1, count]``: the reader splits, in C);
    else the i-th is ``text[offsets[i]:offsets[i + 1]]`` (offsets in characters).
    """
    text = SEP.join(items)
    if text.count(SEP) == max(len(items) - 1, 0):
        return _utf8(text), np.array([-1, len(items)], dtype=np.int64)
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    if items:
        np.cumsum([len(s) for s in items], out=offsets[1:])
    return _utf8("".join(items)), offsets


def unpack_strs(data: np.ndarray, offsets: np.ndarray) -> list[str]:
    """The strings of :func:`pack_strs`.

    Raises:
        ValueError: The offsets do not fit the text.
    """
    packed = joined(data, offsets)
    if packed is not None:
        text, count = packed
        return text.split(SEP) if count else []
    text = data.tobytes().decode("utf-8")
    cuts = offsets.tolist()
    if not cuts or cuts[0] != 0 or cuts[-1] != len(text):
        raise ValueError("string offsets do not fit their text")
    return [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


def joined(data: np.ndarray, offsets: np.ndarray) -> tuple[str, int] | None:
    """``(text, count)`` of :func:`pack_strs`'s strings when it joined them by :data:`SEP`.

    ``None`` when it gave offsets instead. A reader may keep the text whole and split it
    later (``text.split(SEP)`` when ``count``, else no strings).

    Raises:
        ValueError: The count does not fit the text.
    """
    cuts = offsets.tolist()
    if len(cuts) != 2 or cuts[0] != -1:
        return None
    text, count = data.tobytes().decode("utf-8"), cuts[1]
    if count and text.count(SEP) != count - 1:
        raise ValueError("string count does not fit its text")
    return text, count


class Strings:
    """:func:`unpack_strs` for the arrays of one snapshot, decoding alike lists once.

    The indexes of a snapshot each pack their namespace's ids, usually in the same order,
    byte for byte: the first decoding serves the others (each gets its own list; the
    strings are shared), as does the position map :meth:`positions` builds.
    """

    def __init__(self) -> None:
        self._seen: list[tuple[bytes, bytes, list[str]]] = []
        self._maps: dict[int, dict[str, int]] = {}

    def _find(self, data: np.ndarray, offsets: np.ndarray) -> list[str]:
        raw_o = offsets.tobytes()
        for s, o, got in self._seen:
            if o == raw_o and len(s) == data.nbytes and s == data.tobytes():
                return got
        got = unpack_strs(data, offsets)
        self._seen.append((data.tobytes(), raw_o, got))
        return got

    def __call__(self, data: np.ndarray, offsets: np.ndarray) -> list[str]:
        """The strings of :func:`pack_strs`, a new list.

        Raises:
            ValueError: The offsets do not fit the text.
        """
        return list(self._find(data, offsets))

    def positions(self, data: np.ndarray, offsets: np.ndarray) -> tuple[list[str], dict[str, int]]:
        """The strings (a new list) and a new ``dict(zip(strings, range(len(strings))))``.

        Raises:
            ValueError: The offsets do not fit the text.
        """
        got = self._find(data, offsets)
        pos = self._maps.get(id(got))
        if pos is None:
            pos = self._maps[id(got)] = dict(zip(got, range(len(got)), strict=True))
        return list(got), pos.copy()


SEP = "\0"
"""Between the strings :func:`pack_strs` joins."""
_DTYPES = {d.str: d for d in map(np.dtype, ("<i8", "<i4", "<f8", "<f4", "|u1", "|b1"))}
"""The dtypes snapshots hold, by their ``str`` (no parsing per array)."""


def _utf8(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
