"""Opening a Norax collection in Chroma, and reading its records back.

A memory's Chroma record holds its text, its embedding and metadata (the user's plus the
reserved ``norax_*`` keys); :func:`memory_from_record` turns one back into a
:class:`~norax_core.models.Memory`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from norax_core.batch import CREATED_KEY, ENTITIES_KEY, KIND_KEY, SEQ_KEY
from norax_core.embedders import Embedder
from norax_core.errors import DimensionMismatchError, InvalidInputError
from norax_core.kinds import given_kind, infer_kind
from norax_core.models import (
    DEFAULT_NAMESPACE,
    INFERRED_KIND_KEY,
    RESERVED_PREFIX,
    Memory,
    assembled,
    utc_from_timestamp,
    varied,
)
from norax_core.sidecar import IndexRow, Sidecar, record_json
from norax_core.signals.dense import NAMESPACE_KEY
from norax_core.signals.vectors import NamespaceMatrix
from norax_core.store.client_records import client_records, held
from norax_core.store.writes import CHROMA_BATCH
from norax_core.sync import ChangeLog, SyncConfig

logger = logging.getLogger("norax")


def open_collection(client: Any, name: str, embedder: Embedder) -> Any:
    """Get or create collection ``name``, refusing one built with another dimension.

    Raises:
        InvalidInputError: Chroma refuses the name.
        DimensionMismatchError: The collection holds embeddings of another dimension.
    """
    meta = {"norax_embedder": embedder.name, "norax_dim": embedder.dim}
    try:
        col = client.get_or_create_collection(
            name,
            embedding_function=None,
            configuration={"hnsw": {"space": "cosine"}},
            metadata=meta,
        )
    except Exception as exc:  # Chroma raises several types for bad names
        raise InvalidInputError(f"cannot open Chroma collection {name!r}: {exc}") from exc
    stored = dict(col.metadata or {})
    dim = stored.get("norax_dim")
    if dim is not None and int(dim) != embedder.dim:
        raise DimensionMismatchError(
            f"collection {name!r} holds {dim}-dimensional embeddings from "
            f"{stored.get('norax_embedder')!r}, but the embedder {embedder.name!r} "
            f"makes {embedder.dim}-dimensional ones; open it with the same embedder "
            "or use another collection"
        )
    if stored.get("norax_embedder") not in (None, embedder.name):
        logger.warning(
            "norax: collection %r was built with %r, now queried with %r",
            name,
            stored.get("norax_embedder"),
            embedder.name,
        )
    return col


def memory_from_record(mid: str, doc: str | None, meta: dict[str, Any]) -> Memory:
    """The memory a Chroma record (id, document, metadata) holds."""
    ents = meta.get(ENTITIES_KEY) or ()
    return assembled(  # every field, in order: Memory(...) without its frozen __init__
        Memory,
        {
            "id": mid,
            "text": doc or "",
            "kind": str(meta.get(KIND_KEY, "episodic")),
            "created_at": utc_from_timestamp(float(meta.get(CREATED_KEY, 0.0))),
            "namespace": str(meta.get(NAMESPACE_KEY, DEFAULT_NAMESPACE)),
            "metadata": {k: v for k, v in meta.items() if not k.startswith(RESERVED_PREFIX)},
            "entities": tuple(ents),
            "inferred_kind": inferred_of(doc or "", meta),
        },
    )


def inferred_of(doc: str, meta: dict[str, Any]) -> str:
    """A record's inferred kind: the stored one, or derived for a record written without."""
    got = meta.get(INFERRED_KIND_KEY)
    return got if isinstance(got, str) and got else derive_kind(doc, meta)


def derive_kind(doc: str, meta: dict[str, Any]) -> str:
    """What :mod:`norax_core.kinds` makes of a record now (its kind, text and role)."""
    kind = meta.get(KIND_KEY)
    given = given_kind(kind if isinstance(kind, str) else None)
    return given if given is not None else infer_kind(doc, meta.get("role"))


def seq(value: Any) -> int:
    """A stored write sequence number; 0 (unknown) for records without a valid one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def change_log(client: Any, name: str, interval: float) -> ChangeLog | None:
    """The change log of a client-mode store, or ``None`` when sync is off."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval < 0:
        raise InvalidInputError(f"sync_interval must be a number >= 0, got {interval!r}")
    if client is None or interval == 0:
        return None
    try:
        return ChangeLog(client, name, SyncConfig(interval=float(interval)))
    except Exception as exc:  # Chroma raises several types for bad names
        raise InvalidInputError(f"cannot open Chroma collection {name!r}: {exc}") from exc


