"""Each namespace's stored embeddings held in process as one float32 matrix.

The dense signal ranks a namespace by one matrix-vector product over that namespace's own
vectors, so its answer depends on nothing outside the namespace and involves no approximate
index (see :mod:`norax_core.signals.dense`). The matrices are derived from Chroma like the
other indexes: a namespace's is loaded on first use (a ``get`` filtered by namespace) and kept
in step by the write path: the ids a write changes (this process's, another process's seen
through the change log, a repair's) are marked stale and their vectors fetched from Chroma
again before the namespace's next use. The
least recently used matrices are dropped beyond a memory budget and reloaded when needed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from norax_core.snapshot_format import Strings, pack_strs

NAMESPACE_KEY = "norax_namespace"
PAGE = 5_000


class NamespaceMatrix:
    """One namespace's vectors: the rows of a float32 matrix, with their ids.

    Rows are appended into spare capacity (doubled when full); a removed row is filled with
    the last one. Row order therefore depends on the history of writes, and nothing that
    ranks may depend on it.

    Attributes:
        ids: The id of each row.
        stale: Ids whose vector must be fetched from Chroma again before the next use.
        max_norm: An upper bound of the rows' L2 norms (error bounds of float32 products).
    """

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.stale: set[str] = set()
        self.max_norm = 0.0
        self._pos: dict[str, int] = {}
        self._mat = np.zeros((0, 0), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.ids)

    def to_arrays(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The rows in use (not the spare capacity) and their ids, for :meth:`from_arrays`."""
        ids_s, ids_o = pack_strs(self.ids)
        return {"max_norm": self.max_norm}, {"ids_s": ids_s, "ids_o": ids_o, "mat": self.matrix}

    @classmethod
    def from_arrays(
        cls,
        meta: Mapping[str, Any],
        arrays: Mapping[str, np.ndarray],
        strs: Strings | None = None,
    ) -> NamespaceMatrix:
        """The matrix of :meth:`to_arrays`.

        An aligned read-only view of the blob is kept as it is until the first write
        (:meth:`_writable` copies it then); another matrix is copied now. ``strs``: the
        snapshot's string decoder (shared with its other indexes).

        Raises:
            ValueError: The arrays do not fit together.
        """
        strs = strs if strs is not None else Strings()
        block = cls()
        block.ids, block._pos = strs.positions(arrays["ids_s"], arrays["ids_o"])
        mat = arrays["mat"]
        if mat.ndim != 2 or mat.shape[0] != len(block.ids) or mat.dtype != np.float32:
            raise ValueError("the vector arrays do not fit together")
        block._mat = mat if mat.flags.aligned and mat.flags.c_contiguous else mat.copy()
        block.max_norm = float(meta["max_norm"])
        return block

    def _writable(self) -> None:
        """Copy a matrix restored as a read-only view before it is written."""
        if not self._mat.flags.writeable:
            self._mat = self._mat.copy()

    def __contains__(self, mid: object) -> bool:
        return mid in self._pos

    @property
    def nbytes(self) -> int:
        """Bytes held by the matrix (capacity included)."""
        return int(self._mat.nbytes)

    @property
    def matrix(self) -> np.ndarray:
        """The rows in use (a view: valid until the next write)."""
        return self._mat[: len(self.ids)]

    def rows(self, ids: Iterable[str]) -> tuple[list[str], np.ndarray]:
        """The ids among ``ids`` that have a row, and the row numbers, in that order."""
        pos = self._pos
        found = list(filter(pos.__contains__, ids))
        return found, np.fromiter(map(pos.__getitem__, found), dtype=np.intp, count=len(found))

    def vector(self, mid: str) -> np.ndarray:
        """A copy of one id's vector (the id must have a row)."""
        return self._mat[self._pos[mid]].copy()

    def put(self, ids: Sequence[str], vectors: Any) -> None:
        """Set the vectors of ``ids``: replace their rows, or append new ones."""
        if not len(ids):
            return
        vecs = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1)
        self._writable()
        if self._mat.shape[1] != vecs.shape[1]:
            if self.ids:
                raise ValueError(f"vectors of dimension {vecs.shape[1]}, not {self._mat.shape[1]}")
            self._mat = np.zeros((0, vecs.shape[1]), dtype=np.float32)
        self.max_norm = max(self.max_norm, float(np.sqrt((vecs * vecs).sum(axis=1)).max()))
        for mid, vec in zip(ids, vecs, strict=True):
            row = self._pos.get(mid)
            if row is None:
                row = len(self.ids)
                if row == self._mat.shape[0]:
                    self._grow()
                self._pos[mid] = row
                self.ids.append(mid)
            self._mat[row] = vec
            self.stale.discard(mid)

    def drop(self, ids: Iterable[str]) -> None:
        """Remove the rows of ``ids`` (unknown ids are ignored)."""
        for mid in ids:
            self.stale.discard(mid)
            row = self._pos.pop(mid, None)
            if row is None:
                continue
            last = len(self.ids) - 1
            if row != last:
                moved = self.ids[last]
                self._writable()
                self._mat[row] = self._mat[last]
                self.ids[row] = moved
                self._pos[moved] = row
            self.ids.pop()
        if len(self.ids) < self._mat.shape[0] // 4:  # give memory back after mass deletes
            self._mat = self._mat[: max(2 * len(self.ids), 16)].copy()

    def _grow(self) -> None:
        cap = max(16, 2 * self._mat.shape[0])
        grown = np.zeros((cap, self._mat.shape[1]), dtype=np.float32)
        grown[: len(self.ids)] = self._mat[: len(self.ids)]
        self._mat = grown


