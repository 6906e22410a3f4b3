"""The derived-index sidecar: what the keyword and graph indexes are rebuilt from.

Chroma is the source of truth. Beside it, a small SQLite file keeps, per memory, the
namespace, kind, creation time, BM25 tokens and entities, so that reopening a store rebuilds
the in-memory indexes without re-tokenising or re-running spaCy. Every write is one SQLite
transaction, proportional to the batch (never a rewrite of the whole index). The engine
reconciles the sidecar with Chroma's ids on open and on :meth:`NoraxMemory.refresh`.

A write is crash-safe through a small intent log: the ids of a batch are recorded as
*pending* before Chroma is written, and cleared in the same transaction that stores their
rows. Ids still pending at the next open belong to a write that was interrupted (a crash, a
kill); reconciliation re-derives them from whatever Chroma holds. Without it, an upsert
interrupted between Chroma and the sidecar would leave stale tokens behind the same id.

The supersession links (:mod:`norax_core.supersession`) a write changes are stored in the
same transaction as its rows (or its deletion), so rows and links never disagree on disk.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = "3"
"""Bumped when the rows change meaning; a sidecar of another version is rebuilt from Chroma
(2: ``seq``, the write sequence number; 3: the ``supersedes`` links)."""

Links = Mapping[str, tuple[str, tuple[str, ...]]]
"""Supersession links a write changes: ``{newer id: (namespace, older ids)}``; no older ids
deletes the memory's links."""


@dataclass(frozen=True)
class IndexRow:
    """What the derived indexes know of one memory.

    ``seq`` is its write sequence number (:func:`norax_core.batch.sequence_numbers`): the
    order among memories that share ``created_at``; 0 for memories written before Norax kept
    one (they fall back to id order).
    """

    id: str
    namespace: str
    kind: str
    created_at: float
    tokens: tuple[str, ...]
    entities: tuple[str, ...]
    seq: int = 0


class Sidecar:
    """SQLite persistence of :class:`IndexRow` plus a small key/value table.

    ``path=None`` keeps it in memory (for in-memory stores and remote Chroma servers, where
    the derived indexes are rebuilt from Chroma at open).
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._conn = sqlite3.connect(
            str(path) if path is not None else ":memory:",
            check_same_thread=False,
            isolation_level=None,  # explicit BEGIN/COMMIT below
        )
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS memories (id TEXT PRIMARY KEY, namespace TEXT NOT NULL,"
                " kind TEXT NOT NULL, created_at REAL NOT NULL, tokens TEXT NOT NULL,"
                " entities TEXT NOT NULL)"
            )
            columns = {r[1] for r in self._conn.execute("PRAGMA table_info(memories)")}
            if "seq" not in columns:  # a version 1 sidecar: load() rebuilds its rows
                self._conn.execute("ALTER TABLE memories ADD COLUMN seq INTEGER NOT NULL DEFAULT 0")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            self._conn.execute("CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY)")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS supersedes (id TEXT PRIMARY KEY,"
                " namespace TEXT NOT NULL, older TEXT NOT NULL)"
            )

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._conn.close()

    def get_meta(self, key: str) -> str | None:
        """A value of the key/value table, or ``None``."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, items: dict[str, str]) -> None:
        """Set several key/value pairs in one transaction."""
        with self._lock, self._tx():
            self._conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(items.items())
            )

    def _tx(self) -> _Transaction:
        return _Transaction(self._conn)

    def mark_pending(self, ids: Iterable[str]) -> None:
        """Record ``ids`` as being written (before Chroma is), in one transaction."""
        with self._lock, self._tx():
            self._conn.executemany("INSERT OR IGNORE INTO pending VALUES (?)", [(i,) for i in ids])

    def clear_pending(self, ids: Iterable[str]) -> None:
        """Forget that ``ids`` were being written."""
        with self._lock, self._tx():
            self._conn.executemany("DELETE FROM pending WHERE id = ?", [(i,) for i in ids])

    def pending(self) -> set[str]:
        """Ids whose write began but never completed (see the module docstring)."""
        with self._lock:
            return {r[0] for r in self._conn.execute("SELECT id FROM pending")}

    def upsert(self, rows: Sequence[IndexRow], links: Links | None = None) -> None:
        """Insert or replace rows and the links they change, and clear them from the pending log.

        One transaction: rows and ``links`` are stored together or not at all.
        """
        with self._lock, self._tx():
            self._write_links(links or {})
            self._conn.executemany("DELETE FROM pending WHERE id = ?", [(r.id,) for r in rows])
            self._conn.executemany(
                "INSERT OR REPLACE INTO memories"
                " (id, namespace, kind, created_at, tokens, entities, seq)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.id,
                        r.namespace,
                        r.kind,
                        r.created_at,
                        json.dumps(r.tokens, ensure_ascii=False),
                        json.dumps(r.entities, ensure_ascii=False),
                        r.seq,
                    )
                    for r in rows
                ],
            )

    def delete(self, ids: Iterable[str], links: Links | None = None) -> None:
        """Delete rows by id, and write the ``links`` that changes, in one transaction."""
        with self._lock, self._tx():
            gone = [(i,) for i in ids]
            self._conn.executemany("DELETE FROM memories WHERE id = ?", gone)
            self._conn.executemany("DELETE FROM supersedes WHERE id = ?", gone)
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

    def links(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Every stored supersession link: ``{newer id: (namespace, older ids)}``."""
        with self._lock:
            got = self._conn.execute("SELECT id, namespace, older FROM supersedes").fetchall()
        return {mid: (ns, tuple(json.loads(older))) for mid, ns, older in got}

    def clear(self) -> None:
        """Delete every row and link (before a full rebuild)."""
        with self._lock, self._tx():
            self._conn.execute("DELETE FROM memories")
            self._conn.execute("DELETE FROM supersedes")

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
                    "SELECT id, namespace, kind, created_at, tokens, entities, seq FROM memories"
                    " WHERE id > ? ORDER BY id LIMIT ?",
                    (last, batch),
                ).fetchall()
            if not chunk:
                return
            for mid, ns, kind, ts, tok, ent, seq in chunk:
                yield IndexRow(
                    mid, ns, kind, ts, tuple(json.loads(tok)), tuple(json.loads(ent)), seq
                )
            last = chunk[-1][0]


class _Transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
