"""The :class:`Store`: one Chroma collection, its sidecar, its derived indexes and their lock.

Chroma holds the truth (texts, embeddings, metadata); the derived indexes (BM25, recency,
entity graph, id catalog) are rebuilt from it and persisted in the sidecar. The store keeps
them in step: every write goes through :meth:`Store.write` / :meth:`Store.delete` under
its ``lock``, other processes' writes arrive through :meth:`Store.maybe_sync` and
:meth:`Store.refresh`, and :mod:`norax_core.store.consistency` checks and repairs them.

The engine (:class:`~norax_core.engine.NoraxMemory`) validates, embeds and ranks, and
:mod:`norax_core.maintenance` checks and exports; both reach Chroma and the indexes through
this object, never through each other's fields. What the store holds in memory is its own
decision: the namespaces in use, loaded lazily under a budget (:mod:`norax_core.indexes`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import chromadb
import networkx as nx
import numpy as np

from norax_core.batch import CREATED_KEY, INFERRED_KIND_KEY, KIND_KEY, SEQ_KEY
from norax_core.client_snapshots import open_shared
from norax_core.config import NoraxConfig
from norax_core.embedders import Embedder
from norax_core.errors import InvalidInputError
from norax_core.indexes import chroma_pages
from norax_core.locking import StoreLock
from norax_core.models import Memory
from norax_core.sidecar import IndexRow, Sidecar
from norax_core.signals.dense import NAMESPACE_KEY, DenseSignal, chroma_where
from norax_core.signals.vectors import NamespaceMatrix, fetch_ids
from norax_core.store import publishing
from norax_core.store.chroma import (
    ChromaRows,
    drop_collection,
    index_row,
    open_collection,
    seq,
    store_records,
)
from norax_core.store.kind_rule import rederive_kinds
from norax_core.store.position import CountedCollection, keeper, reconcile_at_open
from norax_core.store.writes import WritePath
from norax_core.sync import ChangeLog

logger = logging.getLogger("norax")

SIDECAR_FILE = "norax_index.sqlite3"
DEFAULT_COLLECTION = "norax"


class Store(WritePath):
    """A Norax collection in Chroma with its derived indexes, opened for one process.

    Writes and context re-embedding come from :class:`~norax_core.store.writes.WritePath`.

    Args:
        path: Folder of an embedded persistent store, or ``None``.
        client: A Chroma client instead of ``path``; neither keeps everything in memory.
        collection: Chroma collection name (an in-memory store picks a unique one).
        embedder: The embedder the collection's vectors come from (its name and dimension
            are recorded in the collection; followers are re-embedded with it).
        config: Configuration of the derived indexes.
        add_config: The configuration memories are added with, asked at each write (its
            ``embed_context`` settings decide what the embedder reads); default ``config``.
        index_path: Sidecar file location when ``client`` is given.
        lock: Take an exclusive lock on an embedded ``path``.
        sync: The change log of a client-mode store, or ``None``.
        reconcile: Re-sync the derived indexes with Chroma at open.
        snapshot_path: With ``client``: a shared snapshot file (:mod:`norax_core.client_snapshots`).

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
        add_config: Callable[[], NoraxConfig] | None = None,
        snapshot_path: str | Path | None = None,
    ) -> None:
        self.path = path
        self.embedder = embedder
        self.config = config
        self.add_config = add_config or (lambda: config)
        self.sync = sync
        self.lock = threading.RLock()
        """Held by every write, sync and read of the indexes (re-entrant)."""
        self.closed = False
        self._store_lock: StoreLock | None = None
        self._owns_client = False
        try:
            self._open(client, collection, index_path, lock, reconcile, snapshot_path)
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
        snaps: str | Path | None,
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
        if self.path is not None:  # its writes are counted (norax_core.store.position)
            self.collection = CountedCollection(self.collection)
        if client is None and self.path is None:
            self._finalizer = weakref.finalize(self, drop_collection, self.client, self.collection)
            self._finalizer.atexit = False  # the in-memory database ends with the process
        shared = open_shared(self.collection, self.sync, client is not None, snaps)

        # A client's namespaces are read from Chroma (other processes write there); an
        # embedded or in-memory store's from its sidecar, which this process alone writes.
        source = (
            ChromaRows(
                self.collection,
                self.row_from_record,
                lambda ns, block: self.indexes.vectors_with_rows(ns, block),
            )
            if client is not None
            else None
        )
        self.indexes = publishing.derived(self, Sidecar(sidecar_path), source, shared, client)
        # Lambdas, not bound methods: a repair may replace the derived indexes.
        self.dense = DenseSignal(
            self.collection,
            lambda mid: self.indexes.namespace_of.get(mid),
            cache=lambda: self.indexes.vectors,
            size=lambda ns: self.indexes.temporal.count(ns),
            members=lambda ns: self.indexes.temporal.ids(ns),
            exact_limit=self.config.dense_exact_limit,
            on_load=lambda ns, block: self.indexes.vectors_read(ns, block),
        )
        self.position = keeper(self.path, self.collection, self.indexes.sidecar)
        self.checkpoint = self.position.checkpoint  # after each write (WritePath)
        self.indexes.load()
        if reconcile:  # nothing read from Chroma when its write position is the recorded one
            reconcile_at_open(self.position, self.indexes, self.collection, self.row_from_record)
        if reconcile and self.indexes.source.complete:  # a client reads Chroma's kinds
            sync = self.sync
            rederive_kinds(
                self.collection,
                self.indexes,
                self.row_from_record,
                None if sync is None else lambda ids: sync.record("upsert", ids),
            )

    def holds(self) -> bool:
        """Whether the collection holds a memory (the sidecar says, when it matches Chroma)."""
        known = self.position.known
        return not self.indexes.sidecar.empty() if known else int(self.collection.count()) > 0

    # -- closing ------------------------------------------------------------------------

    def close(self) -> None:
        """Save what is costly to recompute and release everything; idempotent."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            if self.indexes.sidecar.path is not None:
                self.indexes.finish(self.vectors_of)
                self.indexes.save_state()
                self.checkpoint()  # a write behind Norax's back meanwhile: forgotten
            self.indexes.publish()
            self.release()

    def release(self) -> None:
        """Close the sidecar and Chroma's files, drop an in-memory collection, unlock."""
        indexes = getattr(self, "indexes", None)
        if indexes is not None:
            indexes.close()  # its community worker thread, sidecar and snapshot file
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

    def vectors_of(self, namespace: str, ids: set[str]) -> NamespaceMatrix | None:
        """A namespace's vectors for its snapshot, if it ranks from a matrix (by id)."""
        if len(ids) > self.config.dense_exact_limit:
            return None
        block = fetch_ids(self.collection, ids)
        return block if len(block) == len(ids) else None

    # -- other processes' writes --------------------------------------------------------

    def maybe_sync(self, namespace: str | None = None) -> None:
        """Apply other processes' writes when a pull is due (:mod:`norax_core.sync`).

        A read of one ``namespace`` that is not loaded skips it: that namespace is about to
        be read whole from Chroma, and a pull only updates loaded namespaces, so this read
        sees every write either way; the pull stays due for the next read of a loaded one
        (it reads the same entries then). It saves a cold namespace's first query a round
        trip.
        """
        if self.sync is None or (namespace is not None and not self.indexes.holds(namespace)):
            return
        self.sync.sync(self.collection, self.indexes, self.row_from_record)

    def refresh(self) -> tuple[int, int]:
        """Re-sync the derived indexes with Chroma (others' writes): ``(added, removed)``."""
        with self.lock:
            started = time.time()
            before = self.position.now()
            counts = self.indexes.reconcile(self.collection, self.row_from_record, defer=True)
            self.position.reconciled(before)
            self.indexes.flush_unpublish()
            self.checkpoint()
            if self.sync is not None:
                self.sync.reconciled(started)
            return counts

    # -- reads and hooks for the consistency check --------------------------------------

    def count(self, namespace: str | None = None) -> int:
        """Number of memories, in one (valid) namespace or (``None``) in all."""
        with self.lock:
            self.maybe_sync()
            return self.indexes.count(namespace)

    def namespaces(self) -> list[str]:
        """Namespaces that hold at least one memory."""
        with self.lock:
            self.maybe_sync()
            return self.indexes.namespaces()

    def records(
        self, ids: Sequence[str], *, local: bool = False, namespace: str | None = None
    ) -> dict[str, Memory]:
        """Each of ``ids`` stored (in ``namespace``), by id; ``local``: :func:`store_records`."""
        return store_records(
            self.collection, self.indexes, self.sync, ids, local, namespace, self.lock
        )

    def roles(self, namespace: str, ids: Sequence[str]) -> dict[str, str]:
        """The ``role`` of each of ``ids`` in the loaded ``namespace`` (held in memory)."""
        return self.indexes.roles(namespace, ids)

    def texts(self, ids: list[str]) -> dict[str, str]:
        """The stored text of each of ``ids`` that exists."""
        return {mid: m.text for mid, m in self.records(ids).items()}

    def embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each of ``ids`` that exists (float32, unit norm)."""
        id_list = list(dict.fromkeys(ids))
        return self.dense.vectors(id_list) if id_list else {}

    def superseding(self, namespace: str, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """The memories linked as superseding each of ``ids`` (:mod:`norax_core.supersession`)."""
        with self.lock:
            return self.indexes.supersede.newer(namespace, ids)

    def pages(
        self, include: list[str], where: dict[str, Any] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Chroma's records (``include`` fields, ``where`` filter), a page at a time."""
        return chroma_pages(self.collection, include, where)

    def browse(
        self,
        namespace: str,
        *,
        kind: str | None = None,
        inferred_kind: str | None = None,
        since: float | None = None,
        until: float | None = None,
        where: dict[str, Any] | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[int, list[Memory]]:
        """A page of a namespace's memories, newest first, and how many pass the filters.

        Args:
            namespace: The namespace (validated by the caller).
            kind: Only memories of this kind.
            inferred_kind: Only memories whose inferred kind (:data:`INFERRED_KIND_KEY`,
                where the store records one) is this.
            since: Only memories created at or after this time (epoch seconds).
            until: Only memories created before this time (epoch seconds).
            where: A Chroma filter on user metadata.
            limit: Page size.
            offset: Memories to skip, in the order newest first (ties: latest write first).

        Raises:
            InvalidInputError: Chroma refuses the filter.
        """
        terms: list[dict[str, Any]] = [{NAMESPACE_KEY: namespace}]
        terms += [{KIND_KEY: kind}] if kind else []
        terms += [{INFERRED_KIND_KEY: inferred_kind}] if inferred_kind else []
        terms += [{CREATED_KEY: {"$gte": since}}] if since is not None else []
        terms += [{CREATED_KEY: {"$lt": until}}] if until is not None else []
        terms += [where] if where else []
        flt = terms[0] if len(terms) == 1 else {"$and": terms}
        with self.lock:
            self.maybe_sync()
            try:
                got = self.collection.get(where=flt, include=["metadatas"])
            except Exception as exc:
                raise InvalidInputError(f"invalid filter {where!r}: {exc}") from exc
        order = sorted(
            zip(got["ids"], got["metadatas"], strict=True),
            key=lambda im: (-float(im[1].get(CREATED_KEY, 0.0)), -seq(im[1].get(SEQ_KEY)), im[0]),
        )
        page = [mid for mid, _ in order[offset : offset + limit]]
        found = self.records(page)
        return len(order), [found[mid] for mid in page if mid in found]

    def neighbourhood(
        self, namespace: str, memory_id: str, limit: int = 8
    ) -> tuple[nx.Graph, dict[str, list[str]]]:
        """A memory's place in its namespace's entity graph.

        Returns:
            The memory's entities with each one's ``limit`` strongest neighbours and the edges
            among them
            (:meth:`~norax_core.signals.entity_graph.EntityGraph.neighbourhood`), and for
            each of its entities the other memories that mention it. Both empty for an
            unknown id.
        """
        with self.lock:
            self.maybe_sync()
            self.indexes.ensure(namespace)
            graph = self.indexes.graph
            entities = graph.entities_of(namespace, memory_id)
            shared = {
                e: [m for m in graph.mentions(namespace, e) if m != memory_id] for e in entities
            }
            return graph.neighbourhood(namespace, entities, limit), shared

    def resync(self, ids: Sequence[str]) -> tuple[int, int]:
        """Re-derive ``ids`` from Chroma (see :meth:`norax_core.indexes.DerivedIndexes.resync`)."""
        return self.indexes.resync(self.collection, ids, self.row_from_record)

    def rebuild_indexes(self) -> None:
        """Replace the in-memory indexes by fresh ones (namespaces load again on use)."""
        old = self.indexes
        old.save_state()
        old.drop_shared()  # a client's snapshots hold what is being rebuilt, as do these:
        old.sidecar.drop_snapshots()
        fresh = old.renewed()
        fresh.load()
        fresh.last_seq = max(fresh.last_seq, old.last_seq)
        self.indexes = fresh
        old.graph.close()  # stops the replaced graph's community worker thread

    def recent(self, ns: str, flt: dict[str, Any] | None, n: int) -> list[str]:
        """The ids of the ``n`` latest memories of ``ns`` that pass ``flt``, newest first.

        Latest by ``created_at``, whatever their kinds (no decay); memories sharing a time,
        the later written first: conversation order reversed.
        """
        with self.lock:
            self.maybe_sync()
            self.indexes.ensure(ns)
            ordered, _, _ = self.indexes.temporal.filtered_timeline(ns, self.allowed(ns, flt))
        return ordered[: -n - 1 : -1] if n > 0 else []

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
        """What the derived indexes hold of a Chroma record (:func:`index_row`)."""
        return index_row(mid, doc, meta, self.indexes.tokenizer)
