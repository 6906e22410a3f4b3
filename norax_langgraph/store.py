"""``NoraxStore``: a LangGraph ``BaseStore`` whose search is Norax's four-signal ranking."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from norax_core.engine import NoraxMemory
from norax_core.errors import InvalidInputError
from norax_core.models import Memory, SearchResult
from norax_langgraph import _codec as codec


class NoraxSearchItem(SearchItem):
    """A ``SearchItem`` that explains itself.

    ``score`` is the fused score within the item's namespace (``None`` when the search had no
    query); ``signals`` holds each Norax signal's score in [0, 1] (``bm25``, ``dense``,
    ``temporal``, ``graph``) and ``matched_entities`` the query entities the item shares;
    ``query_plan`` is the query's reading (``{"intent", "periods": [{"start", "end", "text"}],
    "entities"}``) and ``explanation`` what each ranking stage contributed (``{"fused",
    "context", "bridges", "period", "latest_wins", "supersede", "turns", "exchange", "lane"}``,
    summing to ``score``), both ``None`` without a query. All are also in
    :meth:`dict`.
    """

    __slots__ = ("explanation", "matched_entities", "query_plan", "signals")

    def __init__(
        self,
        item: Item,
        score: float | None = None,
        signals: Mapping[str, float] | None = None,
        matched_entities: Sequence[str] = (),
        query_plan: Mapping[str, Any] | None = None,
        explanation: Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(
            namespace=item.namespace,
            key=item.key,
            value=item.value,
            created_at=item.created_at,
            updated_at=item.updated_at,
            score=score,
        )
        self.signals: dict[str, float] = dict(signals or {})
        self.matched_entities: list[str] = list(matched_entities)
        self.query_plan: dict[str, Any] | None = None if query_plan is None else dict(query_plan)
        self.explanation: dict[str, float] | None = (
            None if explanation is None else dict(explanation)
        )

    def dict(self) -> dict[str, Any]:
        """The item as JSON-ready data, with the search's explanation keys."""
        out = super().dict()
        out["signals"] = dict(self.signals)
        out["matched_entities"] = list(self.matched_entities)
        out["query_plan"] = self.query_plan
        out["explanation"] = self.explanation
        return out


