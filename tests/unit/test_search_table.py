"""A search's table reads each row's columns once, and a grown table matches one built whole."""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from norax_core import NoraxConfig, NoraxMemory
from norax_core.embedders import CallableEmbedder
from norax_core.search_table import neighbour_slots, search_table

T0 = 1_700_000_000.0
DIM = 16


def _embed(texts: Sequence[str]) -> np.ndarray:
    out = np.full((len(texts), DIM), 0.1, dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.split():
            out[i, zlib.crc32(word.encode()) % DIM] += 1.0
    return out


@pytest.fixture(scope="module")
def mem() -> NoraxMemory:
    m = NoraxMemory(embedder=CallableEmbedder(_embed, name="bag", dim=DIM), extractor=False)
    texts = [f"note {i} about {'apples' if i % 3 else 'pears'} and item{i}" for i in range(12)]
    m.add(
        texts,
        ids=[f"m{i:02d}" for i in range(12)],
        created_at=[T0 + 60.0 * i for i in range(12)],
        metadata=[{"role": "user" if i % 2 else "assistant"} for i in range(12)],
    )
    return m


def _table(mem: NoraxMemory, ids: list[str]):  # type: ignore[no-untyped-def]
    cands = mem.candidates("apples", k=2, now=T0 + 10_000, ids=ids)
    st = mem.store
    cfg = mem.config
    with st.lock:
        return search_table(
            cands,
            st.indexes,
            st.dense,
            cfg,
            roles=lambda got: st.roles("default", got),
        )


def test_a_grown_table_holds_what_a_table_built_whole_holds(mem: NoraxMemory) -> None:
    first, extend = _table(mem, ["m01", "m02", "m05"])
    width = first.valid.shape[1]
    assert first.users is not None and first.users().tolist() == [[True, False, True]]
    grown = extend(first, np.zeros((1, width), dtype=bool), [["m07", "m10"]])
    assert grown.ids == [["m01", "m02", "m05", "m07", "m10"]]
    whole, _ = _table(mem, ["m01", "m02", "m05", "m07", "m10"])
    # the rows read when the table grew (scores, times, standing, roles) are the new rows' own
    np.testing.assert_array_equal(grown.scores, whole.scores)
    np.testing.assert_array_equal(grown.created, whole.created)
    np.testing.assert_array_equal(grown.standing, whole.standing)
    assert grown.users is not None and whole.users is not None
    assert grown.users().tolist() == whole.users().tolist() == [[True, False, True, True, False]]
    assert grown.statements is not None
    assert grown.statements.replies().tolist() == [[False, True, False, False, True]]
    # only the first table's rows were proposed; the joined ones never were
    assert (grown.proposed[:, 0, 3:] == np.iinfo(np.int32).max).all()
    np.testing.assert_array_equal(grown.proposed[:, :, :3], first.proposed)


def test_an_earlier_table_never_sees_the_rows_added_after_it(mem: NoraxMemory) -> None:
    first, extend = _table(mem, ["m03", "m05"])
    extend(first, np.zeros((1, 2), dtype=bool), [["m04", "m06"]])  # m05's neighbours
    assert first.neighbours is not None and first.users is not None
    for slot in first.neighbours(1, 3600.0):
        assert slot.shape == (1, 2) and (slot <= 2).all()  # 2: none; never rows 2, 3 of the grown
    assert first.users().shape == (1, 2)


def test_users_and_positions_of_some_rows_are_those_of_every_row(mem: NoraxMemory) -> None:
    """Exchange and latest wins read a few rows only: theirs equal the whole table's reading."""
    table, _ = _table(mem, ["m01", "m02", "m05", "m06", "m09"])
    assert table.users is not None and table.positions is not None
    assert table.statements is not None
    every_user, every_at = table.users(), table.positions(30.0)
    every_reply = table.statements.replies()
    assert every_at.tolist() == [[0, 0, 0, 0, 0]] and table.positions(90.0).tolist() == [
        [1, 2, 5, 6, 9]
    ]
    for gap in (30.0, 90.0):
        every_at = table.positions(gap)
        for rows in ([1, 3], [0], [], [0, 1, 2, 3, 4]):
            wanted = np.zeros((1, 5), dtype=bool)
            wanted[0, rows] = True
            some = table.users(wanted)
            at = table.positions(gap, wanted)
            reply = table.statements.replies(wanted)
            assert reply[0, rows].tolist() == every_reply[0, rows].tolist()
            assert some[0, rows].tolist() == every_user[0, rows].tolist()
            assert at[0, rows].tolist() == every_at[0, rows].tolist()
            assert not some[~wanted].any() and (at[~wanted] == -1).all()
    assert every_user.tolist() == [[True, False, True, False, True]]
    assert every_reply.tolist() == [[False, True, False, True, False]]


def _slots_by_row(
    rows_of: dict[str, int], near: dict[str, tuple[str, ...]], ids: list[str], window: int
) -> np.ndarray:
    """The neighbour slots row by row: each row's neighbours that are rows, in order."""
    n = len(ids)
    out = np.full((2 * window, 1, n), n, dtype=np.int64)
    for r, m in enumerate(ids):
        found = [rows_of[x] for x in near.get(m, ()) if x in rows_of and rows_of[x] < n]
        out[: len(found), 0, r] = found
    return out


def test_neighbour_slots_equal_the_row_by_row_reading() -> None:
    rng = random.Random(3)
    for _ in range(500):
        names = [f"m{i}" for i in range(rng.randint(1, 30))]
        ids = rng.sample(names, rng.randint(1, len(names)))
        later = [m for m in names if m not in ids and rng.random() < 0.5]  # a grown table's
        rows_of = {m: r for r, m in enumerate(ids + later)}
        window = rng.randint(1, 3)
        near = {m: tuple(rng.sample(names, min(2 * window, len(names)))) for m in names}
        got = neighbour_slots(rows_of, near, ids, window, len(ids))
        np.testing.assert_array_equal(np.array(got), _slots_by_row(rows_of, near, ids, window))


def test_standing_rows_the_lane_cannot_pick_are_left_out_and_nothing_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from norax_core import search_table as st

    m = NoraxMemory(
        embedder=CallableEmbedder(_embed, name="bag", dim=DIM),
        extractor=False,
        config=NoraxConfig(pool_min=3, pool_factor=1),  # most standing memories: not proposed
    )
    rng = random.Random(5)
    words = [
        "tabs",
        "spaces",
        "tests",
        "deploy",
        "pears",
        "apples",
        "review",
        "docs",
        "logs",
        "cache",
    ]
    texts = [" ".join(rng.sample(words, 3)) + f" rule{i}" for i in range(40)]
    m.add(
        texts,
        ids=[f"s{i:02d}" for i in range(40)],
        kind=["instruction" if i % 2 else "preference" for i in range(40)],
        created_at=[T0 + 60.0 * i for i in range(40)],
    )
    m.add([f"chat {w} {i}" for i, w in enumerate(words)], created_at=T0 + 5000.0)
    asked: list[int] = []
    pruned = st._Rows.lane_rows

    def counted(self: st._Rows, have: set[str]) -> list[str]:
        got = pruned(self, have)
        asked.append(len(self.standing - have) - len(got))
        return got

    queries = [" ".join(rng.sample(words, 2)) for _ in range(12)]
    monkeypatch.setattr(st._Rows, "lane_rows", counted)
    lean = [m.search(q, k=5, now=T0 + 9000.0) for q in queries]
    assert sum(asked) > 0  # some standing memories were left out of some tables
    monkeypatch.setattr(st._Rows, "lane_rows", lambda self, have: sorted(self.standing - have))
    full = [m.search(q, k=5, now=T0 + 9000.0) for q in queries]
    assert [[r.to_dict() for r in x] for x in lean] == [[r.to_dict() for r in x] for x in full]
    assert any(r.explanation.lane != 0 for x in full for r in x)  # the lane moved some


def test_results_are_assembled_as_their_constructor_would_build_them(mem: NoraxMemory) -> None:
    from dataclasses import fields

    from norax_core.models import Explanation, SearchResult

    # assembled() skips __init__: it is only right while neither class has __post_init__
    assert not hasattr(SearchResult, "__post_init__") and not hasattr(Explanation, "__post_init__")
    got = mem.search("apples item3", k=4, now=T0 + 10_000)
    assert got
    for r in got:
        assert list(vars(r)) == [f.name for f in fields(SearchResult)]
        assert list(vars(r.explanation)) == [f.name for f in fields(Explanation)]
        assert SearchResult(**vars(r)) == r and hash(Explanation(**vars(r.explanation)))
        assert Explanation(**vars(r.explanation)) == r.explanation


def _lane_store(vectors: dict[str, list[float]]) -> NoraxMemory:
    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.array([vectors[t] for t in texts], dtype=np.float32)

    return NoraxMemory(
        embedder=CallableEmbedder(embed, name="table", dim=4),
        extractor=False,
        config=NoraxConfig(pool_min=3, pool_factor=1),  # the weights' own pool: 10
    )


def _unit(*v: float) -> list[float]:
    return (np.array(v) / np.linalg.norm(v)).tolist()  # type: ignore[no-any-return]


@pytest.mark.parametrize("standing_first", [False, True])
def test_the_lane_lifts_a_standing_memory_no_signal_proposed(
    monkeypatch: pytest.MonkeyPatch, standing_first: bool
) -> None:
    from norax_core import search_table as st

    # chat memories match the query best (they fill the dense signal's 10 proposals); "pick"
    # matches it 0.5 (over the lane's bar, 0.4); the other standing memories barely. With
    # standing_first, two standing memories match best and few chat ones follow: the
    # proposals reach down to the low standing memories, so those left are outranked and
    # none needs a row.
    top = "standing" if standing_first else "chat"
    vectors = {"q lane": _unit(1, 0, 0, 0), "pick rule": _unit(0.5, 0, 0.866, 0)}
    vectors |= {f"{top} best {i}": _unit(0.95, 0.31, 0, 0) for i in range(2)}
    vectors |= {f"chat {i}": _unit(0.9, 0.43, 0, 0) for i in range(3 if standing_first else 12)}
    vectors |= {f"standing low {i}": _unit(0.1, 0, 0, 0.99) for i in range(6)}
    m = _lane_store(vectors)
    for text in vectors:
        if text != "q lane":
            standing = text.startswith(("pick", "standing"))
            old = standing and not text.startswith("standing best")
            m.add(text, kind="instruction" if standing else None, created_at=T0 if old else T0 + 99)
    skipped: list[bool] = []
    real = st._Rows._outranked
    monkeypatch.setattr(
        st._Rows, "_outranked", lambda self, have: skipped.append(real(self, have)) or skipped[-1]
    )
    got = [r.text for r in m.search("q lane", k=3, now=T0 + 100)]
    assert skipped == [standing_first]
    monkeypatch.setattr(st._Rows, "lane_rows", lambda self, have: sorted(self.standing - have))
    assert got == [r.text for r in m.search("q lane", k=3, now=T0 + 100)]  # every standing row
    if not standing_first:
        assert "pick rule" in got  # lifted by the lane, though no signal proposed it


def test_a_table_of_no_rows_has_empty_columns(mem: NoraxMemory) -> None:
    table, _ = _table(mem, [])
    assert table.scores.shape == (4, 1, 0) and table.created is not None
    assert table.created.shape == (1, 0) and table.ids == [[]]
