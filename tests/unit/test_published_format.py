"""The published blob's payload (norax_core/published.py, format 4): state compacted, state
and rows (as columns) zstd-compressed, vectors as they are, any damage a ValueError."""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest
import zstandard

from norax_core import published, published_payload
from norax_core import snapshot_format as fmt

_ROW = ("m1", "ns", "text", 1.0, 2.0, "stated", "user", 3, "{}", "The text.", '{"k":1}')


def _state(n: int = 2000) -> bytes:
    """A snapshot blob (:mod:`norax_core.snapshot_format`) with int64 arrays of small values."""
    arrays = {
        "small": np.arange(n, dtype=np.int64) % 100,
        "wide": np.array([-(2**40), 3], dtype=np.int64),
        "floats": np.linspace(0.0, 1.0, n),
        "strs": np.frombuffer(b"state " * n, dtype=np.uint8),
        "empty": np.zeros(0, dtype=np.int64),
        "pairs": (np.arange(2 * n, dtype=np.int32) % 7).reshape(n, 2),
    }
    return fmt.pack({"k": [1, "x"]}, arrays)


def _parts() -> tuple[bytes, bytes, list[tuple[object, ...]]]:
    state = _state()  # compressible, as a snapshot's arrays are
    vectors = np.random.default_rng(0).standard_normal(3 * 384).astype(np.float32).tobytes()
    return state, vectors, [_ROW, ("m2", *_ROW[1:9], None, None)]  # m2 holds no record


def test_pack_round_trips_and_compresses_the_state_and_rows_not_the_vectors() -> None:
    state, vectors, rows = _parts()
    payload = published.pack(state, vectors, rows)
    a, b, c = struct.unpack_from("<QQQ", payload)
    assert a < len(state) // 5 and b == len(vectors)
    assert payload[24 + a : 24 + a + b] == vectors  # the float32 bytes, untouched
    got_state, got_vectors, got_rows = published.unpack(payload)
    assert got_state == state and got_vectors == vectors
    assert got_rows == rows  # the records too, None where a row holds none
    assert published.unpack(published.pack(state, None, rows))[1] is None


def _with_rows(state: bytes, rows_json: object) -> bytes:
    """A payload of ``state`` whose rows part is ``rows_json``, as :func:`published.pack`
    would write it whatever its shape."""
    zstd = zstandard.ZstdCompressor()
    z_state = zstd.compress(published_payload._compact(state))
    z_rows = zstd.compress(json.dumps(rows_json).encode())
    return struct.pack("<QQQ", len(z_state), 0, len(z_rows)) + z_state + z_rows


def _columns(rows: list[tuple[object, ...]]) -> list[list[object]]:
    return [list(c) for c in zip(*rows, strict=True)]


def test_the_rows_travel_as_columns() -> None:
    rows = [_ROW, ("m2", *_ROW[1:9], None, None)]
    payload = published.pack(_state(3), None, rows)
    a, _, c = struct.unpack_from("<QQQ", payload)
    raw = zstandard.ZstdDecompressor().decompress(payload[24 + a :])
    assert json.loads(raw) == _columns(rows)
    assert published.unpack(_with_rows(_state(3), _columns(rows)))[2] == rows


@pytest.mark.parametrize(
    "columns",
    [
        _columns([_ROW[:9], _ROW[:9]]),  # no record columns
        _columns([_ROW, _ROW])[:10],
        [*_columns([_ROW, _ROW]), ["x", "y"]],  # 12 columns
        [*_columns([_ROW, _ROW])[:10], ["{}"]],  # a column shorter than the others
        [*_columns([_ROW, _ROW])[:3], ["x"], *_columns([_ROW, _ROW])[4:]],
        _columns([_ROW, (*_ROW[:9], 7, "{}")]),  # a document not text
        _columns([_ROW, (*_ROW[:9], "text", ["not", "json text"])]),  # metadata not text
        [*_columns([_ROW])[:10], {"a": 1}],  # a column not a list
        {"rows": _columns([_ROW])},
        [_ROW] * 11,  # format 3's rows (row by row), 11 of them
        [list(_ROW)] * 3,
        [],
    ],
    ids=[
        "no record columns",
        "10 columns",
        "12 columns",
        "a short last column",
        "a short column",
        "a document not text",
        "metadata not text",
        "a column not a list",
        "not a list",
        "11 rows by row",
        "3 rows by row",
        "nothing",
    ],
)
def test_rows_of_another_shape_are_a_value_error(columns: object) -> None:
    with pytest.raises(ValueError, match="another shape"):
        published.unpack(_with_rows(_state(3), columns))


