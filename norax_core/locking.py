"""One writer per embedded store.

Chroma's embedded ``PersistentClient`` and Norax's sidecar are not safe to open from several
processes at once: each process would keep its own in-memory indexes and they would drift,
and concurrent SQLite/HNSW writers can corrupt the store. So an embedded store takes an
exclusive, non-blocking lock on ``<store>/norax.lock``; a second opener (another process, or
another ``NoraxMemory`` in this one) fails at once with :class:`StoreLockedError` instead of
corrupting anything. For several processes, run a Chroma server (``chroma run``) and open it
with ``NoraxMemory(client=chromadb.HttpClient(...))``.

The lock is `filelock <https://py-filelock.readthedocs.io>`_'s ``FileLock``: ``flock`` on
Linux and macOS, ``msvcrt.locking`` on Windows. Both are held by an open file handle that
the operating system closes when the process dies, so a crash never leaves a stale lock.
"""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock, Timeout

from norax_core.errors import StoreLockedError


class StoreLock:
    """An exclusive lock on a file, held until :meth:`release`.

    Raises:
        StoreLockedError: Another holder (process or ``StoreLock``) has it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # thread_local=False: the store may be closed from another thread than the one that
        # opened it (asyncio.to_thread, a finaliser), and the release must still count.
        lock = FileLock(str(path), timeout=0, thread_local=False)
        try:
            lock.acquire(blocking=False)
        except Timeout:
            raise StoreLockedError(
                f"the store at {path.parent} is open in another process (or another "
                "NoraxMemory in this one); close it first, or share it through a Chroma "
                "server (chroma run + chromadb.HttpClient)"
            ) from None
        self._lock: FileLock | None = lock

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._lock is not None:
            self._lock.release(force=True)
            self._lock = None
