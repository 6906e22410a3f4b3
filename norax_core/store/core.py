"""The :class:`Store`: one Chroma collection, its sidecar, its derived indexes and their lock.

Chroma holds the truth (texts, embeddings, metadata); the derived indexes (BM25, recency,
entity graph, id catalog) are rebuilt from it and persisted in the sidecar. The store keeps
them in step: every write goes through :meth:`Store.write` / :meth:`Store.delete` under
:attr:`Store.lock`, other processes' writes arrive through :meth:`Store.maybe_sync` and
:meth:`Store.refresh`, and :mod:`norax_core.store.consistency` checks and repairs them.

The engine (:class:`~norax_core.engine.NoraxMemory`) validates, embeds and ranks; it reaches
the indexes through :attr:`Store.indexes` only, so the store is the one place that decides
which namespaces' indexes are in memory.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import chromadb
import numpy as np

from norax_core.batch import (
    CREATED_KEY,
    Prepared,
    checked_embeddings,
    follower_texts,
    replacing_metadata,
    stored_times,
)
from norax_core.config import NoraxConfig
from norax_core.embedders import Embedder
from norax_core.errors import InvalidInputError, NoraxError
from norax_core.indexes import DerivedIndexes, chroma_pages
from norax_core.locking import StoreLock
from norax_core.models import Memory
from norax_core.sidecar import IndexRow, Sidecar
from norax_core.signals.dense import EXACT_LIMIT, DenseSignal, chroma_where
from norax_core.store.chroma import drop_collection, memory_from_record, open_collection
from norax_core.sync import ChangeLog

logger = logging.getLogger("norax")

SIDECAR_FILE = "norax_index.sqlite3"
DEFAULT_COLLECTION = "norax"
CHROMA_BATCH = 4_000
RESTATE_KEY = "restate_pending"
"""Sidecar key: memories whose re-embedding in a new context (``embed_context``) a write
began and may not have finished."""

Followers = tuple[list[str], np.ndarray]
"""Stored memories whose context a write changes, with their new embeddings."""
TextsOf = Callable[[list[str]], dict[str, str]]
EmbeddingTexts = Callable[[list[str], list[str], list[float], list[str]], list[str]]


class Store:
    """A Norax collection in Chroma with its derived indexes, opened for one process.

    Args:
        path: Folder of an embedded persistent store, or ``None``.
        client: A Chroma client instead of ``path``; neither keeps everything in memory.
        collection: Chroma collection name (an in-memory store picks a unique one).
        embedder: The embedder the collection's vectors come from (its name and dimension
            are recorded in the collection; followers are re-embedded with it).
        config: Configuration of the derived indexes.
        index_path: Sidecar file location when ``client`` is given.
        lock: Take an exclusive lock on an embedded ``path``.
        sync: The change log of a client-mode store, or ``None``.
        reconcile: Re-sync the derived indexes with Chroma at open.

    A failed open releases what it took (the lock, Chroma's files) before raising.
    """

    def __init__(
        self,
        path: Path | None,
        client: Any,
        collection: str,
        *,
        embedder: Embedder,
        config: NoraxConfig,
        index_path: str | Path | None = None,
        lock: bool = True,
        sync: ChangeLog | None = None,
        reconcile: bool = True,
    ) -> None:
        self.path = path
        self.embedder = embedder
        self.config = config
        self.sync = sync
        self.lock = threading.RLock()
        """Held by every write, sync and read of the indexes (re-entrant)."""
        self.closed = False
        self._store_lock: StoreLock | None = None
        self._owns_client = False
        try:
            self._open(client, collection, index_path, lock, reconcile)
        except BaseException:
            # A failed open must not keep the store locked (or Chroma's files open) for the
            # rest of the process.
            self.release()
            raise

    def _open(
        self,
        client: Any,
        collection: str,
        index_path: str | Path | None,
        lock: bool,
        reconcile: bool,
    ) -> None:
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            if lock:
                self._store_lock = StoreLock(self.path / "norax.lock")
            self.client = chromadb.PersistentClient(path=str(self.path))
            self._owns_client = True
            sidecar_path: Path | None = self.path / SIDECAR_FILE
        elif client is not None:
            self.client = client
            sidecar_path = Path(index_path) if index_path is not None else None
        else:
            # EphemeralClients in one process share state: a unique collection keeps this
            # memory independent of every other one, and is dropped when it is closed.
            self.client = chromadb.EphemeralClient()
            collection = f"norax-{uuid.uuid4().hex[:16]}"
            sidecar_path = None
        self.name = collection
        self.collection = open_collection(self.client, collection, self.embedder)
        if client is None and self.path is None:
            self._finalizer = weakref.finalize(self, drop_collection, self.client, collection)

        self.indexes = DerivedIndexes(Sidecar(sidecar_path), self.config)
        self.dense = DenseSignal(
            self.collection,
            lambda mid: self.indexes.namespace_of.get(mid),
            members=self.small_namespace,
        )
        self.indexes.load()
        if reconcile:
            self.indexes.reconcile(self.collection, self.row_from_record)

    # -- closing ------------------------------------------------------------------------

    def close(self) -> None:
        """Save what is costly to recompute and release everything; idempotent."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            if self.indexes.sidecar.path is not None:
                self.indexes.save_state()
            self.release()

    def release(self) -> None:
        """Close the sidecar and Chroma's files, drop an in-memory collection, unlock."""
        indexes = getattr(self, "indexes", None)
        if indexes is not None:
            indexes.sidecar.close()
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin()
        if self._owns_client:
            # Chroma caches one system per path for the whole process; closing our client
            # drops it, so a later open sees what other processes wrote since (a cached
            # system keeps a stale HNSW index in memory).
            self._owns_client = False
            close = getattr(self.client, "close", None)  # chromadb >= 1.1
            if close is not None:
                close()
        if self._store_lock is not None:
            self._store_lock.release()
            self._store_lock = None

    # -- writes (callers hold the lock) -------------------------------------------------

    def write(self, p: Prepared, *, upsert: bool) -> None:
        """Chroma first (the truth), then the derived indexes; undo Chroma on failure.

        The ids are logged as pending in the sidecar before Chroma is written and cleared
        with their rows, so a crash in between is repaired at the next open.
        """
        op = self.collection.upsert if upsert else self.collection.add
        done: list[str] = []
        self.indexes.sidecar.mark_pending(p.ids)
        try:
            for s in range(0, len(p.ids), CHROMA_BATCH):
                e = s + CHROMA_BATCH
                metas = p.metadatas[s:e]
                op(
                    ids=p.ids[s:e],
                    documents=p.texts[s:e],
                    embeddings=p.embeddings[s:e],
                    metadatas=replacing_metadata(self.collection, p.ids[s:e], metas)
                    if upsert
                    else metas,
                )
                done.extend(p.ids[s:e])
            self.indexes.apply(p.rows)
            if self.sync is not None:
                self.sync.record("upsert" if upsert else "add", p.ids)
        except BaseException as exc:  # KeyboardInterrupt too: the store stays usable
            if done and not upsert:
                self.collection.delete(ids=done)
            try:  # re-derive the batch from whatever Chroma now holds
                self.indexes.resync(self.collection, p.ids, self.row_from_record)
            except Exception:  # the ids stay pending: the next open reconciles them
                logger.exception("norax: could not re-derive a failed batch from Chroma")
            if isinstance(exc, NoraxError) or not isinstance(exc, Exception):
                raise
            raise InvalidInputError(f"Chroma rejected the batch: {exc}") from exc

    def delete(self, ids: list[str]) -> None:
        """Delete stored memories from Chroma and the indexes, and log it for the others."""
        self.collection.delete(ids=ids)
        self.indexes.remove(ids)
        if self.sync is not None:
            self.sync.record("delete", ids)

    # -- context followers (``NoraxConfig.embed_context``) ------------------------------

    def followers(
        self, p: Prepared | None, gone: Sequence[str], cfg: NoraxConfig, texts: TextsOf
    ) -> Followers | None:
        """The stored memories whose context a write changes, with their new embeddings.

        See :func:`~norax_core.batch.follower_texts`. Computed before the write (under the
        lock), so an embedder failure writes nothing.
        """
        if cfg.embed_context <= 0:
            return None
        found, new_texts = follower_texts(
            p.rows if p is not None else [],
            p.texts if p is not None else [],
            gone,
            cfg,
            self.indexes.temporal,
            self.indexes.namespace_of,
            texts,
        )
        if not found:
            return None
        embedder = self.embedder
        vectors = checked_embeddings(embedder, embedder.embed(new_texts), len(found))
        # Until they are stored, a crash would leave them embedded in their old context: the
        # next open re-embeds what this mark lists (:meth:`finish_restating`).
        self.mark_restating(found, add=True)
        return found, vectors

    def restate(self, followers: Followers | None) -> None:
        """Store the followers' new embeddings (see :meth:`followers`).

        The write itself is done and acknowledged: a failure here leaves the followers with
        their previous embeddings (context as it was), logged, never a half-written memory.
        """
        if followers is None:
            return
        ids, vectors = followers
        try:
            for s in range(0, len(ids), CHROMA_BATCH):
                e = s + CHROMA_BATCH
                self.collection.update(ids=ids[s:e], embeddings=vectors[s:e])
        except Exception:  # marked: the next open re-embeds them
            logger.exception("norax: could not re-embed %d memories in new context", len(ids))
        else:
            self.mark_restating(ids, add=False)

    def mark_restating(self, ids: Sequence[str], *, add: bool) -> None:
        """Add ``ids`` to (or remove them from) the sidecar's list of memories to re-embed."""
        sidecar = self.indexes.sidecar
        marked = json.loads(sidecar.get_meta(RESTATE_KEY) or "[]")
        now = set(marked) | set(ids) if add else set(marked) - set(ids)
        if now != set(marked):
            sidecar.set_meta({RESTATE_KEY: json.dumps(sorted(now))})

    def finish_restating(self, embedding_texts: EmbeddingTexts, texts: TextsOf) -> None:
        """Re-embed the memories a write left marked (it was interrupted before storing them)."""
        marked = json.loads(self.indexes.sidecar.get_meta(RESTATE_KEY) or "[]")
        if not marked:
            return
        home, catalog = self.indexes.namespace_of, self.indexes.temporal
        ids = [m for m in marked if m in home]
        if ids:
            spaces = [home[m] for m in ids]
            times = stored_times(catalog, home, ids)
            text_of = texts(ids)
            inputs = embedding_texts(ids, [text_of.get(m, "") for m in ids], times, spaces)
            vectors = checked_embeddings(self.embedder, self.embedder.embed(inputs), len(ids))
            self.restate((ids, vectors))
            logger.info("norax: re-embedded %d memories an interrupted write left", len(ids))
        self.mark_restating(marked, add=False)

    # -- other processes' writes --------------------------------------------------------

    def maybe_sync(self) -> None:
        """Apply other processes' writes when a pull is due (:mod:`norax_core.sync`)."""
        if self.sync is not None:
            self.sync.sync(self.collection, self.indexes, self.row_from_record)

    def refresh(self) -> tuple[int, int]:
        """Re-sync the derived indexes with Chroma (writes by other processes).

        Returns:
            ``(added, removed)`` counts.
        """
        with self.lock:
            started = time.time()
            counts = self.indexes.reconcile(self.collection, self.row_from_record)
            if self.sync is not None:
                self.sync.reconciled(started)
            return counts

    # -- reads and hooks for the consistency check --------------------------------------

    def count(self, namespace: str | None = None) -> int:
        """Number of memories, in one (valid) namespace or (``None``) in all."""
        with self.lock:
            self.maybe_sync()
            if namespace is None:
                return len(self.indexes.namespace_of)
            return self.indexes.temporal.count(namespace)

    def namespaces(self) -> list[str]:
        """Namespaces that hold at least one memory."""
        with self.lock:
            self.maybe_sync()
            return sorted(set(self.indexes.namespace_of.values()))

    def records(self, ids: Sequence[str]) -> dict[str, Memory]:
        """The stored memory of each of ``ids`` that exists, by id."""
        if not ids:
            return {}
        got = self.collection.get(ids=list(dict.fromkeys(ids)), include=["documents", "metadatas"])
        return {
            mid: memory_from_record(mid, doc, dict(meta or {}))
            for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        }

    def texts(self, ids: list[str]) -> dict[str, str]:
        """The stored text of each of ``ids`` that exists."""
        return {mid: m.text for mid, m in self.records(ids).items()}

    def embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each of ``ids`` that exists (float32, unit norm)."""
        id_list = list(dict.fromkeys(ids))
        if not id_list:
            return {}
        got = self.collection.get(ids=id_list, include=["embeddings"])
        if got["embeddings"] is None:
            return {}
        return {
            mid: np.asarray(vec, dtype=np.float32)
            for mid, vec in zip(got["ids"], got["embeddings"], strict=True)
        }

    def pages(
        self, include: list[str], where: dict[str, Any] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Chroma's records (``include`` fields, ``where`` filter), a page at a time."""
        return chroma_pages(self.collection, include, where)

    def resync(self, ids: Sequence[str]) -> tuple[int, int]:
        """Re-derive ``ids`` from Chroma (see :meth:`DerivedIndexes.resync`)."""
        return self.indexes.resync(self.collection, ids, self.row_from_record)

    def rebuild_indexes(self) -> None:
        """Replace the in-memory indexes by a fresh load of the sidecar."""
        self.indexes.save_state()
        fresh = DerivedIndexes(self.indexes.sidecar, self.indexes.config)
        fresh.load()
        self.indexes = fresh

    def small_namespace(self, namespace: str) -> set[str] | None:
        """A namespace's ids when the dense signal searches it exactly (it is small enough).

        Called by a search (holding the lock) from the worker thread: reads only.
        """
        catalog = self.indexes.temporal
        return catalog.ids(namespace) if catalog.count(namespace) <= EXACT_LIMIT else None

    def allowed(self, ns: str, flt: dict[str, Any] | None) -> frozenset[str] | None:
        """The ids of namespace ``ns`` that pass the user's metadata filter ``flt``."""
        if flt is None:
            return None
        try:
            got = self.collection.get(where=chroma_where(ns, flt), include=[])
        except Exception as exc:
            raise InvalidInputError(f"invalid where filter {flt!r}: {exc}") from exc
        return frozenset(got["ids"])

    def row_from_record(self, mid: str, doc: str, meta: dict[str, Any]) -> IndexRow:
        """What the derived indexes hold of a Chroma record."""
        mem = memory_from_record(mid, doc, meta)
        return IndexRow(
            mid,
            mem.namespace,
            mem.kind,
            float(meta.get(CREATED_KEY, 0.0)),  # the stored float: a datetime rounds to µs
            tuple(self.indexes.tokenizer(doc)),
            mem.entities,
        )
