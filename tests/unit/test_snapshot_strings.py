"""A snapshot's indexes decode their alike id lists once, and restore exactly as alone.

Every index of a snapshot packs its namespace's ids, usually in the same order, byte for
byte; :class:`~norax_core.snapshot_format.Strings` decodes such a list once for all of them
(a new list each, the strings shared) and builds the id -> position map once (a new dict
each). Each builder given the shared decoder is compared with the same builder alone on
random namespaces (adds, removes, replaced ids: free and dead slots included), and a
restored vector matrix is checked to stay a view of its blob until its first write.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from norax_core import snapshot_format as fmt
from norax_core.signals import graph_arrays
from norax_core.signals.bm25 import _Partition
from norax_core.signals.entity_graph import NamespaceGraph
from norax_core.signals.temporal import _Namespace
from norax_core.signals.vectors import NamespaceMatrix


def same(a: Any, b: Any, path: str = "") -> None:
    """``a`` equals ``b``: arrays by dtype and values, dicts in order, objects field by field."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, path
        assert np.array_equal(a, b), path
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), path
        for k in a:
            if k != "version":  # a graph's version: a process-wide counter, new per graph
                same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif hasattr(a, "__dict__") and not isinstance(a, type):
        same(vars(a), vars(b), path)
    else:
        assert a == b, path


def histories(seed: int) -> tuple[_Namespace, _Partition, NamespaceGraph, NamespaceMatrix]:
    """The four indexes of one random namespace, written alike."""
    rng = random.Random(seed)
    temporal, part, graph, vecs = _Namespace(), _Partition(), NamespaceGraph(), NamespaceMatrix()
    removes = rng.random() < 0.5
    for step in range(rng.randrange(1, 300)):
        mid = f"m{rng.randrange(200)}-é"
        if removes and rng.random() < 0.15:
            temporal.remove(mid)
            part.remove(mid)
            graph.remove(mid)
            vecs.drop([mid])
            continue
        temporal.add(mid, float(rng.randrange(50)), rng.randrange(3), step)
        if mid not in part.slot_of:
            part.add(mid, [f"w{rng.randrange(40)}" for _ in range(rng.randrange(1, 6))])
        graph.add(mid, [f"e{rng.randrange(30)}" for _ in range(rng.randrange(0, 4))])
        vecs.put([mid], np.array([rng.random() for _ in range(4)], np.float32))
    return temporal, part, graph, vecs


