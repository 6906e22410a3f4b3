"""The published blob's payload (norax_core/published.py, format 4): state and rows (column
by column) zstd-compressed, vectors as they are, any damage a ValueError."""

from __future__ import annotations

import json
import struct
import zlib

import mmh3
import numpy as np
import pytest
import zstandard

from norax_core import published
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


def _rows_part(payload: bytes) -> tuple[dict, bytes]:
    """The head and the columns' bytes of a payload's rows."""
    a, b, _ = struct.unpack_from("<QQQ", payload)
    raw = zstandard.ZstdDecompressor().decompress(payload[24 + a + b :])
    (size,) = struct.unpack_from("<Q", raw)
    return json.loads(raw[8 : 8 + size]), raw[8 + size :]


def _with_rows(head: object, body: bytes, state: bytes = b"") -> bytes:
    """A payload whose rows part is ``head`` (JSON) and ``body``, whatever they say."""
    zstd = zstandard.ZstdCompressor()
    raw_head = json.dumps(head).encode()
    z_state = zstd.compress(state or _state(3))
    z_rows = zstd.compress(struct.pack("<Q", len(raw_head)) + raw_head + body)
    return struct.pack("<QQQ", len(z_state), 0, len(z_rows)) + z_state + z_rows


def _json_columns(columns: list[object], n: int | None = None) -> bytes:
    """A rows part of ``columns``, each a JSON list (``n`` rows: the first column's length)."""
    bodies = [json.dumps(c).encode() for c in columns]
    count = len(columns[0]) if n is None and isinstance(columns[0], list) else n  # type: ignore[arg-type]
    head = {"n": count, "columns": [["j", len(b)] for b in bodies]}
    return _with_rows(head, b"".join(bodies))


def _columns(rows: list[tuple[object, ...]]) -> list[list[object]]:
    return [list(c) for c in zip(*rows, strict=True)]


def test_pack_round_trips_and_compresses_the_state_and_rows_not_the_vectors() -> None:
    state, vectors, rows = _parts()
    payload = published.pack(state, vectors, rows)
    a, b, c = struct.unpack_from("<QQQ", payload)
    assert a < len(state) // 5 and b == len(vectors)
    assert payload[24 + a : 24 + a + b] == vectors  # the float32 bytes, untouched
    got_state, got_vectors, got_rows = published.unpack(payload)
    assert got_state == state and got_vectors == vectors
    assert got_rows == rows  # the records too, None where a row holds none
    assert all(type(r) is tuple for r in got_rows)
    assert [list(map(type, r)) for r in got_rows] == [list(map(type, r)) for r in rows]
    assert published.unpack(published.pack(state, None, rows))[1] is None


def test_the_rows_travel_column_by_column_texts_joined() -> None:
    _, _, rows = _parts()
    head, body = _rows_part(published.pack(_state(3), None, rows))
    forms = [form for form, _ in head["columns"]]
    # texts joined by NUL; the numbers and the record columns holding a None as JSON
    assert head["n"] == 2 and forms == ["t"] * 3 + ["j"] * 2 + ["t"] * 2 + ["j"] + ["t", "j", "j"]
    assert body.startswith(b"m1\0m2ns\0ns")
    assert sum(size for _, size in head["columns"]) == len(body)


@pytest.mark.parametrize(
    "rows",
    [
        [],
        [("", "", "", 0.0, 0.0, "", "", 0, "", "", "")],
        [(*_ROW[:9], "a\0NUL in the text", "é ünïcödé ✓"), (*_ROW[:9], "", None)],
        [("m\ud800", "ns", "lone \udc00", 0.1 + 0.2, 2.0, "s", "u", 2**62, "{}", "\ud800", None)],
        [(*_ROW, "an 12th column, not kept")],
        [(*_ROW[:3], 1, 2.5, *_ROW[5:])],  # an int where a float is stored: kept an int
    ],
    ids=["none", "empty texts", "NUL and unicode", "what orjson refuses", "longer", "types"],
)
def test_rows_round_trip(rows: list[tuple[object, ...]]) -> None:
    got = published.unpack(published.pack(_state(3), None, rows))[2]
    kept = [r[:11] for r in rows]
    assert got == kept
    assert [list(map(type, r)) for r in got] == [list(map(type, r)) for r in kept]


def _text_columns(rows: list[tuple[object, ...]], n: int | None = None) -> bytes:
    """A rows part with every column joined as text (stating ``n`` rows)."""
    bodies = ["\0".join(map(str, c)).encode() for c in zip(*rows, strict=True)]
    head = {"n": len(rows) if n is None else n, "columns": [["t", len(b)] for b in bodies]}
    return _with_rows(head, b"".join(bodies))


_TWO = _columns([_ROW, _ROW])