def drop_collection(client: Any, collection: Any) -> None:
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


class ChromaRows:
    """Chroma as the source of a client's namespaces (:class:`~norax_core.indexes.RowSource`).

    Other processes write to the server, so a client's sidecar only caches the namespaces
    it has loaded; a namespace is read by one ``get`` filtered on it (no other is read),
    which brings its vectors too: they go to ``vectors`` (the dense signal's matrix).
    A namespace of more than :data:`ROWS_PER_GET` memories is read in parts (its ids, then
    the rest by id), so that the JSON of one response, decoded by Chroma's client (a peak of
    about 100 KB per memory with a 384-dimension vector), stays bounded whatever the
    namespace's size.

    Args:
        collection: The memory collection.
        row_from_record: What the derived indexes hold of a record.
        vectors: Told of each namespace's vectors read with its rows, if given.
    """

    complete = False

    def __init__(
        self,
        collection: Any,
        row_from_record: Callable[[str, str, dict[str, Any]], IndexRow],
        vectors: Callable[[str, NamespaceMatrix], None] | None = None,
    ) -> None:
        self.collection = collection
        self.row_from_record = row_from_record
        self.vectors = vectors

    def rows(self, namespace: str) -> list[IndexRow]:
        """Every row of ``namespace``: one filtered ``get`` up to :data:`ROWS_PER_GET` rows.

        A larger namespace: its ids (one filtered ``get`` of ids only), then the rows the
        first ``get`` did not bring, by id, :data:`ROWS_PER_GET` at a time (no offset paging,
        which a concurrent write would shift). A write in between is either read or named
        by a change-log entry later than the read's time, as for the single ``get``.
        """
        include = ["documents", "metadatas", *(["embeddings"] if self.vectors else [])]
        ids: list[str] = []
        out: list[IndexRow] = []
        blocks: list[np.ndarray | None] = []
        for got in self._parts(namespace, include):  # each decoded, then dropped
            ids.extend(got["ids"])
            out.extend(
                self.row_from_record(mid, doc or "", dict(meta or {}))
                for mid, doc, meta in zip(
                    got["ids"], got["documents"], got["metadatas"], strict=True
                )
            )
            if len(got["ids"]):
                emb = got.get("embeddings")
                blocks.append(None if emb is None else np.asarray(emb, dtype=np.float32))
                del emb
            del got  # before the next part is read: one decoded response at a time
        arrays = [b for b in blocks if b is not None]
        if self.vectors is not None and ids and len(arrays) == len(blocks):
            block = NamespaceMatrix()
            block.put(ids, np.concatenate(arrays) if len(arrays) > 1 else arrays[0])
            self.vectors(namespace, block)
        return out

    def _parts(self, namespace: str, include: list[str]) -> Iterator[dict[str, Any]]:
        where = {NAMESPACE_KEY: namespace}
        got = self.collection.get(where=where, include=include, limit=ROWS_PER_GET)
        yield got
        if len(got["ids"]) < ROWS_PER_GET:
            return
        first = set(got["ids"])
        del got
        listed = self.collection.get(where=where, include=[])["ids"]
        rest = [m for m in listed if m not in first]
        for s in range(0, len(rest), ROWS_PER_GET):
            yield self.collection.get(ids=rest[s : s + ROWS_PER_GET], include=include)

    def homes(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """``id -> (namespace, seq)`` of the ``ids`` Chroma holds."""
        out: dict[str, tuple[str, int]] = {}
        for s in range(0, len(ids), CHROMA_BATCH):
            got = self.collection.get(ids=list(ids[s : s + CHROMA_BATCH]), include=["metadatas"])
            for mid, meta in zip(got["ids"], got["metadatas"], strict=True):
                meta = meta or {}
                out[mid] = (str(meta.get(NAMESPACE_KEY, DEFAULT_NAMESPACE)), seq(meta.get(SEQ_KEY)))
        return out

    def has(self, namespace: str) -> bool:
        """Whether Chroma holds a memory of ``namespace``."""
        got = self.collection.get(where={NAMESPACE_KEY: namespace}, limit=1, include=[])
        return bool(got["ids"])

    def namespaces(self) -> list[str]:
        """Every namespace, from a pass over Chroma's metadata (an administration call)."""
        found: set[str] = set()
        offset = 0
        while True:
            got = self.collection.get(include=["metadatas"], limit=_PAGE, offset=offset)
            found.update(
                str((m or {}).get(NAMESPACE_KEY, DEFAULT_NAMESPACE)) for m in got["metadatas"]
            )
            if len(got["ids"]) < _PAGE:
                return sorted(found)
            offset += _PAGE

    def count(self) -> int:
        """Number of memories in Chroma."""
        return int(self.collection.count())


_PAGE = 5_000
ROWS_PER_GET = 256
"""Rows of one namespace per ``get`` when a client reads it (see :class:`ChromaRows`).

Reading a 1,000-memory namespace with its vectors over ``chroma run`` peaks at 100 MB of
decoded objects in one ``get`` of 1,024, 60 MB by 512 and 31 MB by 256, for the same CPU
(340-370 ms); its round trips grow from 1 to 5."""


def read_records(collection: Any, sidecar: Sidecar | None, ids: Sequence[str]) -> dict[str, Memory]:
    """The memory of each of ``ids`` that exists, by id.

    From ``sidecar`` where it holds the record (an embedded or in-memory store, whose sidecar
    this process alone writes: a search's results), else (and without one) from Chroma.
    """
    wanted, out = list(dict.fromkeys(ids)), {}
    if sidecar is not None and wanted:
        held = sidecar.kept_records("sidecar", wanted, lambda rest: _decoded(sidecar, rest))
        out = {m: copied(r) for m, r in held.items()}  # the sidecar keeps its own
        wanted = [m for m in wanted if m not in out]
    if not wanted:
        return out
    got = collection.get(ids=wanted, include=["documents", "metadatas"])
    return out | {
        mid: memory_from_record(mid, doc, dict(meta or {}))
        for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
    }


def store_records(
    collection: Any,
    indexes: Any,
    sync: object,
    ids: Sequence[str],
    local: bool,
    namespace: str | None,
    lock: Any,
) -> dict[str, Memory]:
    """The records of ``ids`` (in ``namespace``) by id; ``local``: a search's results.

    A search's results of an embedded or in-memory store are read from its sidecar
    (:func:`read_records`). A client with sync on (a ``sync`` change log) reads a loaded
    namespace's from the records its sidecar's rows hold, else from Chroma
    (:mod:`norax_core.store.client_records`, under the store's ``lock``); its sidecar then
    keeps them (:meth:`Sidecar.kept_records`) until its own write, a pulled write
    (:mod:`norax_core.sync`), a reconcile or the namespace's eviction or reload changes
    their row: as current as the indexes that ranked them. Nothing read while the namespace
    is not loaded is kept (an eviction after that check counts as a write). Anything else
    is read from Chroma.
    """
    if not local:
        got = read_records(collection, None, ids)
        return {m: r for m, r in got.items() if namespace in (None, r.namespace)}
    sidecar: Sidecar = indexes.sidecar
    if not indexes.source.complete and sync is not None and namespace is not None:
        ns = namespace

        def read(rest: list[str]) -> tuple[dict[str, Memory], bool]:
            return client_records(collection, indexes, lock, rest, ns, memory_from_record)

        kept = sidecar.kept_records("chroma", ids, read)
        return {m: copied(r) for m, r in kept.items() if r.namespace == namespace}
    got = read_records(collection, sidecar if indexes.source.complete else None, ids)
    return {m: r for m, r in got.items() if namespace in (None, r.namespace)}


def _decoded(sidecar: Sidecar, ids: Sequence[str]) -> tuple[dict[str, Memory], bool]:
    """The memories whose record (document, metadata JSON) ``sidecar`` holds, to keep."""
    return held(sidecar, ids, memory_from_record), True


def copied(mem: Memory) -> Memory:
    """``mem`` with a metadata dict of its own (its values are scalars)."""
    return varied(mem, metadata=dict(mem.metadata))


def index_row(
    mid: str, doc: str, meta: dict[str, Any], tokenizer: Callable[[str], Any]
) -> IndexRow:
    """What the derived indexes hold of a Chroma record, with the record itself.

    Its document and metadata: a search's results are read from the sidecar (a client's
    holds the loaded namespaces' rows, :mod:`norax_core.store.client_records`).
    """
    mem = memory_from_record(mid, doc, meta)
    role = meta.get("role")
    return IndexRow(
        mid,
        mem.namespace,
        mem.kind,
        float(meta.get(CREATED_KEY, 0.0)),  # the stored float: a datetime rounds to µs
        tuple(tokenizer(doc)),
        mem.entities,
        seq(meta.get(SEQ_KEY)),
        role if isinstance(role, str) else "",
        mem.inferred_kind,
        doc,
        record_json(meta),
    )
