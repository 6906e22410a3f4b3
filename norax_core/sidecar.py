"""The derived-index sidecar: what the keyword and graph indexes are rebuilt from.

Chroma is the source of truth. Beside it, a small SQLite file keeps, per memory, the
namespace, kind, creation time, BM25 tokens and entities, so that reopening a store rebuilds
the in-memory indexes without re-tokenising or re-running spaCy. Every write is one SQLite
transaction, proportional to the batch (never a rewrite of the whole index). Rows are indexed
by namespace, so one namespace loads without reading the others
(:class:`~norax_core.indexes.DerivedIndexes` loads namespaces lazily), and each namespace's
saved graph communities have a row of their own. Each row also keeps the memory's Chroma
record (document, metadata), so an embedded store answers a search without reading Chroma
(a client too, for the namespaces it has loaded: :mod:`norax_core.store.client_records`).
A client's sidecar is in memory and a cache: emptied at open, never read to recover
anything. The rows of a namespace it restores from a snapshot stay in memory as the snapshot
gave them until SQL must answer (:meth:`Sidecar.cache`): a search reads its results' records
there, and a namespace evicted without a write never writes them.
The engine reconciles the sidecar with Chroma on open (not at all when Chroma's write
position is the one the sidecar recorded, :mod:`norax_core.store.position`; else pending
ids, and every id) and on :meth:`NoraxMemory.refresh`.

A write is crash-safe through a small intent log: the ids of a batch are recorded as
*pending* before Chroma is written, and cleared in the same transaction that stores their
rows. Ids still pending at the next open belong to a write that was interrupted (a crash, a
kill); reconciliation re-derives them from whatever Chroma holds. Without it, an upsert
interrupted between Chroma and the sidecar would leave stale tokens behind the same id.

The supersession links (:mod:`norax_core.supersession`) a write changes are stored in the
same transaction as its rows (or its deletion); a row written while its namespace is not
loaded is marked *unlinked* in that transaction, and its links are derived when the
namespace loads.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Protocol, TypeVar

from norax_core import snapshot_table
from norax_core.lazy_rows import Rows

SCHEMA_VERSION = "6"
"""Bumped when the rows change meaning; a sidecar of another version is rebuilt from Chroma
(2: ``seq``; 3: the ``supersedes`` links; 4: links under the rule with value cues and the
reply rule, so a store written by 3 re-derives them at open; 5: ``role``, ``inferred_kind``;
6: ``document``, ``metadata``, the record as Chroma holds it, so a search's results are read
from the sidecar)."""

POSITION_KEY = "chroma_position"
"""Meta key: the position of Chroma's write log the rows match (:mod:`norax_core.store.position`).
Deleted by a trigger on any change of ``memories`` (a hand edit too); the store records it
again after each of its writes."""

PARSED_RECORDS = 2_048
"""How many records of a kind :meth:`Sidecar.kept_records` keeps (the most recently read)."""

T = TypeVar("T")

Links = Mapping[str, tuple[str, tuple[str, ...]]]
"""Supersession links a write changes: ``{newer id: (namespace, older ids)}``; no older ids
deletes the memory's links."""


@dataclass(frozen=True)
class IndexRow:
    """What the derived indexes know of one memory.

    ``seq`` is its write sequence number (:func:`norax_core.batch.sequence_numbers`): the
    order among memories that share ``created_at``; 0 for memories written before Norax kept
    one (they fall back to id order). ``role`` is its metadata ``role`` (``""`` without
    one) and ``inferred_kind`` its kind as :mod:`norax_core.kinds` read it at write time.
    ``document`` and ``metadata`` (JSON) are its Chroma record as Chroma returns it (``None``:
    not held, read from Chroma); they are written with the row, never read into the indexes.
    """

    id: str
    namespace: str
    kind: str
    created_at: float
    tokens: tuple[str, ...]
    entities: tuple[str, ...]
    seq: int = 0
    role: str = ""
    inferred_kind: str = ""
    document: str | None = None
    metadata: str | None = None


