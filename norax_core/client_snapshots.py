"""Namespace snapshots of a Chroma server's clients, in a file their processes share.

An embedded store keeps each namespace's snapshot in its sidecar
(:mod:`norax_core.snapshot_table`), where SQLite triggers delete it with any write. A client
of a Chroma server has no such sidecar: other processes write to the server. Its snapshots
(the same :func:`~norax_core.snapshots.capture` blobs, plus the namespace's rows, which a
client's sidecar caches) go to a SQLite file named by ``NoraxMemory(snapshot_path=...)``,
which any number of client processes on one host may share, keyed by the Chroma
collection's id (a collection dropped and created again under the same name has another).

Validity comes from Chroma, not from the file: each snapshot is stored with the
namespace's basis (:meth:`~norax_core.write_marks.WriteMarks.basis`) read before its rows
were read, and served only while the basis read now is the same, so a write by any Norax
process since (which changes the basis) or under way (no basis) bypasses it. Each snapshot
is one SQLite statement (all or nothing); one that does not unpickle, or whose parts
disagree, is ignored and deleted, and the namespace loads from Chroma.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from norax_core import snapshots
from norax_core.errors import InvalidInputError
from norax_core.write_marks import WriteMarks

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS client_snapshots (collection TEXT NOT NULL,"
    " namespace TEXT NOT NULL, basis TEXT NOT NULL, layout TEXT NOT NULL,"
    " state BLOB NOT NULL, vectors BLOB, rows BLOB NOT NULL,"
    " PRIMARY KEY (collection, namespace))"
)


class ClientSnapshots:
    """The snapshots of one collection in a shared snapshot file, and the marks that vouch.

    Args:
        path: The SQLite file (created if missing).
        collection: The Chroma collection's id.
        marks: The collection's write marks.
    """

    def __init__(self, path: str | Path, collection: str, marks: WriteMarks) -> None:
        self.path = Path(path)
        self.collection = collection
        self.marks = marks
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(SCHEMA)

    def basis(self, namespace: str) -> str | None:
        """The namespace's basis now (one small ``get``); ``None`` while it is being written."""
        return self.marks.basis(namespace)

    def get(self, namespace: str, basis: str) -> tuple[bytes, bytes | None, bytes] | None:
        """``(state, vectors or None, rows)`` of ``namespace`` if stored at ``basis``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT state, vectors, rows FROM client_snapshots WHERE collection = ?"
                " AND namespace = ? AND basis = ? AND layout = ?",
                (self.collection, namespace, basis, snapshots.layout()),
            ).fetchone()
        if row is None:
            return None
        return bytes(row[0]), None if row[1] is None else bytes(row[1]), bytes(row[2])

    def put(
        self, namespace: str, basis: str, state: bytes, vectors: bytes | None, rows: bytes
    ) -> None:
        """Store (replace) the snapshot of ``namespace``, taken at ``basis``."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO client_snapshots"
                " (collection, namespace, basis, layout, state, vectors, rows)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (self.collection, namespace, basis, snapshots.layout(), state, vectors, rows),
            )

    def stored(self) -> dict[str, str]:
        """Namespace -> basis of every snapshot of this collection (of this code's layout)."""
        with self._lock:
            got = self._conn.execute(
                "SELECT namespace, basis FROM client_snapshots WHERE collection = ? AND layout = ?",
                (self.collection, snapshots.layout()),
            ).fetchall()
        return dict(got)

    def drop(self, namespaces: Iterable[str] | None = None) -> None:
        """Delete the snapshots of ``namespaces`` (``None``: all of this collection's)."""
        with self._lock:
            if namespaces is None:
                self._conn.execute(
                    "DELETE FROM client_snapshots WHERE collection = ?", (self.collection,)
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


def open_marks(
    client: Any, collection: Any, given: Any, folder: Path | None, path: str | Path | None
) -> tuple[WriteMarks | None, ClientSnapshots | None]:
    """A store's write marks and shared snapshot file (``path``), on its Chroma ``client``.

    Every client of a server (the user ``given`` one) marks its writes, since another may
    keep snapshots; an embedded store (in ``folder``) only if a client has made marks for
    its collection (its folder is served at times); an in-memory store never.

    Raises:
        InvalidInputError: A snapshot file for a store that is not a server's client.
    """
    server = given is not None
    if path is not None and not server:
        raise InvalidInputError(
            "snapshot_path is for a client of a Chroma server (client=...); an embedded"
            " store keeps its snapshots in its sidecar"
        )
    if not server and folder is None:
        return None, None
    marks = WriteMarks.open(client, collection.name, create=server)
    if path is None or marks is None:
        return marks, None
    return marks, ClientSnapshots(path, str(collection.id), marks)
