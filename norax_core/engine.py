"""``NoraxMemory``: the public entry point, a four-signal memory store over Chroma."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import chromadb
import numpy as np

from norax_core import validation as check
from norax_core.config import NoraxConfig
from norax_core.embedders import Embedder, resolve_embedder
from norax_core.entities import load_extractor
from norax_core.errors import (
    DimensionMismatchError,
    DuplicateIdError,
    InvalidInputError,
    NoraxError,
)
from norax_core.fusion import fuse, rank
from norax_core.indexes import DerivedIndexes
from norax_core.latest import latest_wins, pair_cosines
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
from norax_core.presets import get_preset
from norax_core.sidecar import IndexRow, Sidecar
from norax_core.signals.base import Query, Signal
from norax_core.signals.context import batch_preceding, embedding_text, propagate
from norax_core.signals.dense import EXACT_LIMIT, NAMESPACE_KEY, DenseSignal, chroma_where
from norax_core.sync import ChangeLog, SyncConfig
from norax_core.weights import Weights

if TYPE_CHECKING:
    from norax_core.maintenance import CheckReport, RepairReport

logger = logging.getLogger("norax")

KIND_KEY = "norax_kind"
CREATED_KEY = "norax_created_at"
ENTITIES_KEY = "norax_entities"
SIDECAR_FILE = "norax_index.sqlite3"
DEFAULT_COLLECTION = "norax"
CHROMA_BATCH = 4_000
CONTEXT_SEEDS = 2
"""With context propagation, the neighbours of the best ``CONTEXT_SEEDS * k`` candidates are
scored and join the pool (a memory's context can lift it into the top k)."""
MODEL_CHARS = 10_000
"""The embedder and the entity extractor read at most this many characters of a text (or
query); the whole text is stored and BM25-indexed. The embedding model reads 256 word pieces
anyway, but tokenizing a 1 MB text first took seconds, and spaCy over 100,000 characters
(the extractor's own cap) took 8 to 19 s on a busy 2-core box: a hostile text must not hold
a core for that long."""

WeightsLike = Weights | str | Mapping[str, float] | None


@dataclass(frozen=True)
class Candidates:
    """A search's candidate pool before fusion.

    Attributes:
        query: The prepared query (tokens, embedding, entities, clock).
        k: The number of results asked for, capped at what the namespace (and filter) holds.
        ids: Candidate ids, in the order the signals proposed them.
        signals: Each signal's normalised score for every candidate.
        matched: Entities each candidate shares with the query (graph breakdown).
    """

    query: Query
    k: int
    ids: list[str]
    signals: dict[str, dict[str, float]]
    matched: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class _Prepared:
    """A validated batch, ready to write."""

    ids: list[str]
    texts: list[str]
    embeddings: np.ndarray
    metadatas: list[dict[str, Any]]
    rows: list[IndexRow]


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
        weights: WeightsLike = "default",
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
        self.embedder: Embedder = resolve_embedder(embedder)
        self.extractor = None if extractor is False else load_extractor(extractor)
        self._lock = threading.RLock()
        self._closed = False
        self._store_lock: StoreLock | None = None
        self._owns_client = False
        self.path = Path(path) if path is not None else None
        try:
            self._open(path, client, collection, index_path, lock, reconcile)
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
            self._finalizer = weakref.finalize(self, _drop_collection, self._client, collection)

        self._indexes = DerivedIndexes(Sidecar(sidecar_path), self.config)
        self._dense = DenseSignal(
            self._collection,
            lambda mid: self._indexes.namespace_of.get(mid),
            members=self._small_namespace,
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
            self._write(prepared, upsert=False)
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
        an id stored in another namespace is refused (delete it there first).

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
            self._write(prepared, upsert=True)
        return prepared.ids

    async def aadd(self, texts: str | Sequence[str], **kwargs: Any) -> list[str]:
        """Async :meth:`add`; the work runs in a thread, the event loop stays free."""
        return await asyncio.to_thread(self.add, texts, **kwargs)

    def _prepare(
        self,
        texts: Any,
        ids: Any,
        kind: Any,
        created_at: Any,
        namespace: Any,
        metadata: Any,
    ) -> _Prepared:
        items = check.texts(texts)
        n = len(items)
        id_list = check.ids(ids, n)
        kinds = [check.name(k, "kind") for k in check.as_list(kind, n, "kind", str)]
        now = time.time()
        times = [
            now if t is None else check.timestamp(t)
            for t in check.as_list(created_at, n, "created_at", float)
        ]
        spaces = [check.namespace(s) for s in check.as_list(namespace, n, "namespace", str)]
        metas = [check.metadata(m) for m in check.as_list(metadata, n, "metadata", dict)]

        heads = [t[:MODEL_CHARS] for t in items]
        # spaCy works in a worker thread while the batch is tokenised and embedded
        # (onnxruntime releases the GIL), so ingest costs about max(extract, embed), not both.
        extracting = _in_background(self.extractor.extract, heads) if self.extractor else None
        tokens = [tuple(self._indexes.tokenizer(t)) for t in items]
        embeddings = self.embedder.embed(self._embedding_texts(id_list, items, times, spaces))
        entities = [tuple(e) for e in extracting.result()] if extracting else [()] * n
        if embeddings.shape != (n, self.embedder.dim) or not np.isfinite(embeddings).all():
            raise NoraxError(f"embedder {self.embedder.name!r} returned invalid embeddings")
        chroma_metas = []
        for ns, kd, ts, meta, ents in zip(spaces, kinds, times, metas, entities, strict=True):
            m: dict[str, Any] = {**meta, NAMESPACE_KEY: ns, KIND_KEY: kd, CREATED_KEY: ts}
            if ents:
                m[ENTITIES_KEY] = list(ents)
            chroma_metas.append(m)
        rows = [
            IndexRow(i, ns, kd, ts, tok, ents)
            for i, ns, kd, ts, tok, ents in zip(
                id_list, spaces, kinds, times, tokens, entities, strict=True
            )
        ]
        return _Prepared(id_list, items, embeddings, chroma_metas, rows)

    @property
    def add_config(self) -> NoraxConfig:
        """The configuration memories are added with.

        The store's, with its default weights' parameters applied (as a search applies its
        weights').
        """
        return self.config.with_params(self.weights.params) if self.weights.params else self.config

    def _embedding_texts(
        self, ids: list[str], texts: list[str], times: list[float], spaces: list[str]
    ) -> list[str]:
        """What the embedder reads for each memory (``NoraxConfig.embed_context``)."""
        cfg = self.add_config
        if cfg.embed_context <= 0:
            return [t[:MODEL_CHARS] for t in texts]
        catalog = self._indexes.temporal
        with self._lock:
            prev = batch_preceding(
                ids,
                times,
                spaces,
                lambda ns: catalog.timeline(ns)[:2],
                cfg.embed_context,
                cfg.context_gap_seconds,
            )
            batch = dict(zip(ids, texts, strict=True))
            stored = [
                m for m in dict.fromkeys(n for p in prev.values() for n in p) if m not in batch
            ]
            text_of = {m.id: m.text for m in self.get(stored)} if stored else {}
        text_of.update(batch)
        return [
            embedding_text(
                t[:MODEL_CHARS],
                [text_of[m][:MODEL_CHARS] for m in prev[i] if m in text_of],
                MODEL_CHARS,
            )
            for i, t in zip(ids, texts, strict=True)
        ]

    def _write(self, p: _Prepared, *, upsert: bool) -> None:
        """Chroma first (the truth), then the derived indexes; undo Chroma on failure.

        The ids are logged as pending in the sidecar before Chroma is written and cleared
        with their rows, so a crash in between is repaired at the next open.
        """
        op = self._collection.upsert if upsert else self._collection.add
        done: list[str] = []
        self._indexes.sidecar.mark_pending(p.ids)
        try:
            for s in range(0, len(p.ids), CHROMA_BATCH):
                e = s + CHROMA_BATCH
                metas = p.metadatas[s:e]
                op(
                    ids=p.ids[s:e],
                    documents=p.texts[s:e],
                    embeddings=p.embeddings[s:e],
                    metadatas=self._drop_old_keys(p.ids[s:e], metas) if upsert else metas,
                )
                done.extend(p.ids[s:e])
            self._indexes.apply(p.rows)
            if self._sync is not None:
                self._sync.record("upsert" if upsert else "add", p.ids)
        except BaseException as exc:  # KeyboardInterrupt too: the store stays usable
            if done and not upsert:
                self._collection.delete(ids=done)
            try:  # re-derive the batch from whatever Chroma now holds
                self._indexes.resync(self._collection, p.ids, self._row_from_record)
            except Exception:  # the ids stay pending: the next open reconciles them
                logger.exception("norax: could not re-derive a failed batch from Chroma")
            if isinstance(exc, NoraxError) or not isinstance(exc, Exception):
                raise
            raise InvalidInputError(f"Chroma rejected the batch: {exc}") from exc

    def _drop_old_keys(self, ids: list[str], metas: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Metadata for an upsert that replaces the old record's instead of merging into it.

        Chroma's upsert merges metadata: the keys the new version lacks (old user metadata,
        old entities) are set to ``None``, which deletes them.
        """
        old = self._collection.get(ids=ids, include=["metadatas"])
        keys = {mid: set(m or {}) for mid, m in zip(old["ids"], old["metadatas"], strict=True)}
        out = []
        for mid, meta in zip(ids, metas, strict=True):
            gone = keys.get(mid, set()) - set(meta)
            out.append({**meta, **dict.fromkeys(gone)} if gone else meta)
        return out

    def delete(self, ids: str | Sequence[str]) -> int:
        """Delete memories by id; returns how many existed. Unknown ids are ignored."""
        id_list = check.id_list(ids)
        with self._lock:
            self._maybe_sync()
            known = [i for i in dict.fromkeys(id_list) if i in self._indexes.namespace_of]
            if known:
                self._collection.delete(ids=known)
                self._indexes.remove(known)
                if self._sync is not None:
                    self._sync.record("delete", known)
        return len(known)

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

    def get(self, ids: str | Sequence[str]) -> list[Memory]:
        """The memories found for ``ids``, in the order asked; unknown ids are skipped."""
        id_list = check.id_list(ids)
        if not id_list:
            return []
        got = self._collection.get(
            ids=list(dict.fromkeys(id_list)), include=["documents", "metadatas"]
        )
        by_id = {
            mid: _memory_from_record(mid, doc, dict(meta or {}))
            for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        }
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
        fused = fuse(cands.signals, cands.ids, w)
        cfg = self.config.with_params(w.params) if w.params else self.config
        if cfg.context_on and cands.k:
            cands, fused = self._with_context(cands, fused, w, cfg)
        if cfg.latest_on and cands.k:
            fused = self._latest_wins(cands.query, fused, cfg)
        best = rank(fused, cands.k)
        records = {m.id: m for m in self.get(best)}
        return [
            SearchResult(
                **vars(records[mid]),
                score=fused[mid],
                signals={s: cands.signals[s].get(mid, 0.0) for s in SIGNALS},
                matched_entities=tuple(cands.matched.get(mid, ())),
            )
            for mid in best
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
        """
        text = check.query(query)
        k = check.k(k)
        ns = check.namespace(namespace)
        flt = check.where(where)
        now_ts = time.time() if now is None else check.timestamp(now, "now")
        w = self.weights if weights is None else resolve_weights(weights)
        cfg = self.config.with_params(w.params) if w.params else self.config
        if pool is not None and (isinstance(pool, bool) or not isinstance(pool, int) or pool < 1):
            raise InvalidInputError(f"pool must be an integer >= 1, got {pool!r}")

        head = text[:MODEL_CHARS]
        # The query's entity extraction (spaCy) runs in a worker thread while the query is
        # embedded and Chroma searched (both release the GIL): on two cores it is off the
        # critical path.
        extracting = _in_background(self.extractor.extract_query, head) if self.extractor else None
        embedding = self.embedder.embed([head])[0]
        with self._lock:
            self._maybe_sync()
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
            signals: dict[str, Signal] = {
                "bm25": self._indexes.bm25_signal.with_params(cfg.bm25_k1, cfg.bm25_b),
                "dense": self._dense,
                "temporal": self._indexes.temporal.with_decay(cfg.tau_days),
                "graph": self._indexes.graph_signal,
            }
            size = self.count(ns) if allowed is None else len(allowed)
            k = min(k, size)
            if k == 0:
                return Candidates(q, 0, [], {s: {} for s in SIGNALS}, {})
            n_pool = pool or cfg.pool_size(k)
            weight = w.as_dict() if ids is None else dict.fromkeys(SIGNALS, 0.0)
            proposed: dict[str, None] = dict.fromkeys(
                check.memory_id(i) for i in (ids or ()) if i in self._indexes.namespace_of
            )
            # Recency alone says nothing about relevance: beside other signals it proposes
            # only a few of the newest memories; on its own it ranks the whole pool.
            recency_only = [s for s, v in weight.items() if v > 0] == ["temporal"]
            wanted: dict[str, int] = {}
            for name in signals:
                n = cfg.recency_candidates if name == "temporal" and not recency_only else n_pool
                if weight[name] > 0 and n > 0:
                    wanted[name] = min(n, size)
            tops: dict[str, Future[dict[str, float]] | dict[str, float]] = {}
            if "dense" in wanted:  # Chroma works while the local signals do
                tops["dense"] = _in_background(self._dense.top, q, wanted["dense"])
            entities = tuple(extracting.result()) if extracting is not None else ()
            q = dataclasses.replace(q, entities=entities)
            for name, sig in signals.items():
                if name in wanted and name != "dense":
                    tops[name] = sig.top(q, wanted[name])
            for name in signals:
                if name in tops:
                    top = tops[name]
                    proposed.update(dict.fromkeys(top.result() if isinstance(top, Future) else top))
            cand = list(proposed)
            scores = {name: sig.score(q, cand) for name, sig in signals.items()}
            matched = self._indexes.graph_signal.explain(q, cand)
        return Candidates(q, k, cand, scores, matched)

    def _with_context(
        self, cands: Candidates, fused: dict[str, float], w: Weights, cfg: NoraxConfig
    ) -> tuple[Candidates, dict[str, float]]:
        """Context propagation (:mod:`norax_core.signals.context`).

        The neighbours of the best ``CONTEXT_SEEDS * k`` candidates join the pool, then every
        memory borrows from its best-scoring neighbour.
        """
        q = cands.query
        catalog = self._indexes.temporal
        window, gap = cfg.context_window, cfg.context_gap_seconds
        with self._lock:
            seeds = rank(fused, CONTEXT_SEEDS * cands.k)
            near = catalog.neighbours(q.namespace, seeds, window, gap)
            known = set(cands.ids)
            extra = [
                m
                for m in dict.fromkeys(n for s in seeds for n in near.get(s, ()))
                if m not in known and (q.allowed is None or m in q.allowed)
            ]
            if extra:
                signals: dict[str, Signal] = {
                    "bm25": self._indexes.bm25_signal.with_params(cfg.bm25_k1, cfg.bm25_b),
                    "dense": self._dense,
                    "temporal": catalog.with_decay(cfg.tau_days),
                    "graph": self._indexes.graph_signal,
                }
                scores = {s: {**cands.signals[s], **signals[s].score(q, extra)} for s in SIGNALS}
                matched = {**cands.matched, **self._indexes.graph_signal.explain(q, extra)}
                cands = dataclasses.replace(
                    cands, ids=[*cands.ids, *extra], signals=scores, matched=matched
                )
                fused = fuse(cands.signals, cands.ids, w)
            near = catalog.neighbours(q.namespace, cands.ids, window, gap)
        return cands, propagate(fused, near, cfg.context_weight)

    def _latest_wins(self, q: Query, fused: dict[str, float], cfg: NoraxConfig) -> dict[str, float]:
        """The latest-wins rule (:mod:`norax_core.latest`) over the best candidates."""
        top = rank(fused, cfg.latest_wins_depth)
        with self._lock:
            times = self._indexes.temporal.created(q.namespace, top)
        vectors = self.embeddings(top)
        # A memory deleted meanwhile has no vector or time: it is left out of the comparison.
        keep = [i for i, m in enumerate(top) if m in vectors and not np.isnan(times[i])]
        top = [top[i] for i in keep]
        if len(top) < 2:
            return fused
        return latest_wins(
            fused,
            top,
            [times[i] for i in keep],
            pair_cosines(np.stack([vectors[m] for m in top])),
            cfg.latest_wins_similarity,
            cfg.latest_wins_weight,
        )

    def embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each of ``ids`` that exists (float32, unit norm)."""
        id_list = list(dict.fromkeys(check.id_list(ids)))
        if not id_list:
            return {}
        got = self._collection.get(ids=id_list, include=["embeddings"])
        if got["embeddings"] is None:
            return {}
        return {
            mid: np.asarray(vec, dtype=np.float32)
            for mid, vec in zip(got["ids"], got["embeddings"], strict=True)
        }

    async def asearch(self, query: str, k: int = 10, **kwargs: Any) -> list[SearchResult]:
        """Async :meth:`search`; the work runs in a thread, the event loop stays free."""
        return await asyncio.to_thread(self.search, query, k, **kwargs)

    def _small_namespace(self, namespace: str) -> set[str] | None:
        """A namespace's ids when the dense signal searches it exactly (it is small enough).

        Called by a search (holding the lock) from the worker thread: reads only.
        """
        catalog = self._indexes.temporal
        return catalog.ids(namespace) if catalog.count(namespace) <= EXACT_LIMIT else None

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
        )

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return f"NoraxMemory({where!r}, collection={self.collection_name!r}, n={self.count()})"


def resolve_weights(value: WeightsLike) -> Weights:
    """A :class:`Weights` from weights, a preset name, or a mapping of signal -> weight."""
    if value is None:
        return get_preset("default")
    if isinstance(value, Weights):
        return value
    if isinstance(value, str):
        return get_preset(value)
    if isinstance(value, Mapping):
        return Weights.from_mapping(value)
    raise InvalidInputError(f"weights must be Weights, a preset name or a mapping, got {value!r}")


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


_WORKERS: ThreadPoolExecutor | None = None
_WORKERS_LOCK = threading.Lock()


def _in_background(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run ``fn(*args)`` on the engine's small shared thread pool (two threads)."""
    global _WORKERS
    if _WORKERS is None:
        with _WORKERS_LOCK:
            if _WORKERS is None:
                _WORKERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="norax")
    return _WORKERS.submit(fn, *args)


def _drop_collection(client: Any, name: str) -> None:
    try:
        client.delete_collection(name)
    except Exception:  # already gone, or the client is shutting down
        logger.debug("norax: could not drop collection %s", name)
