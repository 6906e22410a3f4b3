"""The write path of a :class:`~norax_core.store.Store`: batches and context followers.

A write goes to Chroma first (the truth), then to the derived indexes, under the store's
lock. With ``NoraxConfig.embed_context``, a write also re-embeds the stored memories whose
context it changes (their *followers*); those are marked in the sidecar until stored, so an
interrupted write is finished at the next open.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from norax_core.batch import (
    Prepared,
    checked_embeddings,
    follower_texts,
    replacing_metadata,
    stored_times,
)
from norax_core.config import NoraxConfig
from norax_core.embedders import Embedder
from norax_core.errors import InvalidInputError, NoraxError
from norax_core.indexes import DerivedIndexes
from norax_core.sidecar import IndexRow
from norax_core.sync import ChangeLog

logger = logging.getLogger("norax")

CHROMA_BATCH = 4_000
RESTATE_KEY = "restate_pending"
"""Sidecar key: memories whose re-embedding in a new context (``embed_context``) a write
began and may not have finished."""

Followers = tuple[list[str], np.ndarray]
"""Stored memories whose context a write changes, with their new embeddings."""
TextsOf = Callable[[list[str]], dict[str, str]]
EmbeddingTexts = Callable[[list[str], list[str], list[float], list[str]], list[str]]


class WritePath:
    """Writes of a :class:`~norax_core.store.Store` (callers hold its lock)."""

    collection: Any
    indexes: DerivedIndexes
    sync: ChangeLog | None
    embedder: Embedder
    row_from_record: Callable[[str, str, dict[str, Any]], IndexRow]

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