class VectorCache:
    """The loaded namespaces' matrices, least recently used dropped beyond ``budget_bytes``.

    Writes (:meth:`mark_stale`, :meth:`drop`) change loaded namespaces only: a
    namespace that is not loaded will be read whole from Chroma when it is next used.
    Searches run in a worker thread and :meth:`NoraxMemory.embeddings` outside the store's
    lock, so every access holds :attr:`lock`.

    Args:
        budget_bytes: Memory for matrices; the one in use is kept even if it alone exceeds it.
        freed: Told the bytes of each matrix dropped (:class:`~norax_core.reclaim.Reclaimer`).
    """

    def __init__(self, budget_bytes: int, freed: Callable[[int], None] | None = None) -> None:
        self.budget_bytes = budget_bytes
        self._freed = freed
        self.lock = threading.RLock()
        self._blocks: OrderedDict[str, NamespaceMatrix] = OrderedDict()

    def __contains__(self, namespace: object) -> bool:
        return namespace in self._blocks

    @property
    def nbytes(self) -> int:
        """Bytes held by all loaded matrices."""
        return sum(b.nbytes for b in self._blocks.values())

    def loaded(self) -> list[str]:
        """The loaded namespaces, least recently used first."""
        return list(self._blocks)

    def block(
        self,
        namespace: str,
        load: Callable[[str], NamespaceMatrix],
        refresh: Callable[[str, NamespaceMatrix], None],
    ) -> NamespaceMatrix:
        """The namespace's matrix, loaded (``load``) or its stale rows refetched (``refresh``).

        The caller holds :attr:`lock` while it uses the matrix.
        """
        got = self._blocks.get(namespace)
        if got is None:
            got = load(namespace)
            self._blocks[namespace] = got
            self._evict(keep=namespace)
        else:
            self._blocks.move_to_end(namespace)
            if got.stale:
                refresh(namespace, got)
                self._evict(keep=namespace)
        return got

    def get(self, namespace: str) -> NamespaceMatrix | None:
        """The namespace's matrix if it is loaded (stale rows and all), else ``None``."""
        return self._blocks.get(namespace)

    def fresh(self, namespace: str) -> NamespaceMatrix | None:
        """The namespace's matrix if it is loaded and holds no stale row, else ``None``."""
        with self.lock:
            got = self._blocks.get(namespace)
            return got if got is not None and not got.stale else None

    def restore(self, namespace: str, block: NamespaceMatrix) -> None:
        """Hold a matrix read back from a snapshot (the least recently used may be evicted)."""
        with self.lock:
            self._blocks[namespace] = block
            self._evict(keep=namespace)

    def mark_stale(self, namespace: str, ids: Collection[str]) -> None:
        """``ids`` of ``namespace`` changed in Chroma: fetch their vectors before next use."""
        with self.lock:
            got = self._blocks.get(namespace)
            if got is not None:
                got.stale.update(ids)

    def drop(self, namespace: str, ids: Iterable[str]) -> None:
        """``ids`` left ``namespace``."""
        with self.lock:
            got = self._blocks.get(namespace)
            if got is not None:
                got.drop(ids)

    def evict(self, namespace: str) -> None:
        """Forget one namespace's matrix (it is reloaded on use)."""
        with self.lock:
            got = self._blocks.pop(namespace, None)
            if got is not None and self._freed is not None:
                self._freed(got.nbytes)

    def clear(self) -> None:
        """Forget every matrix (they are reloaded on use)."""
        with self.lock:
            self._blocks.clear()

    def _evict(self, keep: str) -> None:
        total = self.nbytes
        for ns in list(self._blocks):
            if total <= self.budget_bytes:
                return
            if ns != keep:
                nbytes = self._blocks.pop(ns).nbytes
                total -= nbytes
                if self._freed is not None:
                    self._freed(nbytes)