ROW_BYTES = 3_000
"""Estimated bytes one loaded memory costs in the derived indexes beyond its tokens and
entities (ids in several maps, numpy slots, graph rows). Fitted with tracemalloc on loaded
namespaces (BM25, recency, graph and its communities): the 10k-memory store of
``benchmarks/scale.py`` (11 tokens, 4.1 entities a memory) traced 5,174 bytes a memory, the
estimate says 7,317; on synthetic rows of 0-200 tokens and 0-10 entities the estimate is
1.15 to 1.8 x the traced bytes (6 x for rows with neither): it errs on the high side."""
TOKEN_BYTES = 60
"""Estimated bytes per BM25 token of a loaded memory (postings, term lists)."""
ENTITY_BYTES = 900
"""Estimated bytes per entity of a loaded memory (graph postings, edges, communities)."""


def row_bytes(row: IndexRow) -> int:
    """What one memory is estimated to cost in memory once its namespace is loaded."""
    return ROW_BYTES + TOKEN_BYTES * len(row.tokens) + ENTITY_BYTES * len(row.entities)


RECORD_BYTES = 100
"""Estimated bytes an in-memory sidecar row costs beyond its record's characters (SQLite
cell and index entry, page slack)."""


def record_bytes(document: object, metadata: object) -> int:
    """What a client's in-memory sidecar is estimated to spend on one row's record.

    0 for a row that does not hold it (``None``); a client charges it to the index budget
    (:class:`~norax_core.indexes.DerivedIndexes`).
    """
    if not isinstance(document, str) or not isinstance(metadata, str):
        return 0
    return RECORD_BYTES + len(document) + len(metadata)


def column(rows: Sequence[tuple[object, ...]], i: int) -> list[Any]:
    """Item ``i`` of every row.

    The column :class:`~norax_core.lazy_rows.Rows` keep (not copied: the caller leaves it
    unchanged), else read out of the rows in C.
    """
    if isinstance(rows, Rows):
        return rows.column(i)
    return list(map(itemgetter(i), rows))


def records_bytes(rows: Sequence[tuple[object, ...]], column_at: int) -> int:
    """The sum of :func:`record_bytes` of ``rows``' columns ``column_at`` and ``column_at + 1``.

    With no Python call per row when every row holds its record (plain strings).
    """
    if isinstance(rows, Rows):  # texts kept joined are summed as they are
        chars = (rows.text_chars(column_at), rows.text_chars(column_at + 1))
        if chars[0] is not None and chars[1] is not None:
            return RECORD_BYTES * len(rows) + chars[0] + chars[1]
    docs, metas = column(rows, column_at), column(rows, column_at + 1)
    if set(map(type, docs)) | set(map(type, metas)) <= {str}:
        return RECORD_BYTES * len(rows) + sum(map(len, docs)) + sum(map(len, metas))
    return sum(map(record_bytes, docs, metas))