class NoraxStore(BaseStore):
    """LangGraph long-term memory (``BaseStore``) over a :class:`~norax_core.NoraxMemory`.

    Pass it wherever LangGraph takes a store (``langchain.agents.create_agent(..., store=store)``,
    ``StateGraph.compile(store=store)``, langmem's memory tools)::

        memory = NoraxMemory("./agent-memory")
        store = NoraxStore(memory, index={"fields": ["content"]})
        agent = create_agent(model, tools, store=store)

    What maps to what:

    - A namespace tuple is a Norax namespace (``("users", "alice")`` is ``"lg:users.alice"``),
      so tenants share no BM25 statistics, entities or graph; the item's memory id is a hash
      of ``(namespace, key)``. Other namespaces of the same ``NoraxMemory`` are ignored.
    - The value is stored whole (JSON) in the memory's metadata. The memory's text is what
      ``index`` selects: ``fields`` are LangGraph JSON paths (default ``["$"]``, the whole
      value as JSON), and a put's ``index=False`` or field list overrides them per item. An
      item stored with ``index=False`` (or whose fields hold no text) is left out of query
      searches; like ``InMemoryStore``, a query search fills a short page with such items
      (``score=None``).
    - ``created_at`` is the first put's time; ``updated_at`` is the memory's own time,
      renewed by every put, so the temporal signal sees the last update.
    - ``search(..., query=...)`` ranks with the memory's weights (all four signals fused);
      items are :class:`NoraxSearchItem` with ``score`` (the fused score) and ``signals``.
      Without a query, items come most recently updated first (``score=None``).
    - ``filter`` becomes a Chroma ``where`` that every signal applies before ranking (so a
      filter never shortens a page that matching items could fill); see
      :func:`norax_langgraph._codec.filter_where` for its semantics.
    - A ``namespace_prefix`` that covers several namespaces runs one search per namespace
      (the query embedded once) and merges them by rank: every namespace's best item, then
      every second best, and so on, ties broken by the fused score. Fused scores are
      normalised within a namespace (BM25 against the namespace's best match, the graph
      within its own entity graph), so comparing them across namespaces would favour
      whichever namespace is smallest or least varied. Listings without a query merge by
      ``updated_at``, which is comparable.
    - Puts in one ``batch`` are one Norax ``upsert`` (in op order, so ``embed_context``
      sees them in order) and one ``delete``; everything is validated before anything is
      written. Reads in a batch see the store as it was before the batch's writes.
    - TTL is not supported (``supports_ttl`` is ``False``): a put with a ``ttl`` raises.

    Args:
        memory: The Norax memory that holds the items. The store never closes it.
        index: LangGraph's ``IndexConfig``; only ``fields`` is read. ``embed`` and ``dims``
            are refused: the memory's own embedder embeds everything.
        kind: The Norax memory kind of every item (its recency decay rate).

    Raises:
        InvalidInputError: ``index`` holds ``embed`` or ``dims``, or has unknown keys.
    """

    supports_ttl = False

    def __init__(
        self, memory: NoraxMemory, *, index: IndexConfig | None = None, kind: str = "semantic"
    ) -> None:
        config: dict[str, Any] = dict(index or {})
        unknown = set(config) - {"fields"}
        if unknown:
            raise InvalidInputError(
                f"NoraxStore reads only index['fields'] (the NoraxMemory's embedder embeds); "
                f"got {sorted(unknown)}"
            )
        fields = config.get("fields") or ["$"]
        if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
            raise InvalidInputError(f"index['fields'] must be a list of paths, got {fields!r}")
        self.memory = memory
        self.fields: list[str] = list(fields)
        self.kind = kind

    # -- batches ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops; reads see the store before this batch's puts."""
        ops = self._checked(ops)
        results: list[Result] = [None] * len(ops)
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                plans = self._search_plan(op)
                vec = self.memory.embed_query(op.query) if plans.searches and op.query else None
                found = [self.memory.search(**kw, query_embedding=vec) for kw in plans.searches]
                fill = [self._recent(*listing) for listing in plans.fills]
                results[i] = plans.merge(found, fill)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
        self._put([op for op in ops if isinstance(op, PutOp)])
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`: the searches of all its ops run concurrently in worker threads."""
        ops = self._checked(ops)

        async def run(op: Op) -> Result:
            if isinstance(op, SearchOp):
                plans = self._search_plan(op)
                vec = (
                    await asyncio.to_thread(self.memory.embed_query, op.query)
                    if plans.searches and op.query
                    else None
                )
                found, fill = await asyncio.gather(
                    asyncio.gather(
                        *(self.memory.asearch(**kw, query_embedding=vec) for kw in plans.searches)
                    ),
                    asyncio.gather(*(asyncio.to_thread(self._recent, *a) for a in plans.fills)),
                )
                return plans.merge(list(found), list(fill))
            if isinstance(op, GetOp):
                return await asyncio.to_thread(self._get, op)
            if isinstance(op, ListNamespacesOp):
                return await asyncio.to_thread(self._list_namespaces, op)
            return None

        results = list(await asyncio.gather(*(run(op) for op in ops)))
        await asyncio.to_thread(self._put, [op for op in ops if isinstance(op, PutOp)])
        return results

    def _checked(self, ops: Iterable[Op]) -> list[Op]:
        """The ops as a list, every namespace, TTL and paging argument checked first."""
        out = list(ops)
        for op in out:
            if isinstance(op, (GetOp, PutOp)):
                codec.norax_namespace(tuple(op.namespace))
            elif isinstance(op, SearchOp):
                codec.check_labels(tuple(op.namespace_prefix))
                _paging(op.limit, op.offset)
            elif isinstance(op, ListNamespacesOp):
                for cond in op.match_conditions or ():
                    codec.check_labels(tuple(p for p in cond.path if p != "*"))
                _paging(op.limit, op.offset)
                if op.max_depth is not None and op.max_depth < 1:
                    raise InvalidInputError(f"max_depth must be >= 1, got {op.max_depth}")
            else:
                raise InvalidInputError(f"unknown operation {type(op).__name__}")
            if isinstance(op, PutOp) and op.ttl is not None:
                raise InvalidInputError(
                    "NoraxStore does not support TTL (supports_ttl is False); put with ttl=None"
                )
        return out

    # -- reads --------------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        ns = tuple(op.namespace)
        found = self.memory.get(codec.item_id(ns, op.key), namespace=codec.norax_namespace(ns))
        return codec.memory_item(found[0]) if found else None

    def _namespaces(self) -> list[tuple[str, ...]]:
        return [
            ns for ns in map(codec.langgraph_namespace, self.memory.namespaces()) if ns is not None
        ]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        names = [
            ns
            for ns in self._namespaces()
            if all(codec.matches(c, ns) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            names = list({ns[: op.max_depth] for ns in names})
        return sorted(names)[op.offset : op.offset + op.limit]

    def _recent(self, namespace: str, n: int, where: dict[str, Any] | None) -> list[Memory]:
        """The ``n`` most recently updated items of ``namespace`` that pass ``where``."""
        ids = self.memory.store.recent(namespace, where, n)
        return self.memory.get(ids, namespace=namespace)

    def _search_plan(self, op: SearchOp) -> _SearchPlan:
        prefix = tuple(op.namespace_prefix)
        spaces = [
            codec.norax_namespace(ns) for ns in self._namespaces() if ns[: len(prefix)] == prefix
        ]
        where = codec.filter_where(op.filter)
        k = op.offset + op.limit
        if not spaces or op.limit == 0:
            return _SearchPlan(op, [], [])
        if not op.query:  # InMemoryStore treats "" as no query too: the newest k of each
            return _SearchPlan(op, [], [(ns, k, where) for ns in spaces])
        indexed = codec.and_where([where, {codec.INDEXED: True}])
        unindexed = codec.and_where([where, {codec.INDEXED: False}])
        searches = [{"query": op.query, "k": k, "namespace": ns, "where": indexed} for ns in spaces]
        return _SearchPlan(op, searches, [(ns, op.limit, unindexed) for ns in spaces])

    # -- writes -------------------------------------------------------------------------

    def _put(self, ops: Sequence[PutOp]) -> None:
        """One upsert for the values, one delete for the ``None`` ones; all checked first."""
        last = {(tuple(op.namespace), op.key): op for op in ops}
        gone = [codec.item_id(ns, key) for (ns, key), op in last.items() if op.value is None]
        puts = [op for op in last.values() if op.value is not None]
        if puts:
            now = time.time()
            ids = [codec.item_id(tuple(op.namespace), op.key) for op in puts]
            first = {
                m.id: float(m.metadata[codec.CREATED])
                for m in self.memory.get(ids)
                if codec.CREATED in m.metadata
            }
            texts, metadata = [], []
            for mid, op in zip(ids, puts, strict=True):
                value = op.value or {}
                codec.value_json(value)  # refuses a bad value before index_text reads it
                fields = None if op.index is False else (op.index or self.fields)
                text = codec.index_text(value, fields)
                texts.append(text or codec.NOT_INDEXED_TEXT)
                metadata.append(
                    codec.item_metadata(op.key, value, first.get(mid, now), text is not None)
                )
            self.memory.upsert(
                texts,
                ids=ids,
                kind=self.kind,
                created_at=now,
                namespace=[codec.norax_namespace(tuple(op.namespace)) for op in puts],
                metadata=metadata,
            )
        if gone:
            self.memory.delete(gone)


Listing = tuple[str, int, "dict[str, Any] | None"]
"""``(namespace, n, where)``: the ``n`` most recently updated items that pass ``where``."""


class _SearchPlan:
    """The Norax searches and listings one ``SearchOp`` needs, and how they merge into a page.

    Without a query there are only listings (each namespace's newest ``offset + limit``);
    with one, a search per namespace and, to fill a short page, listings of the unindexed.
    """

    def __init__(self, op: SearchOp, searches: list[dict[str, Any]], fills: list[Listing]) -> None:
        self.op = op
        self.searches = searches
        self.fills = fills

    def merge(self, found: list[list[SearchResult]], fill: list[list[Memory]]) -> list[SearchItem]:
        """The page: ranked results merged by rank, or listings merged by recency."""
        op = self.op
        if not op.query:
            listed = sorted(_flat(fill), key=lambda r: r.created_at, reverse=True)
            return [_item(r, scored=False) for r in listed[op.offset : op.offset + op.limit]]
        ranked = sorted(
            ((rank, -r.score, n, r) for n, rs in enumerate(found) for rank, r in enumerate(rs)),
            key=lambda t: t[:3],
        )
        window = ranked[op.offset : op.offset + op.limit]
        page: list[SearchItem] = [_item(t[3], scored=True) for t in window]
        if len(page) < op.limit:  # as InMemoryStore: unindexed items fill a short page
            extra = sorted(_flat(fill), key=lambda r: r.created_at, reverse=True)
            page += [_item(r, scored=False) for r in extra[: op.limit - len(page)]]
        return page


def _flat(lists: Sequence[Sequence[Memory]]) -> list[Memory]:
    return [r for rs in lists for r in rs]


def _item(result: Memory, *, scored: bool) -> NoraxSearchItem:
    item = codec.memory_item(result)
    if not scored or not isinstance(result, SearchResult):
        return NoraxSearchItem(item)
    meta = result.framework_metadata()
    return NoraxSearchItem(
        item,
        result.score,
        result.signals,
        result.matched_entities,
        meta["query_plan"],
        meta["explanation"],
    )


def _paging(limit: Any, offset: Any) -> None:
    for name, v in (("limit", limit), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InvalidInputError(f"{name} must be an integer >= 0, got {v!r}")
