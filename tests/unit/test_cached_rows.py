"""A client's sidecar keeps the rows of a restored namespace in memory until SQL needs them.

:meth:`Sidecar.cache` (a namespace restored from a snapshot) writes nothing: the rows are
served from memory to the reads a search makes (its results' records), and written at the
first read or write of SQL. Every answer must be the one an eager insert gives, whatever
comes after: writes, drops, other caches (one moving an id from another cached namespace),
fills, clears, and threads reading while others write.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from norax_core import published_payload, sidecar
from norax_core.lazy_rows import Rows
from norax_core.sidecar import IndexRow, Sidecar

_STATE = b"state"


def _published(rows: list[tuple[object, ...]]) -> Rows:
    """``rows`` as a published payload's restore hands them over (columns, texts joined)."""
    return published_payload.unpack(published_payload.pack(_STATE, None, rows))[2]


def _rows(ns: str, ids: list[str], tag: str = "", records: bool = True) -> list[IndexRow]:
    return [
        IndexRow(
            m,
            ns,
            "episodic",
            1e9 + i,
            ("word", f"w{i}{tag}"),
            (f"E{i % 3}",),
            i + 1,
            "user" if i % 2 else "",
            "preference" if i % 3 == 0 else "",
            f"doc {m} {tag}" if records or i % 2 else None,
            json.dumps({"norax_namespace": ns, "tag": tag}) if records or i % 2 else None,
        )
        for i, m in enumerate(ids)
    ]


def _records(side: Sidecar, ns: str, ids: list[str], tag: str = "", records: bool = True):  # type: ignore[no-untyped-def]
    """The stored form of rows, as a snapshot hands them to :meth:`Sidecar.cache`."""
    other = Sidecar(None)
    other.upsert(_rows(ns, ids, tag, records), done=())
    return other.namespace_records(ns)


def _sql_count(side: Sidecar) -> int:
    return int(side._db.execute("SELECT count(*) FROM memories").fetchone()[0])


def test_cached_rows_are_served_from_memory_and_written_at_the_first_sql_use() -> None:
    side = Sidecar(None)
    side.upsert(_rows("b", ["b1", "b2"]), done=())
    rows = _records(side, "a", [f"a{i}" for i in range(40)], records=False)
    side.cache("a", rows)
    assert _sql_count(side) == 2 and side.settled == 0  # nothing written
    got = side.records(["a1", "a2", "a3", "b1", "zz"])
    assert set(got) == {"a1", "a3", "b1"}  # a2 holds no record (as a stored row would)
    assert got["a1"] == (rows[1][9], rows[1][10])
    assert sorted(side.namespace_records("a")) == sorted(rows)
    assert side.lacking_records("a") == [f"a{i}" for i in range(0, 40, 2)]
    assert side.settled == 0 and _sql_count(side) == 2
    side.upsert(_rows("b", ["b3"]), done=())  # any write: they are written first
    assert side.settled == 1 and _sql_count(side) == 43
    assert sorted(side.namespace_records("a")) == sorted(rows)
    side.cache("a", rows)
    side.drop_namespace("a")  # evicted before any SQL use: never written
    assert side.settled == 1 and _sql_count(side) == 3
    assert side.records(["a1"]) == {} and side.namespace_records("a") == []


def test_a_cache_moving_an_id_of_another_cached_namespace_answers_as_an_eager_insert() -> None:
    lazy, eager = Sidecar(None), Sidecar(None)
    a = _records(lazy, "a", ["x1", "x2", "shared"])
    b = _records(lazy, "b", ["y1", "shared"], tag="b")
    for side in (lazy, eager):
        side.cache("a", a)
        side.count()  # eager: written at once
        side.cache("b", b)
    eager.count()
    for side in (lazy, eager):
        assert sorted(side.namespace_records("a")) == sorted(a[:2])
        assert side.records(["shared"])["shared"][0] == b[1][9]
        assert side.homes(["shared", "x1"]) == {"shared": ("b", 2), "x1": ("a", 1)}


def _state(side: Sidecar, ids: list[str]) -> tuple[object, ...]:
    return (
        side.records(ids),
        {ns: sorted(side.namespace_records(ns)) for ns in "abc"},
        {ns: sorted(side.lacking_records(ns)) for ns in "abc"},
        side.homes(ids),
        sorted(side.ids()),
        {ns: sorted(side.namespace_rows(ns), key=lambda r: r.id) for ns in "abc"},
    )


Cached = Callable[[Sidecar, bool], Sequence[tuple[object, ...]]]
"""What a step's ``cache`` gives one side: ``(side, whether it is the lazy one) -> rows``."""


def _against_eager(rng: random.Random, step_rows: Callable[[int, str, list[str]], Cached]) -> None:
    """Random cache, upsert, delete, drop and fill steps on a lazy and an eager sidecar.

    ``step_rows(step, namespace, ids)`` (called once a step, before either side's) gives each
    side what that step caches; ``read`` steps and the end compare what both answer.
    """
    pool = [f"m{i}" for i in range(30)]
    for _ in range(40):
        lazy, eager = Sidecar(None), Sidecar(None)
        for step in range(25):
            op = rng.choice(["cache", "cache", "upsert", "delete", "drop", "fill", "read"])
            ns, ids = rng.choice("abc"), rng.sample(pool, rng.randint(0, 8))
            cached = step_rows(step, ns, ids)
            for side in (lazy, eager):
                if op == "cache":
                    side.cache(ns, cached(side, side is lazy))
                elif op == "upsert":
                    side.upsert(_rows(ns, ids, f"{step}"), done=())
                elif op == "delete":
                    side.delete(ids)
                elif op == "drop":
                    side.drop_namespace(ns)
                elif op == "fill":
                    lacking = side.lacking_records(ns)
                    side.fill_records(ns, {m: ("filled", "{}") for m in lacking}, side.writes)
                if side is eager:
                    side.count()  # written at once
            if op == "read":
                assert _state(lazy, pool) == _state(eager, pool)
        assert _state(lazy, pool) == _state(eager, pool)
        assert lazy.count() == eager.count()