class RowSource(Protocol):
    """Where the rows of a namespace that is not loaded come from.

    ``complete`` says whether the sidecar holds every memory (embedded and in-memory stores:
    this process writes them all) or only a cache of the loaded namespaces (a client of a
    Chroma server, where other processes write).
    """

    complete: bool

    def rows(self, namespace: str) -> list[IndexRow]:
        """Every row of ``namespace``."""

    def homes(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """``id -> (namespace, write sequence number)`` of the ``ids`` that exist."""

    def has(self, namespace: str) -> bool:
        """Whether ``namespace`` holds any memory."""

    def namespaces(self) -> list[str]:
        """Namespaces that hold a memory, sorted."""

    def count(self) -> int:
        """Number of memories in all namespaces."""


class SidecarRows:
    """The sidecar as the source: it holds every memory of an embedded or in-memory store."""

    complete = True

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar

    def rows(self, namespace: str) -> list[IndexRow]:  # noqa: D102 (see RowSource)
        return self.sidecar.namespace_rows(namespace)

    def homes(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]:  # noqa: D102
        return self.sidecar.homes(ids)

    def has(self, namespace: str) -> bool:  # noqa: D102
        return self.sidecar.has_namespace(namespace)

    def namespaces(self) -> list[str]:  # noqa: D102
        return self.sidecar.namespaces()

    def count(self) -> int:  # noqa: D102
        return self.sidecar.count()


LABELS_INDEX = (
    "CREATE INDEX IF NOT EXISTS memories_labels ON memories (namespace, inferred_kind, role, id)"
)
"""The covering index :meth:`Sidecar.labels` reads, when a namespace loads from its snapshot.

Without it the read visits each of the namespace's rows in the table, one page apiece, spread
over the file by the order they were written in: on the 100k store of
``benchmarks/scale_store.py`` with the file out of the page cache, a 1k namespace's first
query took 61-87 ms, 45-50 of them in this read; with it, 14-19 ms (as from the page cache).
A file made before it gains it at its next open: 0.14 s for 100k memories from the page
cache, 3.6 MB. Only a file sidecar has it: an in-memory one reads labels from the rows."""


class Sidecar(snapshot_table.SnapshotTable):
    """SQLite persistence of :class:`IndexRow` plus a small key/value table.

    ``path=None`` keeps it in memory (for in-memory stores and remote Chroma servers, where
    the derived indexes are rebuilt from Chroma at open).
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._db = sqlite3.connect(
            str(path) if path is not None else ":memory:",
            check_same_thread=False,
            isolation_level=None,  # explicit BEGIN/COMMIT below
        )
        self._lock = threading.Lock()
        # kind -> id -> record (kept_records); a write of the row drops it
        self._parsed: dict[str, OrderedDict[str, Any]] = {}
        self._writes = 0
        # rows :meth:`cache` keeps in memory, not written yet: namespace -> rows, id -> its
        # namespace
        self._cached: dict[str, Rows] = {}
        self._cached_ids: dict[object, str] = {}
        self.settled = 0
        """How many times rows :meth:`cache` kept in memory were written to SQL."""
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS memories (id TEXT PRIMARY KEY, namespace TEXT NOT NULL,"
                " kind TEXT NOT NULL, created_at REAL NOT NULL, tokens TEXT NOT NULL,"
                " entities TEXT NOT NULL)"
            )
            columns = {r[1] for r in self._conn.execute("PRAGMA table_info(memories)")}
            for column, spec in _LATER.items():  # load() rebuilds an older sidecar's rows
                if column not in columns:
                    self._conn.execute(f"ALTER TABLE memories ADD COLUMN {column} {spec}")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            self._conn.execute("CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY)")
            self._conn.execute(
                "CREATE INDEX IF NOT EXISTS memories_namespace ON memories (namespace)"
            )
            # max(seq) at open in one index probe, not a scan of every row
            self._conn.execute("CREATE INDEX IF NOT EXISTS memories_seq ON memories (seq)")
            if path is not None:  # labels() from a few adjacent pages (see LABELS_INDEX)
                self._conn.execute(LABELS_INDEX)
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS supersedes (id TEXT PRIMARY KEY,"
                " namespace TEXT NOT NULL, older TEXT NOT NULL)"
            )
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS unlinked (id TEXT PRIMARY KEY, namespace TEXT NOT NULL)"
            )
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS graph_state (namespace TEXT PRIMARY KEY,"
                " state TEXT NOT NULL)"
            )
            # The triggers guard a file's snapshots and recorded Chroma position. An in-memory
            # sidecar (in-memory store, client) never holds either (DerivedIndexes._snapshot,
            # store.position.keeper), and per-row triggers would triple its bulk inserts.
            schema = snapshot_table.SCHEMA if path is not None else snapshot_table.SCHEMA[:1]
            list(map(self._conn.execute, schema))  # snapshots, their triggers
            for event in ("INSERT", "UPDATE", "DELETE") if path is not None else ():
                self._conn.execute(  # any change of rows, by hand too, voids the recorded
                    f"CREATE TRIGGER IF NOT EXISTS memories_{event.lower()}_position"  # Chroma
                    f" AFTER {event} ON memories BEGIN DELETE FROM meta"  # position (recorded
                    f" WHERE key = '{POSITION_KEY}'; END"  # again after a write)
                )

    @property
    def _conn(self) -> sqlite3.Connection:
        """The connection, once the rows :meth:`cache` keeps in memory are written.

        Every read or write of SQL goes through it (the caller holds the lock), so SQL
        answers as if :meth:`cache` had written them at once.
        """
        if self._cached:
            self._settle()
        return self._db

    def _settle(self) -> None:
        """Write the rows :meth:`cache` keeps in memory, in one transaction (lock held)."""
        cached, ids = self._cached, self._cached_ids
        self._cached, self._cached_ids = {}, {}
        try:
            with _Transaction(self._db):
                for rows in cached.values():
                    self._db.executemany(_INSERT_FULL, rows)
        except BaseException:  # rolled back: they stay in memory
            self._cached, self._cached_ids = cached, ids
            raise
        self.settled += 1

    def _uncache(self, namespace: str) -> None:
        """Forget the rows of ``namespace`` that :meth:`cache` keeps in memory.

        The caller holds the lock, in a transaction, and deletes the namespace's rows from
        SQL. Rows of other namespaces under the same ids go too, as if they had been
        written: writing them would have replaced those (``INSERT OR REPLACE``).
        """
        rows = self._cached.pop(namespace, None)
        ids = rows.column(0) if rows is not None else []
        for m in ids:
            self._cached_ids.pop(m, None)
        sql = "DELETE FROM memories WHERE id IN ({})"
        self._in_ids(self._db, sql, list(map(str, ids)))

    def close(self) -> None:
        """Close the database (an in-memory one drops what :meth:`cache` kept unwritten)."""
        with self._lock:
            (self._conn if self.path is not None else self._db).close()

    def get_meta(self, key: str) -> str | None:
        """A value of the key/value table, or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, items: dict[str, str]) -> None:
        """Set several key/value pairs in one transaction."""
        with self._lock, _Transaction(self._db):
            self._db.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(items.items())
            )

    def _tx(self) -> _Transaction:
        return _Transaction(self._conn)

    def mark_pending(self, ids: Iterable[str]) -> None:
        """Record ``ids`` as being written (before Chroma is), in one transaction."""
        with self._lock, _Transaction(self._db):
            self._db.executemany("INSERT OR IGNORE INTO pending VALUES (?)", [(i,) for i in ids])

    def clear_pending(self, ids: Iterable[str]) -> None:
        """Forget that ``ids`` were being written."""
        with self._lock, _Transaction(self._db):
            self._db.executemany("DELETE FROM pending WHERE id = ?", [(i,) for i in ids])

    def pending(self) -> set[str]:
        """Ids whose write began but never completed (see the module docstring)."""
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT id FROM pending")}

    def upsert(
        self,
        rows: Sequence[IndexRow],
        done: Iterable[str] | None = None,
        links: Links | None = None,
        unlinked: Sequence[IndexRow] = (),
    ) -> None:
        """Insert or replace rows and clear ids from the pending log, in one transaction.

        ``done``: the ids to clear (default: the rows'). ``links``: the supersession links
        the rows change; ``unlinked``: rows whose links are derived when their namespace
        loads. All stored together or not at all.
        """
        cleared = [r.id for r in rows] if done is None else list(done)
        with self._lock, self._tx():
            self._forget([r.id for r in rows])
            self._write_links(links or {})
            self._conn.executemany(
                "INSERT OR REPLACE INTO unlinked (id, namespace) VALUES (?, ?)",
                [(r.id, r.namespace) for r in unlinked],
            )
            self._conn.executemany("DELETE FROM pending WHERE id = ?", [(i,) for i in cleared])
            self._conn.executemany(_INSERT_FULL, [_values(r) for r in rows])

    def delete(self, ids: Iterable[str], links: Links | None = None) -> None:
        """Delete rows by id, and write the ``links`` that changes, in one transaction.

        A deleted memory's own links go with it; the links of memories that superseded it
        are in ``links`` (loaded namespace) or re-derived when its namespace loads.
        """
        with self._lock, self._tx():
            gone = [(i,) for i in ids]
            self._forget([i for (i,) in gone])
            self._conn.executemany("DELETE FROM memories WHERE id = ?", gone)
            self._conn.executemany("DELETE FROM supersedes WHERE id = ?", gone)
            self._conn.executemany("DELETE FROM unlinked WHERE id = ?", gone)
            self._write_links(links or {})

    def _write_links(self, links: Links) -> None:
        gone = [(mid,) for mid, (_, older) in links.items() if not older]
        self._conn.executemany("DELETE FROM supersedes WHERE id = ?", gone)
        self._conn.executemany(
            "INSERT OR REPLACE INTO supersedes (id, namespace, older) VALUES (?, ?, ?)",
            [
                (mid, ns, json.dumps(list(older), ensure_ascii=False))
                for mid, (ns, older) in links.items()
                if older
            ],
        )

    def links(self, namespace: str | None = None) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Stored supersession links (of one namespace): ``{newer id: (namespace, older)}``."""
        sql = "SELECT id, namespace, older FROM supersedes"
        args: tuple[str, ...] = ()
        if namespace is not None:
            sql, args = sql + " WHERE namespace = ?", (namespace,)
        with self._lock:
            got = self._conn.execute(sql, args).fetchall()
        return {mid: (ns, tuple(json.loads(older))) for mid, ns, older in got}

    def unlinked(self, namespace: str) -> list[str]:
        """The ids of ``namespace`` written while it was not loaded (links not derived yet)."""
        with self._lock:
            got = self._conn.execute("SELECT id FROM unlinked WHERE namespace = ?", (namespace,))
            return [r[0] for r in got.fetchall()]

    def relink(self, namespace: str, links: Links) -> None:
        """Store the links derived at ``namespace``'s load and unmark its ids, together."""
        with self._lock, self._tx():
            self._write_links(links)
            self._conn.execute("DELETE FROM unlinked WHERE namespace = ?", (namespace,))

    def clear(self) -> None:
        """Delete every row and link (before a full rebuild, or a client-mode cache at open).

        The recorded Chroma position goes with them: the rows no longer match it.
        """
        with self._lock, _Transaction(self._db):
            self._forget()
            self._cached.clear()
            self._cached_ids.clear()
            self._db.execute("DELETE FROM memories")
            self._db.execute("DELETE FROM supersedes")
            self._db.execute("DELETE FROM unlinked")
            self._db.execute("DELETE FROM meta WHERE key = ?", (POSITION_KEY,))

    def ids(self) -> set[str]:
        """Every id the sidecar holds."""
        with self._lock:
            return {r[0] for r in self._conn.execute("SELECT id FROM memories")}

    def rows(self, batch: int = 10_000) -> Iterator[IndexRow]:
        """Every row, streamed in batches."""
        last = ""
        while True:
            with self._lock:
                chunk = self._conn.execute(
                    f"SELECT {_FULL} FROM memories WHERE id > ? ORDER BY id LIMIT ?",
                    (last, batch),
                ).fetchall()
            if not chunk:
                return
            yield from (_row(r[:9], r[9], r[10]) for r in chunk)
            last = chunk[-1][0]

    def namespace_rows(self, namespace: str) -> list[IndexRow]:
        """The rows of one namespace (through the namespace index: no other row is read)."""
        with self._lock:
            found = self._conn.execute(
                f"SELECT {_ROW} FROM memories WHERE namespace = ?", (namespace,)
            ).fetchall()
        return [_row(r) for r in found]

    def labels(self, namespace: str, kinds: Iterable[str]) -> tuple[set[str], dict[str, str]]:
        """Standing ids and roles of ``namespace``, in one read.

        The ids whose inferred kind is one of ``kinds``, and ``id -> role`` of the memories
        that have a role.
        """
        sql = "SELECT id, inferred_kind, role FROM memories WHERE namespace = ?"
        wanted, standing, roles = set(kinds), set(), {}
        with self._lock:
            for m, k, role in self._conn.execute(sql, (namespace,)):
                if k in wanted:
                    standing.add(m)
                if role:
                    roles[m] = role
        return standing, roles

    def records(self, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``id -> (document, metadata JSON)`` of the ``ids`` whose record the sidecar holds.

        Those of rows :meth:`cache` keeps in memory are read there (nothing is written).
        """
        sql = "SELECT id, document, metadata FROM memories WHERE id IN ({})"
        sql += " AND document IS NOT NULL AND metadata IS NOT NULL"
        out: dict[str, tuple[str, str]] = {}
        with self._lock:
            cached, rest = self._cached_ids, list(ids)
            if cached:
                for m in ids:
                    ns = cached.get(m)
                    if ns is None:
                        continue
                    rows = self._cached[ns]
                    at = rows.position(m)
                    doc, meta = rows.record(at) if at is not None else (None, None)
                    if doc is not None and meta is not None:
                        out[m] = (str(doc), str(meta))
                rest = [m for m in ids if m not in cached]
            got = self._in_ids(self._db, sql, rest)  # no id of a cached row
        return out | {mid: (doc, meta) for mid, doc, meta in got}

    def kept_records(
        self,
        kind: str,
        ids: Sequence[str],
        read: Callable[[list[str]], tuple[Mapping[str, T], bool]],
    ) -> dict[str, T]:
        """The records of ``ids`` by id: kept from an earlier call, else ``read``.

        ``read(ids)`` returns the records and whether to keep them.

        The last :data:`PARSED_RECORDS` of each ``kind`` are kept until a write
        (:meth:`upsert`, :meth:`delete`, :meth:`clear`, a namespace's drop or :meth:`cache`)
        changes their row; what ``read`` returned while such a write ran is not kept. The
        caller must not change what it gets (it copies what it hands out).
        """
        wanted = list(dict.fromkeys(ids))
        with self._lock:
            kept = self._parsed.setdefault(kind, OrderedDict())
            out = {m: kept[m] for m in wanted if m in kept}
            for m in out:
                kept.move_to_end(m)
            writes = self._writes
        rest = [m for m in wanted if m not in out]
        if not rest:
            return out
        got, keep = read(rest)
        with self._lock:
            if keep and self._writes == writes:  # no row changed meanwhile
                kept.update(got)
                while len(kept) > PARSED_RECORDS:
                    kept.popitem(last=False)
        return out | dict(got)

    @property
    def writes(self) -> int:
        """How many writes changed rows so far (:meth:`fill_records` compares it)."""
        with self._lock:
            return self._writes

    def lacking_records(self, namespace: str) -> list[str]:
        """The ids of ``namespace``'s rows that hold no record (:meth:`fill_records`)."""
        sql = "SELECT id FROM memories WHERE namespace = ? AND document IS NULL"
        with self._lock:
            rows = self._cached.get(namespace)
            if rows is not None:
                return rows.lacking()
            return [m for (m,) in self._conn.execute(sql, (namespace,))]

    def fill_records(
        self, namespace: str, records: Mapping[str, tuple[str, str]], writes: int
    ) -> int:
        """Give ``namespace``'s rows that hold no record theirs; the bytes filled in.

        ``records``: ``id -> (document, metadata JSON)`` as Chroma returned them. Nothing is
        filled if a write changed any row since ``writes`` (:attr:`writes` taken before
        Chroma was read): the rows are as current as ever, the records may not be. Returns
        the :func:`record_bytes` filled in.
        """
        sql = "UPDATE memories SET document = ?, metadata = ? WHERE id = ? AND namespace = ?"
        sql += " AND document IS NULL"
        filled = 0
        with self._lock, self._tx():
            if self._writes != writes:
                return 0
            for mid, (doc, meta) in records.items():
                if self._conn.execute(sql, (doc, meta, mid, namespace)).rowcount:
                    filled += record_bytes(doc, meta)
        return filled

    def _forget(self, ids: Iterable[str] | None = None) -> None:
        """Drop the kept records of ``ids`` (all: ``None``): their rows change.

        The caller holds the lock.
        """
        self._writes += 1
        if ids is None:
            self._parsed.clear()
            return
        for kept in self._parsed.values():
            for m in ids:
                kept.pop(m, None)

    def homes(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """``id -> (namespace, seq)`` for the ``ids`` the sidecar holds."""
        sql = "SELECT id, namespace, seq FROM memories WHERE id IN ({})"
        return {mid: (ns, int(seq)) for mid, ns, seq in self._by_ids(sql, ids)}

    def _by_ids(self, sql: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """The rows of ``sql``, its ``IN ({})`` filled with ``ids`` (:data:`_IN_CHUNK` a time)."""
        with self._lock:
            return self._in_ids(self._conn, sql, ids)

    @staticmethod
    def _in_ids(conn: sqlite3.Connection, sql: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for s in range(0, len(ids), _IN_CHUNK):
            chunk = list(ids[s : s + _IN_CHUNK])
            out += conn.execute(sql.format(",".join("?" * len(chunk))), chunk)
        return out

    def has_namespace(self, namespace: str) -> bool:
        """Whether any row belongs to ``namespace``."""
        with self._lock:
            return (
                self._conn.execute(
                    "SELECT 1 FROM memories WHERE namespace = ? LIMIT 1", (namespace,)
                ).fetchone()
                is not None
            )

    def namespaces(self) -> list[str]:
        """The namespaces that hold a row, sorted (read from the namespace index)."""
        with self._lock:
            return [
                r[0]
                for r in self._conn.execute(
                    "SELECT DISTINCT namespace FROM memories ORDER BY namespace"
                )
            ]

    def count(self) -> int:
        """Number of rows."""
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM memories").fetchone()[0])

    def empty(self) -> bool:
        """Whether no row is held (one row read at most)."""
        with self._lock:
            return self._conn.execute("SELECT 1 FROM memories LIMIT 1").fetchone() is None

    def max_seq(self) -> int:
        """The highest write sequence number held (0 when empty)."""
        with self._lock:
            got = self._conn.execute("SELECT max(seq) FROM memories").fetchone()[0]
        return int(got or 0)

    def drop_namespace(self, namespace: str) -> None:
        """Delete one namespace's rows and links (a cache of Chroma's, in client mode)."""
        with self._lock, _Transaction(self._db):
            self._forget()  # the namespace's ids are not known here
            self._drop(namespace)

    def _drop(self, namespace: str) -> None:
        """Delete ``namespace``'s rows, links and unlinked marks (lock held, in a transaction).

        Only its own: the rows :meth:`cache` keeps in memory for others stay there.
        """
        self._uncache(namespace)
        self._db.execute("DELETE FROM memories WHERE namespace = ?", (namespace,))
        self._db.execute("DELETE FROM supersedes WHERE namespace = ?", (namespace,))
        self._db.execute("DELETE FROM unlinked WHERE namespace = ?", (namespace,))

    def namespace_records(self, namespace: str) -> list[tuple[object, ...]]:
        """One namespace's rows as stored (every column, JSON undecoded: :meth:`cache`)."""
        with self._lock:
            rows = self._cached.get(namespace)
            if rows is not None:  # kept in memory: as they would read from SQL
                return list(rows)
            return self._conn.execute(
                f"SELECT {_FULL} FROM memories WHERE namespace = ?", (namespace,)
            ).fetchall()

    def cache(self, namespace: str, records: Sequence[tuple[object, ...]]) -> None:
        """Replace one namespace's rows by :meth:`namespace_records` of a like sidecar.

        A client's cache of a namespace read from a snapshot (the shared file, a published one):
        its old rows, links and unlinked marks go at once (the loaded indexes hold its links);
        the new rows are kept in memory (``records`` is kept, not copied: the caller leaves it
        unchanged; a published payload's :class:`~norax_core.lazy_rows.Rows` as their columns, a
        record read by position) and written when SQL must answer: any read or write of SQL but
        :meth:`records`, :meth:`namespace_records` and :meth:`lacking_records` of them, which
        read them in memory (meta, pending ids and graph states are other tables). Measured on a
        1,000-memory namespace: 0.05-0.3 ms instead of 3.1-3.5 ms for the insert; a namespace
        searched and evicted without a write never writes them. Rows under an id another
        namespace's kept rows hold write those first. Only an in-memory sidecar (a client's)
        keeps them; a file's are written at once (its triggers).
        """
        rows = records if isinstance(records, Rows) else Rows.from_rows(list(records))
        with self._lock:
            with _Transaction(self._db):
                self._forget()  # the namespace's ids are not known here
                self._drop(namespace)
            ids = column(rows, 0)
            if self._cached_ids and not self._cached_ids.keys().isdisjoint(ids):
                self._settle()  # it moves an id of another kept namespace: in SQL's order
            if rows:
                self._cached[namespace] = rows
                self._cached_ids.update(dict.fromkeys(ids, namespace))
            if self.path is not None and self._cached:  # a file: its triggers see them now
                self._settle()

    def graph_state(self, namespace: str) -> str | None:
        """The saved graph communities of ``namespace`` (JSON), or ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT state FROM graph_state WHERE namespace = ?", (namespace,)
            ).fetchone()
        return None if row is None else str(row[0])

    def set_graph_states(self, states: Mapping[str, str]) -> None:
        """Save several namespaces' graph communities (JSON) in one transaction."""
        with self._lock, _Transaction(self._db):
            self._db.executemany(
                "INSERT OR REPLACE INTO graph_state (namespace, state) VALUES (?, ?)",
                list(states.items()),
            )

    def trim_graph_states(self, max_bytes: int) -> int:
        """Delete the least recently saved graph communities beyond ``max_bytes`` of JSON.

        A client's sidecar would otherwise keep one per namespace it ever evicted. A replaced
        state counts as saved when it was replaced. Returns how many were deleted.
        """
        with self._lock, _Transaction(self._db):
            cur = self._db.execute(
                "DELETE FROM graph_state WHERE rowid IN (SELECT rowid FROM (SELECT rowid,"
                " SUM(length(state)) OVER (ORDER BY rowid DESC) AS kept FROM graph_state)"
                " WHERE kept > ?)",
                (max(0, int(max_bytes)),),
            )
        return int(cur.rowcount)


_ROW = "id, namespace, kind, created_at, tokens, entities, seq, role, inferred_kind"
_FULL = _ROW + ", document, metadata"  # written, and read by a check; not by a load
_INSERT_FULL = f"INSERT OR REPLACE INTO memories ({_FULL}) VALUES ({', '.join('?' * 11)})"
_IN_CHUNK = 500  # ids per ``IN (...)`` (SQLite allows 999 parameters in old builds)


_LATER = {"seq": "INTEGER NOT NULL DEFAULT 0", "role": "TEXT NOT NULL DEFAULT ''"}
_LATER["inferred_kind"] = _LATER["role"]
_LATER["document"] = _LATER["metadata"] = "TEXT"
"""Columns later versions added to ``memories``, and their types."""


def _values(r: IndexRow) -> tuple[object, ...]:
    tok, ent = (json.dumps(x, ensure_ascii=False) for x in (r.tokens, r.entities))
    fields = (r.id, r.namespace, r.kind, r.created_at, tok, ent, r.seq, r.role, r.inferred_kind)
    return (*fields, r.document, r.metadata)


def _row(
    r: tuple[str, str, str, float, str, str, int, str, str],
    document: str | None = None,
    metadata: str | None = None,
) -> IndexRow:
    mid, ns, kind, ts, tok, ent, seq, role, inferred = r
    tokens, entities = tuple(json.loads(tok)), tuple(json.loads(ent))
    return IndexRow(mid, ns, kind, ts, tokens, entities, seq, role, inferred, document, metadata)


def record_json(meta: Mapping[str, object]) -> str:
    """A Chroma record's metadata as the sidecar keeps it (:attr:`IndexRow.metadata`)."""
    return json.dumps(dict(meta), ensure_ascii=False, sort_keys=True)


class _Transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
