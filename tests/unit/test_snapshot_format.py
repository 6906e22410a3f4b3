"""The byte form of snapshots (norax_core/snapshot_format.py): arrays and strings come back
exactly, whatever the strings hold, and a malformed blob is refused with a ValueError."""

from __future__ import annotations

import numpy as np
import pytest

from norax_core.snapshot_format import pack, pack_strs, unpack, unpack_strs


@pytest.mark.parametrize(
    "items",
    [
        [],
        [""],
        ["a"],
        ["a", "", ""],
        ["", "b"],
        ["naïve", "日本", "x y"],
        ["a\x00b", "c"],
        ["\x00"],
    ],
)
def test_strings_come_back_exactly(items: list[str]) -> None:
    data, offsets = pack_strs(items)
    meta, arrays = unpack(pack({}, {"s": data, "o": offsets}))
    assert unpack_strs(arrays["s"], arrays["o"]) == items


def test_arrays_and_meta_come_back_as_read_only_views() -> None:
    arrays = {
        "f": np.arange(6, dtype=np.float32).reshape(2, 3),
        "i": np.array([-1, 2**40], dtype=np.int64),
        "b": np.array([True, False, True]),
        "e": np.zeros(0, dtype=np.int32),
    }
    meta, got = unpack(pack({"n": 3, "x": [1.5, "y"]}, arrays))
    assert meta == {"n": 3, "x": [1.5, "y"]}
    for name, arr in arrays.items():
        assert got[name].dtype == arr.dtype and np.array_equal(got[name], arr)
        assert not got[name].flags.writeable


@pytest.mark.parametrize("blob", [b"", b"\x00ff", b"\x05\x00\x00\x00\x00\x00\x00\x00{bad}"])
def test_a_malformed_blob_is_refused(blob: bytes) -> None:
    with pytest.raises(ValueError):
        unpack(blob)


def test_object_arrays_are_refused() -> None:
    with pytest.raises(TypeError):
        pack({}, {"o": np.array([object()], dtype=object)})


def test_offsets_that_do_not_fit_are_refused() -> None:
    data, _ = pack_strs(["abc", "d"])
    with pytest.raises(ValueError):
        unpack_strs(data, np.array([0, 2, 9], dtype=np.int64))
    with pytest.raises(ValueError):
        unpack_strs(data, np.array([-1, 5], dtype=np.int64))
