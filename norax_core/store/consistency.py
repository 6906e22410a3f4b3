"""The consistency check and repair of a :class:`~norax_core.store.Store`.

Chroma holds the truth; the sidecar rows and the in-memory BM25, temporal, graph and id
catalog indexes are derived from it. :func:`check` compares them, namespace by namespace:
the ids every source holds, and (``deep``) whether each sidecar row still matches what
Chroma's record derives (namespace, kind, time, tokens, entities, write sequence number,
role, inferred kind).
Supersession links must agree between the sidecar and memory and (``deep``) with the links
Chroma's records derive; a memory whose links disagree is reported stale (``supersedes``).
:func:`repair` re-derives what disagrees. ``NoraxMemory.check`` / ``repair``, ``norax check
[--repair]`` and :mod:`norax_core.maintenance` all run these.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from norax_core.errors import IndexInconsistentError
from norax_core.models import DEFAULT_NAMESPACE
from norax_core.sidecar import IndexRow
from norax_core.signals.dense import NAMESPACE_KEY
from norax_core.store.core import Store
from norax_core.supersession import derive_links

__all__ = ["SOURCES", "CheckReport", "NamespaceCheck", "RepairReport", "check", "repair"]

SOURCES: tuple[str, ...] = ("sidecar", "catalog", "bm25", "temporal", "graph", "supersede")
"""The derived indexes compared with Chroma: the persisted sidecar rows, the in-memory id
catalog (``id -> namespace``, behind ``count`` and duplicate checks), the three in-memory
signal indexes and the supersession index (whose links are also compared, see :func:`check`)."""

_SHOW = 5  # ids printed per problem


@dataclass(frozen=True)
class NamespaceCheck:
    """What one namespace holds in Chroma and in each derived index.

    Attributes:
        namespace: The namespace.
        counts: Number of ids per source, ``"chroma"`` included.
        missing: Per source, ids Chroma holds in this namespace that the source lacks.
        extra: Per source, ids the source holds in this namespace that Chroma does not.
        stale: Ids whose sidecar row differs from what Chroma's record derives (deep only),
            each with the fields that differ.
    """

    namespace: str
    counts: dict[str, int]
    missing: dict[str, tuple[str, ...]] = field(default_factory=dict)
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stale: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every source agrees with Chroma."""
        return not (any(self.missing.values()) or any(self.extra.values()) or self.stale)


