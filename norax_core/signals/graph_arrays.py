"""A namespace's entity graph as flat arrays, for snapshots (:mod:`norax_core.snapshots`).

:func:`to_arrays` writes every field of a :class:`NamespaceGraph` but its derived caches;
:func:`from_arrays` reads them back into a graph whose postings and co-occurrence edges stay
CSR arrays (``_gcsr``) until something other than a search needs them as sets and dicts
(:meth:`NamespaceGraph._thaw`): a search reads an entity's rows and neighbours from the
arrays. Rows come out in the order of a set built from the captured set's items in its
iteration order: as the thawed set gives them, and as the pickled graphs of earlier
snapshots did (checked: 1,000 searches rank identically). Each row's entities stay arrays
too (``_ents_csr``) until a write or a reader of a graph's ``ents`` builds the
tuples: the incidence and the explanations of a search read the arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import count
from typing import Any

import numpy as np

from norax_core.signals.entity_graph import NamespaceGraph, next_version
from norax_core.snapshot_format import Strings, pack_strs

_INTS = ("next_comm", "changes", "edges", "generation", "fingerprint")


def _ints(values: Sequence[int] | Any) -> np.ndarray:
    return np.fromiter(values, np.int64)


def _csr(groups: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(groups) + 1, dtype=np.int64)
    if groups:
        np.cumsum([len(g) for g in groups], out=ptr[1:])
    return ptr, _ints(x for g in groups for x in g)


def to_arrays(space: NamespaceGraph) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The graph's fields as flat arrays and JSON numbers, for :func:`from_arrays`."""
    post, adj = space.post, space.adj  # built if the graph was itself restored
    kept = space.__dict__.get("_ents_csr")  # a restored graph's rows, unchanged since
    ents_ptr, ents = kept if kept is not None else _csr(space.ents)
    post_ptr, post_rows = _csr([list(rows) for rows in post.values()])
    adj_ptr, adj_nbr = _csr([list(n) for n in adj.values()])
    ids_s, ids_o = pack_strs([m if m is not None else "" for m in space.ids])
    slot_s, slot_o = pack_strs(list(space.slot))
    eid_s, eid_o = pack_strs(list(space.eid))
    names_s, names_o = pack_strs(space.names)
    arrays = {
        "ids_s": ids_s,
        "ids_o": ids_o,
        "free": np.array([m is None for m in space.ids], dtype=np.bool_),
        "slot_s": slot_s,
        "slot_o": slot_o,
        "slot_rows": _ints(space.slot.values()),
        "ents_ptr": ents_ptr,
        "ents": ents,
        "row_tie": space.row_tie,
        "free_rows": _ints(space.free_rows),
        "eid_s": eid_s,
        "eid_o": eid_o,
        "eid_ids": _ints(space.eid.values()),
        "len_words": _ints(space.lengths.keys()),
        "len_count": _ints(space.lengths.values()),
        "names_s": names_s,
        "names_o": names_o,
        "free_eids": _ints(space.free_eids),
        "counts": _ints(space.counts),
        "df": space._df,
        "stale": _ints(space._stale),
        "tie": space.tie,
        "comm": space.comm,
        "post_keys": _ints(post.keys()),
        "post_ptr": post_ptr,
        "post_rows": post_rows,
        "adj_keys": _ints(adj.keys()),
        "adj_ptr": adj_ptr,
        "adj_nbr": adj_nbr,
        "adj_w": _ints(w for n in adj.values() for w in n.values()),
        "unplaced": _ints(space.unplaced),
    }
    return {name: int(getattr(space, name)) for name in _INTS}, arrays


def from_arrays(
    meta: Mapping[str, Any], a: Mapping[str, np.ndarray], strs: Strings | None = None
) -> NamespaceGraph:
    """A graph of :func:`to_arrays`; its postings and edges are built at first need.

    ``strs``: the snapshot's string decoder (shared with its other indexes).

    Raises:
        ValueError: The arrays do not fit together.
    """
    strs = strs if strs is not None else Strings()
    g = NamespaceGraph.__new__(NamespaceGraph)
    ids: list[str | None] = strs(a["ids_s"], a["ids_o"])  # type: ignore[assignment]
    for row in np.flatnonzero(a["free"]).tolist():
        ids[row] = None
    ptr, flat = a["ents_ptr"].astype(np.int64, copy=False), a["ents"].astype(np.int64, copy=False)
    if len(ptr) != len(ids) + 1 or int(ptr[-1]) != len(flat) or int(ptr[0]) != 0:
        raise ValueError("the graph's rows do not fit together")
    if len(ptr) > 1 and bool((ptr[1:] < ptr[:-1]).any()):
        raise ValueError("the graph's rows do not fit together")
    g.ids = ids
    # each row's entities: the tuples (g.ents) are built at their first use or write; a
    # search reads them as arrays (NamespaceGraph.row_ents, Incidence.of)
    g.__dict__["_ents_csr"] = (ptr, flat)
    rows = a["slot_rows"]
    if np.array_equal(rows, np.arange(len(rows))):  # slot i at row i: the decoder's map
        keys, g.slot = strs.positions(a["slot_s"], a["slot_o"])
        if len(keys) != len(rows):
            raise ValueError("the graph's slots do not fit together")
    else:
        g.slot = dict(zip(strs(a["slot_s"], a["slot_o"]), rows.tolist(), strict=True))
    g.row_tie = a["row_tie"].astype(np.int64)
    g.free_rows = a["free_rows"].tolist()
    g.names = strs(a["names_s"], a["names_o"])
    g.eid = dict(zip(strs(a["eid_s"], a["eid_o"]), a["eid_ids"].tolist(), strict=True))
    g.lengths = dict(zip(a["len_words"].tolist(), a["len_count"].tolist(), strict=True))
    g.free_eids = a["free_eids"].tolist()
    g.counts = a["counts"].tolist()
    g._df = a["df"].astype(np.int64)
    stale = a["stale"]
    if len(stale):  # synced now, in one step (NamespaceGraph.df would, entity by entity)
        counts = a["counts"]
        if int(stale.min()) < 0 or int(stale.max()) >= min(len(counts), len(g._df)):
            raise ValueError("the graph's entity counts do not fit together")
        g._df[stale] = counts[stale]
    g._stale = set()
    g.tie = a["tie"].astype(np.int64)
    g.comm = a["comm"].astype(np.int64)
    g.post_arr, g.adj_arr, g.mask_arr, g._memo = {}, {}, {}, {}
    g.unplaced = set(a["unplaced"].tolist())
    for name in _INTS:
        setattr(g, name, int(meta[name]))
    g.touched = None
    g.version = next_version()
    post_keys, adj_keys = a["post_keys"], a["adj_keys"]
    if len(post_keys) + 1 != a["post_ptr"].size or len(adj_keys) + 1 != a["adj_ptr"].size:
        raise ValueError("the graph's postings do not fit together")
    g.__dict__["_gcsr"] = (
        _positions(post_keys),
        a["post_ptr"].astype(np.int64, copy=False),
        a["post_rows"],
        _positions(adj_keys),
        a["adj_ptr"].astype(np.int64, copy=False),
        a["adj_nbr"],
        a["adj_w"],
    )
    return g


def _positions(keys: np.ndarray) -> dict[int, int] | None:
    """Each key's position, or ``None`` when key ``i`` is at position ``i``.

    No dict to build then: the entity ids of a graph that never freed one are ``0 .. n - 1``
    in order.
    """
    if np.array_equal(keys, np.arange(len(keys))):
        return None
    return dict(zip(keys.tolist(), count(), strict=False))
