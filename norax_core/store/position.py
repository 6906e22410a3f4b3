"""Chroma's write position in an embedded store: an open that reads nothing from Chroma.

Chroma (1.x, embedded ``PersistentClient``) numbers every record it is asked to write (add,
upsert, update, delete: one number per id) in the ``embeddings_queue`` table of its SQLite
file. It purges the queue as it applies it, but always keeps the newest entry, so the
highest number there only grows (dropping a collection drops its entries; the collection id
below tells a re-created collection apart).

The store records, in the sidecar's ``meta``, the position (``"<collection id>:<number>"``)
at which the sidecar holds exactly what Chroma holds. It counts the records its own Chroma
calls write (:class:`CountedCollection`) and moves the recorded position only when Chroma's
advanced by exactly that count; anything else (a write behind Norax's back, a failed call, a
delete by filter whose count is unknown) forgets it. An open that finds the recorded
position equal to Chroma's, and nothing pending, trusts the sidecar without asking Chroma
anything: no ``count``, no per-namespace id check, so Chroma never loads its vector index
for it. A missing or different position means today's path: the sidecar is reconciled with
every id in Chroma (an unreadable one, as from another Chroma version: the lazy path).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from norax_core.sidecar import POSITION_KEY

logger = logging.getLogger("norax")


CHROMA_FILE = "chroma.sqlite3"


def read_position(folder: Path) -> int | None:
    """The highest write number in Chroma's queue (0 when empty); ``None`` if unreadable.

    Read-only: a connection of its own, opened and closed here (Chroma keeps the file in
    rollback-journal mode; a read takes a shared lock for its duration only).
    """
    path = folder / CHROMA_FILE
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            got = conn.execute("SELECT max(seq_id) FROM embeddings_queue").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:  # another Chroma layout: the slow path
        logger.info("norax: cannot read Chroma's write position (%s)", exc)
        return None
    return int(got[0] or 0)


class CountedCollection:
    """A Chroma collection that counts the records its writes ask Chroma to log.

    ``written`` is the count since creation; ``unknown`` turns True after a write whose
    count cannot be told (a delete by filter alone, a call that raised).
    """

    def __init__(self, collection: Any) -> None:
        self._col = collection
        self.written = 0
        self.unknown = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._col, name)

    def _count(self, method: str, ids: Any, **kwargs: Any) -> Any:
        try:
            out = getattr(self._col, method)(ids=ids, **kwargs)
        except BaseException:
            self.unknown = True
            raise
        if ids is None:
            self.unknown = True
        else:
            self.written += 1 if isinstance(ids, str) else len(ids)
        return out

    def add(self, ids: Any, **kwargs: Any) -> Any:  # noqa: D102 (Chroma's)
        return self._count("add", ids, **kwargs)

    def upsert(self, ids: Any, **kwargs: Any) -> Any:  # noqa: D102
        return self._count("upsert", ids, **kwargs)

    def update(self, ids: Any, **kwargs: Any) -> Any:  # noqa: D102
        return self._count("update", ids, **kwargs)

    def delete(self, ids: Any = None, **kwargs: Any) -> Any:  # noqa: D102
        # with a ``where`` too, Chroma logs only the ids that match: a smaller count than
        # counted here forgets the position (safe)
        return self._count("delete", ids, **kwargs)


class PositionKeeper:
    """Keeps the sidecar's recorded position in step with an embedded store's writes."""

    def __init__(self, folder: Path, collection: CountedCollection, sidecar: Any) -> None:
        self.folder = folder
        self.collection = collection
        self.sidecar = sidecar
        self._base: int | None = None  # Chroma's position the sidecar matches, if known
        self._counted = 0  # collection.written at that position

    def _token(self, pos: int) -> str:
        return f"{self.collection.id}:{pos}"

    def trusted(self) -> bool:
        """At open: whether the sidecar's recorded position is Chroma's (nothing to reconcile).

        Pending ids (an interrupted write) are the caller's to check.
        """
        now = read_position(self.folder)
        if now is None or self.sidecar.get_meta(POSITION_KEY) != self._token(now):
            return False
        self._trust(now)
        return True

    def readable(self) -> bool:
        """Whether Chroma's position can be read (an embedded store of a known layout)."""
        return read_position(self.folder) is not None

    def _trust(self, pos: int) -> None:
        self._base, self._counted = pos, self.collection.written
        self.collection.unknown = False

    def reconciled(self, before: int | None) -> None:
        """After a full reconcile begun at Chroma position ``before``: record that position.

        Only if Chroma did not move meanwhile (a reconcile reads Chroma, never writes it).
        """
        now = read_position(self.folder)
        if before is None or now != before:
            self.forget()
            return
        self._trust(now)
        self.sidecar.set_meta({POSITION_KEY: self._token(now)})

    def checkpoint(self) -> None:
        """After a write reached Chroma and the sidecar: move the recorded position with it.

        Moved only when Chroma advanced by exactly the records this store wrote since the
        last position; otherwise it is forgotten (the next open reconciles).
        """
        if self._base is None:
            return
        grown = self.collection.written - self._counted
        now = read_position(self.folder)
        if now == self._base and not grown and not self.collection.unknown:
            return
        if now is None or self.collection.unknown or now - self._base != grown:
            self.forget()
            return
        self._trust(now)
        self.sidecar.set_meta({POSITION_KEY: self._token(now)})

    def forget(self) -> None:
        """The sidecar no longer vouches for a position (until a full reconcile)."""
        if self._base is not None or self.sidecar.get_meta(POSITION_KEY):
            self.sidecar.set_meta({POSITION_KEY: ""})
        self._base = None

    def now(self) -> int | None:
        """Chroma's position now (``None``: unreadable)."""
        return read_position(self.folder)

    @property
    def known(self) -> bool:
        """Whether the sidecar matches a known position of Chroma's."""
        return self._base is not None


class NoPosition:
    """The keeper of a store whose position cannot be read (in memory, a client)."""

    known = False

    def trusted(self) -> bool:  # noqa: D102 (see PositionKeeper)
        return False

    def now(self) -> int | None:  # noqa: D102
        return None

    def reconciled(self, before: int | None) -> None:  # noqa: D102
        return None

    def checkpoint(self) -> None:  # noqa: D102
        return None


def keeper(folder: Path | None, collection: Any, sidecar: Any) -> PositionKeeper | NoPosition:
    """The position keeper of an embedded store's counted collection."""
    if folder is None or not isinstance(collection, CountedCollection):
        return NoPosition()
    return PositionKeeper(folder, collection, sidecar)


def reconcile_at_open(
    keeper: PositionKeeper | NoPosition,
    indexes: Any,
    collection: Any,
    row_from_record: Callable[[str, str, dict[str, Any]], Any],
) -> None:
    """Make the sidecar hold Chroma's ids at open, reading Chroma only when it must.

    Recorded position is Chroma's, nothing pending: nothing is read. Position differs or
    is missing: every id is compared now and the position recorded. Unreadable (in memory,
    another Chroma): counts now, each namespace's ids as it loads (``lazy``).
    """
    if not indexes.sidecar.pending() and keeper.trusted():
        return
    before = keeper.now()
    if before is None:
        indexes.reconcile(collection, row_from_record, lazy=True)
        return
    indexes.reconcile(collection, row_from_record, defer=True)
    keeper.reconciled(before)
    indexes.flush_unpublish()  # published snapshots of what changed: counted writes
    keeper.checkpoint()