@dataclass(frozen=True)
class CheckReport:
    """The result of :func:`check`.

    Attributes:
        namespaces: One entry per namespace that any source mentions, sorted.
        pending: Ids of writes that began but never completed (the sidecar's intent log).
        deep: Whether sidecar rows were compared field by field.
    """

    namespaces: tuple[NamespaceCheck, ...]
    pending: tuple[str, ...] = ()
    deep: bool = True

    @property
    def ok(self) -> bool:
        """Whether Chroma and every derived index agree."""
        return not self.pending and all(n.ok for n in self.namespaces)

    @property
    def total(self) -> int:
        """Memories in Chroma."""
        return sum(n.counts["chroma"] for n in self.namespaces)

    def problems(self) -> list[str]:
        """One line per disagreement, with a few example ids."""
        out: list[str] = []
        if self.pending:
            out.append(f"{len(self.pending)} interrupted write(s): {_ids(self.pending)}")
        for n in self.namespaces:
            for src, ids in n.missing.items():
                if ids:
                    out.append(f"[{_label(n.namespace)}] {src} lacks {len(ids)} id(s): {_ids(ids)}")
            for src, ids in n.extra.items():
                if ids:
                    out.append(
                        f"[{_label(n.namespace)}] {src} holds {len(ids)} id(s) "
                        f"Chroma does not: {_ids(ids)}"
                    )
            if n.stale:
                fields = sorted({f for fs in n.stale.values() for f in fs})
                out.append(
                    f"[{_label(n.namespace)}] {len(n.stale)} stale sidecar row(s) "
                    f"({', '.join(fields)} differ): {_ids(tuple(sorted(n.stale)))}"
                )
        return out

    def format(self) -> str:
        """A human-readable table plus the problems found."""
        head = ["namespace", "chroma", *SOURCES]
        rows = [
            [_label(n.namespace), *(str(n.counts[s]) for s in ("chroma", *SOURCES))] for n in self
        ]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]
        ]
        verdict = "OK" if self.ok else "INCONSISTENT"
        kind = "ids and rows" if self.deep else "ids"
        lines.append(
            f"{verdict}: {self.total} memories, {len(self.namespaces)} namespace(s), "
            f"{kind} compared"
        )
        return "\n".join(lines + self.problems())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``norax check --json``)."""
        return {
            "ok": self.ok,
            "deep": self.deep,
            "total": self.total,
            "pending": list(self.pending),
            "namespaces": [
                {
                    "namespace": n.namespace,
                    "counts": n.counts,
                    "missing": {s: list(v) for s, v in n.missing.items() if v},
                    "extra": {s: list(v) for s, v in n.extra.items() if v},
                    "stale": {i: list(f) for i, f in n.stale.items()},
                }
                for n in self.namespaces
            ],
        }

    def __iter__(self) -> Iterator[NamespaceCheck]:
        return iter(self.namespaces)


@dataclass(frozen=True)
class RepairReport:
    """The result of :func:`repair`.

    Attributes:
        before: The check before repairing.
        after: The check after repairing (``after.ok`` is always true: otherwise
            :func:`repair` raises).
        rederived: Ids re-derived from Chroma.
        dropped: Ids dropped from the derived indexes because Chroma does not hold them.
        rebuilt: Whether the in-memory indexes were rebuilt from the sidecar.
    """

    before: CheckReport
    after: CheckReport
    rederived: int = 0
    dropped: int = 0
    rebuilt: bool = False


def check(store: Store, *, deep: bool = True) -> CheckReport:
    """Compare Chroma with every derived index of ``store``.

    Runs under the store's lock, so it sees one consistent state (writes wait). The cost is
    one pass over Chroma (plus re-tokenising every document when ``deep``), and loading every
    namespace's indexes (beyond ``index_cache_mb`` for the check's duration).

    Args:
        store: An open store.
        deep: Also compare each sidecar row's namespace, kind, time, tokens and entities
            (write sequence number, and the document and metadata it holds) with what
            Chroma's record derives; otherwise compare ids only.

    Returns:
        The report; ``report.ok`` tells whether everything agrees.
    """
    with store.lock, store.indexes.load_all():  # every namespace, evicted again after
        idx = store.indexes
        truth: dict[str, dict[str, IndexRow | None]] = {}
        for rec in _chroma_rows(store, deep):
            truth.setdefault(rec[0], {})[rec[1]] = rec[2]
        sidecar_rows = {r.id: r for r in idx.sidecar.rows()}
        held: dict[str, dict[str, set[str]]] = {s: {} for s in SOURCES}
        for r in sidecar_rows.values():
            held["sidecar"].setdefault(r.namespace, set()).add(r.id)
        for mid, ns in idx.namespace_of.items():
            held["catalog"].setdefault(ns, set()).add(mid)
        for ns in idx.bm25.namespaces():
            held["bm25"][ns] = idx.bm25.ids(ns)
        for ns in idx.temporal.namespaces():
            held["temporal"][ns] = idx.temporal.ids(ns)
        for ns in idx.graph.namespaces():
            held["graph"][ns] = set(idx.graph.ids(ns))
        for ns in idx.supersede.namespaces():
            held["supersede"][ns] = idx.supersede.ids(ns)
        in_memory = {ns: idx.supersede.links(ns) for ns in idx.supersede.namespaces()}
        stored: dict[str, dict[str, tuple[str, ...]]] = {}
        for mid, (ns, older) in idx.sidecar.links().items():
            stored.setdefault(ns, {})[mid] = older
        derived = (
            derive_links(
                (r for rows in truth.values() for r in rows.values() if r is not None),
                idx.tokenizer,
                idx.supersede.rule,
            )
            if deep
            else in_memory
        )
        pending = tuple(sorted(idx.sidecar.pending()))

    spaces = set(truth).union(*(set(h) for h in held.values()))
    report = []
    for ns in sorted(spaces):
        chroma = truth.get(ns, {})
        want = set(chroma)
        counts = {"chroma": len(want)}
        missing: dict[str, tuple[str, ...]] = {}
        extra: dict[str, tuple[str, ...]] = {}
        for src in SOURCES:
            have = held[src].get(ns, set())
            counts[src] = len(have)
            missing[src] = tuple(sorted(want - have))
            extra[src] = tuple(sorted(have - want))
        stale: dict[str, tuple[str, ...]] = {}
        for mid, row in sorted(chroma.items()):
            fields = _differences(sidecar_rows[mid], row) if row and mid in sidecar_rows else ()
            if fields:
                stale[mid] = fields
        # supersession links: persisted == in memory (== derived from Chroma when deep)
        sources = [stored.get(ns, {}), in_memory.get(ns, {}), derived.get(ns, {})]
        for mid in sorted(set().union(*sources)):
            if len({src.get(mid, ()) for src in sources}) > 1:
                stale[mid] = (*stale.get(mid, ()), "supersedes")
        report.append(NamespaceCheck(ns, counts, missing, extra, stale))
    return CheckReport(tuple(report), pending, deep)


def repair(store: Store) -> RepairReport:
    """Make every derived index agree with Chroma again, re-deriving only what disagrees.

    Sidecar rows that are missing, stale, extra or pending are fixed from Chroma's records;
    if any in-memory index disagreed, the in-memory indexes are rebuilt from the repaired
    sidecar (graph communities are kept when the graph is unchanged).

    Returns:
        What was found and done.

    Raises:
        IndexInconsistentError: The store still disagrees after the repair.
    """
    with store.lock:
        before = check(store, deep=True)
        if before.ok:
            return RepairReport(before, before)
        redo: set[str] = set(before.pending)
        drop: set[str] = set()
        memory_wrong = False
        for n in before:
            redo.update(n.stale, *n.missing.values())
            for src, ids in n.extra.items():
                drop.update(ids)
                memory_wrong = memory_wrong or (src != "sidecar" and bool(ids))
            memory_wrong = memory_wrong or any(
                ids for src, ids in n.missing.items() if src != "sidecar"
            )
        # An id extra in one namespace may live in another one: resync re-derives it from
        # Chroma and drops it only when Chroma does not hold it at all.
        rederived, dropped = store.resync(sorted(redo | drop))
        store.indexes.drop_shared()  # a client's snapshots may hold what was wrong
        rebuilt = False
        if memory_wrong:
            store.rebuild_indexes()
            rebuilt = True
        after = check(store, deep=True)
    if not after.ok:
        raise IndexInconsistentError(
            "the store still disagrees after repair:\n" + "\n".join(after.problems())
        )
    return RepairReport(before, after, rederived, dropped, rebuilt)


def _chroma_rows(store: Store, deep: bool) -> Iterator[tuple[str, str, IndexRow | None]]:
    """``(namespace, id, derived row or None)`` for every Chroma record."""
    include = ["documents", "metadatas"] if deep else ["metadatas"]
    for got in store.pages(include):
        docs = got["documents"] if deep else [None] * len(got["ids"])
        for mid, doc, meta in zip(got["ids"], docs, got["metadatas"], strict=True):
            meta = dict(meta or {})
            row = store.row_from_record(mid, doc or "", meta) if deep else None
            ns = (
                row.namespace
                if row is not None
                else str(meta.get(NAMESPACE_KEY, DEFAULT_NAMESPACE))
            )
            yield ns, mid, row


def _differences(a: IndexRow, b: IndexRow) -> tuple[str, ...]:
    """The fields in which two rows of one memory differ."""
    fields = ("namespace", "kind", "role", "inferred_kind")
    out = [f for f in fields if getattr(a, f) != getattr(b, f)]
    # Chroma hands about one float metadata value in eight back one ulp off
    if not math.isclose(a.created_at, b.created_at, rel_tol=1e-15, abs_tol=1e-6):
        out.append("created_at")
    out += [f for f in ("tokens", "entities") if tuple(getattr(a, f)) != tuple(getattr(b, f))]
    if a.seq != b.seq:
        out.append("seq")
    # the record a search's results are read from, where the sidecar holds it (``a``)
    if a.document is not None and a.document != b.document:
        out.append("document")
    if a.metadata is not None and _loads(a.metadata) != _loads(b.metadata):
        out.append("metadata")
    return tuple(out)


def _loads(text: str | None) -> object:
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return text


def _label(namespace: str) -> str:
    """A namespace as one printable table cell."""
    shown = namespace if namespace.isprintable() else repr(namespace)
    return shown if len(shown) <= 40 else shown[:39] + "…"


def _ids(ids: tuple[str, ...]) -> str:
    shown = ", ".join(repr(i) for i in ids[:_SHOW])
    return shown + (f", ... (+{len(ids) - _SHOW})" if len(ids) > _SHOW else "")
