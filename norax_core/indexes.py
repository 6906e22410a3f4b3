"""The derived indexes (keyword, temporal, graph, supersession, vectors) kept in step with Chroma.

Chroma holds the truth; :class:`DerivedIndexes` holds what can be rebuilt from it: the BM25
index, the recency catalog, the entity graph and the supersession links, all partitioned by
namespace, persisted
through a :class:`~norax_core.sidecar.Sidecar`, and the loaded namespaces' vector matrices
(:class:`~norax_core.signals.vectors.VectorCache`, in memory only: Chroma has the vectors).
Writes go to the sidecar first (one transaction) and then to memory, under the engine's lock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from norax_core.config import NoraxConfig
from norax_core.sidecar import SCHEMA_VERSION, IndexRow, Sidecar
from norax_core.sidecar import Links as StoredLinks
from norax_core.signals.bm25 import BM25Index, BM25Signal
from norax_core.signals.graph import EntityGraph, GraphSignal
from norax_core.signals.temporal import TemporalSignal
from norax_core.signals.vectors import VectorCache
from norax_core.supersession import SupersessionIndex
from norax_core.tokenize import Tokenizer

logger = logging.getLogger("norax")

CHROMA_PAGE = 5_000


class DerivedIndexes:
    """BM25, temporal, graph, supersession and vector indexes plus their sidecar persistence."""

    def __init__(self, sidecar: Sidecar, config: NoraxConfig) -> None:
        self.sidecar = sidecar
        self.config = config
        self.tokenizer = Tokenizer(stem=config.stem, stopwords=config.stopwords)
        self.bm25 = BM25Index(k1=config.bm25_k1, b=config.bm25_b)
        self.temporal = TemporalSignal(config.tau_days)
        self.graph = EntityGraph()
        self.supersede = SupersessionIndex(self.tokenizer)
        self.bm25_signal = BM25Signal(self.bm25, self.tokenizer)
        self.graph_signal = GraphSignal(self.graph)
        self.namespace_of: dict[str, str] = {}
        self.vectors = VectorCache(int(config.dense_cache_mb * 2**20))

    # -- writes -------------------------------------------------------------------------

    def apply(self, rows: Sequence[IndexRow]) -> None:
        """Persist and index ``rows`` (replacing any with the same id).

        The supersession links the rows change are derived first and stored in the same
        sidecar transaction as the rows; if that transaction fails, the links of the
        namespaces touched are re-derived from the sidecar's rows as they still are.
        """
        links: dict[str, tuple[str, tuple[str, ...]]] = {}
        touched = {r.namespace for r in rows}
        try:
            groups: dict[str, list[IndexRow]] = {}
            for r in rows:
                old = self.namespace_of.get(r.id)
                if old is not None and old != r.namespace:  # moves out of its namespace
                    touched.add(old)
                    links.update(_tagged(old, self.supersede.remove(old, [r.id])))
                groups.setdefault(r.namespace, []).append(r)
            for ns, group in groups.items():  # one batch per namespace: see its add
                links.update(_tagged(ns, self.supersede.add(ns, group)))
            for r in rows:  # a re-derived row rewrites its own links (repair relies on it)
                links[r.id] = (r.namespace, self.supersede.older(r.namespace, r.id))
            self.sidecar.upsert(rows, links)
        except BaseException:
            self._relink(touched)
            raise
        self._index(rows)
        self.vectors_changed([r.id for r in rows])

    def _relink(self, namespaces: Iterable[str]) -> None:
        """Rebuild the supersession index of ``namespaces`` from the sidecar's rows and links."""
        spaces = set(namespaces)
        for ns in spaces:
            self.supersede.drop(ns)
        stored = self.sidecar.links()
        self.supersede.load(
            (r for r in self.sidecar.rows() if r.namespace in spaces),
            {m: older for m, (ns, older) in stored.items() if ns in spaces},
        )

    def vectors_changed(self, ids: Iterable[str]) -> None:
        """The stored embeddings of ``ids`` changed: loaded matrices fetch them again.

        From Chroma, before the namespace's next search, rather than from the vectors the
        write sent: Chroma may store a vector one float32 ulp off what it was given (it
        does for some), and a matrix must hold what a reload would read. Unknown ids and
        namespaces that are not loaded are skipped.
        """
        groups: dict[str, list[str]] = {}
        for mid in ids:
            ns = self.namespace_of.get(mid)
            if ns is not None and ns in self.vectors:
                groups.setdefault(ns, []).append(mid)
        for ns, members in groups.items():
            self.vectors.mark_stale(ns, members)

    def _index(self, rows: Iterable[IndexRow]) -> None:
        for r in rows:
            old = self.namespace_of.get(r.id)
            if old is not None and old != r.namespace:
                self._unindex(r.id)
            self.namespace_of[r.id] = r.namespace
            self.bm25.add(r.namespace, r.id, r.tokens)
            self.temporal.add(r.namespace, r.id, r.created_at, r.kind, r.seq)
            self.graph.add(r.namespace, r.id, r.entities)

    def _indexed(self, rows: Iterable[IndexRow]) -> Iterator[IndexRow]:
        """Index each row as it passes (one pass over the sidecar feeds every index)."""
        for r in rows:
            self._index([r])
            yield r

    def remove(self, ids: Iterable[str]) -> list[str]:
        """Forget ``ids``; returns those that were known."""
        known = [i for i in ids if i in self.namespace_of]
        if known:
            links: dict[str, tuple[str, tuple[str, ...]]] = {}
            touched = {self.namespace_of[m] for m in known}
            try:
                for mid in known:
                    ns = self.namespace_of[mid]
                    links.update(_tagged(ns, self.supersede.remove(ns, [mid])))
                self.sidecar.delete(known, links)
            except BaseException:
                self._relink(touched)
                raise
            for mid in known:
                self._unindex(mid)
        return known

    def _unindex(self, mid: str) -> None:
        ns = self.namespace_of.pop(mid)
        self.bm25.remove(ns, mid)
        self.temporal.remove(ns, mid)
        self.graph.remove(ns, mid)
        self.vectors.drop(ns, [mid])

    # -- load and reconcile -------------------------------------------------------------

    def load(self) -> bool:
        """Load the sidecar into memory; returns False when it must be rebuilt."""
        tok = json.dumps(self.tokenizer.to_dict(), sort_keys=True)
        if (
            self.sidecar.get_meta("schema") != SCHEMA_VERSION
            or self.sidecar.get_meta("tokenizer") != tok
        ):
            self.sidecar.clear()
            self.sidecar.set_meta({"schema": SCHEMA_VERSION, "tokenizer": tok})
            return False
        links = {m: older for m, (_, older) in self.sidecar.links().items()}
        self.supersede.load(self._indexed(self.sidecar.rows()), links)
        state = self.sidecar.get_meta("graph_state")
        if state:
            try:
                self.graph.load_state_dict(json.loads(state))
            except ValueError:  # another version: communities are recomputed
                logger.info("norax: ignoring saved graph communities of another version")
        return True

    def save_state(self) -> None:
        """Persist what is costly to recompute (graph communities) for the next open."""
        self.sidecar.set_meta({"graph_state": json.dumps(self.graph.state_dict())})

    def reconcile(
        self,
        collection: Any,
        row_from_record: Callable[[str, str, dict[str, Any]], IndexRow],
        progress: Callable[[int], None] | None = None,
    ) -> tuple[int, int]:
        """Make the indexes hold exactly Chroma's ids: index what is missing, drop extras.

        Ids left pending by an interrupted write are re-derived from Chroma even when both
        sides hold them, since their rows may predate the write.

        Returns ``(added, removed)``.
        """
        truth = chroma_ids(collection)
        pending = self.sidecar.pending()
        mine = set(self.namespace_of)
        extra = mine - truth
        if extra:
            self.remove(extra)
        missing = sorted((truth - mine) | (pending & truth))
        for start in range(0, len(missing), CHROMA_PAGE):
            chunk = missing[start : start + CHROMA_PAGE]
            self.resync(collection, chunk, row_from_record)
            if progress:
                progress(len(chunk))
        if pending:
            self.sidecar.clear_pending(pending)
        if extra or missing:
            logger.info("norax: reconciled indexes with Chroma: +%d -%d", len(missing), len(extra))
        return len(missing), len(extra)

    def resync(
        self,
        collection: Any,
        ids: Sequence[str],
        row_from_record: Callable[[str, str, dict[str, Any]], IndexRow],
    ) -> tuple[int, int]:
        """Re-derive ``ids`` from Chroma: index those it holds, forget the others.

        Returns ``(re-derived, forgotten)`` counts.
        """
        rows: list[IndexRow] = []
        for start in range(0, len(ids), CHROMA_PAGE):
            got = collection.get(
                ids=list(ids[start : start + CHROMA_PAGE]), include=["documents", "metadatas"]
            )
            rows += [
                row_from_record(mid, doc or "", dict(meta or {}))
                for mid, doc, meta in zip(
                    got["ids"], got["documents"], got["metadatas"], strict=True
                )
            ]
        gone = set(ids) - {r.id for r in rows}
        self.remove(gone)
        self.sidecar.delete(gone)  # rows the in-memory indexes never knew
        if rows:
            self.apply(rows)
        self.sidecar.clear_pending(ids)
        return len(rows), len(gone)


def _tagged(namespace: str, links: Mapping[str, tuple[str, ...]]) -> StoredLinks:
    """Links of one namespace in the sidecar's form."""
    return {m: (namespace, older) for m, older in links.items()}


def chroma_pages(
    collection: Any, include: list[str], where: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """A Chroma collection's records (``include`` fields, ``where`` filter), a page at a time."""
    offset = 0
    while True:
        got = collection.get(include=include, where=where, limit=CHROMA_PAGE, offset=offset)
        yield got
        if len(got["ids"]) < CHROMA_PAGE:
            return
        offset += CHROMA_PAGE


def chroma_ids(collection: Any) -> set[str]:
    """Every id in a Chroma collection, paged."""
    return {mid for got in chroma_pages(collection, []) for mid in got["ids"]}
