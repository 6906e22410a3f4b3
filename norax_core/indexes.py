"""The derived indexes (keyword, temporal, graph, supersession, vectors) kept in step with Chroma.

Chroma holds the truth; :class:`DerivedIndexes` holds what can be rebuilt from it: the BM25
index, the recency catalog, the entity graph and the supersession links, all partitioned by
namespace, persisted
through a :class:`~norax_core.sidecar.Sidecar`, and the loaded namespaces' vector matrices
(:class:`~norax_core.signals.vectors.VectorCache`, in memory only: Chroma has the vectors).
Writes go to the sidecar first (one transaction) and then to memory, under the engine's lock.

Namespaces load lazily. Opening a store reads no memory: a namespace's indexes are read on
first use (:meth:`DerivedIndexes.ensure`: a search, a count, a write's context) from its
:class:`~norax_core.sidecar.RowSource` (the sidecar's namespace index, embedded; Chroma, by a
filter on that namespace, for a client of a server) and the least recently used are dropped
beyond ``NoraxConfig.index_cache_mb`` (their communities saved in the sidecar). A write to an
unloaded namespace goes to Chroma and the sidecar only; one to a new namespace starts it
loaded. Id lookups (``add``, ``upsert``, ``delete``) ask the loaded namespaces, then the
source (:meth:`DerivedIndexes.homes`).

An embedded store keeps each namespace's finished state in the sidecar as a snapshot
(:mod:`norax_core.snapshots`): written when the namespace is evicted, at close and once its
vectors have been read, deleted by the sidecar in the transaction of any write to it, and
loaded by :meth:`DerivedIndexes.ensure` in one read instead of rebuilding from the rows.
A client of a Chroma server keeps them, with its rows, in a file its processes share
(:mod:`norax_core.client_snapshots`), each valid while the change log
(:mod:`norax_core.sync`) names no write to it since its rows were read: a namespace
loaded from Chroma is snapshotted when it is evicted or the store closes, if nobody has
written it since it was read. Both also publish their snapshots in Chroma
(:mod:`norax_core.published`), so that a process with no snapshot of its own loads a
namespace in one request: a client loads a cold namespace from its shared file, else from
the published blob, else from Chroma's rows.

The standing instructions and preferences of each loaded namespace (memories whose inferred
kind is in :data:`~norax_core.kinds.STANDING`) are kept as a set of ids (:meth:`standing`),
so the lane (:mod:`norax_core.stages.lane`) reads a few ids rather than the whole namespace.

A further per-namespace index joins in :meth:`_index`, :meth:`_unindex`, :meth:`_drop` and
the snapshot (its ``export`` and ``restore``, :mod:`norax_core.snapshots`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import compress
from typing import Any

from norax_core import snapshots
from norax_core.client_snapshots import ClientSnapshots
from norax_core.config import NoraxConfig
from norax_core.kinds import STANDING
from norax_core.published import Published, publish_checked, vouched
from norax_core.reclaim import READ_BYTES_PER_ROW, Reclaimer
from norax_core.sidecar import (
    SCHEMA_VERSION,
    IndexRow,
    RowSource,
    Sidecar,
    SidecarRows,
    column,
    record_bytes,
    records_bytes,
    row_bytes,
)
from norax_core.signals.bm25 import BM25Index, BM25Signal
from norax_core.signals.dense import NAMESPACE_KEY
from norax_core.signals.entity_graph import STATE_VERSION
from norax_core.signals.graph import EntityGraph, GraphSignal
from norax_core.signals.temporal import TemporalSignal
from norax_core.signals.vectors import NamespaceMatrix, VectorCache
from norax_core.supersession import SupersessionIndex
from norax_core.tokenize import Tokenizer

logger = logging.getLogger("norax")

CHROMA_PAGE = 5_000
GRAPH_STATES_SHARE = 4
"""A client keeps the saved communities of the namespaces it evicted (to reload them without
recomputing) in its in-memory sidecar, up to ``index_cache_mb / GRAPH_STATES_SHARE`` of JSON,
the most recently saved first: without a bound a worker's memory grows with every namespace it
ever served (about 3 KB each, 20 KB for 1,000 memories)."""
_TRIM_STATES_EVERY = 16  # evictions between trims (a trim reads every saved state's length)
_ROLE, _INFERRED, _DOCUMENT = 7, 8, 9  # columns of a stored row (Sidecar.namespace_records)


class DerivedIndexes:
    """BM25, temporal, graph and vector indexes plus their sidecar persistence.

    Args:
        sidecar: Where rows, pending ids and saved communities persist.
        config: Tokenizer, BM25, decay and memory budgets (``index_cache_mb``).
        source: Where unloaded namespaces are read from (default: the sidecar).
        shared: A client's shared snapshot file, if it keeps snapshots.
        published: The snapshots published in Chroma (:mod:`norax_core.published`).
        log: A client's change log, which vouches for published snapshots.

    ``namespace_of`` maps the ids of the *loaded* namespaces to their namespace; ask
    :meth:`homes` for any id.
    """

    def __init__(
        self,
        sidecar: Sidecar,
        config: NoraxConfig,
        source: RowSource | None = None,
        shared: ClientSnapshots | None = None,
        published: Published | None = None,
        log: Any = None,
    ) -> None:
        self.sidecar = sidecar
        self.shared = shared
        self.published = published
        self.log = log
        self.config = config
        self.source: RowSource = source if source is not None else SidecarRows(sidecar)
        self.tokenizer = Tokenizer(stem=config.stem, stopwords=config.stopwords)
        self.bm25 = BM25Index(k1=config.bm25_k1, b=config.bm25_b)
        self.temporal = TemporalSignal(config.tau_days)
        self.graph = EntityGraph(reads_adopt=False)  # a search adopts runs as it begins
        self.supersede = SupersessionIndex(self.tokenizer)
        self.bm25_signal = BM25Signal(self.bm25, self.tokenizer)
        self.graph_signal = GraphSignal(self.graph)
        self.namespace_of: dict[str, str] = {}
        self._standing: dict[str, set[str]] = {}  # namespace -> instruction/preference ids
        self._roles: dict[str, dict[str, str]] = {}  # namespace -> {id: role}, roles only
        self.reclaim = Reclaimer()
        """Returns the memory freed by reads and evictions to the OS (:mod:`norax_core.reclaim`)."""
        self.vectors = VectorCache(int(config.dense_cache_mb * 2**20), freed=self.reclaim.freed)
        self.budget = int(config.index_cache_mb * 2**20)
        self._loaded: OrderedDict[str, int] = OrderedDict()  # namespace -> est. bytes, LRU first
        # a client's loaded namespaces -> est. bytes of the records its sidecar rows hold
        self._records: dict[str, int] = {}
        self.record_reads: dict[str, int] = {}
        """A client's loaded namespaces -> searches that read records from Chroma since it
        loaded (:mod:`norax_core.store.client_records`)."""
        self._held = 0  # > 0: nothing is evicted (a check reads every namespace)
        self._present: set[str] = set()  # namespaces known to hold memories in the source
        self._empty: set[str] = set()  # loaded namespaces that hold no memory
        self.last_seq = 0
        """The highest write sequence number seen (writes are numbered after it)."""
        self.writes = 0
        """Writes applied so far: a write that read a namespace's context can tell, by
        comparing it, whether another write came in between."""
        self.loads = 0
        self.evictions = 0
        self.restored = 0
        """Loads served by a snapshot (:mod:`norax_core.snapshots`)."""
        # namespace -> (graph generation, holds vectors) of its stored snapshot
        self._snapped: dict[str, tuple[int, bool]] = {}
        self._vectors_due: set[str] = set()  # vectors read from Chroma, not in a snapshot yet
        self._written: set[str] = set()  # namespaces written since open (snapshots at close)
        # a client's namespaces unchanged since their rows were read at this time -> whether
        # the shared file holds their snapshot (None: not yet; False: without its vectors)
        self._bases: dict[str, tuple[float, bool | None]] = {}
        # a client's namespaces loaded from Chroma's rows at this time, to publish in Chroma
        self._unpublished: dict[str, float] = {}
        self._unpublish_due: set[str] | None = None  # during a reconcile (unpublish)
        # set by a lazy reconcile: each namespace's ids are compared with Chroma's as it loads
        self._verify: tuple[Any, Callable[[str, str, dict[str, Any]], IndexRow]] | None = None

    # -- loading and eviction -------------------------------------------------------------

    def loaded(self) -> list[str]:
        """The loaded namespaces, least recently used first."""
        return list(self._loaded)

    def holds(self, namespace: str) -> bool:
        """Whether ``namespace`` is loaded."""
        return namespace in self._loaded

    @property
    def nbytes(self) -> int:
        """Estimated bytes held by the loaded namespaces.

        :func:`row_bytes` each, plus the records a client's sidecar rows hold
        (:func:`record_bytes`).
        """
        return sum(self._loaded.values()) + sum(self._records.values())

    def records_kept(self, namespace: str, nbytes: int) -> None:
        """A client's sidecar now holds ``nbytes`` more of loaded ``namespace``'s records."""
        if namespace in self._loaded and nbytes:
            self._records[namespace] = self._records.get(namespace, 0) + nbytes
            self._trim(keep=namespace)

    def ensure(self, namespace: str) -> None:
        """Load ``namespace`` if it is not loaded, and mark it most recently used."""
        self._save_due()
        if namespace in self._loaded:
            self._loaded.move_to_end(namespace)
            return
        if self._verify is not None:
            self._check_namespace(namespace, *self._verify)
        if self.source.complete and self._restore(namespace):
            self._standing[namespace], self._roles[namespace] = self.sidecar.labels(
                namespace, STANDING
            )
            self.loads += 1
            self._trim(keep=namespace)
            return
        if self._restore_shared(namespace) or self._restore_published(namespace):
            self.loads += 1
            self._trim(keep=namespace)
            return
        read_at = None if self.log is None else float(self.log.clock())
        rows = self.source.rows(namespace)
        if not self.source.complete:  # the read's decoded response is garbage now
            self.reclaim.freed(len(rows) * READ_BYTES_PER_ROW)
        if read_at is not None:
            if self.shared is not None:
                self._bases[namespace] = (read_at, None)
            if self.published is not None and rows:
                self._unpublished[namespace] = read_at
        if not self.source.complete:  # the sidecar caches the loaded namespaces' rows
            self.sidecar.drop_namespace(namespace)
            self.sidecar.upsert(rows, done=())
        self._loaded[namespace] = 0
        if not rows:
            self._empty.add(namespace)
        self._index(rows)
        self._link(namespace, rows)
        if not self.source.complete:  # its links too: check() compares them with memory
            links = self.supersede.links(namespace)
            self.sidecar.relink(namespace, {m: (namespace, o) for m, o in links.items()})
        saved = self.sidecar.graph_state(namespace)
        if saved is not None:
            try:
                state = json.loads(saved)
                if state.get("version") == STATE_VERSION:
                    self.graph.load_namespace_state(namespace, state)
            except (ValueError, AttributeError):
                logger.info("norax: ignoring unreadable saved communities of %r", namespace)
        self.loads += 1
        self._trim(keep=namespace)

    def begin(self, namespace: str) -> None:
        """A search of ``namespace`` starts: load it, with its communities for the search.

        :meth:`ensure`, then adopt a finished community run: the search reads these
        communities to its end (see ``EntityGraph.begin``).
        """
        self.ensure(namespace)
        self.graph.begin(namespace)

    @contextlib.contextmanager
    def held(self, namespaces: Iterable[str] = ()) -> Iterator[None]:
        """A context in which ``namespaces`` are loaded and nothing is evicted.

        For work that reads several namespaces at once (a write's context, a check). On
        leaving, the least recently used namespaces are evicted down to the budget again.
        """
        self._held += 1
        try:
            for ns in dict.fromkeys(namespaces):
                self.ensure(ns)
            yield
        finally:
            self._held -= 1
            self._trim(keep=None)

    def load_all(self) -> contextlib.AbstractContextManager[None]:
        """:meth:`held` for every namespace (``check`` and ``repair`` read them all)."""
        return self.held(self.source.namespaces())

    def _trim(self, keep: str | None) -> None:
        if self._held:
            return
        self._evict_over(keep)
        self.reclaim.settle()

    def _evict_over(self, keep: str | None) -> None:
        # An empty namespace's estimate is 0 bytes, but its entries are not free: searches of
        # many empty namespaces would pile them up beyond any budget. Nothing to reload.
        for ns in self._empty - {keep}:
            self.evict(ns)
        total = self.nbytes
        for ns in list(self._loaded):
            if total <= self.budget:
                return
            if ns != keep:
                total -= self._loaded[ns] + self._records.get(ns, 0)
                self.evict(ns)

    def evict(self, namespace: str) -> None:
        """Drop a loaded namespace from memory (it is reloaded on use)."""
        if namespace not in self._loaded:
            return
        self._snapshot(namespace, evicting=True)
        self._publish(namespace)
        self.reclaim.freed(self._loaded.pop(namespace) + self._records.get(namespace, 0))
        self._empty.discard(namespace)
        state = self._drop(namespace)
        if state is not None:
            self.sidecar.set_graph_states({namespace: _state_json(state)})
        if not self.source.complete:
            self.sidecar.drop_namespace(namespace)
            if self.evictions % _TRIM_STATES_EVERY == 0:  # in memory: bounded, see below
                self.sidecar.trim_graph_states(self.budget // GRAPH_STATES_SHARE)
        self.evictions += 1

    # -- snapshots (embedded stores) ------------------------------------------------------

    def _restore(self, namespace: str) -> bool:
        """Load ``namespace`` from its snapshot, if it has a valid one; whether it did."""
        got = self.sidecar.snapshot(namespace, snapshots.layout())
        if got is None:
            return False
        try:
            state, ids = snapshots.ids_of(got[0])
            if self._foreign(ids, namespace):
                raise ValueError("it holds an id loaded in another namespace")
            snapshots.restore(
                namespace, state, self.bm25, self.temporal, self.graph, self.supersede
            )
        except Exception as exc:  # noqa: BLE001 - any bad snapshot: load from the rows
            logger.info("norax: ignoring the snapshot of %r (%s)", namespace, exc)
            self._drop(namespace)
            self.sidecar.drop_snapshots([namespace])
            return False
        self.namespace_of.update(dict.fromkeys(ids, namespace))
        self._loaded[namespace] = int(state["nbytes"])
        self.last_seq = max(self.last_seq, self.temporal.last_seq)
        block = (
            snapshots.unpack_vectors(got[1], ids, state["strings"]) if got[1] is not None else None
        )
        if block is not None:
            self.vectors.restore(namespace, block)
        self._snapped[namespace] = (self.graph.generation(namespace), block is not None)
        self.restored += 1
        return True

    def _restore_shared(self, namespace: str) -> bool:
        """Load a client's ``namespace`` from the shared file's snapshot, if one may be served."""
        if self.shared is None:
            return False
        try:
            taken = self.shared.taken(namespace)  # a log entry since: not served
            got = None if taken is None else self.shared.get(namespace, taken)
        except Exception as exc:  # noqa: BLE001 - the file or the log: load from Chroma
            logger.warning("norax: not serving the snapshot of %r: %s", namespace, exc)
            return False
        if taken is None or got is None:
            return False
        try:
            blob = got[2]
            block = self._restore_client(
                namespace, got[0], got[1], lambda ids: snapshots.unpack_rows(blob, ids, namespace)
            )
        except Exception as exc:  # noqa: BLE001 - any bad snapshot: load from Chroma
            logger.info("norax: ignoring the shared snapshot of %r (%s)", namespace, exc)
            self._drop(namespace)
            self.shared.drop([namespace])
            return False
        self._bases[namespace] = (taken, block)
        return True

    def _restore_published(self, namespace: str) -> bool:
        """Load a client's ``namespace`` from its snapshot published in Chroma, if valid."""
        if self.published is None or self.source.complete:
            return False
        try:
            got = self.published.get(namespace)
            ok = got is not None and vouched(self.log, namespace, got[0])
        except ValueError as exc:  # unreadable: delete it, load from Chroma
            logger.info("norax: ignoring the published snapshot of %r (%s)", namespace, exc)
            self.unpublish([namespace])
            return False
        except Exception as exc:  # noqa: BLE001 - the server or the log: load from Chroma
            logger.warning("norax: not serving the published snapshot of %r: %s", namespace, exc)
            return False
        if got is None or not ok:
            if got is not None and ok is None:  # a write since: it is stale
                self.unpublish([namespace])
            return False
        taken, state, vectors, rows = got
        try:
            self._restore_client(
                namespace, state, vectors, lambda ids: snapshots.check_rows(rows, ids, namespace)
            )
        except Exception as exc:  # noqa: BLE001 - any bad snapshot: load from Chroma
            logger.info("norax: ignoring the published snapshot of %r (%s)", namespace, exc)
            self._drop(namespace)
            self.unpublish([namespace])
            return False
        if self.shared is not None:  # the shared file does not hold it yet
            self._bases[namespace] = (taken, None)
        return True

    def _restore_client(
        self,
        namespace: str,
        state_blob: bytes,
        vectors: bytes | memoryview | None,
        rows_of: Callable[[set[str]], Sequence[Any]],
    ) -> bool:
        """Hand a client's snapshot to the indexes; whether it held the vectors.

        ``rows_of(ids)``: its rows, checked to be exactly ``ids``.

        Raises:
            ValueError: The snapshot is unreadable, its rows are not its ids', or it holds
                an id of another namespace.
        """
        state, ids = snapshots.ids_of(state_blob)
        rows = rows_of(ids)
        if self._foreign(ids, namespace):
            raise ValueError("it holds an id loaded in another namespace")
        snapshots.restore(namespace, state, self.bm25, self.temporal, self.graph, self.supersede)
        self.sidecar.cache(namespace, rows)  # the client's sidecar keeps them (in memory)
        self._standing[namespace], self._roles[namespace] = _labels(rows)
        self.namespace_of.update(dict.fromkeys(ids, namespace))
        self._loaded[namespace] = int(state["nbytes"])
        self._records[namespace] = records_bytes(rows, _DOCUMENT)
        self.last_seq = max(self.last_seq, self.temporal.last_seq)
        block = (
            snapshots.unpack_vectors(vectors, ids, state["strings"])
            if vectors is not None
            else None
        )
        if block is not None:
            self.vectors_with_rows(namespace, block)
        self.restored += 1
        return block is not None

    def _foreign(self, ids: set[str], namespace: str) -> bool:
        """Whether any of ``ids`` is loaded in another namespace than ``namespace``."""
        if self.namespace_of.keys().isdisjoint(ids):  # in C: the usual answer, at once
            return False
        return any(self.namespace_of.get(m, namespace) != namespace for m in ids)

    def _capture(self, namespace: str) -> bytes:
        """The snapshot blob of a loaded namespace's derived indexes."""
        return snapshots.capture(
            namespace,
            self.bm25,
            self.temporal,
            self.graph,
            self.supersede,
            self._loaded.get(namespace, 0),
        )

    def _publish(self, namespace: str) -> None:
        """Store a client's snapshot of ``namespace`` if it is unchanged since it was read.

        In the shared file, and in Chroma if it was loaded from Chroma's rows.
        """
        taken, stored = self._bases.pop(namespace, (0.0, True))
        read_at = self._unpublished.pop(namespace, None)
        ids = self.temporal.ids(namespace)
        block = _covering(self.vectors.fresh(namespace), ids)
        to_file = self.shared is not None and not stored and (stored is None or block is not None)
        if not ids or (not to_file and read_at is None):
            return
        rows = self.sidecar.namespace_records(namespace)
        if {r[0] for r in rows} != ids:
            return
        state = self._capture(namespace)
        vectors = snapshots.pack_vectors(block) if block is not None else None
        try:
            if to_file and self.shared is not None:
                self.shared.put(namespace, taken, state, vectors, snapshots.pack_rows(rows))
            if read_at is not None and self.published is not None and self.log is not None:
                publish_checked(
                    self.published, self.log, namespace, read_at, lambda: (state, vectors, rows)
                )
        except Exception as exc:  # noqa: BLE001 - a cache: the namespace loads from Chroma
            logger.warning("norax: could not store the snapshot of %r: %s", namespace, exc)

    def unpublish(self, namespaces: Iterable[str]) -> None:
        """Delete the published snapshots of ``namespaces`` (a failure is logged).

        During a :meth:`reconcile` they are only noted, and deleted by
        :meth:`flush_unpublish` once it is over (a reconcile must not move Chroma's write
        position, :mod:`norax_core.store.position`).
        """
        if self.published is None:
            return
        if self._unpublish_due is not None:
            self._unpublish_due.update(namespaces)
            return
        try:
            self.published.drop(namespaces)
        except Exception as exc:  # noqa: BLE001 - the next write or repair retries
            logger.warning("norax: could not delete published snapshots: %s", exc)

    def flush_unpublish(self) -> None:
        """After a reconcile: delete the published snapshots of what it changed."""
        due, self._unpublish_due = self._unpublish_due, None
        if due:
            self.unpublish(due)

    def publish_embedded(self, namespace: str) -> bool:
        """Publish an embedded store's sidecar snapshot of ``namespace`` in Chroma.

        Only a snapshot with its vectors, whose ids are the sidecar's rows; one already
        published is left. Deferred: written with others at the caller's
        ``published.flush()``. Returns whether it is (or will be) published.
        """
        if self.published is None or not self.source.complete:
            return False
        held = self.published.held()
        if held is not None and namespace in held:
            return True
        got = self.sidecar.snapshot(namespace, snapshots.layout())
        if got is None or got[1] is None:
            return False
        rows = self.sidecar.namespace_records(namespace)
        try:
            snapshots.check_rows(rows, snapshots.ids_of(got[0])[1], namespace)
        except ValueError:
            return False
        return self.published.put(namespace, time.time(), got[0], got[1], rows, defer=True)

    def publish(self) -> None:
        """At a client's close: the snapshots of the loaded, unchanged namespaces."""
        for ns in list(dict.fromkeys([*self._bases, *self._unpublished])):
            if ns in self._loaded:
                self.graph.communities(ns)  # ready to use: no first search places every entity
                self._publish(ns)

    def renewed(self) -> DerivedIndexes:
        """Empty indexes over the same sidecar, source, snapshot file and published ones."""
        return DerivedIndexes(
            self.sidecar, self.config, self.source, self.shared, self.published, self.log
        )

    def drop_shared(self) -> None:
        """Delete a client's shared snapshots and the published ones (a repair, a rebuild)."""
        if self.shared is not None:
            self.shared.drop()
        if self.published is not None:
            self.published.drop_all()

    def close(self) -> None:
        """Stop the community worker thread, close the sidecar and a client's snapshot file."""
        self.graph.close()
        self.sidecar.close()
        if self.shared is not None:
            self.shared.close()

    def vectors_read(self, namespace: str, block: NamespaceMatrix) -> None:
        """The dense signal read ``namespace``'s vectors from Chroma: snapshot them.

        Called from the search's worker thread, so it only takes note; the snapshot is
        written at the next load, eviction or close (under the store's lock).
        """
        if self.source.complete:
            self._vectors_due.add(namespace)

    def vectors_with_rows(self, namespace: str, block: NamespaceMatrix) -> None:
        """A client read ``namespace``'s vectors with its rows (one ``get``): hold them.

        Only for a namespace the dense signal ranks from a matrix; others are searched
        through Chroma.
        """
        if len(block) <= self.config.dense_exact_limit:
            self.vectors.restore(namespace, block)

    def _save_due(self) -> None:
        while self._vectors_due:
            ns = self._vectors_due.pop()
            if ns in self._loaded:
                self._snapshot(ns)

    def _snapshot(
        self, namespace: str, block: NamespaceMatrix | None = None, evicting: bool = False
    ) -> None:
        """Write the snapshot of a loaded namespace unless its stored one is as complete.

        Its vectors are ``block``, else the loaded matrix if it is fresh. An evicted
        namespace written since open without its vectors at hand is left to :meth:`finish`
        (a bulk write would snapshot it again and again).
        """
        if not self.source.complete or self.sidecar.path is None:
            return
        ids = self.temporal.ids(namespace)
        block = _covering(block if block is not None else self.vectors.fresh(namespace), ids)
        generation = self.graph.generation(namespace)
        done = self._snapped.get(namespace)
        if not ids or (done is not None and done[0] == generation and done[1] >= bool(block)):
            return
        if evicting and block is None and namespace in self._written:
            return
        state = self._capture(namespace)
        vectors = snapshots.pack_vectors(block) if block is not None else None
        self.sidecar.put_snapshot(namespace, snapshots.layout(), state, vectors)
        self._snapped[namespace] = (generation, block is not None)

    def finish(self, fetch: Callable[[str, set[str]], NamespaceMatrix | None]) -> None:
        """At close: a complete snapshot of every namespace loaded or written since open.

        Complete means with its graph communities up to date (run now if stale) and its
        vectors.

        ``fetch(namespace, ids)`` reads a namespace's vectors from Chroma (``None`` when it
        is too large for a matrix, or Chroma disagrees with ``ids``). Namespaces are
        loaded one at a time, so the memory budget holds.
        """
        if not self.source.complete or self.sidecar.path is None:
            return
        self._save_due()
        for ns in sorted(set(self._loaded) | self._written):
            if not self.source.has(ns):
                continue
            loaded = self._complete(ns, fetch, again=False)
            try:
                self.publish_embedded(ns)
            except Exception as exc:  # noqa: BLE001 - not published: clients read the rows
                logger.warning("norax: could not publish the snapshot of %r: %s", ns, exc)
            if not loaded:
                self.evict(ns)
        self._written.clear()
        if self.published is not None:
            try:
                self.published.flush()
            except Exception as exc:  # noqa: BLE001 - not published: clients read the rows
                logger.warning("norax: could not publish snapshots: %s", exc)

    def publish_all(
        self,
        fetch: Callable[[str, set[str]], NamespaceMatrix | None],
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Publish every namespace of an embedded store (see :meth:`finish` for ``fetch``).

        A namespace without a complete sidecar snapshot is loaded and snapshotted first.
        ``progress`` is called with 1 after each namespace. Returns how many are published.
        """
        done = 0
        for ns in self.source.namespaces():
            if not self.publish_embedded(ns):
                loaded = self._complete(ns, fetch, again=True)
                self.publish_embedded(ns)
                if not loaded:
                    self.evict(ns)
            held = self.published.held() if self.published is not None else None
            done += int(held is not None and ns in held)
            if progress is not None:
                progress(1)
        if self.published is not None:
            self.published.flush()
        return done

    def _complete(
        self, ns: str, fetch: Callable[[str, set[str]], NamespaceMatrix | None], *, again: bool
    ) -> bool:
        """Load ``ns`` and snapshot it complete (communities, vectors); whether it was loaded.

        ``again``: snapshot it even if this process's last snapshot of it is still complete.
        """
        loaded = ns in self._loaded
        self.ensure(ns)
        self.graph.communities(ns)  # ready to use: no first search places every entity
        done = self._snapped.get(ns)
        if again or done is None or not done[1] or done[0] != self.graph.generation(ns):
            block = self.vectors.fresh(ns) or fetch(ns, self.temporal.ids(ns))
            self._snapshot(ns, block)
        return loaded

    def _drop(self, namespace: str) -> dict[str, Any] | None:
        self._snapped.pop(namespace, None)
        self._bases.pop(namespace, None)
        self._unpublished.pop(namespace, None)
        self._records.pop(namespace, None)
        self.record_reads.pop(namespace, None)
        for mid in self.temporal.ids(namespace):
            self.namespace_of.pop(mid, None)
        self._standing.pop(namespace, None)
        self._roles.pop(namespace, None)
        self.bm25.drop(namespace)
        self.temporal.drop(namespace)
        self.vectors.evict(namespace)
        self.supersede.drop(namespace)
        return self.graph.drop(namespace)

    # -- lookups --------------------------------------------------------------------------

    def homes(self, ids: Iterable[str], *, fresh: bool = False) -> dict[str, str]:
        """``id -> namespace`` of the ``ids`` the store holds (loaded or not), as :meth:`stored`."""
        return {m: ns for m, (ns, _) in self.stored(ids, fresh=fresh).items()}

    def stored(self, ids: Iterable[str], *, fresh: bool = False) -> dict[str, tuple[str, int]]:
        """``id -> (namespace, write sequence number)`` for the ``ids`` the store holds.

        ``fresh``: the answer a write's id check needs. A client then asks Chroma about every
        id, loaded namespace or not: another process may have written or moved it since the
        last pull, and trusting the loaded indexes would let a write take (upsert) or
        silently lose (add) another tenant's id. An embedded store's indexes are its truth.
        """
        if fresh and not self.source.complete:
            return self.source.homes(list(dict.fromkeys(ids)))
        out: dict[str, tuple[str, int]] = {}
        rest: list[str] = []
        for mid in dict.fromkeys(ids):
            ns = self.namespace_of.get(mid)
            if ns is not None:
                out[mid] = (ns, self.temporal.seqs(ns, [mid])[0])
            else:
                rest.append(mid)
        if rest:
            found = self.source.homes(rest)
            # a client's source is Chroma: a loaded namespace's id it holds but the indexes
            # do not (another process's write, not yet synced) is left out, as searches do
            out.update((m, h) for m, h in found.items() if h[0] not in self._loaded)
        return out

    def standing(self, namespace: str) -> list[str]:
        """The ids of ``namespace``'s standing instructions and preferences, sorted.

        Memories whose inferred kind is in :data:`~norax_core.kinds.STANDING`; the caller
        has loaded the namespace (:meth:`ensure`).
        """
        return sorted(self._standing.get(namespace, ()))

    def roles(self, namespace: str, ids: Iterable[str]) -> dict[str, str]:
        """``id -> role`` of the ``ids`` held in ``namespace`` (``""`` for none).

        :attr:`IndexRow.role`, kept in memory for the loaded namespaces; the caller has
        loaded ``namespace`` (:meth:`ensure`).
        """
        roles = self._roles.get(namespace, {})
        return {m: roles.get(m, "") for m in ids if self.namespace_of.get(m) == namespace}

    def count(self, namespace: str | None = None) -> int:
        """Memories in ``namespace`` (loaded first) or, ``None``, in all."""
        if namespace is None:
            return self.source.count()
        self.ensure(namespace)
        return self.temporal.count(namespace)

    def namespaces(self) -> list[str]:
        """Namespaces that hold at least one memory, sorted."""
        return self.source.namespaces()

    # -- writes ---------------------------------------------------------------------------

    def claim(self, namespaces: Iterable[str]) -> None:
        """Before a write: a namespace the store does not hold yet starts loaded (empty).

        Asked before Chroma is written (afterwards the namespace would exist). The answer is
        kept for namespaces that exist, so a writer asks once per namespace.
        """
        for ns in dict.fromkeys(namespaces):
            if ns in self._loaded or ns in self._present:
                continue
            if self.source.has(ns):
                self._present.add(ns)
            else:  # nothing to read: its next search would load it anyway
                self._loaded[ns] = 0
                self._empty.add(ns)

    def apply(self, rows: Sequence[IndexRow]) -> None:
        """Persist ``rows`` and index those of loaded namespaces (replacing same ids).

        Rows of a namespace that is not loaded go to the sidecar only (an embedded store)
        or nowhere (a client: Chroma has them, and the namespace is read from it when it
        loads). A row that moved a loaded memory into a namespace that is not loaded (another
        process deleted it in one and added it in the other) first leaves the old one.
        """
        moved = [
            r.id
            for r in rows
            if r.namespace not in self._loaded
            and self.namespace_of.get(r.id, r.namespace) != r.namespace
        ]
        if moved:
            self.remove(moved)
        live = [r for r in rows if r.namespace in self._loaded]
        touched = {r.namespace for r in live} | {self.namespace_of.get(r.id, "") for r in live}
        written = (touched | {self.namespace_of.get(r.id, "") for r in rows}) - {""}
        for ns in written:
            self._snapped.pop(ns, None)  # the sidecar deletes their snapshots with the rows
            self._bases.pop(ns, None)  # changed since read: their basis no longer vouches
            self._unpublished.pop(ns, None)
        if self.source.complete:  # an embedded store's published ones (clients: the writer's)
            self.unpublish(written | {r.namespace for r in rows})
        self._written.update(written | {r.namespace for r in rows})
        try:
            complete = self.source.complete
            self.sidecar.upsert(
                rows if complete else live,
                done=[r.id for r in rows],
                links=self.supersede.written(live, self.namespace_of),
                unlinked=[r for r in rows if r.namespace not in self._loaded] if complete else (),
            )
        except BaseException:  # rolled back: the links as the sidecar has them
            self._relink(touched)
            raise
        self._index(live)
        if rows:
            self.last_seq = max(self.last_seq, max(r.seq for r in rows))
        self.writes += 1
        self.vectors_changed([r.id for r in live])
        self._trim(keep=None)

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
        groups: dict[str, list[IndexRow]] = {}
        for r in rows:
            old = self.namespace_of.get(r.id)
            if old is not None and old != r.namespace:
                self._unindex(r.id)
                old = None
            if old is None:
                self._loaded[r.namespace] += row_bytes(r)
                self._empty.discard(r.namespace)
                if not self.source.complete:  # a client's sidecar holds it in memory
                    held = record_bytes(r.document, r.metadata)
                    self._records[r.namespace] = self._records.get(r.namespace, 0) + held
            self.namespace_of[r.id] = r.namespace
            standing = self._standing.setdefault(r.namespace, set())
            if r.inferred_kind in STANDING:
                standing.add(r.id)
            else:  # an upsert may change what a memory is
                standing.discard(r.id)
            roles = self._roles.setdefault(r.namespace, {})
            if r.role:
                roles[r.id] = r.role
            else:
                roles.pop(r.id, None)
            groups.setdefault(r.namespace, []).append(r)
        for ns, group in groups.items():  # one call per index and namespace: a load is bulk
            self.bm25.add_many(ns, [(r.id, r.tokens) for r in group])
            for r in group:
                self.temporal.add(ns, r.id, r.created_at, r.kind, r.seq)
            self.graph.add_many(ns, [(r.id, r.entities) for r in group])
            self.last_seq = max(self.last_seq, *(r.seq for r in group))

    def remove(self, ids: Iterable[str]) -> list[str]:
        """Forget ``ids``; returns those that were known (loaded, or in the sidecar)."""
        wanted = list(dict.fromkeys(ids))
        held = self.sidecar.homes([m for m in wanted if m not in self.namespace_of])
        known = [i for i in wanted if i in self.namespace_of or i in held]
        if known:
            touched = {self.namespace_of[m] for m in known if m in self.namespace_of}
            for ns in touched:
                self._snapped.pop(ns, None)  # the sidecar deletes their snapshots
                self._bases.pop(ns, None)
                self._unpublished.pop(ns, None)
            if self.source.complete:
                self.unpublish(touched | {ns for ns, _ in held.values()})
            self._written.update(touched)
            try:
                self.sidecar.delete(known, self.supersede.removed(known, self.namespace_of))
            except BaseException:
                self._relink(touched)
                raise
            for mid in known:
                if mid in self.namespace_of:
                    self._unindex(mid)
        self.writes += 1
        return known

    def _link(self, namespace: str, rows: Sequence[IndexRow]) -> None:
        """Supersession links of a namespace being loaded (see :meth:`SupersessionIndex.loaded`)."""
        self.supersede.loaded(namespace, rows, self.sidecar if self.source.complete else None)

    def _relink(self, namespaces: Iterable[str]) -> None:
        """After a failed sidecar write: the loaded namespaces' links as the sidecar has them."""
        for ns in namespaces:
            if ns in self._loaded:
                self.supersede.drop(ns)
                self._link(ns, self.source.rows(ns))

    def _unindex(self, mid: str) -> None:
        ns = self.namespace_of.pop(mid)
        n = self.temporal.count(ns)
        if ns in self._loaded and n:
            self._loaded[ns] -= self._loaded[ns] // n
            if ns in self._records:
                self._records[ns] -= self._records[ns] // n
        self._standing.get(ns, set()).discard(mid)
        self._roles.get(ns, {}).pop(mid, None)
        self.bm25.remove(ns, mid)
        self.temporal.remove(ns, mid)
        self.graph.remove(ns, mid)
        self.vectors.drop(ns, [mid])
        if ns in self._loaded and not self.temporal.count(ns):
            self._empty.add(ns)

    # -- load and reconcile -------------------------------------------------------------

    def load(self) -> bool:
        """Check the sidecar at open (no memory is read); returns False when it must be rebuilt.

        A sidecar of another schema or tokenizer is emptied (the caller rebuilds it from
        Chroma); communities saved by an older version in one piece get a row per namespace.
        """
        tok = json.dumps(self.tokenizer.signature(), sort_keys=True)
        if self.sidecar.get_meta("snapshot_layout") != snapshots.layout():
            self.sidecar.drop_snapshots()  # written by other code
            self.sidecar.set_meta({"snapshot_layout": snapshots.layout()})
        if (
            self.sidecar.get_meta("schema") != SCHEMA_VERSION
            or self.sidecar.get_meta("tokenizer") != tok
        ):
            self.sidecar.clear()
            self.sidecar.set_meta({"schema": SCHEMA_VERSION, "tokenizer": tok})
            return False
        if not self.source.complete:  # a cache of another session's loaded namespaces
            self.sidecar.clear()
        self.last_seq = self.sidecar.max_seq()
        old = self.sidecar.get_meta("graph_state")
        if old:
            try:
                spaces = json.loads(old).get("namespaces", {})
                self.sidecar.set_graph_states(
                    {ns: _state_json(st) for ns, st in spaces.items() if isinstance(st, dict)}
                )
            except (ValueError, AttributeError):
                logger.info("norax: ignoring saved graph communities of another version")
            self.sidecar.set_meta({"graph_state": ""})
        return True

    def save_state(self) -> None:
        """Persist what is costly to recompute for the next open.

        The loaded namespaces' graph communities, and their snapshots.
        """
        states = {}
        self._save_due()
        for ns in self._loaded:
            self.graph.begin(ns)  # no search runs now: a finished community run is saved
            self._snapshot(ns)
            state = self.graph.namespace_state(ns)
            if state is not None:
                states[ns] = _state_json(state)
        if states:
            self.sidecar.set_graph_states(states)

    def reconcile(
        self,
        collection: Any,
        row_from_record: Callable[[str, str, dict[str, Any]], IndexRow],
        progress: Callable[[int], None] | None = None,
        lazy: bool = False,
        defer: bool = False,
    ) -> tuple[int, int]:
        """Make the indexes hold exactly Chroma's ids: index what is missing, drop extras.

        Ids left pending by an interrupted write are re-derived from Chroma even when both
        sides hold them, since their rows may predate the write. A complete sidecar
        (embedded) is compared with every id in Chroma (ids only: no memory is read); a
        client compares its loaded namespaces only (the others are read from Chroma when
        they load).

        ``lazy`` (an embedded store's open): when nothing is pending and Chroma holds as
        many memories as the sidecar, no id is read now; instead each namespace's ids are
        compared with Chroma's when it loads (one filtered ``get`` of ids), so an open does
        not grow with the store and a change made behind the sidecar's back (a same-size
        swap of ids included) is still found, when its namespace is first used.

        ``defer``: the published snapshots of what changed are deleted only by
        :meth:`flush_unpublish` (the caller's, once it has recorded Chroma's write position).

        Returns ``(added, removed)``.
        """
        if defer:
            self._unpublish_due = set()  # see unpublish
        try:
            return self._reconcile(collection, row_from_record, progress, lazy)
        except BaseException:
            self.flush_unpublish()
            raise

    def _reconcile(
        self,
        collection: Any,
        row_from_record: Callable[[str, str, dict[str, Any]], IndexRow],
        progress: Callable[[int], None] | None,
        lazy: bool,
    ) -> tuple[int, int]:
        pending = self.sidecar.pending()
        same = lazy and self.source.complete and not pending
        if same and int(collection.count()) == self.sidecar.count():
            self._verify = (collection, row_from_record)
            return 0, 0
        if self.source.complete:
            self._verify = None  # every id is compared now
        if not self.source.complete:  # a client: the loaded namespaces
            pages = [chroma_pages(collection, [], {NAMESPACE_KEY: ns}) for ns in self._loaded]
            truth = {m for ns_pages in pages for got in ns_pages for m in got["ids"]}
            mine = set(self.namespace_of)
            extra, missing = mine - truth, (truth - mine) | pending
        else:
            truth, mine = chroma_ids(collection), self.sidecar.ids()
            extra, missing = mine - truth, (truth - mine) | (pending & truth)
        if extra:
            self.remove(extra)
        todo = sorted(missing)
        for start in range(0, len(todo), CHROMA_PAGE):
            chunk = todo[start : start + CHROMA_PAGE]
            self.resync(collection, chunk, row_from_record)
            if progress:
                progress(len(chunk))
        if pending:
            self.sidecar.clear_pending(pending)
        if extra or todo:
            logger.info("norax: reconciled indexes with Chroma: +%d -%d", len(todo), len(extra))
        return len(todo), len(extra)

    def _check_namespace(
        self,
        namespace: str,
        collection: Any,
        row_from_record: Callable[[str, str, dict[str, Any]], IndexRow],
    ) -> None:
        """Before a namespace's load after a lazy open: re-derive the ids it disagrees on.

        See :meth:`reconcile`.
        """
        got = collection.get(where={NAMESPACE_KEY: namespace}, include=[])
        truth, mine = set(got["ids"]), self.sidecar.namespace_ids(namespace)
        if truth != mine:
            differ = sorted(truth ^ mine)
            logger.info("norax: re-derived %d ids of %r from Chroma", len(differ), namespace)
            self.resync(collection, differ, row_from_record)

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
        # their published snapshots may hold what Chroma no longer does (a write without Norax)
        known = {self.namespace_of[m] for m in ids if m in self.namespace_of}
        self.unpublish({r.namespace for r in rows} | known)
        self.remove(gone)
        self.sidecar.delete(gone)  # rows the in-memory indexes never knew
        if rows:
            self.apply(rows)
        self.sidecar.clear_pending(ids)
        return len(rows), len(gone)


def _state_json(state: dict[str, Any]) -> str:
    return json.dumps({"version": STATE_VERSION, **state})


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


def _labels(rows: Sequence[tuple[object, ...]]) -> tuple[set[str], dict[str, str]]:
    """Stored rows' standing ids (instructions, preferences) and ``{id: role}`` of those with one.

    The columns read in C (:func:`~norax_core.sidecar.column`, ``compress``): the loops run
    over the few rows that have a role.
    """
    ids = column(rows, 0)
    standing = set(map(str, compress(ids, map(STANDING.__contains__, column(rows, _INFERRED)))))
    roles = column(rows, _ROLE)
    return standing, {str(m): str(r) for m, r in compress(zip(ids, roles, strict=True), roles)}


def _covering(block: NamespaceMatrix | None, ids: set[str]) -> NamespaceMatrix | None:
    """``block`` if it holds exactly the vectors of ``ids``, else ``None``."""
    if block is not None and (len(block) != len(ids) or not all(m in block for m in ids)):
        return None
    return block
