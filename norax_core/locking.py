"""One writer per embedded store.

Chroma's embedded ``PersistentClient`` and Norax's sidecar are not safe to open from several
processes at once: each process would keep its own in-memory indexes and they would drift,
and concurrent SQLite/HNSW writers can corrupt the store. So an embedded store takes an
exclusive, non-blocking ``flock`` on ``<store>/norax.lock``; a second opener fails at once
with :class:`StoreLockedError` instead of corrupting anything. The lock dies with the
process, so a crash never leaves a stale lock behind. For several processes, run a Chroma
server (``chroma run``) and open it with ``NoraxMemory(client=chromadb.HttpClient(...))``.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from norax_core.errors import StoreLockedError


class StoreLock:
    """An exclusive advisory lock on a file, held until :meth:`release`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise StoreLockedError(
                f"the store at {path.parent} is open in another process (or another "
                "NoraxMemory in this one); close it first, or share it through a Chroma "
                "server (chroma run + chromadb.HttpClient)"
            ) from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, str(os.getpid()).encode())

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
