"""``NoraxMemory``: the public entry point, a four-signal memory store over Chroma."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from norax_core import validation as check
from norax_core.batch import MODEL_CHARS, Prepared, in_background, prepare, resolved
from norax_core.config import NoraxConfig, QueryEntities
from norax_core.embedders import Embedder, resolve_embedder
from norax_core.entities import load_extractor
from norax_core.errors import InvalidInputError
from norax_core.models import SIGNALS, Memory, MetadataValue, SearchResult, varied
from norax_core.presets import WeightsLike, resolve_weights
from norax_core.query import intents, plan_query
from norax_core.ranking import Plan, proposal_sizes, rank
from norax_core.retrieval import Candidates, gather, search_results
from norax_core.search_table import search_table
from norax_core.signals.base import Query
from norax_core.store import DEFAULT_COLLECTION, SIDECAR_FILE, Store, consistency
from norax_core.store.chroma import change_log
from norax_core.store.consistency import CheckReport, RepairReport
from norax_core.store_settings import EmbedSettings, settle

__all__ = ["DEFAULT_COLLECTION", "SIDECAR_FILE", "NoraxMemory", "WeightsLike", "resolve_weights"]

logger = logging.getLogger("norax")


class NoraxMemory:
    """An agent memory that ranks by keywords, meaning, recency and shared entities.

    Args:
        path: Folder of an embedded persistent store (Chroma ``PersistentClient`` plus the
            derived-index sidecar). ``None`` keeps everything in memory.
        client: Any Chroma client instead of ``path`` (``chromadb.HttpClient`` for a server).
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
        reconcile: Re-sync the derived indexes with Chroma at open (default). ``False`` is for
            maintenance tools that must see the indexes as left on disk (``norax check``); it
            may answer from stale ones until :meth:`refresh` or ``maintenance.repair_store``.
        snapshot_path: With ``client``: a shared snapshot file (:mod:`norax_core.client_snapshots`).

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
        snapshot_path: str | Path | None = None,
    ) -> None:
        if path is not None and client is not None:
            raise InvalidInputError("give either path or client, not both")
        # Created before the open reconciles with Chroma, so no write falls in between.
        sync = change_log(client, collection, sync_interval)
        self.config = config or NoraxConfig()
        self.weights = resolve_weights(weights)
        self._embed = EmbedSettings.of(self.weights.applied(self.config))
        self.embedder: Embedder = resolve_embedder(embedder)
        self.extractor = None if extractor is False else load_extractor(extractor)
        self.path = Path(path) if path is not None else None
        self._store = Store(  # a failed open releases what it took
            self.path,
            client,
            collection,
            embedder=self.embedder,
            config=self.config,
            index_path=index_path,
            lock=lock,
            sync=sync,
            reconcile=reconcile,
            add_config=lambda: self.add_config,
            snapshot_path=snapshot_path,
        )
        self.collection_name = self._store.name
        try:
            intents.load_intent_model()  # read once per process at open, not in a first search
            # Recorded weights (``weights`` None) and embedding settings apply (store_settings).
            self.weights, self._embed = settle(
                self._store.collection,
                self.collection_name,
                None if weights is None else self.weights,
                lambda w: w.applied(self.config),
                record=reconcile,
                holds=self._store.holds,
            )
            if reconcile:
                try:
                    self._store.finish_restating()
                except Exception:  # still marked: the next open tries again
                    logger.exception("norax: could not re-embed memories left by a crash")
        except BaseException:
            # A failed open must not keep the store locked (or Chroma's files open) for the
            # rest of the process.
            self._store.release()
            raise

    @property
    def store(self) -> Store:
        """The storage layer (:mod:`norax_core.store`): an internal API for maintenance."""
        return self._store

    def close(self) -> None:
        """Release the store lock and the sidecar; an in-memory store is dropped."""
        self._store.close()

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
        kind: str | Sequence[str | None] | None = None,
        created_at: Any = None,
        namespace: str | Sequence[str] | None = None,
        metadata: Mapping[str, MetadataValue] | Sequence[Mapping[str, MetadataValue]] | None = None,
    ) -> list[str]:
        """Add one memory or a batch; returns their ids.

        Every argument but ``texts`` may be one value for the whole batch or a list with one
        value per text. ``created_at`` defaults to now; naive datetimes are read as UTC.
        ``kind`` defaults to ``"episodic"``; each memory's ``inferred_kind``
        (:mod:`norax_core.kinds`: instruction, preference, fact, event or scratchpad) is
        read from its text and ``role`` metadata where the kind is not given (or is
        ``"episodic"``), and follows the kind where it says what the memory is.
        Memories sharing a ``created_at`` keep the order they are written in (list order,
        then call order): it is the order context propagation and ``embed_context`` follow.

        Raises:
            InvalidInputError: Bad text, id, kind, time, namespace or metadata. Nothing is
                written.
            DuplicateIdError: An id repeats within the batch or is already stored.
        """
        return self._write(self._prepare(texts, ids, kind, created_at, namespace, metadata))

    def upsert(
        self,
        texts: str | Sequence[str],
        *,
        ids: str | Sequence[str],
        kind: str | Sequence[str | None] | None = None,
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
        return self._write(prepared, upsert=True)

    async def aadd(self, texts: str | Sequence[str], **kwargs: Any) -> list[str]:
        """Async :meth:`add`; the work runs in a thread, the event loop stays free."""
        return await asyncio.to_thread(self.add, texts, **kwargs)

    def _write(self, prepared: Prepared, *, upsert: bool = False) -> list[str]:
        """Check the ids against the store (add: none stored; upsert: no move), then write."""
        with self._store.lock:
            self._store.maybe_sync()
            if upsert:
                self._store.refuse_moves(prepared.rows)
            else:
                self._store.refuse_stored(prepared.ids)
            prepared = self._store.settle(prepared)
            followers = self._store.followers(prepared)
            self._store.write(prepared, upsert=upsert)
            self._store.restate(followers)
        return prepared.ids

    def _prepare(
        self, texts: Any, ids: Any, kind: Any, created_at: Any, namespace: Any, metadata: Any
    ) -> Prepared:
        """Validate and embed a batch, outside the lock (see :func:`~norax_core.batch.prepare`)."""
        with self._store.lock:
            basis = self._store.indexes.writes
        p = prepare(
            texts,
            ids,
            kind,
            created_at,
            namespace,
            metadata,
            embedder=self.embedder,
            extractor=self.extractor,
            tokenizer=self._store.indexes.tokenizer,
            embedding_texts=self._store.embedding_texts,
        )
        return dataclasses.replace(p, basis=basis)

    @property
    def add_config(self) -> NoraxConfig:
        """The configuration memories are added with.

        The store's, with its default weights' parameters applied (as a search applies its
        weights'), and the embedding settings the store recorded once it held memories (see
        :mod:`norax_core.store_settings`).
        """
        cfg, embed = self.weights.applied(self.config), self._embed
        if EmbedSettings.of(cfg) == embed:
            return cfg
        return dataclasses.replace(
            cfg, embed_context=embed.embed_context, context_gap_seconds=embed.context_gap_seconds
        )

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
        with self._store.lock:
            self._store.maybe_sync()
            home = self._store.indexes.homes(id_list, fresh=True)
            known = [
                i for i in dict.fromkeys(id_list) if i in home and (ns is None or home[i] == ns)
            ]
            if known:
                followers = self._store.followers(None, gone=known)
                self._store.delete(known, ns)
                self._store.restate(followers)
        return len(known)

    def refresh(self) -> tuple[int, int]:
        """Re-sync the derived indexes with Chroma (writes by other processes).

        Returns:
            ``(added, removed)`` counts.
        """
        return self._store.refresh()

    def check(self, *, deep: bool = True) -> CheckReport:
        """Compare Chroma with every index (:func:`~norax_core.maintenance.check_store`)."""
        return consistency.check(self._store, deep=deep)

    def repair(self) -> RepairReport:
        """Rebuild what is stale (:func:`~norax_core.maintenance.repair_store`)."""
        return consistency.repair(self._store)

    # -- reads --------------------------------------------------------------------------

    def count(self, namespace: str | None = None) -> int:
        """Number of memories, in one namespace or (``None``) in all."""
        return self._store.count(None if namespace is None else check.namespace(namespace))

    def namespaces(self) -> list[str]:
        """Namespaces that hold at least one memory."""
        return self._store.namespaces()

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
        by_id = self._store.records(id_list)
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
        query_embedding: Any = None,
    ) -> list[SearchResult]:
        """Rank the namespace's memories for ``query``, best first.

        Candidates are the union of each signal's own top hits (so a keyword-only or
        graph-only hit can surface); every candidate then gets all four signals' scores,
        which are fused with ``weights`` (default: the store's; where they hold a per-intent
        override for the query's intent, that one, see :meth:`Weights.for_intent`; the
        result's ``query_plan.weights_intent`` names it). With a single-signal
        preset (``bm25``, ``dense``, ``temporal``, ``graph``) only that signal's proposals
        are candidates, so ``search`` may return fewer than ``k`` results (``bm25`` proposes
        only memories that share a query term). Every result carries the query's plan
        (``query_plan``) and what each ranking stage contributed (``explanation``).

        Args:
            query: The query text.
            k: How many results (fewer if the namespace holds fewer).
            namespace: Namespace to search (default ``"default"``).
            where: Chroma metadata filter on user metadata, applied before ranking.
            now: The clock for recency (datetime, ISO string or epoch seconds; default now).
            weights: A :class:`Weights`, preset name or mapping for this search.
            query_embedding: The query's :meth:`embed_query`, to search several namespaces
                with one query embedding (default: embedded here).
        """
        w = self.weights if weights is None else resolve_weights(weights)
        cands = self.candidates(
            query, k, namespace, where, now, w, query_embedding=query_embedding, explain=False
        )
        if not cands.k:
            return []
        chosen = cands.weights or w  # the query's intent selected them (Weights.for_intent)
        plan = Plan.of(chosen, self.config)
        with self._store.lock:  # the context stage reads the indexes
            self._store.indexes.ensure(cands.query.namespace)  # another thread may evict it
            table, extend = search_table(
                cands,
                self._store.indexes,
                self._store.dense,
                chosen.applied(self.config),
                supersede=plan.supersede_weight > 0,
                roles=lambda ids: self._store.roles(cands.query.namespace, ids),
            )
            ranking = rank(table, plan, cands.k, extend)
            shown = set(cands.ids).intersection(ids := ranking.ids())  # proposed: the breakdown
            matched = self._store.indexes.graph_signal.explain(cands.query, sorted(shown))
        found = self._store.records(ids, local=True, namespace=cands.query.namespace)
        return search_results(ranking, varied(cands, matched=matched), found, w)

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
        query_embedding: Any = None,
        explain: bool = True,
    ) -> Candidates:
        """The candidate pool of a search with every signal's score, before fusion.

        Each signal with a positive weight proposes its own top ``pool`` hits (default:
        ``config.pool_size(k)``; the temporal signal ``config.recency_candidates``); every
        candidate is then scored by all four signals. :meth:`search` fuses this; weight
        fitting reuses it to try many weightings without querying again.

        With ``ids``, nothing is proposed: exactly those ids (the ones in ``namespace`` and
        the filter; others score 0) are scored, as a reranker of store memories needs.

        Without ``ids``, with a zero graph weight and the bridge step off, the query's
        entities are not extracted and every candidate's graph score is 0.

        The query's intent (:func:`~norax_core.plan_query`) selects the weights first
        (:meth:`Weights.for_intent`: a per-intent override where the weights have one), so
        proposal sizes and signal parameters follow them; ``Candidates.weights`` holds them.
        ``explain=False`` leaves ``matched`` empty (:meth:`search` fills its results').
        """
        text = check.query(query)
        k = check.k(k)
        ns = check.namespace(namespace)
        flt = check.where(where)
        now_ts = time.time() if now is None else check.timestamp(now, "now")
        # The query's reading picks its weights first: proposals and parameters follow them.
        reading = plan_query(text, now_ts)
        w = self.weights if weights is None else resolve_weights(weights)
        w = w.for_intent(reading.intent)
        cfg = w.applied(self.config)
        if pool is not None and (isinstance(pool, bool) or not isinstance(pool, int) or pool < 1):
            raise InvalidInputError(f"pool must be an integer >= 1, got {pool!r}")

        head = text[:MODEL_CHARS]
        # The query's entities: by default its words matched against the namespace's entity
        # graph (under the lock, microseconds; only graph nodes can score anyway). With
        # query_entities="extract", spaCy runs in a worker thread while the query is embedded.
        # With a zero graph weight neither runs (the signal would not count), unless the
        # bridge step walks from them.
        wants = w.graph > 0 or cfg.bridges_on or ids is not None
        extractor = self.extractor if wants else None
        extracting = (
            in_background(extractor.extract_query, head)
            if extractor and cfg.query_entities is QueryEntities.EXTRACT
            else None
        )
        embedding = (
            self.embedder.embed([head])[0]
            if query_embedding is None
            else check.query_embedding(query_embedding, self.embedder.dim)
        )
        with self._store.lock:
            self._store.maybe_sync(ns)
            self._store.indexes.begin(ns)  # loaded, with the communities it reads to its end
            if extractor and extracting is None:
                extracting = resolved(self._store.indexes.graph.match_query(ns, head))
            allowed = self._store.allowed(ns, flt)
            q = Query(
                text=text,
                namespace=ns,
                now=now_ts,
                allowed=allowed,
                tokens=tuple(self._store.indexes.tokenizer(text)),
                embedding=embedding,
                where=flt,
                plan=reading,
            )
            size = self._store.indexes.count(ns) if allowed is None else len(allowed)
            k = min(k, size)
            if k == 0:
                return Candidates(q, 0, [], {s: {} for s in SIGNALS}, {}, {}, size, w)
            known = self._store.indexes.homes(check.memory_id(i) for i in ids or ())
            plan = Plan.of(w, self.config)
            if pool is not None:
                plan = dataclasses.replace(plan, pool_min=pool, pool_factor=0)
            return gather(
                q,
                extracting,
                self._store.indexes,
                self._store.dense,
                cfg,
                proposal_sizes(plan, k, size) if ids is None else {},
                k=k,
                size=size,
                weights=w,
                forced=[
                    m for m in dict.fromkeys(check.memory_id(i) for i in ids or ()) if m in known
                ],
                explain=explain,
            )

    def embed_query(self, query: str) -> np.ndarray:
        """The query's embedding as :meth:`search` computes it (pass it as ``query_embedding``)."""
        return self.embedder.embed([check.query(query)[:MODEL_CHARS]])[0]

    def embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each of ``ids`` that exists (float32, unit norm)."""
        return self._store.embeddings(check.id_list(ids))

    async def asearch(self, query: str, k: int = 10, **kwargs: Any) -> list[SearchResult]:
        """Async :meth:`search`; the work runs in a thread, the event loop stays free."""
        return await asyncio.to_thread(self.search, query, k, **kwargs)

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return f"NoraxMemory({where!r}, collection={self.collection_name!r}, n={self.count()})"