def test_random_operations_answer_as_an_eager_insert() -> None:
    rng = random.Random(5)

    def step_rows(step: int, ns: str, ids: list[str]) -> Cached:
        with_records = rng.random() < 0.5
        return lambda side, _: _records(side, ns, ids, f"{step}", with_records)

    _against_eager(rng, step_rows)


_TEXTS = ["", "plain", "é ünïcödé ✓", "emoji 🙂", "a\ttab", '{"k": "ü"}', "x" * 300]


def _random_records(rng: random.Random, ns: str, ids: list[str]) -> list[tuple[object, ...]]:
    """Stored rows of random texts (unicode, empty), records held or not, a few kinds."""
    out = []
    for i, m in enumerate(ids):
        held = rng.random() < 0.8
        doc = f"{rng.choice(_TEXTS)} {m} {rng.random()}" if held else None
        meta = json.dumps({"n": ns, "t": rng.choice(_TEXTS)}, ensure_ascii=False) if held else None
        tokens = json.dumps([rng.choice(_TEXTS), m], ensure_ascii=False)
        kind, role = rng.choice(["episodic", "fact"]), rng.choice(["", "user", "tool"])
        out.append((m, ns, kind, 1e9 + i, tokens, '["É"]', i + 1, role, "", doc, meta))
    return out


def test_published_rows_read_as_the_rows_they_were_made_of() -> None:
    """Every way of reading :class:`Rows` gives the rows a payload was packed from."""
    rng = random.Random(7)
    for n in (0, 1, 2, 3, 10, 300):
        rows = _random_records(rng, "a", [f"m{i}" for i in range(n)])
        got = _published(rows)
        assert isinstance(got, Rows) and len(got) == n
        for i in rng.sample(range(n), min(n, 30)):  # by position first, nothing read yet
            assert got.record(i) == rows[i][9:11]
            assert got[i] == rows[i] and got[i - n] == rows[i]
            assert got.position(rows[i][0]) == i
        assert got.position("nope") is None
        assert got == rows and list(got) == rows and got[1:3] == rows[1:3]
        for c in range(11):
            assert sidecar.column(got, c) == [r[c] for r in rows]
        assert got.lacking() == [r[0] for r in rows if r[9] is None]
        assert sidecar.records_bytes(got, 9) == sidecar.records_bytes(rows, 9)
        with pytest.raises(IndexError):
            got[n]


def test_random_operations_on_published_rows_answer_as_an_eager_insert() -> None:
    rng = random.Random(11)

    def step_rows(step: int, ns: str, ids: list[str]) -> Cached:
        rows = _random_records(rng, ns, ids)
        return lambda _, lazy: _published(rows) if lazy else list(rows)

    _against_eager(rng, step_rows)


@pytest.mark.parametrize("via", ["rows", "payload"])
def test_threads_read_cached_records_while_others_write_and_evict(via: str) -> None:
    side = Sidecar(None)
    ids = [f"a{i}" for i in range(200)]
    versions = {tag: _records(side, "a", ids, tag) for tag in ("one", "two")}
    if via == "payload":
        versions = {tag: _published(rows) for tag, rows in versions.items()}
    docs = {r[9] for rows in versions.values() for r in rows}
    stop, errors = threading.Event(), []

    def read() -> None:
        try:
            while not stop.is_set():
                got = side.records(ids[:50])
                assert all(d in docs for d, _ in got.values())
                assert len(side.namespace_records("a")) in (0, 200)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    for i in range(150):
        side.cache("a", versions["one" if i % 2 else "two"])
        if i % 3 == 0:
            side.upsert(_rows("b", [f"b{i}"]), done=())
        if i % 5 == 0:
            side.drop_namespace("a")
    stop.set()
    for t in readers:
        t.join()
    assert errors == []


def test_a_file_sidecar_writes_cached_rows_at_once(tmp_path: Path) -> None:
    side = Sidecar(tmp_path / "side.sqlite3")  # its triggers must see every row change
    side.cache("a", _records(side, "a", ["a1", "a2"]))
    assert side.settled == 1 and _sql_count(side) == 2
    side.cache("b", [])
    assert side.settled == 1


def test_threads_reading_one_published_rows_every_way_read_the_same_rows() -> None:
    """Records by position while another thread makes the whole columns: never a gap."""
    rows = _random_records(random.Random(3), "a", [f"m{i}" for i in range(400)])
    errors: list[BaseException] = []
    for _ in range(20):
        got = _published(rows)
        start = threading.Barrier(3)

        def records(got: Rows = got, start: threading.Barrier = start) -> None:
            try:
                start.wait()
                assert [got.record(i) for i in range(0, 400, 7)] == [r[9:] for r in rows[0:400:7]]
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        def whole(got: Rows = got, start: threading.Barrier = start) -> None:
            try:
                start.wait()
                assert list(got) == rows and got.lacking() == [r[0] for r in rows if r[9] is None]
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=f) for f in (records, records, whole)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
