"""snapshots.ids_of refuses a snapshot whose indexes do not hold exactly the same ids.

Each index's ids are checked against the recency catalog's: BM25's slots, the graph's
slots, the supersession rows (as a set, and their count: no id twice). A snapshot made from
loaded indexes passes; one with any index's ids changed, short of one, or holding an id
twice, raises ``ValueError`` ("disagree").
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable

import numpy as np
import pytest

from norax_core import NoraxConfig, snapshots
from norax_core import snapshot_format as fmt
from norax_core.indexes import DerivedIndexes
from norax_core.sidecar import IndexRow, Sidecar
from norax_core.snapshot_format import pack_strs, unpack_strs

IDS = [f"a-{i}" for i in range(6)]


def _blob() -> bytes:
    side = Sidecar(None)
    side.upsert(
        [
            IndexRow(m, "a", "episodic", 1e9 + i, ("word", f"w{i}"), (f"E{i % 3}", "Colby"), i + 1)
            for i, m in enumerate(IDS)
        ]
    )
    idx = DerivedIndexes(side, NoraxConfig())
    idx.ensure("a")
    return idx._capture("a")


def _retyped(blob: bytes, prefix: str, change: Callable[[list[str]], list[str]]) -> bytes:
    """``blob`` with the ids of one index (``prefix``: its strings' name) changed."""
    meta, arrays = fmt.unpack(blob)
    out = {k: np.array(v) for k, v in arrays.items()}
    ids = unpack_strs(out[prefix + "_s"], out[prefix + "_o"])
    out[prefix + "_s"], out[prefix + "_o"] = pack_strs(change(ids))
    return fmt.pack(meta, out)


def test_a_snapshot_of_loaded_indexes_holds_the_same_ids_everywhere() -> None:
    state, ids = snapshots.ids_of(_blob())
    assert ids == set(IDS) and state["supersede"] is not None and state["graph"] is not None


@pytest.mark.parametrize("prefix", ["bm25.ids", "graph.slot", "supersede.ids"])
def test_an_index_holding_another_id_is_refused(prefix: str) -> None:
    blob = _retyped(_blob(), prefix, lambda ids: [*ids[:-1], "zz"])
    with pytest.raises(ValueError, match="disagree"):
        snapshots.ids_of(blob)


def test_a_supersession_space_holding_an_id_twice_is_refused() -> None:
    blob = _retyped(_blob(), "supersede.ids", lambda ids: [*ids[:-1], ids[0]])
    with pytest.raises(ValueError, match="disagree"):
        snapshots.ids_of(blob)


def test_the_recency_catalog_short_of_an_id_is_refused() -> None:
    def short(ids: list[str]) -> list[str]:
        return [*ids[:-1], ""]  # its slot stays, under an id no other index holds

    with pytest.raises(ValueError, match="disagree"):
        snapshots.ids_of(_retyped(_blob(), "temporal.ids", short))


def test_a_client_snapshot_holding_an_id_loaded_in_another_namespace_is_refused() -> None:
    blob = _blob()  # namespace a, ids a-0 ... a-5
    side = Sidecar(None)
    rows = [IndexRow(m, "b", "episodic", 1e9, ("word",), ()) for m in ("b-0", "a-3")]
    side.upsert(rows)
    idx = DerivedIndexes(side, NoraxConfig())
    idx.ensure("b")  # a-3 is loaded, in b

    def records(ids: set[str]) -> list[tuple[object, ...]]:
        return [(m, "a", "episodic", 1e9, "[]", "[]", 0, "", "", None, None) for m in ids]

    with pytest.raises(ValueError, match="another namespace"):
        idx._restore_client("a", blob, None, records)
    idx.remove(["a-3"])
    assert idx._restore_client("a", blob, None, records) is False  # no vectors
    assert idx.namespace_of["a-3"] == "a" and idx.namespace_of["b-0"] == "b"


def test_a_snapshot_naming_an_array_by_a_number_is_unreadable() -> None:
    blob = _blob()
    (size,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8 : 8 + size])
    header["arrays"][0][0] = 7  # a name that is no string
    text = json.dumps(header, separators=(",", ":")).encode().ljust(size)
    with pytest.raises(ValueError, match="unreadable snapshot"):
        snapshots.ids_of(blob[:8] + text + blob[8 + size :])