def test_packing_rows_of_fewer_columns_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="another shape"):
        published.pack(_state(3), None, [_ROW, _ROW[:9]])
    assert published.unpack(published.pack(_state(3), None, []))[2] == []


def test_a_corrupt_compressed_state_or_rows_is_a_value_error() -> None:
    state, vectors, rows = _parts()
    payload = bytearray(published.pack(state, vectors, rows))
    a, b, c = struct.unpack_from("<QQQ", payload)
    broken = bytes(payload[: 24 + a // 2]) + bytes(a - a // 2) + bytes(payload[24 + a :])
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(broken)
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(bytes(payload[:-3]) + b"xyz")  # the rows' stream
    cut = bytes(payload[24 : 24 + a - 9])  # a truncated state frame, its sizes made to fit
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(struct.pack("<QQQ", len(cut), b, c) + cut + bytes(payload[24 + a :]))
    extra = bytes(payload[24 + a + b :]) + b"\0\0"  # bytes after the rows' frame
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(struct.pack("<QQQ", a, b, c + 2) + bytes(payload[24 : 24 + a + b]) + extra)
    with pytest.raises(ValueError, match="unreadable"):  # format 1's uncompressed payload
        published.unpack(struct.pack("<QQQ", len(state), 0, 2) + state + b"[]")
    z_state = zlib.compress(state)  # format 2's state: not compacted
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(struct.pack("<QQQ", len(z_state), 0, 0) + z_state)


def test_format_3s_payload_is_a_value_error() -> None:
    """zlib, rows row by row: what main wrote before format 4 (never read: other settings)."""
    state, vectors, rows = _parts()
    z_state = zlib.compress(published_payload._compact(state), 1)
    z_rows = zlib.compress(json.dumps([list(r) for r in rows]).encode(), 1)
    old = struct.pack("<QQQ", len(z_state), len(vectors), len(z_rows)) + z_state + vectors + z_rows
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(old)


def test_the_format_is_in_the_settings() -> None:
    now = published.settings("id", 1, {"t": 1})
    assert now.startswith(f"{published.VERSION}-")  # benchmarks/scale_store.published_count
    old = published.VERSION
    try:
        published.VERSION = "1"
        assert published.settings("id", 1, {"t": 1}) != now
    finally:
        published.VERSION = old


def test_rows_orjson_refuses_are_read_by_json() -> None:
    rows = [
        ("m\ud800", "ns", "lone \udc00", 0.1 + 0.2, 2.0, "s", "user", 2**70, "{}", "\ud800", None)
    ]
    got = published.unpack(published.pack(_state(3), None, rows))[2]
    assert got == rows


def test_the_state_is_compacted_and_read_back_the_same() -> None:
    """Integer arrays travel in the smallest type that holds them and come back as they were
    (the same bytes): the int64 arrays of a snapshot's state are mostly small values."""
    state = _state()
    compact = published_payload._compact(state)
    head, arrays = fmt.unpack(compact)
    assert arrays["small"].dtype == np.int8 and arrays["pairs"].dtype == np.int8
    assert arrays["wide"].dtype == np.int64 and arrays["empty"].dtype == np.int64
    assert arrays["floats"].dtype == np.float64
    assert len(compact) < 0.6 * len(state)
    assert published_payload._widen(compact) == state
