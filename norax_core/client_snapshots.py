"""Namespace snapshots of a Chroma server's clients, in a file their processes share.

An embedded store keeps each namespace's snapshot in its sidecar
(:mod:`norax_core.snapshot_table`), where SQLite triggers delete it with any write. A client
of a Chroma server has no such sidecar: other processes write to the server. Its snapshots
(the same :func:`~norax_core.snapshots.capture` blobs, plus the namespace's rows, which a
client's sidecar caches) go to a SQLite file named by ``NoraxMemory(snapshot_path=...)``,
which any number of client processes on one host may share, keyed by the Chroma
collection's id (a collection dropped and created again under the same name has another).

Validity comes from the change log (:mod:`norax_core.sync`), not from the file: each
snapshot records the time ``T`` its rows were read from Chroma and is served only while
``T`` is recent enough for the log to still hold every later entry and no entry since
``T - lookback`` names its namespace (:meth:`ClientSnapshots.taken`). A write leaves its
entry after Chroma stored it, and a write killed in between leaves none: like every write
made without Norax, it is not seen until :func:`~norax_core.maintenance.repair_store` (which
drops the snapshots) or the next Norax write to the namespace; the periodic reconcile
corrects the loaded indexes meanwhile. Each snapshot is one SQLite statement (all or
nothing); one that does not read back, or whose parts disagree, is ignored and deleted, and
the namespace loads from Chroma.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from norax_core import snapshots
from norax_core.errors import InvalidInputError
from norax_core.sync import ChangeLog

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS client_snapshots (collection TEXT NOT NULL,"
    " namespace TEXT NOT NULL, taken REAL NOT NULL, layout TEXT NOT NULL,"
    " state BLOB NOT NULL, vectors BLOB, rows BLOB NOT NULL,"
    " PRIMARY KEY (collection, namespace))"
)


MMAP_BYTES = 256 << 20
"""Bytes of the file each process maps (address space, not memory: the page cache holds it)."""

ROWS_VERSION = 2
"""The rows blob's form (2: stored columns as plain tuples), part of each snapshot's layout."""


def _layout() -> str:
    return f"{snapshots.layout()}/rows{ROWS_VERSION}"


class ClientSnapshots:
    """The snapshots of one collection in a shared snapshot file, and the log that vouches.

    Args:
        path: The SQLite file (created if missing).
        collection: The Chroma collection's id.
        log: The collection's change log.
    """

    def __init__(self, path: str | Path, collection: str, log: ChangeLog) -> None:
        self.path = Path(path)
        self.collection = collection
        self.log = log
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        # A namespace's snapshot is megabytes of overflow pages: read in place, not copied
        # page by page (the file is never truncated: no VACUUM, no auto_vacuum).
        self._conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        self._conn.execute(SCHEMA)

    def now(self) -> float:
        """The log's clock: read it before reading a namespace's rows (its ``T``)."""
        return self.log.clock()

    def taken(self, namespace: str) -> float | None:
        """``T`` of the stored snapshot of ``namespace`` if it may be served now, else ``None``.

        Served if ``T > now - (retention - lookback)`` and no log entry with
        ``ts >= T - lookback`` names ``namespace`` or no namespace (:meth:`ChangeLog.touched`).
        """
        with self._lock:
            row = self._conn.execute(
                "SELECT taken FROM client_snapshots WHERE collection = ? AND namespace = ?"
                " AND layout = ?",
                (self.collection, namespace, _layout()),
            ).fetchone()
        if row is None:
            return None
        taken = float(row[0])
        if not self.log.holds(taken):
            return None
        touched = self.log.touched(taken - self.log.config.lookback)
        if touched is None or namespace in touched:
            return None
        return taken

    def get(self, namespace: str, taken: float) -> tuple[bytes, bytes | None, bytes] | None:
        """``(state, vectors or None, rows)`` of ``namespace`` if stored at ``taken``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT state, vectors, rows FROM client_snapshots WHERE collection = ?"
                " AND namespace = ? AND taken = ? AND layout = ?",
                (self.collection, namespace, taken, _layout()),
            ).fetchone()
        if row is None:
            return None
        return bytes(row[0]), None if row[1] is None else bytes(row[1]), bytes(row[2])

    def put(
        self, namespace: str, taken: float, state: bytes, vectors: bytes | None, rows: bytes
    ) -> None:
        """Store (replace) the snapshot of ``namespace``, whose rows were read at ``taken``."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO client_snapshots"
                " (collection, namespace, taken, layout, state, vectors, rows)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (self.collection, namespace, taken, _layout(), state, vectors, rows),
            )

    def stored(self) -> dict[str, float]:
        """Namespace -> ``T`` of every snapshot of this collection (of this code's layout)."""
        with self._lock:
            got = self._conn.execute(
                "SELECT namespace, taken FROM client_snapshots WHERE collection = ? AND layout = ?",
                (self.collection, _layout()),
            ).fetchall()
        return dict(got)

    def drop(self, namespaces: Iterable[str] | None = None) -> None:
        """Delete the snapshots of ``namespaces`` (``None``: all of this collection's)."""
        with self._lock:
            if namespaces is None:
                self._conn.execute(
                    "DELETE FROM client_snapshots WHERE collection = ?",
                    (self.collection,),
                )
            else:
                self._conn.executemany(
                    "DELETE FROM client_snapshots WHERE collection = ? AND namespace = ?",
                    [(self.collection, ns) for ns in namespaces],
                )

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._conn.close()


def open_shared(
    collection: Any, log: ChangeLog | None, server: bool, path: str | Path | None
) -> ClientSnapshots | None:
    """A client's shared snapshot file (``path``), vouched for by its change ``log``.

    Raises:
        InvalidInputError: A snapshot file for a store that is not a server's client, or
            whose change log is off (``sync_interval=0``).
    """
    if path is None:
        return None
    if not server:
        raise InvalidInputError(
            "snapshot_path is for a client of a Chroma server (client=...); an embedded"
            " store keeps its snapshots in its sidecar"
        )
    if log is None:
        raise InvalidInputError(
            "snapshot_path needs the change log that vouches for the snapshots: sync_interval > 0"
        )
    return ClientSnapshots(path, str(collection.id), log)
