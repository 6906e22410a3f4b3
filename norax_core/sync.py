"""Keep one process's derived indexes in step with writes made by other processes.

When several processes share one Chroma server (``NoraxMemory(client=chromadb.HttpClient())``),
Chroma holds every memory, but each process has its own derived indexes (BM25, recency, entity
graph). This module makes those follow the server with a bounded delay.

Mechanism
---------
* **Change log.** Every write (add, upsert, delete) is followed by an append to a companion
  collection ``<name>__norax_log``: one entry per chunk of at most :data:`IDS_PER_ENTRY` ids,
  with metadata ``op``, ``writer`` (a random id per process), ``seq`` (the writer's counter),
  ``ts`` (the writer's wall clock, epoch seconds) and ``ns`` (the namespaces written, a JSON
  list; absent when unknown, and in entries of older versions, which means "any namespace");
  the entry id is ``<writer>-<seq>``, so
  it is unique and readers can deduplicate by it. The memory ids are the entry's document
  (JSON). The data write comes first: an entry never names a write that did not happen.
* **Pull.** Before a read or write (search, count, add, delete), at most once every
  ``interval`` seconds, a process asks the log for the ids of entries with
  ``ts >= last_pull - lookback`` (one ``get``), drops those it has already seen or wrote
  itself, fetches the new entries' memory ids and then those memories' current records from
  Chroma (one ``get`` each). Entries are treated as "these ids changed", never replayed: an id
  Chroma still holds is (re)indexed from its stored document and metadata, an id it no longer
  holds is removed. Applying is therefore idempotent and independent of entry order, clock
  skew between writers only moves *when* an entry is read, and Chroma stays the truth. A
  pull is committed (its entries marked seen, its clock advanced) only once its changes are
  applied: if applying fails, the next pull reads the same entries again.
* **Lookback.** An entry is stamped before it commits and with the writer's clock, so it can
  land "in the past" of a reader that just pulled. Re-reading the last ``lookback`` seconds
  (default 30 s) at every pull catches it, as long as clock skew between processes plus the
  time a write takes to commit stays below ``lookback``. Seen entry ids are kept for
  ``lookback`` plus a margin, so each entry is applied once.
* **Safety net.** Every ``reconcile_interval`` seconds (default 300 s), and whenever a pull
  would start further back than ``retention - lookback`` (a process that slept through log
  pruning), the process runs a full :meth:`NoraxMemory.refresh`: every id in Chroma is
  compared with the indexes. This also catches writes made without Norax or lost between
  a data write and its log entry (a crash).
* **Pruning.** Entries older than ``retention`` (default 1 hour) are deleted by whichever
  process writes, at most once a minute, with one ``delete(where=ts < now - retention)``.

Bound
-----
A write whose log entry has committed at time ``T`` is visible to every search that another
process *starts* at ``T + interval`` or later (plus the pull's own duration), provided the clock
skew and commit delay are below ``lookback``: either that search pulls (reading every entry
committed before it) or the process pulled less than ``interval`` ago, i.e. after ``T``.
Anything outside those assumptions is repaired within ``reconcile_interval``.
The cost when nothing changed is one small ``get`` on the log per ``interval``.

Snapshots
---------
A client's namespace snapshot (:mod:`norax_core.client_snapshots`) records the time ``T`` its
rows were read from Chroma. At a cold load it is served only if ``T > now - (retention -
lookback)`` (the entries it must be checked against are still in the log) and no entry with
``ts >= T - lookback`` names its namespace (or no namespace): :meth:`ChangeLog.touched`
answers from the entries' metadata the pulls read anyway (the pull's first ``get`` includes
it), with one ``get`` only when ``T - lookback`` is older than what the pulls have covered.
An entry committed after that check is pulled as new and applied to the loaded namespace,
as for any loaded namespace: the snapshot has the same bound as sync. Writes made without
Norax leave no entry, so a snapshot taken before them may be served until the namespace is
written through Norax or :func:`~norax_core.maintenance.repair_store` drops the snapshots;
the periodic reconcile (the safety net above) corrects the loaded indexes meanwhile.

Embedded stores (``path=...``) are single-process (they take a lock), so sync is off there.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("norax")

__all__ = ["IDS_PER_ENTRY", "LOG_SUFFIX", "ChangeLog", "SyncConfig", "SyncStats"]

LOG_SUFFIX = "__norax_log"
"""The change log of collection ``name`` is the collection ``name + LOG_SUFFIX``."""
IDS_PER_ENTRY = 500
"""Memory ids per log entry: a large batch becomes several entries."""
_PRUNE_EVERY = 60.0
_PLACEHOLDER = [1.0]  # Chroma needs an embedding per record; the log never uses it


@dataclass(frozen=True)
class SyncConfig:
    """Timing of the change-log sync (seconds).

    Attributes:
        interval: Pull the log at most this often; the visibility bound (see module doc).
        lookback: Re-read this much of the log at each pull (clock skew + commit delay).
        retention: Log entries older than this are pruned.
        reconcile_interval: Run a full reconcile with Chroma at least this often.
    """

    interval: float = 1.0
    lookback: float = 30.0
    retention: float = 3600.0
    reconcile_interval: float = 300.0

    def __post_init__(self) -> None:
        for name in ("interval", "lookback", "retention", "reconcile_interval"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"SyncConfig.{name} must be a number > 0, got {value!r}")
        if self.retention <= 2 * self.lookback:
            raise ValueError("SyncConfig.retention must be more than twice lookback")


@dataclass
class SyncStats:
    """Counters, for tests and monitoring."""

    pulls: int = 0
    entries: int = 0
    indexed: int = 0
    removed: int = 0
    reconciles: int = 0


class ChangeLog:
    """One process's view of a collection's change log.

    Args:
        client: The Chroma client that holds the memory collection.
        name: The memory collection's name.
        config: Timing; see :class:`SyncConfig`.
        clock: Wall clock (epoch seconds); injectable for tests.
        start: When the store's indexes were last reconciled with Chroma (default now).
    """

    def __init__(
        self,
        client: Any,
        name: str,
        config: SyncConfig | None = None,
        clock: Callable[[], float] = time.time,
        start: float | None = None,
    ) -> None:
        self.config = config or SyncConfig()
        self.clock = clock
        self.writer = uuid.uuid4().hex[:12]
        self.stats = SyncStats()
        self._log = client.get_or_create_collection(
            name + LOG_SUFFIX, embedding_function=None, metadata={"norax_log": 1}
        )
        self._seq = 0
        # The store's open (``start``) reconciled with Chroma: pull from there on.
        now = clock() if start is None else start
        self._last_pull = now
        self._last_reconcile = now
        self._last_prune = 0.0
        self._seen: dict[str, float] = {}  # entry id -> its ts
        # entry id -> (ts, namespaces or None: any) of every entry read or written, and the
        # span of ts over which that is every entry (no gap between consecutive reads)
        self._recent: dict[str, tuple[float, frozenset[str] | None]] = {}
        self._covered = (float("inf"), float("-inf"))

    # -- writing -----------------------------------------------------------------------

    def record(self, op: str, ids: Sequence[str], namespaces: Iterable[str] | None = None) -> None:
        """Append entries saying that ``ids`` were written (``op``: add, upsert, delete).

        ``namespaces``: the namespaces those ids live in (``None``: unknown, i.e. any).

        A failure is logged, not raised: the data write has happened, and the other
        processes' periodic reconcile will pick it up.
        """
        if not ids:
            return
        now = self.clock()
        spaces = None if namespaces is None else frozenset(namespaces)
        entry_ids, docs, metas = [], [], []
        for start in range(0, len(ids), IDS_PER_ENTRY):
            self._seq += 1
            entry = f"{self.writer}-{self._seq:012d}"
            entry_ids.append(entry)
            docs.append(json.dumps(list(ids[start : start + IDS_PER_ENTRY])))
            meta: dict[str, Any] = {"op": op, "writer": self.writer, "seq": self._seq, "ts": now}
            if spaces is not None:
                meta["ns"] = json.dumps(sorted(spaces))
            metas.append(meta)
            self._seen[entry] = now
            self._recent[entry] = (now, spaces)
        try:
            self._log.add(
                ids=entry_ids,
                documents=docs,
                metadatas=metas,
                embeddings=[_PLACEHOLDER] * len(entry_ids),
            )
            if now - self._last_prune >= _PRUNE_EVERY:
                self._last_prune = now
                self._log.delete(where={"ts": {"$lt": now - self.config.retention}})
        except Exception as exc:  # the server is unreachable or the log was dropped
            logger.warning("norax: could not append to the change log: %s", exc)

    # -- reading -----------------------------------------------------------------------

    def due(self) -> bool:
        """Whether :meth:`pull` should run now (``interval`` has passed since the last)."""
        return self.clock() - self._last_pull >= self.config.interval

    def needs_reconcile(self) -> bool:
        """Whether a full reconcile is due (periodic, or the log may have been pruned)."""
        now = self.clock()
        cfg = self.config
        return (
            now - self._last_reconcile >= cfg.reconcile_interval
            or now - self._last_pull >= cfg.retention - cfg.lookback
        )

    def reconciled(self, started: float | None = None) -> None:
        """Note that a full reconcile ran from ``started`` (default now) on.

        It covers every write committed before it started.
        """
        at = self.clock() if started is None else started
        self._last_reconcile = self._last_pull = at
        self.stats.reconciles += 1

    def pull(self, apply: Callable[[list[str]], Any] | None = None) -> list[str]:
        """Ids that other processes changed since the last pull (deduplicated, in log order).

        Args:
            apply: Called with those ids before the pull is committed. The entries are
                marked seen and the pull's clock advances only once it returns: if it
                raises, the exception propagates and the next pull reads the same entries
                again (nothing is lost until the periodic full reconcile).
        """
        start = self.clock()
        since = self._last_pull - self.config.lookback
        found = self._read(since, start)
        new = [e for e in found["ids"] if e not in self._seen]
        changed: dict[str, None] = {}
        seen: dict[str, float] = {}
        foreign = 0
        if new:
            got = self._log.get(ids=new, include=["documents", "metadatas"])
            rows = sorted(
                zip(got["ids"], got["documents"], got["metadatas"], strict=True),
                key=lambda r: (float((r[2] or {}).get("ts", 0.0)), r[0]),
            )
            for entry, doc, meta in rows:
                seen[entry] = float((meta or {}).get("ts", start))
                if (meta or {}).get("writer") != self.writer:
                    changed.update(dict.fromkeys(json.loads(doc or "[]")))
                    foreign += 1
        if apply is not None and changed:
            apply(list(changed))
        # Applied (or handed to the caller): only now are the entries done with.
        self._seen.update(seen)
        self.stats.entries += foreign
        self._last_pull = start
        horizon = since - self.config.lookback  # entries below it are never read again
        self._seen = {e: ts for e, ts in self._seen.items() if ts >= horizon}
        self.stats.pulls += 1
        return list(changed)

    def _read(self, since: float, start: float) -> dict[str, Any]:
        """The entries with ``ts >= since`` (ids and metadata), noted in :meth:`touched`'s memo.

        ``start``: the clock before the read (every entry committed before it is covered).
        """
        found = self._log.get(where={"ts": {"$gte": since}}, include=["metadatas"])
        for entry, meta in zip(found["ids"], found["metadatas"] or [], strict=False):
            ts, raw = float((meta or {}).get("ts", start)), (meta or {}).get("ns")
            try:
                spaces = None if raw is None else frozenset(json.loads(raw))
            except (TypeError, ValueError):
                spaces = None
            self._recent[entry] = (ts, spaces)
        low, high = self._covered
        # contiguous with what was covered: extend it; else (a gap) start over from here
        self._covered = (min(low, since), start) if since <= high else (since, start)
        horizon = start - self.config.retention  # pruned from the log: never asked about
        self._recent = {e: v for e, v in self._recent.items() if v[0] >= horizon}
        return found

    def holds(self, taken: float) -> bool:
        """Whether the log still holds every entry a state read at ``taken`` may have missed.

        Those are the entries since ``taken - lookback``; held while
        ``taken > now - (retention - lookback)``.
        """
        cfg = self.config
        return taken > self.clock() - (cfg.retention - cfg.lookback)

    def touched(self, since: float) -> frozenset[str] | None:
        """The namespaces written by entries with ``ts >= since`` (``None``: maybe any).

        Answered from the entries the pulls have read when they cover ``since``, else with
        one ``get``. An entry naming no namespace (unknown, or written by an older version)
        makes it ``None``.
        """
        if since < self._covered[0]:
            self._read(since, self.clock())
        out: set[str] = set()
        for ts, spaces in self._recent.values():
            if ts >= since:
                if spaces is None:
                    return None
                out |= spaces
        return frozenset(out)

    def recheck(self, since: float) -> frozenset[str] | None:
        """:meth:`touched`, reading the log now: entries committed since the last pull too.

        For a publisher that stored a snapshot of rows read at ``since + lookback`` and
        must know whether a write to them has landed since (:mod:`norax_core.published`).
        """
        self._read(since, self.clock())
        return self.touched(since)

    def sync(self, collection: Any, indexes: Any, row_from_record: Callable[..., Any]) -> None:
        """Pull if due and apply the changes to ``indexes`` (a ``DerivedIndexes``).

        Runs a full ``indexes.reconcile`` instead when one is due. Errors are logged, never
        raised: a search must not fail because the log is unreachable. A pull whose changes
        could not be applied is not committed, so the next pull retries it.
        """
        if not self.due():
            return

        def apply(ids: list[str]) -> None:
            added, removed = apply_changes(
                collection,
                ids,
                indexes.namespace_of.__contains__,
                indexes.apply,
                indexes.remove,
                row_from_record,
            )
            self.stats.indexed += added
            self.stats.removed += removed

        try:
            if self.needs_reconcile():
                started = self.clock()
                indexes.reconcile(collection, row_from_record)
                self.reconciled(started)
                return
            self.pull(apply)
        except Exception as exc:  # noqa: BLE001 - see the docstring
            logger.warning("norax: could not sync with the change log: %s", exc)


def apply_changes(
    collection: Any,
    ids: Sequence[str],
    known: Callable[[str], bool],
    index: Callable[[list[Any]], None],
    remove: Callable[[list[str]], Any],
    row_from_record: Callable[[str, str, dict[str, Any]], Any],
) -> tuple[int, int]:
    """Make the indexes agree with Chroma for ``ids``: index those it holds, drop the rest.

    Returns:
        ``(indexed, removed)`` counts.
    """
    if not ids:
        return 0, 0
    got = collection.get(ids=list(ids), include=["documents", "metadatas"])
    rows = [
        row_from_record(mid, doc or "", dict(meta or {}))
        for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
    ]
    present = set(got["ids"])
    gone = [i for i in ids if i not in present and known(i)]
    if rows:
        index(rows)
    if gone:
        remove(gone)
    return len(rows), len(gone)