def packed(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` as a blob's read-only views (as a snapshot is read)."""
    return fmt.unpack(fmt.pack({}, arrays))[1]


@pytest.mark.parametrize("seed", range(40))
def test_each_builder_with_the_shared_decoder_equals_it_alone(seed: int) -> None:
    temporal, part, graph, vecs = histories(seed)
    t_arrays = packed(temporal.to_arrays())
    b_meta, b_arrays = part.to_arrays()
    g_meta, g_arrays = graph_arrays.to_arrays(graph)
    v_meta, v_arrays = vecs.to_arrays()
    b_arrays, g_arrays, v_arrays = packed(b_arrays), packed(g_arrays), packed(v_arrays)
    strs = fmt.Strings()
    shared = (
        _Namespace.from_arrays(t_arrays, strs),
        _Partition.from_arrays(b_meta, b_arrays, strs),
        graph_arrays.from_arrays(g_meta, g_arrays, strs),
        NamespaceMatrix.from_arrays(v_meta, v_arrays, strs),
    )
    alone = (
        _Namespace.from_arrays(t_arrays),
        _Partition.from_arrays(b_meta, b_arrays),
        graph_arrays.from_arrays(g_meta, g_arrays),
        NamespaceMatrix.from_arrays(v_meta, v_arrays),
    )
    for a, b in zip(shared, alone, strict=True):
        same(a, b, type(a).__name__)
    t, p, g, v = shared
    # no list or map is shared between indexes: a write to one leaves the others as they were
    lists = [t.ids, p.id_at, g.ids, v.ids]
    maps = [t.slot, p.slot_of, g.slot, v._pos]
    assert len({id(x) for x in lists}) == 4 and len({id(x) for x in maps}) == 4
    t.add("new", 1.0, 0, 10_000)
    assert "new" not in p.slot_of and "new" not in g.slot and "new" not in v._pos
    assert p.id_at == alone[1].id_at and v.ids == alone[3].ids


def test_alike_lists_are_decoded_once_into_new_lists() -> None:
    ids = ["a", "bé", "c"]
    one, two = fmt.pack_strs(ids), fmt.pack_strs(list(ids))
    strs = fmt.Strings()
    first, second = strs(*one), strs(*two)
    assert first == second == ids and first is not second
    assert all(x is y for x, y in zip(first, second, strict=True))  # decoded once
    first.append("d")
    assert strs(*one) == ids
    names, pos = strs.positions(*two)
    assert names == ids and pos == {"a": 0, "bé": 1, "c": 2}
    pos["x"] = 9
    assert strs.positions(*one)[1] == {"a": 0, "bé": 1, "c": 2}
    other = strs(*fmt.pack_strs(["a", "bé", "d"]))  # other bytes: decoded on their own
    assert other == ["a", "bé", "d"]
    with pytest.raises(ValueError):
        strs(one[0], np.array([0, 1, 99], dtype=np.int64))


def test_a_restored_matrix_is_a_view_until_its_first_write() -> None:
    block = NamespaceMatrix()
    block.put(["a", "b", "c"], np.arange(12, dtype=np.float32).reshape(3, 4))
    meta, arrays = block.to_arrays()
    blob = fmt.pack(meta, arrays)
    _, views = fmt.unpack(blob)
    got = NamespaceMatrix.from_arrays(meta, views)
    assert np.shares_memory(got.matrix, views["mat"]) and not got.matrix.flags.writeable
    got.drop(["zz"])  # nothing to move: still the view
    assert np.shares_memory(got.matrix, views["mat"])
    got.put(["b"], np.ones(4, np.float32))
    assert not np.shares_memory(got.matrix, views["mat"])
    assert got.matrix.tolist() == [[0, 1, 2, 3], [1, 1, 1, 1], [8, 9, 10, 11]]
    assert fmt.unpack(blob)[1]["mat"][1].tolist() == [4, 5, 6, 7]  # the blob is unchanged
    again = NamespaceMatrix.from_arrays(meta, views)
    again.drop(["a"])  # moves the last row into the first: a copy first
    assert again.ids == ["c", "b"] and again.matrix.tolist() == [[8, 9, 10, 11], [4, 5, 6, 7]]
    assert fmt.unpack(blob)[1]["mat"][0].tolist() == [0, 1, 2, 3]
    unaligned = np.frombuffer(b"\0" + arrays["mat"].tobytes(), np.float32, offset=1).reshape(3, 4)
    copied = NamespaceMatrix.from_arrays(meta, {**views, "mat": unaligned})
    assert copied.matrix.flags.aligned and not np.shares_memory(copied.matrix, unaligned)


@pytest.mark.parametrize("seed", range(20))
def test_row_labels_and_record_bytes_equal_the_row_by_row_build(seed: int) -> None:
    from norax_core.indexes import _DOCUMENT, _INFERRED, _ROLE, _labels
    from norax_core.kinds import STANDING
    from norax_core.sidecar import record_bytes, records_bytes

    rng = random.Random(seed)
    pick = rng.choice
    rows = [
        (
            f"m{i}",
            "ns",
            *[None] * 5,
            pick([None, "", "user", "assistant"]),
            pick([None, "fact", "instruction", "preference"]),
            pick(["text é", "", None] if seed % 2 else ["text é", ""]),
            pick(['{"a": 1}', "{}", None] if seed % 3 else ['{"a": 1}']),
        )
        for i in range(rng.randrange(0, 60))
    ]
    standing, roles = _labels(rows)
    assert standing == {str(r[0]) for r in rows if r[_INFERRED] in STANDING}
    assert roles == {str(r[0]): str(r[_ROLE]) for r in rows if r[_ROLE]}
    assert list(roles) == [str(r[0]) for r in rows if r[_ROLE]]
    plain = sum(record_bytes(r[_DOCUMENT], r[_DOCUMENT + 1]) for r in rows)
    assert records_bytes(rows, _DOCUMENT) == plain


@pytest.mark.parametrize("seed", range(12))
def test_neighbours_of_equals_each_entitys_neighbours_in_turn(seed: int) -> None:
    from test_first_search_builders import random_graph

    live = random_graph(seed)
    restored = graph_arrays.from_arrays(*graph_arrays.to_arrays(live))
    assert "_gcsr" in restored.__dict__
    rng = random.Random(seed)
    entities = [e for e, name in enumerate(live.names) if name]
    for g in (live, restored):
        for _ in range(20):
            es = [rng.choice(entities) for _ in range(rng.randrange(1, 30))]
            if rng.random() < 0.5:
                g.neighbours(es[0])  # one already kept as arrays
            lengths, nbs, ws = g.neighbours_of(es)
            each = [live.neighbours(e) for e in es]
            assert lengths.dtype == np.int64 and lengths.tolist() == [len(n) for n, _ in each]
            same(nbs, np.concatenate([n for n, _ in each]))
            same(ws, np.concatenate([w for _, w in each]))
    assert "_gcsr" in restored.__dict__  # read from the arrays: not thawed


def plain_check_rows(rows: Any, ids: set[str], namespace: str) -> list[tuple[object, ...]]:
    if not isinstance(rows, list) or not all(
        type(r) is tuple and len(r) == 11 and r[1] == namespace for r in rows
    ):
        raise ValueError("not snapshot rows")
    if len(rows) != len(ids) or {r[0] for r in rows} != ids:
        raise ValueError("the snapshot's rows and indexes disagree")
    return rows


@pytest.mark.parametrize("seed", range(60))
def test_check_rows_accepts_and_refuses_as_row_by_row(seed: int) -> None:
    from norax_core.snapshots import check_rows

    rng = random.Random(seed)
    n = rng.randrange(0, 6)
    rows: Any = [(f"m{i}", "ns", *range(9)) for i in range(n)]
    ids = {f"m{i}" for i in range(n)}
    change = rng.randrange(9)
    if change == 1 and rows:
        rows[rng.randrange(n)] = list(rows[0])
    elif change == 2 and rows:
        rows[rng.randrange(n)] = rows[0][:10]
    elif change == 3 and rows:
        i = rng.randrange(n)
        rows[i] = (rows[i][0], "other", *rows[i][2:])
    elif change == 4 and rows:
        rows.append(rows[0])
    elif change == 5:
        ids.add("extra")
    elif change == 6 and rows:
        ids.discard("m0")
    elif change == 7:
        rows = tuple(rows)
    elif change == 8 and rows:
        i = rng.randrange(n)
        rows[i] = (["unhashable"], *rows[i][1:])
    try:
        expected: Any = plain_check_rows(rows, ids, "ns")
    except (ValueError, TypeError):
        expected = ValueError
    if expected is ValueError:
        with pytest.raises(ValueError):
            check_rows(rows, ids, "ns")
    else:
        assert check_rows(rows, ids, "ns") is rows


def test_unpack_reads_every_shape_and_type_as_packed() -> None:
    arrays = {
        "a": np.arange(5, dtype=np.int64),
        "b": np.arange(6, dtype=np.float32).reshape(2, 3),
        "c": np.array([[3.5]]),
        "d": np.array([True, False]),
        "e": np.arange(4, dtype=np.int16),
        "f": np.zeros(0, dtype=np.uint8),
    }
    meta, got = fmt.unpack(fmt.pack({"x": 1}, arrays))
    assert meta == {"x": 1} and list(got) == list(arrays)
    for k, v in arrays.items():
        assert got[k].shape == v.shape and got[k].dtype == v.dtype and np.array_equal(got[k], v)


@pytest.mark.parametrize("seed", range(30))
def test_a_restored_partitions_term_ids_equal_its_vocabulary(seed: int) -> None:
    rng = random.Random(seed)
    words = ["", "a", "ab", "b", "é", "x y", "na\u00efve", *(f"w{i}" for i in range(30))]
    part = _Partition()
    for i in range(rng.randrange(0, 40)):
        part.add(f"m{i}", [rng.choice(words[1:]) for _ in range(rng.randrange(1, 6))])
    meta, arrays = part.to_arrays()
    views = packed(arrays)
    lazy, plain = _Partition.from_arrays(meta, views), _Partition.from_arrays(meta, views)
    _ = plain.vocab  # built now
    asked = [*words, "w", "a\0b", "\0", "zz", *plain.terms]
    tokens = [rng.choice(asked) for _ in range(8)]
    for q in (tokens, tokens[:1], ["nothing"]):
        a, b = lazy.raw_scores(q, 1.2, 0.75), plain.raw_scores(q, 1.2, 0.75)
        assert (a is None) == (b is None) and (a is None or np.array_equal(a, b))
    if plain.terms:
        assert "_terms_text" in lazy.__dict__  # a search left the vocabulary packed
    for term in asked * 2:  # past _PACKED_LOOKUPS: then from the built vocabulary
        assert lazy.term_id(term) == plain.vocab.get(term)
    assert "_terms_text" not in lazy.__dict__
    again = _Partition.from_arrays(meta, views)
    same(again.to_arrays(), plain.to_arrays())  # built at the first other use
    assert lazy.vocab == plain.vocab and lazy.terms == plain.terms


def test_packed_terms_that_do_not_fit_are_refused() -> None:
    part = _Partition()
    part.add("m", ["a", "b"])
    meta, arrays = part.to_arrays()
    bad = dict(arrays, terms_s=np.frombuffer(b"a", np.uint8))
    with pytest.raises(ValueError):
        _Partition.from_arrays(meta, bad)


def test_a_write_to_a_restored_partition_builds_its_vocabulary_first() -> None:
    part = _Partition()
    part.add("m1", ["a", "b"])
    part.add("m2", ["b", "c"])
    meta, arrays = part.to_arrays()
    lazy = _Partition.from_arrays(meta, packed(arrays))
    del arrays  # views of part's own arrays (its df): it may grow them now
    lazy.add("m3", ["c", "new"])
    part.add("m3", ["c", "new"])
    assert "_terms_text" not in lazy.__dict__
    assert lazy.vocab == part.vocab and [lazy.term_id(t) for t in "abc"] == [0, 1, 2]
    assert lazy.term_id("new") == 3
    q = ["new", "c", "a"]
    assert np.array_equal(lazy.raw_scores(q, 1.2, 0.75), part.raw_scores(q, 1.2, 0.75))
