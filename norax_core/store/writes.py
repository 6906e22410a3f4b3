"""The write path of a :class:`~norax_core.store.Store`: batches and context followers.

A write goes to Chroma first (the truth), then to the derived indexes, under the store's
lock. With ``NoraxConfig.embed_context``, a write also re-embeds the stored memories whose
context it changes (their *followers*); those are marked in the sidecar until stored, so an
interrupted write is finished at the next open.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from norax_core.batch import (
    SEQ_KEY,
    Prepared,
    checked_embeddings,
    context_texts,
    follower_texts,
    replacing_metadata,
    restore,
    sequence_numbers,
    settled,
    stored_records,
    stored_times,
)
from norax_core.config import NoraxConfig
from norax_core.embedders import Embedder
from norax_core.errors import DuplicateIdError, InvalidInputError, NoraxError
from norax_core.indexes import DerivedIndexes
from norax_core.models import DEFAULT_NAMESPACE
from norax_core.sidecar import IndexRow, record_json
from norax_core.signals.dense import NAMESPACE_KEY
from norax_core.sync import ChangeLog

logger = logging.getLogger("norax")

CHROMA_BATCH = 4_000
RESTATE_KEY = "restate_pending"
"""Sidecar key: memories whose re-embedding in a new context (``embed_context``) a write
began and may not have finished."""

Followers = tuple[list[str], np.ndarray]
"""Stored memories whose context a write changes, with their new embeddings."""


class WritePath:
    """Writes of a :class:`~norax_core.store.Store` (callers hold its lock).

    ``add_config`` gives the configuration memories are added with (its ``embed_context``
    and ``context_gap_seconds`` decide what the embedder reads).
    """

    collection: Any
    indexes: DerivedIndexes
    sync: ChangeLog | None
    embedder: Embedder
    lock: Any
    add_config: Callable[[], NoraxConfig]
    row_from_record: Callable[[str, str, dict[str, Any]], IndexRow]
    texts: Callable[[list[str]], dict[str, str]]
    checkpoint: Callable[[], None]

    def embedding_texts(
        self,
        ids: list[str],
        texts: list[str],
        times: list[float],
        spaces: list[str],
        seqs: list[int] | None = None,
    ) -> list[str]:
        """What the embedder reads for each memory (``NoraxConfig.embed_context``).

        ``seqs``: their write sequence numbers; by default a stored memory's own, and for
        new ones numbers after the store's (what :meth:`settle` gives them if no other
        write comes first).
        """
        with self.lock:
            cfg = self.add_config()
            if seqs is None:
                seqs = self.sequence_numbers(ids, spaces)
            # the context is read from the namespaces' timelines: they are loaded
            with self.indexes.held(spaces if cfg.embed_context > 0 else ()):
                catalog = self.indexes.temporal
                return context_texts(
                    ids, texts, times, spaces, seqs, cfg, catalog.sequence, self.texts
                )

    def sequence_numbers(self, ids: Sequence[str], spaces: Sequence[str]) -> list[int]:
        """See :func:`~norax_core.batch.sequence_numbers` (stored ids looked up, not loaded)."""
        return sequence_numbers(self.indexes.last_seq, self.indexes.stored(ids), ids, spaces)

    def settle(self, p: Prepared) -> Prepared:
        """Number the batch in write order and make its context current (under the lock).

        See :func:`~norax_core.batch.settled`: a write that came in between this batch's
        preparation and now (another thread, task or, through the change log, process)
        has its context computed again.
        """
        seqs = self.sequence_numbers(p.ids, [r.namespace for r in p.rows])
        stale = self.add_config().embed_context > 0 and self.indexes.writes != p.basis
        return settled(p, seqs, self.embedder, self.embedding_texts, stale)

    def refuse_stored(self, ids: Sequence[str]) -> None:
        """Before an add: refuse ids the store holds (a client asks Chroma, see ``fresh``).

        Raises:
            DuplicateIdError: An id is already stored, in any namespace.
        """
        _refuse_duplicates(ids, self.indexes.homes(ids, fresh=True))

    def refuse_moves(self, rows: Sequence[IndexRow]) -> None:
        """Before an upsert: refuse ids stored in another namespace than the row's.

        Raises:
            InvalidInputError: An id lives in another namespace.
        """
        _refuse_moves(rows, self.indexes.homes([r.id for r in rows], fresh=True))

    def write(self, p: Prepared, *, upsert: bool) -> None:
        """Chroma first (the truth), then the derived indexes; all or nothing.

        The ids are logged as pending in the sidecar before Chroma is written and cleared
        with their rows, so a crash in between is repaired at the next open. On an error,
        Chroma is put back as it was (added memories deleted, replaced ones restored from
        the records read before the write) and the indexes re-derived from it.

        Other processes may write the same ids at the same moment (a client of a server):
        an upsert is refused if the records it read just before writing live in another
        namespace, and an add checks afterwards that Chroma holds what it wrote (Chroma
        ignores an add of an id it holds), else undoes its own records and raises.

        Raises:
            DuplicateIdError: Another process stored one of the ids meanwhile (an add).
            InvalidInputError: Chroma refused the batch, or another process stored one of
                the ids in another namespace meanwhile (an upsert).
        """
        op = self.collection.upsert if upsert else self.collection.add
        old = stored_records(self.collection, p.ids, CHROMA_BATCH) if upsert else {}
        _refuse_moves(p.rows, {m: _namespace(rec[2]) for m, rec in old.items()})
        tried: list[str] = []
        self.indexes.sidecar.mark_pending(p.ids)
        self.indexes.claim(r.namespace for r in p.rows)
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
            if not upsert and not self.indexes.source.complete:  # another process may write
                _refuse_duplicates(p.ids, {m: "" for m in set(p.ids) - set(self._own(p.ids, p))})
            self.indexes.apply(self._as_stored(p) if self.indexes.source.complete else p.rows)
            if self.sync is not None:
                self.sync.record("upsert" if upsert else "add", p.ids, _spaces(p))
            self.unpublish(_spaces(p))
        except BaseException as exc:  # KeyboardInterrupt too: the store stays usable
            undo = self._undo(tried, old, p, own=not upsert and not self.indexes.source.complete)
            if isinstance(exc, NoraxError) or not isinstance(exc, Exception):
                if undo:
                    logger.error("norax: %s", undo)
                raise
            raise InvalidInputError(f"Chroma rejected the batch: {exc}{undo}") from exc
        self.checkpoint()

    def _as_stored(self, p: Prepared) -> list[IndexRow]:
        """The batch's rows with their records read back from Chroma (document, metadata).

        Read back, not taken from the batch: Chroma returns some float metadata one ulp off
        what it was given, and a search's results read from the sidecar must be what
        Chroma's records say (:meth:`~norax_core.store.Store.records`).
        """
        held: dict[str, tuple[str, str]] = {}
        for s in range(0, len(p.ids), CHROMA_BATCH):
            got = self.collection.get(
                ids=list(p.ids[s : s + CHROMA_BATCH]), include=["documents", "metadatas"]
            )
            for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
                held[mid] = (doc or "", record_json(meta or {}))
        return [
            dataclasses.replace(r, document=held[r.id][0], metadata=held[r.id][1])
            if r.id in held
            else r
            for r in p.rows
        ]

    def _own(self, ids: Sequence[str], p: Prepared) -> list[str]:
        """The ``ids`` whose Chroma record is the one ``p`` wrote (not another process's)."""
        mine = {m: (t, meta) for m, t, meta in zip(p.ids, p.texts, p.metadatas, strict=True)}
        held: dict[str, tuple[str, dict[str, Any]]] = {}
        for s in range(0, len(ids), CHROMA_BATCH):
            got = self.collection.get(
                ids=list(ids[s : s + CHROMA_BATCH]), include=["documents", "metadatas"]
            )
            for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
                held[mid] = (doc or "", dict(meta or {}))
        return [m for m in ids if m in held and _same(held[m], *mine[m])]

    def _undo(self, tried: list[str], old: Mapping[str, Any], p: Prepared, own: bool) -> str:
        """Undo a failed write of ``tried`` ids (see :meth:`write`).

        ``own``: undo only the records this write stored (an add of a client: Chroma kept
        another process's record under an id it held, and that one must stay).

        Returns what could not be undone, as words for the error message ("" when all was).
        """
        undo = ""
        if tried:
            written = dict(zip(p.ids, p.metadatas, strict=True))
            try:
                tried = self._own(tried, p) if own else tried
                restore(self.collection, tried, old, written, CHROMA_BATCH)
                if self.sync is not None:  # anyone who pulled the failed version re-reads
                    self.sync.record("upsert", tried, _spaces(p))
            except Exception as err:  # they stay pending: the next open re-derives them
                logger.exception("norax: could not undo a failed write")
                undo = (
                    f"; putting the previous versions back failed too ({err}): up to "
                    f"{len(tried)} memories (e.g. {tried[0]!r}) may hold the new version"
                )
        try:  # re-derive the batch from whatever Chroma now holds
            self.indexes.resync(self.collection, p.ids, self.row_from_record)
        except Exception:  # the ids stay pending: the next open reconciles them
            logger.exception("norax: could not re-derive a failed batch from Chroma")
        return undo

    def delete(self, ids: list[str], namespace: str | None = None) -> None:
        """Delete stored memories from Chroma and the indexes, and log it for the others.

        With ``namespace``, Chroma deletes only the ids it holds there: another process
        may have moved one to another namespace since this one looked it up.
        """
        where = None if namespace is None else {NAMESPACE_KEY: namespace}
        home = self.indexes.namespace_of
        spaces = {namespace} if namespace is not None else {home.get(m) for m in ids}
        homes = {ns for ns, _ in self.indexes.stored(ids).values()} if None in spaces else set()
        self.collection.delete(ids=ids, where=where)
        self.indexes.remove(ids)
        self.checkpoint()
        if self.sync is not None:  # an id of an unloaded namespace: any namespace
            self.sync.record("delete", ids, None if None in spaces else {*filter(None, spaces)})
        self.unpublish({*filter(None, spaces)} | homes)

    # -- context followers (``NoraxConfig.embed_context``) ------------------------------

    def followers(self, p: Prepared | None, gone: Sequence[str] = ()) -> Followers | None:
        """The stored memories whose context a write changes, with their new embeddings.

        See :func:`~norax_core.batch.follower_texts`. Computed before the write (under the
        lock), so an embedder failure writes nothing.
        """
        cfg = self.add_config()
        if cfg.embed_context <= 0:
            return None
        rows = p.rows if p is not None else []
        # the followers live in the namespaces written to (or deleted from): load those
        homes = self.indexes.homes([*(p.ids if p is not None else []), *gone])
        spaces = [*(r.namespace for r in rows), *homes.values()]
        with self.indexes.held(spaces):
            found, new_texts = follower_texts(
                rows,
                p.texts if p is not None else [],
                gone,
                cfg,
                self.indexes.temporal,
                self.indexes.namespace_of,
                self.texts,
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
        home = self.indexes.namespace_of
        spaces = None if any(m not in home for m in ids) else {home[m] for m in ids}
        try:
            for s in range(0, len(ids), CHROMA_BATCH):
                e = s + CHROMA_BATCH
                self.collection.update(ids=ids[s:e], embeddings=vectors[s:e])
        except Exception:  # marked: the next open re-embeds them
            logger.exception("norax: could not re-embed %d memories in new context", len(ids))
        else:
            self.mark_restating(ids, add=False)
            if self.sync is not None:  # their vectors changed: no stale snapshot is served
                self.sync.record("upsert", ids, spaces)
            # an embedded store's writes of vectors alone do not pass its indexes
            self.indexes.unpublish(
                spaces if spaces is not None else {h for h, _ in self.indexes.stored(ids).values()}
            )
        finally:  # some may have been updated
            self.indexes.vectors_changed(ids)
            self.checkpoint()

    def unpublish(self, namespaces: Iterable[str]) -> None:
        """After a client's write and its log entry: delete the namespaces' published snapshots.

        An embedded store's indexes do it with each write. After the entry, not before: a
        publisher that read the rows before this write and stored its blob after this delete
        finds the entry when it reads the log again.
        """
        if not self.indexes.source.complete:
            self.indexes.unpublish(namespaces)

    def mark_restating(self, ids: Sequence[str], *, add: bool) -> None:
        """Add ``ids`` to (or remove them from) the sidecar's list of memories to re-embed."""
        sidecar = self.indexes.sidecar
        marked = json.loads(sidecar.get_meta(RESTATE_KEY) or "[]")
        now = set(marked) | set(ids) if add else set(marked) - set(ids)
        if now != set(marked):
            sidecar.set_meta({RESTATE_KEY: json.dumps(sorted(now))})

    def finish_restating(self) -> None:
        """Re-embed the memories a write left marked (it was interrupted before storing them)."""
        marked = json.loads(self.indexes.sidecar.get_meta(RESTATE_KEY) or "[]")
        if not marked:
            return
        with self.indexes.held(self.indexes.homes(marked).values()):
            home, catalog = self.indexes.namespace_of, self.indexes.temporal
            ids = [m for m in marked if m in home]
            spaces = [home[m] for m in ids]
            times = stored_times(catalog, home, ids)
        if ids:
            text_of = self.texts(ids)
            inputs = self.embedding_texts(ids, [text_of.get(m, "") for m in ids], times, spaces)
            vectors = checked_embeddings(self.embedder, self.embedder.embed(inputs), len(ids))
            self.restate((ids, vectors))
            logger.info("norax: re-embedded %d memories an interrupted write left", len(ids))
        self.mark_restating(marked, add=False)


def _namespace(meta: Mapping[str, Any]) -> str:
    return str(meta.get(NAMESPACE_KEY, DEFAULT_NAMESPACE))


def _same(record: tuple[str, Mapping[str, Any]], text: str, meta: Mapping[str, Any]) -> bool:
    """Whether a stored record is the one written with ``text`` and ``meta``.

    Compared on the text, the namespace and the write sequence number (a microsecond clock,
    see :func:`~norax_core.batch.sequence_numbers`): another writer's record under the same
    id differs in one of them unless it is the same memory written in the same microsecond.
    Not on the time: a float read back through Chroma's HTTP API may lose its last digit.
    """
    keys = (NAMESPACE_KEY, SEQ_KEY)
    return record[0] == text and all(record[1].get(k) == meta.get(k) for k in keys)


def _refuse_duplicates(ids: Sequence[str], stored: Mapping[str, str]) -> None:
    existing = [i for i in ids if i in stored]
    if existing:
        raise DuplicateIdError(
            f"{len(existing)} id(s) already stored, e.g. {existing[0]!r}; use upsert()"
        )


def _refuse_moves(rows: Sequence[IndexRow], homes: Mapping[str, str]) -> None:
    moved = [r.id for r in rows if homes.get(r.id, r.namespace) != r.namespace]
    if moved:
        raise InvalidInputError(
            f"{len(moved)} id(s) belong to another namespace, e.g. {moved[0]!r}; "
            "upsert cannot move a memory between namespaces (delete it there first)"
        )


def _spaces(p: Prepared) -> set[str]:
    """The namespaces a write stores to (an upsert never moves a memory: see ``_refuse_moves``)."""
    return {r.namespace for r in p.rows}
