"""Give memory freed by namespace loads and evictions back to the operating system.

A client worker reads each cold namespace from Chroma: the HTTP response, decoded to Python
objects, costs about 100 KB per memory for a moment (vectors included) and is freed as soon as
the namespace is indexed; an eviction frees the namespace's indexes and matrix. glibc keeps
most of that freed memory in its heap arenas (the top of a heap only is returned), so without
help a worker's RSS stays tens of MB above what its budgets hold, whichever namespaces it
serves next. :class:`Reclaimer` counts the bytes freed that way and, once at least
``threshold`` bytes are due, calls glibc's ``malloc_trim(0)``, which returns the free pages of
every arena (2-3 ms for a worker's heap of about 150 MB, measured). Where the C library has no
``malloc_trim`` (macOS, musl, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable

TRIM_AFTER = 32 * 2**20
"""Bytes freed (estimated) between two trims: a trim costs a few ms, a cold 1k namespace's
read about 100 MB of transient objects, so a trim follows each large read and one per few
dozen small ones."""

READ_BYTES_PER_ROW = 64 * 1024
"""Transient bytes a client's read of one memory (with its vector) from Chroma leaves freed."""


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        fn = ctypes.CDLL(None).malloc_trim  # the C library this process runs on
    except (OSError, AttributeError, TypeError):  # TypeError: Windows needs a library name
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_TRIM = _malloc_trim()


def available() -> bool:
    """Whether the C library can return freed heap memory (glibc's ``malloc_trim``)."""
    return _TRIM is not None


class Reclaimer:
    """Counts bytes freed and trims the heap once ``threshold`` of them are due.

    Thread-safe (a search's matrix evictions happen in its worker thread).

    Args:
        threshold: Bytes due before :meth:`settle` trims; 0 trims at every settle with any due.
    """

    def __init__(self, threshold: int = TRIM_AFTER) -> None:
        self.threshold = threshold
        self.due = 0
        self.trims = 0
        self.cpu_s = 0.0
        """CPU seconds spent in trims so far."""
        self._lock = threading.Lock()

    def freed(self, nbytes: int) -> None:
        """Note ``nbytes`` freed (estimated); nothing is trimmed until :meth:`settle`."""
        if nbytes > 0:
            with self._lock:
                self.due += nbytes

    def settle(self) -> bool:
        """Trim if at least ``threshold`` bytes are due; whether it trimmed."""
        with self._lock:
            if self.due < max(self.threshold, 1) or _TRIM is None:
                return False
            self.due = 0
            t0 = time.process_time()
            _TRIM(0)
            self.cpu_s += time.process_time() - t0
            self.trims += 1
            return True
