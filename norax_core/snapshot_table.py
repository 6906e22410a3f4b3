"""The sidecar's table of namespace snapshots: each namespace's derived state, ready to load.

A snapshot (:mod:`norax_core.snapshots` makes and reads them) holds one namespace's BM25
corpus, recency catalog, entity graph with its communities, supersession links and, once
they have been read from Chroma, its vectors, so that the namespace loads in one read
without re-tokenising, re-extracting or asking Chroma. It is derived from the sidecar's
rows and valid only while they are unchanged: SQLite triggers delete a namespace's snapshot
inside the same transaction as any write to its rows, links or unlinked marks (Norax's,
or anyone's who edits the file), so no committed state holds a snapshot older than its rows.
A snapshot of another ``layout`` (the code's format, see :func:`norax_core.snapshots.layout`)
is ignored.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from typing import Any

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS snapshots (namespace TEXT PRIMARY KEY, layout TEXT NOT NULL,"
    " state BLOB NOT NULL, vectors BLOB)",
    # A row moving namespace (INSERT OR REPLACE) outdates its old namespace too.
    "CREATE TRIGGER IF NOT EXISTS snapshots_row_in BEFORE INSERT ON memories BEGIN"
    " DELETE FROM snapshots WHERE namespace = NEW.namespace"
    " OR namespace = (SELECT namespace FROM memories WHERE id = NEW.id); END",
    "CREATE TRIGGER IF NOT EXISTS snapshots_row_up AFTER UPDATE ON memories BEGIN"
    " DELETE FROM snapshots WHERE namespace IN (OLD.namespace, NEW.namespace); END",
    "CREATE TRIGGER IF NOT EXISTS snapshots_row_out AFTER DELETE ON memories BEGIN"
    " DELETE FROM snapshots WHERE namespace = OLD.namespace; END",
    *(
        f"CREATE TRIGGER IF NOT EXISTS snapshots_{table}_{event} AFTER {event} ON {table}"
        f" BEGIN DELETE FROM snapshots WHERE namespace = {row}.namespace; END"
        for table in ("supersedes", "unlinked")
        for event, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD"))
    ),
)
"""The table and its invalidation triggers (created with the sidecar's other tables)."""


class SnapshotTable:
    """The snapshot rows of a :class:`~norax_core.sidecar.Sidecar` (its connection and lock)."""

    _lock: threading.Lock

    @property
    def _conn(self) -> sqlite3.Connection:
        """The sidecar's connection (the caller holds ``_lock``)."""
        raise NotImplementedError

    def namespace_ids(self, namespace: str) -> set[str]:
        """The ids of one namespace's rows (what a lazy open compares with Chroma's)."""
        with self._lock:
            got = self._conn.execute("SELECT id FROM memories WHERE namespace = ?", (namespace,))
            return {r[0] for r in got.fetchall()}

    def snapshot(self, namespace: str, layout: str) -> tuple[bytes, bytes | None] | None:
        """``(state, vectors or None)`` of ``namespace`` if it has a snapshot of ``layout``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT state, vectors FROM snapshots WHERE namespace = ? AND layout = ?",
                (namespace, layout),
            ).fetchone()
        return None if row is None else (bytes(row[0]), None if row[1] is None else bytes(row[1]))

    def put_snapshot(
        self, namespace: str, layout: str, state: bytes, vectors: bytes | None
    ) -> None:
        """Store (replace) the snapshot of ``namespace``."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO snapshots (namespace, layout, state, vectors)"
                " VALUES (?, ?, ?, ?)",
                (namespace, layout, state, vectors),
            )

    def put_snapshot_vectors(self, namespace: str, layout: str, vectors: bytes) -> bool:
        """Add the vectors to the snapshot of ``namespace``; whether it had one of ``layout``."""
        with self._lock:
            cur = self._conn.execute(
                "UPDATE snapshots SET vectors = ? WHERE namespace = ? AND layout = ?",
                (vectors, namespace, layout),
            )
            return cur.rowcount > 0

    def snapshot_namespaces(self) -> dict[str, dict[str, Any]]:
        """Per namespace with a snapshot: its ``layout`` and whether it holds ``vectors``."""
        with self._lock:
            got = self._conn.execute(
                "SELECT namespace, layout, vectors IS NOT NULL FROM snapshots"
            ).fetchall()
        return {ns: {"layout": lay, "vectors": bool(v)} for ns, lay, v in got}

    def drop_snapshots(self, namespaces: Iterable[str] | None = None) -> None:
        """Delete the snapshots of ``namespaces`` (``None``: all of them)."""
        with self._lock:
            if namespaces is None:
                self._conn.execute("DELETE FROM snapshots")
            else:
                self._conn.executemany(
                    "DELETE FROM snapshots WHERE namespace = ?", [(ns,) for ns in namespaces]
                )