def load_namespace(
    collection: Any, namespace: str, member: Callable[[str], bool], expected: Collection[str]
) -> NamespaceMatrix:
    """Read one namespace's vectors from Chroma (filtered by namespace, a page at a time).

    Args:
        collection: The Chroma collection.
        namespace: The namespace.
        member: Whether an id belongs to the namespace as the derived indexes know it; other
            ids Chroma returns (written by another process, not yet synced) are left out
            until the sync indexes them, as every other signal does.
        expected: The ids the derived indexes hold in the namespace; any that paging missed
            (a concurrent delete shifts offsets) are fetched by id.
    """
    block = NamespaceMatrix()
    offset = 0
    while True:
        got = collection.get(
            where={NAMESPACE_KEY: namespace}, include=["embeddings"], limit=PAGE, offset=offset
        )
        ids = got["ids"]
        keep = [i for i, m in enumerate(ids) if member(m)]
        if keep:
            emb = np.asarray(got["embeddings"], dtype=np.float32)
            block.put([ids[i] for i in keep], emb[keep])
        if len(ids) < PAGE:
            break
        offset += PAGE
    missed = [m for m in expected if m not in block]
    if missed:
        fetch_into(collection, block, missed, member)
    return block


def fetch_ids(collection: Any, ids: Collection[str]) -> NamespaceMatrix:
    """The vectors of ``ids`` (one namespace's, all known), read from Chroma by id.

    A lookup per id, where :func:`load_namespace`'s ``where`` filter costs Chroma a scan of
    the whole collection's metadata: a close that snapshots every namespace of a 1M-memory
    store spent about 0.2 s per namespace on it (10,000 namespaces: over half an hour).
    """
    block = NamespaceMatrix()
    fetch_into(collection, block, sorted(ids), set(ids).__contains__)
    return block


def fetch_into(
    collection: Any, block: NamespaceMatrix, ids: Sequence[str], member: Callable[[str], bool]
) -> None:
    """Fetch ``ids``' vectors from Chroma into ``block``; ids gone from the namespace leave it."""
    found: set[str] = set()
    for start in range(0, len(ids), PAGE):
        got = collection.get(ids=list(ids[start : start + PAGE]), include=["embeddings"])
        keep = [i for i, m in enumerate(got["ids"]) if member(m)]
        if keep:
            emb = np.asarray(got["embeddings"], dtype=np.float32)
            block.put([got["ids"][i] for i in keep], emb[keep])
            found.update(got["ids"][i] for i in keep)
    block.drop(m for m in ids if m not in found)