@pytest.mark.parametrize(
    "payload",
    [
        _json_columns(_TWO[:9]),
        _json_columns(_TWO[:10]),
        _json_columns([*_TWO, ["x", "y"]]),
        _json_columns([*_TWO[:10], ["{}"]]),
        _json_columns([*_TWO[:3], [1.0], *_TWO[4:]]),
        _json_columns([*_TWO[:9], ["a", 7], _TWO[10]]),
        _json_columns([*_TWO[:10], ["{}", ["not", "json text"]]]),
        _json_columns([*_TWO[:10], {"a": 1}]),
        _json_columns(_TWO, n=3),
        _json_columns(_TWO, n=-2),
        _text_columns([_ROW, _ROW], n=3),
        _text_columns([_ROW, _ROW], n=1),
        _with_rows({"n": 2, "columns": "tj"}, b""),
        _with_rows([_ROW] * 11, b""),  # format 3's rows, row by row
        _with_rows({"n": 2.0, "columns": [["j", 2]] * 11}, b"[]" * 11),
        _with_rows({"n": 0, "columns": [["t", 1]] + [["t", 0]] * 10}, b"x"),
    ],
    ids=[
        "9 columns",
        "10 columns",
        "12 columns",
        "a short last column",
        "a short column",
        "a document not text",
        "metadata not text",
        "a column not a list",
        "more rows stated",
        "rows stated negative",
        "more rows stated than texts",
        "fewer rows stated than texts",
        "columns not a list",
        "rows by row",
        "a count not an int",
        "a text of no row",
    ],
)
def test_rows_of_another_shape_are_a_value_error(payload: bytes) -> None:
    with pytest.raises(ValueError, match="another shape"):
        published.unpack(payload)


def test_packing_rows_of_fewer_columns_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="another shape"):
        published.pack(_state(3), None, [_ROW, _ROW[:9]])


@pytest.mark.parametrize(
    "head, body",
    [
        ({"n": 1, "columns": [["x", 2]] * 11}, b"[]" * 11),  # an unknown form
        ({"n": 0, "columns": [["j", 2]] * 11}, b"[]" * 11 + b"  "),  # bytes after them
        ({"n": 0, "columns": [["j", 2]] * 11}, b"[]" * 10),  # bytes missing
        ({"n": 0, "columns": [["j", 4], ["j", -2]] + [["j", 2]] * 9}, b"[]" * 11),
        ({"n": 0, "columns": [["t", 2]] * 11}, b"\xff\xfe" * 11),  # not UTF-8
    ],
    ids=["unknown form", "extra bytes", "missing bytes", "a negative size", "not utf-8"],
)
def test_rows_whose_sizes_or_forms_do_not_fit_are_a_value_error(head: dict, body: bytes) -> None:
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(_with_rows(head, body))


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
    z_state = zlib.compress(state)  # format 2's state
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(struct.pack("<QQQ", len(z_state), 0, 0) + z_state)


def test_format_3s_payload_is_a_value_error() -> None:
    """zlib, rows row by row: what was written before format 4 (never read: other settings)."""
    state, vectors, rows = _parts()
    z_state = zlib.compress(state, 1)
    z_rows = zlib.compress(json.dumps([list(r) for r in rows]).encode(), 1)
    old = struct.pack("<QQQ", len(z_state), len(vectors), len(z_rows)) + z_state + vectors + z_rows
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(old)


def test_the_format_is_in_the_settings() -> None:
    now = published.settings("id", 1, {"t": 1})
    assert now.startswith(f"{published.VERSION}-")  # benchmarks/scale_store.published_count
    old = published.VERSION
    try:
        published.VERSION = "3"
        assert published.settings("id", 1, {"t": 1}) != now
    finally:
        published.VERSION = old


def test_reads_after_a_damaged_frame_and_from_threads_are_whole() -> None:
    """Each thread reuses one decompressor: an error leaves it usable, threads do not mix."""
    from concurrent.futures import ThreadPoolExecutor

    state, vectors, rows = _parts()
    payload = published.pack(state, vectors, rows)
    a = struct.unpack_from("<QQQ", payload)[0]
    damaged = payload[: 24 + a - 9] + bytes(5) + payload[24 + a - 4 :]
    for _ in range(2):
        with pytest.raises(ValueError, match="unreadable"):
            published.unpack(damaged)
        assert published.unpack(payload)[2] == rows
    others = [published.pack(_state(50 + i), None, [(f"m{i}", *_ROW[1:])]) for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda p: published.unpack(p), others * 25))
    assert all(g[2][0][0] == f"m{i % 4}" and g[0] == _state(50 + i % 4) for i, g in enumerate(got))


def test_the_digest_is_murmurhash3_and_either_form_is_checked() -> None:
    payload = bytes(range(256)) * 40
    digest = published._digest(payload)
    assert digest.startswith("m") and digest.endswith(f"-{len(payload)}")
    assert digest == "m" + mmh3.hash_bytes(payload).hex() + f"-{len(payload)}"
    for i in range(64):  # 32 hex digits, never a sign (mmh3's hash128 gives some negative)
        head = published._digest(payload + bytes([i])).split("-")[0]
        assert len(head) == 33 and int(head[1:], 16) >= 0
    crc = f"{zlib.crc32(payload):08x}-{len(payload)}"
    assert published._matches(payload, digest) and published._matches(payload, crc)
    for other in (payload[:-1], payload[:-1] + b"x", b"x" + payload[1:]):
        assert not published._matches(other, digest)
        assert not published._matches(other, crc)
    assert not published._matches(payload, digest.replace("m", "n", 1))
    assert not published._matches(payload, "")
