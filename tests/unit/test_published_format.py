"""The published blob's payload (norax_core/published.py, format 5): the vectors as they are
first (aligned: their matrix stays a view), state and rows (column by column, few-valued text
columns keyed) zstd-compressed, any damage a ValueError."""

from __future__ import annotations

import json
import struct
import zlib

import mmh3
import numpy as np
import pytest
import zstandard

from norax_core import published, sidecar, snapshots
from norax_core import snapshot_format as fmt
from norax_core.lazy_rows import Rows
from norax_core.signals.vectors import NamespaceMatrix

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
    b, a, _ = struct.unpack_from("<QQQ", payload)
    raw = zstandard.ZstdDecompressor().decompress(payload[24 + b + a :])
    (size,) = struct.unpack_from("<Q", raw)
    return json.loads(raw[8 : 8 + size]), raw[8 + size :]


def _with_rows(head: object, body: bytes, state: bytes = b"") -> bytes:
    """A payload whose rows part is ``head`` (JSON) and ``body``, whatever they say."""
    zstd = zstandard.ZstdCompressor()
    raw_head = json.dumps(head).encode()
    z_state = zstd.compress(state or _state(3))
    z_rows = zstd.compress(struct.pack("<Q", len(raw_head)) + raw_head + body)
    return struct.pack("<QQQ", 0, len(z_state), len(z_rows)) + z_state + z_rows


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
    b, a, c = struct.unpack_from("<QQQ", payload)
    assert a < len(state) // 5 and b == len(vectors)
    assert payload[24 : 24 + b] == vectors  # the float32 bytes, untouched, first
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
    # texts joined by NUL, keyed where the two rows hold one text; the numbers and the
    # record columns holding a None as JSON
    assert head["n"] == 2 and forms == ["t", "k", "k", "j", "j", "k", "k", "j", "k", "j", "j"]
    assert body.startswith(b"m1\0m2\0\0ns\0\0text")  # ids joined, then a byte per row, the key
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
    b, a, c = struct.unpack_from("<QQQ", payload)
    s = 24 + b  # where the state's frame starts
    broken = bytes(payload[: s + a // 2]) + bytes(a - a // 2) + bytes(payload[s + a :])
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(broken)
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(bytes(payload[:-3]) + b"xyz")  # the rows' stream
    cut = bytes(payload[s : s + a - 9])  # a truncated state frame, its sizes made to fit
    vec, z_rows = bytes(payload[24:s]), bytes(payload[s + a :])
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(struct.pack("<QQQ", b, len(cut), c) + vec + cut + z_rows)
    extra = z_rows + b"\0\0"  # bytes after the rows' frame
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(struct.pack("<QQQ", b, a, c + 2) + bytes(payload[24 : s + a]) + extra)
    for more in (1, -1):  # sizes that do not add up to the payload's
        with pytest.raises(ValueError, match="unreadable"):
            published.unpack(struct.pack("<QQQ", b + more, a, c) + bytes(payload[24:]))
    with pytest.raises(ValueError, match="unreadable"):  # format 1's uncompressed payload
        published.unpack(struct.pack("<QQQ", 0, len(state), 2) + state + b"[]")
    z_state = zlib.compress(state)  # format 2's state
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(struct.pack("<QQQ", 0, len(z_state), 0) + z_state)


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
    b, a, _ = struct.unpack_from("<QQQ", payload)
    damaged = payload[: 24 + b + a - 9] + bytes(5) + payload[24 + b + a - 4 :]
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


def _matrix(n: int = 5) -> tuple[NamespaceMatrix, bytes]:
    block = NamespaceMatrix()
    block.put([f"m{i}" for i in range(n)], np.arange(n * 384, dtype=np.float32).reshape(n, 384))
    return block, snapshots.pack_vectors(block)


@pytest.mark.parametrize("state_size", [3, 4, 5, 6, 7, 8, 9])
def test_the_vectors_are_aligned_and_their_matrix_a_view_of_the_payload(state_size: int) -> None:
    """Whatever the state's size: format 4 put the vectors after it, their matrix was copied
    unless it happened to land aligned."""
    block, vectors = _matrix()
    payload = published.pack(_state(state_size), vectors, [_ROW])
    _, got, _ = published.unpack(payload)
    assert got is not None and got.obj is payload and bytes(got) == vectors
    restored = snapshots.unpack_vectors(got, set(block.ids))
    assert restored is not None and restored.matrix.flags.aligned
    assert np.shares_memory(restored.matrix, np.frombuffer(payload, dtype=np.uint8))  # no copy
    np.testing.assert_array_equal(restored.matrix, block.matrix)
    assert restored.ids == block.ids


def test_format_4s_payload_is_a_value_error() -> None:
    """The state first, then the vectors and rows (never read: other settings)."""
    state, _, rows = _parts()
    _, vectors = _matrix()
    zstd = zstandard.ZstdCompressor(level=3)
    z_state = zstd.compress(state)
    z_rows = zstd.compress(_json_columns(_columns(rows))[24:])  # any rows part
    old = struct.pack("<QQQ", len(z_state), len(vectors), len(z_rows)) + z_state + vectors + z_rows
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(old)


def _many(n: int, kinds: int) -> list[tuple[object, ...]]:
    return [
        (f"m{i}", "ns", f"kind{i % kinds}", float(i), 0.5, "s", "", i, "{}", f"text {i}", None)
        for i in range(n)
    ]


@pytest.mark.parametrize("kinds", [1, 3, 256, 257, 400])
def test_few_valued_text_columns_are_keyed_and_their_rows_share_the_strings(kinds: int) -> None:
    rows = _many(600, kinds)
    payload = published.pack(_state(3), None, rows)
    head, _ = _rows_part(payload)
    forms = [form for form, _ in head["columns"]]
    assert forms[:3] == ["t", "k", "k" if kinds <= 256 else "t"]  # at most 256 keys
    assert forms[5:9] == ["k", "k", "j", "k"]  # an empty text ('' roles) is a key too
    got = published.unpack(payload)[2]
    assert got == rows
    assert [list(map(type, r)) for r in got] == [list(map(type, r)) for r in rows]
    assert got[0][1] is got[599][1]  # one string for every row's namespace
    assert _rows_part(published.pack(_state(3), None, rows[:1]))[0]["columns"][1][0] == "t"


def _keyed(head_columns: list[list[object]], body: bytes, n: int = 2) -> bytes:
    """A rows part of ``n`` rows: columns 0-9 as the real ones, then ``head_columns``' last."""
    real, real_body = _rows_part(published.pack(_state(3), None, [_ROW] * n))
    sizes = [size for _, size in real["columns"][:10]]
    return _with_rows(
        {"n": n, "columns": real["columns"][:10] + head_columns}, real_body[: sum(sizes)] + body
    )


@pytest.mark.parametrize(
    "column, body",
    [
        (["k", 3], b"\x00\x01a"),  # an index past the one key
        (["k", 1], b"\x00"),  # fewer bytes than rows
        (["k", 2 + 513], b"\x00\x00" + b"\0".join([b"k"] * 257)),  # 257 keys
        (["k", 4], b"\x00\x00\xff\xfe"),  # keys not UTF-8
    ],
    ids=["index past the keys", "short", "too many keys", "not utf-8"],
)
def test_a_damaged_keyed_column_is_a_value_error(column: list[object], body: bytes) -> None:
    with pytest.raises(ValueError, match="unreadable"):
        published.unpack(_keyed([column], body))
    # the same column, well formed, is read
    assert published.unpack(_keyed([["k", 4]], b"\x00\x00{}"))[2] == [_ROW[:10] + ("{}",)] * 2


def test_the_rows_keep_their_columns_for_the_restores_checks() -> None:
    rows = _many(10, 2)
    got = published.unpack(published.pack(_state(3), None, rows))[2]
    ids = {f"m{i}" for i in range(10)}
    assert isinstance(got, Rows) and sidecar.column(got, 0) is sidecar.column(got, 0)
    assert sidecar.column(got, 2) == [r[2] for r in rows]
    assert sidecar.records_bytes(got, 9) == sidecar.records_bytes(list(got), 9)
    assert snapshots.check_rows(got, ids, "ns") is got
    for wrong_ids, wrong_ns in ((ids, "other"), (ids - {"m1"}, "ns"), (ids | {"m10"}, "ns")):
        with pytest.raises(ValueError):
            snapshots.check_rows(got, wrong_ids, wrong_ns)
    assert got == rows and list(got) == rows


def test_long_texts_of_many_byte_characters_are_summed_and_read_whole() -> None:
    """Their UTF-8 is checked a chunk at a time: characters cut at a chunk's end count once."""
    texts = ["é✓🙂a" * 9_000, "b" * 5, "", "🙂" * 20_000, "ü" * 16_383]
    rows = [(f"m{i}", "ns", "t", 1.0, t, t, "", i, "", t, t[::-1]) for i, t in enumerate(texts)]
    got = published.unpack(published.pack(_state(3), None, rows))[2]
    assert sidecar.records_bytes(got, 9) == sidecar.records_bytes(rows, 9)
    assert [got.record(i) for i in range(len(rows))] == [r[9:] for r in rows]
    assert got == rows


@pytest.mark.parametrize("column", [4, 5, 9, 10])
@pytest.mark.parametrize(
    "body", [b"\xff\xfe", b"caf\xc3", b"a\0b\0c", b"one"], ids=["bad", "cut", "3 texts", "1 text"]
)
def test_a_damaged_text_column_kept_joined_is_a_value_error_at_once(
    column: int, body: bytes
) -> None:
    """The columns read when read are checked when unpacked: no wrong row is ever served."""
    rows = [(f"m{i}", "ns", "t", 1.0, f"[{i}]", f"e{i}", "", i, "", f"d{i}", f"{i}") for i in "01"]
    payload = published.pack(_state(3), None, rows)
    assert published.unpack(payload)[2] == rows
    head, raw = _rows_part(payload)
    forms, bodies, at = head["columns"], [], 0
    for _form, size in forms:
        bodies.append(raw[at : at + size])
        at += size
    assert forms[column][0] == "t"
    bodies[column] = body + (b"\0x" if body in (b"\xff\xfe", b"caf\xc3") else b"")
    forms[column][1] = len(bodies[column])
    with pytest.raises(ValueError):
        published.unpack(_with_rows(head, b"".join(bodies)))


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_the_vectors_of_a_buffer_are_a_copy(kind: type) -> None:
    """A buffer its caller may reuse: the matrix must not see it change."""
    block, vectors = _matrix()
    buffer = bytearray(published.pack(_state(3), vectors, [_ROW]))
    _, got, _ = published.unpack(kind(buffer))
    assert got is not None and bytes(got) == vectors
    restored = snapshots.unpack_vectors(got, set(block.ids))
    assert restored is not None and restored.matrix.flags.aligned
    buffer[:] = bytes(len(buffer))  # reused
    np.testing.assert_array_equal(restored.matrix, block.matrix)
