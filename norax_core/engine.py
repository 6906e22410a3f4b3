"""``NoraxMemory``: the public entry point, a four-signal memory store over Chroma."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import chromadb
import numpy as np

from norax_core import validation as check
from norax_core.batch import (
    CREATED_KEY,
    ENTITIES_KEY,
    KIND_KEY,
    MODEL_CHARS,
    SEQ_KEY,
    Prepared,
    checked_embeddings,
    context_texts,
    follower_texts,
    in_background,
    prepare,
    replacing_metadata,
    resolved,
    restore,
    sequence_numbers,
    settled,
    stored_records,
    stored_times,
)
from norax_core.config import NoraxConfig, QueryEntities
from norax_core.embedders import Embedder, resolve_embedder
from norax_core.entities import load_extractor
from norax_core.errors import (
    DimensionMismatchError,
    DuplicateIdError,
    InvalidInputError,
    NoraxError,
)
from norax_core.indexes import DerivedIndexes
from norax_core.locking import StoreLock
from norax_core.models import (
    DEFAULT_NAMESPACE,
    RESERVED_PREFIX,
    SIGNALS,
    Memory,
    MetadataValue,
    SearchResult,
    utc_from_timestamp,
)
from norax_core.presets import WeightsLike, resolve_weights
from norax_core.ranking import Plan, proposal_sizes, rank
from norax_core.retrieval import Candidates, gather, search_table
from norax_core.sidecar import IndexRow, Sidecar
from norax_core.signals.base import Query
from norax_core.signals.dense import NAMESPACE_KEY, DenseSignal, chroma_where
from norax_core.store_settings import EmbedSettings, settle
from norax_core.sync import ChangeLog, SyncConfig
from norax_core.weights import Weights

if TYPE_CHECKING:
    from norax_core.maintenance import CheckReport, RepairReport

logger = logging.getLogger("norax")

SIDECAR_FILE = "norax_index.sqlite3"
DEFAULT_COLLECTION = "norax"
CHROMA_BATCH = 4_000
RESTATE_KEY = "restate_pending"
"""Sidecar key: memories whose re-embedding in a new context (``embed_context``) a write
began and may not have finished."""


class NoraxMemory:
    """An agent memory that ranks by keywords, meaning, recency and shared entities.

    Args:
        path: Folder of an embedded persistent store (Chroma ``PersistentClient`` plus the
            derived-index sidecar). ``None`` keeps everything in memory.
        client: Any Chroma client instead of ``path`` (for example ``chromadb.HttpClient``
            for a Chroma server). The derived indexes are then rebuilt from Chroma at open,
            unless ``index_path`` names a sidecar file to persist them in.
        collection: Chroma collection name.
        embedder: An :class:`~norax_core.embedders.Embedder`, a callable, ``"openai"`` or
            ``None`` for the local all-MiniLM-L6-v2 model.
        extractor: An entity extractor, a spaCy model name or path, ``None`` to find one
            (``NORAX_SPACY_MODEL``, then ``en_core_web_sm``, else rules), or ``False`` to
            switch entity extraction off.
        config: Engine configuration.
        weights: Default fusion weights: a :class:`Weights`, a preset name or a mapping.
            ``None`` takes the weights the store recorded when it was created (see
            :mod:`norax_core.store_settings`), else ``"default"``.
        index_path: Sidecar file location when ``client`` is given.
        lock: Take an exclusive lock on an embedded ``path`` (see :mod:`norax_core.locking`).
        sync_interval: With ``client``: pull other processes' writes from the change log at
            most every this many seconds, before a read or write (see :mod:`norax_core.sync`).
            Default 1 s; ``0`` turns it off (then use :meth:`refresh`). Embedded and in-memory
            stores are single-process and never sync.
        reconcile: Re-sync the derived indexes with Chroma at open (the default). ``False``
            is for maintenance tools that must see the indexes as they were left on disk
            (``norax check``); such a store may answer from stale indexes until
            :meth:`refresh` or :func:`~norax_core.maintenance.repair_store`.

    Raises:
        DimensionMismatchError: The store was built with an embedder of another dimension.
        StoreLockedError: Another process has the embedded store open.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        client: Any = None,
        collection: str = DEFAULT_COLLECTION,
        embedder: Any = None,
        extractor: Any = None,
        config: NoraxConfig | None = None,
        weights: WeightsLike = None,
        index_path: str | Path | None = None,
        lock: bool = True,
        sync_interval: float = 1.0,
        reconcile: bool = True,
    ) -> None:
        if path is not None and client is not None:
            raise InvalidInputError("give either path or client, not both")
        # Created before the open reconciles with Chroma, so no write falls in between.
        self._sync = _change_log(client, collection, sync_interval)
        self.config = config or NoraxConfig()
        self.weights = resolve_weights(weights)
        self._embed = EmbedSettings.of(self._session_config())
        self.embedder: Embedder = resolve_embedder(embedder)
        self.extractor = None if extractor is False else load_extractor(extractor)
        self._lock = threading.RLock()
        self._closed = False
        self._store_lock: StoreLock | None = None
        self._owns_client = False
        self.path = Path(path) if path is not None else None
        try:
            self._open(path, client, collection, index_path, lock, reconcile)
            self._settle_settings(weights, record=reconcile)
            if reconcile:
                try:
                    self._finish_restating()
                except Exception:  # still marked: the next open tries again
                    logger.exception("norax: could not re-embed memories left by a crash")
        except BaseException:
            # A failed open must not keep the store locked (or Chroma's files open) for the
            # rest of the process.
            self._release()
            raise

    def _open(
        self,
        path: str | Path | None,
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
            self._client = chromadb.PersistentClient(path=str(self.path))
            self._owns_client = True
            sidecar_path: Path | None = self.path / SIDECAR_FILE
        elif client is not None:
            self._client = client
            sidecar_path = Path(index_path) if index_path is not None else None
        else:
            # EphemeralClients in one process share state: a unique collection keeps this
            # memory independent of every other one, and is dropped when it is closed.
            self._client = chromadb.EphemeralClient()
            collection = f"norax-{uuid.uuid4().hex[:16]}"
            sidecar_path = None
        self.collection_name = collection
        self._collection = self._open_collection(collection)
        if client is None and path is None:
            self._finalizer = weakref.finalize(
                self, _drop_collection, self._client, self._collection
            )
            # The in-memory database ends with the process: no work to do at exit.
            self._finalizer.atexit = False

        self._indexes = DerivedIndexes(Sidecar(sidecar_path), self.config)
        # Lambdas, not bound methods: a repair may replace the derived indexes.
        self._dense = DenseSignal(
            self._collection,
            lambda mid: self._indexes.namespace_of.get(mid),
            cache=lambda: self._indexes.vectors,
            size=lambda ns: self._indexes.temporal.count(ns),
            members=lambda ns: self._indexes.temporal.ids(ns),
            exact_limit=self.config.dense_exact_limit,
        )
        self._indexes.load()
        if reconcile:
            self._indexes.reconcile(self._collection, self._row_from_record)

    # -- opening ------------------------------------------------------------------------

    def _open_collection(self, name: str) -> Any:
        meta = {"norax_embedder": self.embedder.name, "norax_dim": self.embedder.dim}
        try:
            col = self._client.get_or_create_collection(
                name,
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}},
                metadata=meta,
            )
        except Exception as exc:  # Chroma raises several types for bad names
            raise InvalidInputError(f"cannot open Chroma collection {name!r}: {exc}") from exc
        stored = dict(col.metadata or {})
        dim = stored.get("norax_dim")
        if dim is not None and int(dim) != self.embedder.dim:
            raise DimensionMismatchError(
                f"collection {name!r} holds {dim}-dimensional embeddings from "
                f"{stored.get('norax_embedder')!r}, but the embedder {self.embedder.name!r} "
                f"makes {self.embedder.dim}-dimensional ones; open it with the same embedder "
                "or use another collection"
            )
        if stored.get("norax_embedder") not in (None, self.embedder.name):
            logger.warning(
                "norax: collection %r was built with %r, now queried with %r",
                name,
                stored.get("norax_embedder"),
                self.embedder.name,
            )
        return col

    def _settle_settings(self, weights: WeightsLike, *, record: bool) -> None:
        """Take the store's recorded default weights and embedding settings, or record ours.

        See :mod:`norax_core.store_settings`: the recorded weights apply when ``weights`` is
        ``None``; the recorded embedding settings apply to every add once the store holds
        memories. An empty store records the settings it is opened with.
        """
        self.weights, self._embed = settle(
            self._collection,
            self.collection_name,
            None if weights is None else self.weights,
            self._config_for,
            record=record,
        )

    def close(self) -> None:
        """Release the store lock and the sidecar; an in-memory store is dropped."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._indexes.sidecar.path is not None:
                self._indexes.save_state()
            self._release()

    def _release(self) -> None:
        indexes = getattr(self, "_indexes", None)
        if indexes is not None:
            indexes.graph.close()  # stops its community worker thread
            indexes.sidecar.close()
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin()
        if self._owns_client:
            # Chroma caches one system per path for the whole process; closing our client
            # drops it, so a later open sees what other processes wrote since (a cached
            # system keeps a stale HNSW index in memory).
            self._owns_client = False
            close = getattr(self._client, "close", None)  # chromadb >= 1.1
            if close is not None:
                close()
        if self._store_lock is not None:
            self._store_lock.release()
            self._store_lock = None

    def __enter__(self) -> NoraxMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -------------------------------------------------------------------------

    def add(
        self,
        texts: str | Sequence[str],
        *,
        ids: str | Sequence[str] | None = None,
        kind: str | Sequence[str] = "episodic",
        created_at: Any = None,
        namespace: str | Sequence[str] | None = None,
        metadata: Mapping[str, MetadataValue] | Sequence[Mapping[str, MetadataValue]] | None = None,
    ) -> list[str]:
        """Add one memory or a batch; returns their ids.

        Every argument but ``texts`` may be one value for the whole batch or a list with one
        value per text. ``created_at`` defaults to now; naive datetimes are read as UTC.
        Memories sharing a ``created_at`` keep the order they are written in (list order,
        then call order): it is the order context propagation and ``embed_context`` follow.

        Raises:
            InvalidInputError: Bad text, id, kind, time, namespace or metadata. Nothing is
                written.
            DuplicateIdError: An id repeats within the batch or is already stored.
        """
        prepared = self._prepare(texts, ids, kind, created_at, namespace, metadata)
        with self._lock:
            self._maybe_sync()
            existing = [i for i in prepared.ids if i in self._indexes.namespace_of]
            if existing:
                raise DuplicateIdError(
                    f"{len(existing)} id(s) already stored, e.g. {existing[0]!r}; use upsert()"
                )
            prepared = self._settle(prepared)
            followers = self._followers(prepared)
            self._write(prepared, upsert=False)
            self._restate(followers)
        return prepared.ids

    def upsert(
        self,
        texts: str | Sequence[str],
        *,
        ids: str | Sequence[str],
        kind: str | Sequence[str] = "episodic",
        created_at: Any = None,
        namespace: str | Sequence[str] | None = None,
        metadata: Mapping[str, MetadataValue] | Sequence[Mapping[str, MetadataValue]] | None = None,
    ) -> list[str]:
        """Add memories, replacing any stored under the same ids.

        A memory cannot change namespace this way: namespaces are a security boundary, so
        an id stored in another namespace is refused (delete it there first). A replaced
        memory keeps its place among memories that share its time (its write order).

        All or nothing: if any part fails (a batch too large for one Chroma call is split),
        every memory is put back as it was and the new ids are removed before the error is
        raised.

        Raises:
            InvalidInputError: Bad input, or an id that lives in another namespace. Nothing
                is written.
        """
        if ids is None:
            raise InvalidInputError("upsert needs ids")
        prepared = self._prepare(texts, ids, kind, created_at, namespace, metadata)
        with self._lock:
            self._maybe_sync()
            known = self._indexes.namespace_of
            moved = [r.id for r in prepared.rows if known.get(r.id, r.namespace) != r.namespace]
            if moved:
                raise InvalidInputError(
                    f"{len(moved)} id(s) belong to another namespace, e.g. {moved[0]!r}; "
                    "upsert cannot move a memory between namespaces (delete it there first)"
                )
            prepared = self._settle(prepared)
            followers = self._followers(prepared)
            self._write(prepared, upsert=True)
            self._restate(followers)
        return prepared.ids

    async def aadd(self, texts: str | Sequence[str], **kwargs: Any) -> list[str]:
        """Async :meth:`add`; the work runs in a thread, the event loop stays free."""
        return await asyncio.to_thread(self.add, texts, **kwargs)

    def _prepare(
        self, texts: Any, ids: Any, kind: Any, created_at: Any, namespace: Any, metadata: Any
    ) -> Prepared:
        """Validate and embed a batch, outside the lock (see :func:`~norax_core.batch.prepare`)."""
        with self._lock:
            basis = self._indexes.temporal.writes
        p = prepare(
            texts,
            ids,
            kind,
            created_at,
            namespace,
            metadata,
            embedder=self.embedder,
            extractor=self.extractor,
            tokenizer=self._indexes.tokenizer,
            embedding_texts=self._embedding_texts,
        )
        return dataclasses.replace(p, basis=basis)

    def _settle(self, p: Prepared) -> Prepared:
        """Number the batch in write order and make its context current (under the lock).

        See :func:`~norax_core.batch.settled`: a write that came in between this batch's
        preparation and now (another thread, task or, through the change log, process)
        has its context computed again.
        """
        catalog = self._indexes.temporal
        seqs = sequence_numbers(
            catalog, self._indexes.namespace_of, p.ids, [r.namespace for r in p.rows]
        )
        stale = self.add_config.embed_context > 0 and catalog.writes != p.basis
        return settled(p, seqs, self.embedder, self._embedding_texts, stale)

    def _config_for(self, weights: Weights) -> NoraxConfig:
        """The store's configuration with ``weights``' learned parameters applied."""
        return self.config.with_params(weights.params) if weights.params else self.config

    def _session_config(self) -> NoraxConfig:
        """The store's configuration with its default weights' parameters applied."""
        return self._config_for(self.weights)

    def _texts(self, ids: list[str]) -> dict[str, str]:
        """The stored text of each of ``ids`` that exists."""
        return {m.id: m.text for m in self.get(ids)}

    @property
    def add_config(self) -> NoraxConfig:
        """The configuration memories are added with.

        The store's, with its default weights' parameters applied (as a search applies its
        weights'), and the embedding settings the store recorded once it held memories (see
        :mod:`norax_core.store_settings`).
        """
        cfg, embed = self._session_config(), self._embed
        if EmbedSettings.of(cfg) == embed:
            return cfg
        return dataclasses.replace(
            cfg, embed_context=embed.embed_context, context_gap_seconds=embed.context_gap_seconds
        )

    def _embedding_texts(
        self,
        ids: list[str],
        texts: list[str],
        times: list[float],
        spaces: list[str],
        seqs: list[int] | None = None,
    ) -> list[str]:
        """What the embedder reads for each memory (``NoraxConfig.embed_context``).

        ``seqs``: their write sequence numbers; by default a stored memory's own, and for
        new ones numbers after the store's (what :meth:`_settle` gives them if no other
        write comes first).
        """
        catalog = self._indexes.temporal
        with self._lock:
            if seqs is None:
                seqs = sequence_numbers(catalog, self._indexes.namespace_of, ids, spaces)
            return context_texts(
                ids, texts, times, spaces, seqs, self.add_config, catalog.sequence, self._texts
            )

    def _write(self, p: Prepared, *, upsert: bool) -> None:
        """Chroma first (the truth), then the derived indexes; all or nothing.

        The ids are logged as pending in the sidecar before Chroma is written and cleared
        with their rows, so a crash in between is repaired at the next open. On an error,
        Chroma is put back as it was (added memories deleted, replaced ones restored from
        the records read before the write) and the indexes re-derived from it.
        """
        op = self._collection.upsert if upsert else self._collection.add
        old = stored_records(self._collection, p.ids, CHROMA_BATCH) if upsert else {}
        tried: list[str] = []
        self._indexes.sidecar.mark_pending(p.ids)
        try:
            for s in range(0, len(p.ids), CHROMA_BATCH):
                e = s + CHROMA_BATCH
                chunk, metas = p.ids[s:e], p.metadatas[s:e]
                if upsert:  # a failed upsert call may have replaced some of its ids
                    tried.extend(chunk)
                op(
                    ids=chunk,
                    documents=p.texts[s:e],
                    embeddings=p.embeddings[s:e],
                    metadatas=replacing_metadata(old, chunk, metas) if upsert else metas,
                )
                if not upsert:  # a failed add call wrote nothing (its ids may be another's)
                    tried.extend(chunk)
            self._indexes.apply(p.rows)
            if self._sync is not None:
                self._sync.record("upsert" if upsert else "add", p.ids)
        except BaseException as exc:  # KeyboardInterrupt too: the store stays usable
            undo = self._undo(tried, old, p)
            if isinstance(exc, NoraxError) or not isinstance(exc, Exception):
                if undo:
                    logger.error("norax: %s", undo)
                raise
            raise InvalidInputError(f"Chroma rejected the batch: {exc}{undo}") from exc

    def _undo(self, tried: list[str], old: Mapping[str, Any], p: Prepared) -> str:
        """Undo a failed write of ``tried`` ids (see :meth:`_write`).

        Returns what could not be undone, as words for the error message ("" when all was).
        """
        undo = ""
        if tried:
            written = dict(zip(p.ids, p.metadatas, strict=True))
            try:
                restore(self._collection, tried, old, written, CHROMA_BATCH)
                if self._sync is not None:  # anyone who pulled the failed version re-reads
                    self._sync.record("upsert", tried)
            except Exception as err:  # they stay pending: the next open re-derives them
                logger.exception("norax: could not undo a failed write")
                undo = (
                    f"; putting the previous versions back failed too ({err}): up to "
                    f"{len(tried)} memories (e.g. {tried[0]!r}) may hold the new version"
                )
        try:  # re-derive the batch from whatever Chroma now holds
            self._indexes.resync(self._collection, p.ids, self._row_from_record)
        except Exception:  # the ids stay pending: the next open reconciles them
            logger.exception("norax: could not re-derive a failed batch from Chroma")
        return undo

    def delete(self, ids: str | Sequence[str], namespace: str | None = None) -> int:
        """Delete memories by id; returns how many were deleted. Unknown ids are ignored.

        Args:
            ids: One id or a list.
            namespace: Only memories of this namespace are deleted; an id that lives in
                another namespace is left alone, as if unknown. Code acting for one tenant
                must pass its namespace. ``None`` acts on every namespace (ids are unique
                in a store): for administration, as ``count(None)`` counts all.
        """
        id_list = check.id_list(ids)
        ns = None if namespace is None else check.namespace(namespace)
        with self._lock:
            self._maybe_sync()
            home = self._indexes.namespace_of
            known = [
                i for i in dict.fromkeys(id_list) if i in home and (ns is None or home[i] == ns)
            ]
            if known:
                followers = self._followers(None, gone=known)
                self._collection.delete(ids=known)
                self._indexes.remove(known)
                if self._sync is not None:
                    self._sync.record("delete", known)
                self._restate(followers)
        return len(known)

    def _followers(
        self, p: Prepared | None, gone: Sequence[str] = ()
    ) -> tuple[list[str], np.ndarray] | None:
        """The stored memories whose context a write changes, with their new embeddings.

        See :func:`~norax_core.batch.follower_texts`. Computed before the write (under the
        lock), so an embedder failure writes nothing.
        """
        cfg = self.add_config
        if cfg.embed_context <= 0:
            return None
        found, texts = follower_texts(
            p.rows if p is not None else [],
            p.texts if p is not None else [],
            gone,
            cfg,
            self._indexes.temporal,
            self._indexes.namespace_of,
            self._texts,
        )
        if not found:
            return None
        vectors = checked_embeddings(self.embedder, self.embedder.embed(texts), len(found))
        # Until they are stored, a crash would leave them embedded in their old context: the
        # next open re-embeds what this mark lists (:meth:`_finish_restating`).
        self._mark_restating(found, add=True)
        return found, vectors

    def _restate(self, followers: tuple[list[str], np.ndarray] | None) -> None:
        """Store the followers' new embeddings (see :meth:`_followers`).

        The write itself is done and acknowledged: a failure here leaves the followers with
        their previous embeddings (context as it was), logged, never a half-written memory.
        """
        if followers is None:
            return
        ids, vectors = followers
        try:
            for s in range(0, len(ids), CHROMA_BATCH):
                e = s + CHROMA_BATCH
                self._collection.update(ids=ids[s:e], embeddings=vectors[s:e])
        except Exception:  # marked: the next open re-embeds them
            logger.exception("norax: could not re-embed %d memories in new context", len(ids))
        else:
            self._mark_restating(ids, add=False)
        finally:  # some may have been updated
            self._indexes.vectors_changed(ids)

    def _mark_restating(self, ids: Sequence[str], *, add: bool) -> None:
        """Add ``ids`` to (or remove them from) the sidecar's list of memories to re-embed."""
        sidecar = self._indexes.sidecar
        marked = json.loads(sidecar.get_meta(RESTATE_KEY) or "[]")
        now = set(marked) | set(ids) if add else set(marked) - set(ids)
        if now != set(marked):
            sidecar.set_meta({RESTATE_KEY: json.dumps(sorted(now))})

    def _finish_restating(self) -> None:
        """Re-embed the memories a write left marked (it was interrupted before storing them)."""
        marked = json.loads(self._indexes.sidecar.get_meta(RESTATE_KEY) or "[]")
        if not marked:
            return
        home, catalog = self._indexes.namespace_of, self._indexes.temporal
        ids = [m for m in marked if m in home]
        if ids:
            spaces = [home[m] for m in ids]
            times = stored_times(catalog, home, ids)
            text_of = self._texts(ids)
            texts = self._embedding_texts(ids, [text_of.get(m, "") for m in ids], times, spaces)
            vectors = checked_embeddings(self.embedder, self.embedder.embed(texts), len(ids))
            self._restate((ids, vectors))
            logger.info("norax: re-embedded %d memories an interrupted write left", len(ids))
        self._mark_restating(marked, add=False)

    def refresh(self) -> tuple[int, int]:
        """Re-sync the derived indexes with Chroma (writes by other processes).

        Returns:
            ``(added, removed)`` counts.
        """
        with self._lock:
            started = time.time()
            counts = self._indexes.reconcile(self._collection, self._row_from_record)
            if self._sync is not None:
                self._sync.reconciled(started)
            return counts

    def _maybe_sync(self) -> None:
        """Apply other processes' writes when a pull is due (:mod:`norax_core.sync`)."""
        if self._sync is not None:
            self._sync.sync(self._collection, self._indexes, self._row_from_record)

    def check(self, *, deep: bool = True) -> CheckReport:
        """Compare Chroma with every index (:func:`~norax_core.maintenance.check_store`)."""
        from norax_core.maintenance import check_store

        return check_store(self, deep=deep)

    def repair(self) -> RepairReport:
        """Rebuild what is stale (:func:`~norax_core.maintenance.repair_store`)."""
        from norax_core.maintenance import repair_store

        return repair_store(self)

    # -- reads --------------------------------------------------------------------------

    def count(self, namespace: str | None = None) -> int:
        """Number of memories, in one namespace or (``None``) in all."""
        with self._lock:
            self._maybe_sync()
            if namespace is None:
                return len(self._indexes.namespace_of)
            return self._indexes.temporal.count(check.namespace(namespace))

    def namespaces(self) -> list[str]:
        """Namespaces that hold at least one memory."""
        with self._lock:
            self._maybe_sync()
            return sorted(set(self._indexes.namespace_of.values()))

    def get(self, ids: str | Sequence[str], namespace: str | None = None) -> list[Memory]:
        """The memories found for ``ids``, in the order asked; unknown ids are skipped.

        Args:
            ids: One id or a list.
            namespace: Only memories of this namespace are returned; an id that lives in
                another namespace is skipped, as if unknown. Code acting for one tenant must
                pass its namespace. ``None`` reads every namespace (for administration, as
                ``count(None)``).
        """
        id_list = check.id_list(ids)
        ns = None if namespace is None else check.namespace(namespace)
        if not id_list:
            return []
        got = self._collection.get(
            ids=list(dict.fromkeys(id_list)), include=["documents", "metadatas"]
        )
        by_id = {
            mid: _memory_from_record(mid, doc, dict(meta or {}))
            for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        }
        if ns is not None:
            by_id = {mid: m for mid, m in by_id.items() if m.namespace == ns}
        return [by_id[i] for i in id_list if i in by_id]

    def search(
        self,
        query: str,
        k: int = 10,
        namespace: str | None = None,
        where: Mapping[str, Any] | None = None,
        now: Any = None,
        weights: WeightsLike = None,
    ) -> list[SearchResult]:
        """Rank the namespace's memories for ``query``, best first.

        Candidates are the union of each signal's own top hits (so a keyword-only or
        graph-only hit can surface); every candidate then gets all four signals' scores,
        which are fused with ``weights`` (default: the store's). With a single-signal
        preset (``bm25``, ``dense``, ``temporal``, ``graph``) only that signal's proposals
        are candidates, so ``search`` may return fewer than ``k`` results (``bm25`` proposes
        only memories that share a query term).

        Args:
            query: The query text.
            k: How many results (fewer if the namespace holds fewer).
            namespace: Namespace to search (default ``"default"``).
            where: Chroma metadata filter on user metadata, applied before ranking.
            now: The clock for recency (datetime, ISO string or epoch seconds; default now).
            weights: A :class:`Weights`, preset name or mapping for this search.
        """
        w = self.weights if weights is None else resolve_weights(weights)
        cands = self.candidates(query, k=k, namespace=namespace, where=where, now=now, weights=w)
        if not cands.k:
            return []
        cfg = self._config_for(w)
        with self._lock:  # the context stage reads the indexes
            table, extend = search_table(cands, self._indexes, self._dense, cfg, self.embeddings)
            ranking = rank(table, Plan.of(w, self.config), cands.k, extend)
        rows = ranking.top()
        ids = ranking.ids()
        scores = ranking.table.scores[:, 0, :]
        records = {m.id: m for m in self.get(ids, namespace=cands.query.namespace)}
        return [
            SearchResult(
                **vars(records[mid]),
                score=float(ranking.score[0, r]),
                signals={s: float(scores[i, r]) for i, s in enumerate(SIGNALS)},
                matched_entities=tuple(cands.matched.get(mid, ())),
            )
            for mid, r in zip(ids, rows, strict=True)
            if mid in records
        ]

    def candidates(
        self,
        query: str,
        k: int = 10,
        namespace: str | None = None,
        where: Mapping[str, Any] | None = None,
        now: Any = None,
        weights: WeightsLike = None,
        pool: int | None = None,
        ids: Sequence[str] | None = None,
    ) -> Candidates:
        """The candidate pool of a search with every signal's score, before fusion.

        Each signal with a positive weight proposes its own top ``pool`` hits (default:
        ``config.pool_size(k)``; the temporal signal ``config.recency_candidates``); every
        candidate is then scored by all four signals. :meth:`search` fuses this; weight
        fitting reuses it to try many weightings without querying again.

        With ``ids``, nothing is proposed: exactly those ids (the ones in ``namespace`` and
        the filter; others score 0) are scored, as a reranker of store memories needs.

        Without ``ids`` and with a zero graph weight, the query's entities are not extracted
        and every candidate's graph score is 0.
        """
        text = check.query(query)
        k = check.k(k)
        ns = check.namespace(namespace)
        flt = check.where(where)
        now_ts = time.time() if now is None else check.timestamp(now, "now")
        w = self.weights if weights is None else resolve_weights(weights)
        cfg = self._config_for(w)
        if pool is not None and (isinstance(pool, bool) or not isinstance(pool, int) or pool < 1):
            raise InvalidInputError(f"pool must be an integer >= 1, got {pool!r}")

        head = text[:MODEL_CHARS]
        # The query's entities: by default its words matched against the namespace's entity
        # graph (under the lock, microseconds; only graph nodes can score anyway). With
        # query_entities="extract", spaCy runs in a worker thread while the query is embedded.
        # With a zero graph weight neither runs: the signal would not count.
        extractor = self.extractor if w.graph > 0 or ids is not None else None
        extracting = (
            in_background(extractor.extract_query, head)
            if extractor and cfg.query_entities is QueryEntities.EXTRACT
            else None
        )
        embedding = self.embedder.embed([head])[0]
        with self._lock:
            self._maybe_sync()
            if extractor and extracting is None:
                extracting = resolved(self._indexes.graph.match_query(ns, head))
            allowed = self._allowed(ns, flt)
            q = Query(
                text=text,
                namespace=ns,
                now=now_ts,
                allowed=allowed,
                tokens=tuple(self._indexes.tokenizer(text)),
                embedding=embedding,
                where=flt,
            )
            size = self.count(ns) if allowed is None else len(allowed)
            k = min(k, size)
            if k == 0:
                return Candidates(q, 0, [], {s: {} for s in SIGNALS}, {}, {}, size)
            known = self._indexes.namespace_of
            plan = Plan.of(w, self.config)
            if pool is not None:
                plan = dataclasses.replace(plan, pool_min=pool, pool_factor=0)
            return gather(
                q,
                extracting,
                self._indexes,
                self._dense,
                cfg,
                proposal_sizes(plan, k, size) if ids is None else {},
                k=k,
                size=size,
                forced=[
                    m for m in dict.fromkeys(check.memory_id(i) for i in ids or ()) if m in known
                ],
            )

    def embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each of ``ids`` that exists (float32, unit norm)."""
        id_list = list(dict.fromkeys(check.id_list(ids)))
        return self._dense.vectors(id_list) if id_list else {}

    async def asearch(self, query: str, k: int = 10, **kwargs: Any) -> list[SearchResult]:
        """Async :meth:`search`; the work runs in a thread, the event loop stays free."""
        return await asyncio.to_thread(self.search, query, k, **kwargs)

    def _allowed(self, ns: str, flt: dict[str, Any] | None) -> frozenset[str] | None:
        if flt is None:
            return None
        try:
            got = self._collection.get(where=chroma_where(ns, flt), include=[])
        except Exception as exc:
            raise InvalidInputError(f"invalid where filter {flt!r}: {exc}") from exc
        return frozenset(got["ids"])

    def _row_from_record(self, mid: str, doc: str, meta: dict[str, Any]) -> IndexRow:
        mem = _memory_from_record(mid, doc, meta)
        return IndexRow(
            mid,
            mem.namespace,
            mem.kind,
            float(meta.get(CREATED_KEY, 0.0)),  # the stored float: a datetime rounds to µs
            tuple(self._indexes.tokenizer(doc)),
            mem.entities,
            _seq(meta.get(SEQ_KEY)),
        )

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return f"NoraxMemory({where!r}, collection={self.collection_name!r}, n={self.count()})"


def _memory_from_record(mid: str, doc: str | None, meta: dict[str, Any]) -> Memory:
    ents = meta.get(ENTITIES_KEY) or ()
    return Memory(
        id=mid,
        text=doc or "",
        kind=str(meta.get(KIND_KEY, "episodic")),
        created_at=utc_from_timestamp(float(meta.get(CREATED_KEY, 0.0))),
        namespace=str(meta.get(NAMESPACE_KEY, DEFAULT_NAMESPACE)),
        metadata={k: v for k, v in meta.items() if not k.startswith(RESERVED_PREFIX)},
        entities=tuple(ents),
    )


def _seq(value: Any) -> int:
    """A stored write sequence number; 0 (unknown) for records without a valid one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _change_log(client: Any, name: str, interval: float) -> ChangeLog | None:
    """The change log of a client-mode store, or ``None`` when sync is off."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval < 0:
        raise InvalidInputError(f"sync_interval must be a number >= 0, got {interval!r}")
    if client is None or interval == 0:
        return None
    try:
        return ChangeLog(client, name, SyncConfig(interval=float(interval)))
    except Exception as exc:  # Chroma raises several types for bad names
        raise InvalidInputError(f"cannot open Chroma collection {name!r}: {exc}") from exc


def _drop_collection(client: Any, collection: Any) -> None:
    """Drop an in-memory store's collection, deleting its records first.

    Chroma's ``delete_collection`` leaves list-valued metadata (our entities) behind under
    internal row ids that the next records written to the process's shared in-memory
    database reuse, in any collection (chroma-core/chroma#7594): another store's memories
    would carry this store's entities. Deleting records removes their metadata.
    """
    try:
        while ids := collection.get(limit=CHROMA_BATCH, include=[])["ids"]:
            collection.delete(ids=ids)
        client.delete_collection(collection.name)
    except Exception:  # already gone, or the client is shutting down
        logger.debug("norax: could not drop collection %s", collection.name)
