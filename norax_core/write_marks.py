"""Write marks: which namespaces Norax wrote, kept in Chroma where every process sees them.

A client's namespace snapshot (:mod:`norax_core.client_snapshots`) is valid only while
nobody has written its namespace since its rows were read, and other processes write to
the same server. Chroma has no per-record version a client could ask for, so every write
by Norax leaves a mark in the companion collection ``<name>__norax_marks``: one record per
namespace and writing process, set *busy* with a fresh token before the write reaches
Chroma and *done* with another fresh token after it, whether it succeeded or not. A
namespace's **basis** (:meth:`WriteMarks.basis`) is a hash of its marks' tokens and of the
store-wide mark (:data:`ALL`, left by a write whose namespaces are not known): any write
since changes it.

A snapshot is stored with the basis read *before* its rows were read and served only while
the basis is the same. While a mark is busy there is no basis (no snapshot is served or
stored): a reader could otherwise read the rows before a write lands and the basis after
its busy mark, and a write interrupted for good (a crash) would keep the two equal. A busy
mark older than :data:`BUSY_EXPIRY` is taken as interrupted (rows read now hold whatever it
wrote), assuming, like the change log's ``lookback`` (:mod:`norax_core.sync`), that
writers' clocks agree within that bound. A process sends its marks in order from one
thread; a write waits for its busy mark, not for its done mark (a late one only delays
the next snapshot). Writes made without Norax leave no mark: after them,
:func:`~norax_core.maintenance.repair_store` re-derives what differs and drops the
snapshots.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

logger = logging.getLogger("norax")

MARKS_SUFFIX = "__norax_marks"
"""The marks of collection ``name`` are the collection ``name + MARKS_SUFFIX``."""
ALL = "\x00all"
"""The namespace of the store-wide mark (a write whose namespaces are not known)."""
BUSY_EXPIRY = 3600.0
"""Seconds after which a busy mark is taken as a write that was interrupted for good."""
_PLACEHOLDER = [1.0]  # Chroma needs an embedding per record; marks never use it


def _key(namespace: str) -> str:
    return hashlib.sha1(namespace.encode()).hexdigest()[:24]


class WriteMarks:
    """One process's marks in a collection's companion marks collection.

    Args:
        collection: The marks collection (see :meth:`open`).
        clock: Wall clock (epoch seconds); injectable for tests.
    """

    def __init__(self, collection: Any, clock: Callable[[], float] = time.time) -> None:
        self._col = collection
        self.clock = clock
        self.writer = uuid.uuid4().hex[:12]
        self._queue: ThreadPoolExecutor | None = None  # one thread: marks land in order

    @classmethod
    def open(cls, client: Any, name: str, create: bool) -> WriteMarks | None:
        """The marks of collection ``name`` on ``client``.

        ``create``: create the marks collection if it does not exist (a client of a server);
        otherwise (an embedded store) ``None`` is returned for a store without one: no
        client has kept snapshots of it, so its writes need no marks.
        """
        if create:
            col = client.get_or_create_collection(
                name + MARKS_SUFFIX, embedding_function=None, metadata={"norax_marks": 1}
            )
            return cls(col)
        try:
            return cls(client.get_collection(name + MARKS_SUFFIX, embedding_function=None))
        except Exception:  # noqa: BLE001 - no marks collection: nobody keeps client snapshots
            return None

    def _send(self, spaces: list[str], busy: bool) -> Future[None]:
        if self._queue is None:
            self._queue = ThreadPoolExecutor(max_workers=1, thread_name_prefix="norax-marks")
        return self._queue.submit(self._set, spaces, busy)

    def close(self) -> None:
        """Wait for the marks still being sent."""
        if self._queue is not None:
            self._queue.shutdown(wait=True)
            self._queue = None

    def _set(self, namespaces: Iterable[str], busy: bool) -> None:
        spaces = sorted(set(namespaces))
        if not spaces:
            return
        now = self.clock()
        self._col.upsert(
            ids=[f"{_key(ns)}:{self.writer}" for ns in spaces],
            metadatas=[
                {"ns": ns, "busy": busy, "token": uuid.uuid4().hex, "ts": now} for ns in spaces
            ],
            embeddings=[_PLACEHOLDER] * len(spaces),
        )

    @contextlib.contextmanager
    def writing(self, namespaces: Iterable[str] | None) -> Iterator[None]:
        """Mark ``namespaces`` (``None``: every namespace) busy for the block, then done.

        Done is set whether the block succeeds or not (its write may have landed in part);
        if setting it fails the marks stay busy until :data:`BUSY_EXPIRY`.
        """
        spaces = [ALL] if namespaces is None else list(namespaces)
        self._send(spaces, busy=True).result()  # after every earlier mark of this process
        try:
            yield
        finally:
            self._send(spaces, busy=False).add_done_callback(_warn)

    def basis(self, namespace: str) -> str | None:
        """A hash of the marks of ``namespace``, or ``None`` while a write to it is under way."""
        got = self._col.get(where={"ns": {"$in": [namespace, ALL]}}, include=["metadatas"])
        now = self.clock()
        parts = []
        for mid, meta in zip(got["ids"], got["metadatas"], strict=True):
            meta = meta or {}
            if meta.get("busy") and now - float(meta.get("ts", 0.0)) < BUSY_EXPIRY:
                return None
            parts.append(f"{mid}={meta.get('token')}")
        return hashlib.sha1("\n".join(sorted(parts)).encode()).hexdigest()[:24]


def _warn(done: Future[None]) -> None:
    if done.exception() is not None:  # the write itself is done; the mark stays busy
        logger.warning("norax: could not clear a write mark: %s", done.exception())
