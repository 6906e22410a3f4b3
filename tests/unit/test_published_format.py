"""The published blob's payload (norax_core/published.py, format 2): state and rows
compressed, vectors as they are, any damage a ValueError."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from norax_core import published

_ROW = ("m1", "ns", "text", 1.0, 2.0, "stated", "user", 3, "{}", "The text.", '{"k":1}')


def _parts() -> tuple[bytes, bytes, list[tuple[object, ...]]]:
    state = b"state " * 2000  # compressible, as a snapshot's arrays are
    vectors = np.random.default_rng(0).standard_normal(3 * 384).astype(np.float32).tobytes()
    return state, vectors, [_ROW, ("m2", *_ROW[1:9], None, None)]  # m2 holds no record


def test_pack_round_trips_and_compresses_the_state_and_rows_not_the_vectors() -> None:
    state, vectors, rows = _parts()
    payload = published.pack(state, vectors, rows)
    a, b, c = struct.unpack_from("<QQQ", payload)
    assert a < len(state) // 10 and b == len(vectors)
    assert payload[24 + a : 24 + a + b] == vectors  # the float32 bytes, untouched
    got_state, got_vectors, got_rows = published.unpack(payload)
    assert got_state == state and got_vectors == vectors
    assert got_rows == rows  # the records too, None where a row holds none
    assert published.unpack(published.pack(state, None, rows))[1] is None


@pytest.mark.parametrize(
    "row",
    [_ROW[:9], (*_ROW[:9], 7, "{}"), (*_ROW[:9], "text", ["not", "json text"])],
    ids=["no record columns", "a document not text", "metadata not text"],
)
def test_rows_of_another_shape_are_a_value_error(row: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match="another shape"):
        published.unpack(published.pack(b"state", None, [_ROW, row]))


def test_a_corrupt_compressed_state_or_rows_is_a_value_error() -> None:
    state, vectors, rows = _parts()
    payload = bytearray(published.pack(state, vectors, rows))
    a = struct.unpack_from("<QQQ", payload)[0]
    broken = bytes(payload[: 24 + a // 2]) + bytes(a - a // 2) + bytes(payload[24 + a :])
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(broken)
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(bytes(payload[:-3]) + b"xyz")  # the rows' stream
    with pytest.raises(ValueError, match="unreadable"):  # format 1's uncompressed payload
        published.unpack(struct.pack("<QQQ", len(state), 0, 2) + state + b"[]")


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
    got = published.unpack(published.pack(b"state", None, rows))[2]
    assert got == rows
