"""Namespace snapshots published in Chroma, so any process loads a namespace in one request.

A namespace's snapshot (the :func:`~norax_core.snapshots.capture` blob, its vectors and the
rows a client's sidecar caches) is written to a companion collection ``<name>__norax_snap``
of the memory collection ``<name>``: a head record ``<key>-h`` (namespace, settings,
time, part count, digest) and up to :data:`MAX_PARTS` parts ``<key>-<i>``, the payload
base64 in the metadata string ``b`` (not the document: Chroma
puts documents in its trigram full-text index, which took 1.4-1.8 s and 18 MB of disk per
2.7 MB blob against 64-122 ms and 8 MB for a metadata string, measured in Chroma 1.5.9).
A cold namespace is read with one ``get`` of its ids (:meth:`Published.get`), over a kept
connection of its own when the client is chromadb's HTTP client (:mod:`norax_core.fast_get`,
which then decodes the base64 from the answer's bytes, never making it a ``str``).

The payload (:mod:`norax_core.published_payload`, format :data:`VERSION` 5) holds the vectors
first (aligned: their matrix stays a view of it), then the state and rows zstd-compressed. A
blob of another version names other :func:`settings`: it is never served, and it is replaced
like a missing one.

Validity. A blob is served only if its metadata names this store's settings (:func:`settings`:
the memory collection's id, the snapshot layout, the sidecar schema and the tokenizer's
signature), its parts agree (count and digest of the whole payload, :func:`_digest`) and its
parts disagree on nothing with each other (:mod:`norax_core.snapshots` checks the ids). Any
Norax write deletes the blobs of the namespaces it wrote, after its data write and its
change-log entry (:meth:`Published.drop`): a publisher that read its rows before that write and
stored its blob after the delete finds the write's log entry when it looks again right after
storing (:meth:`Published.put` returns, the caller checks the log and drops its own blob), and a
reader of a blob young enough for the log to hold every later entry also checks the log (as
:class:`~norax_core.client_snapshots.ClientSnapshots` does). Writes made without Norax are
caught like every other: a reconcile or ``norax check --repair`` drops the blobs.
Nothing is unpickled: the rows are JSON, the arrays are read with numpy.
"""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from norax_core import fast_get, snapshots
from norax_core.published_payload import b64decode, b64encode
from norax_core.published_payload import pack as pack
from norax_core.published_payload import unpack as unpack

_mmh3: Any
try:
    import mmh3 as _mmh3
except ImportError:  # pragma: no cover - mmh3 comes with chromadb
    _mmh3 = None

logger = logging.getLogger("norax")

SUFFIX = "__norax_snap"
"""The published snapshots of collection ``name`` are in the collection ``name + SUFFIX``."""
PART_CHARS = 4 << 20
"""Base64 characters per record (Chroma's server takes requests far larger)."""
MAX_PARTS = 16
"""Parts per namespace at most (64 MB of base64): a larger namespace is not published."""
BATCH_CHARS = 32 << 20
"""A deferred :meth:`Published.put` is written once this much is waiting (see there)."""
LOG_SYNC = 2
"""The companion collection's HNSW ``sync_threshold`` and ``batch_size``. Chroma keeps a
collection's writes in its SQLite log until its vector index persists them, by default every
1,000 records: with multi-MB records that log held hundreds of MB (another copy of every
blob on disk), and each write call, a delete of one small record included, read it again
(0.2-0.8 s a call, growing with the log). With 2 the log is purged as it goes: a delete
takes 5-15 ms and 60 writes of 4 MB 4 s instead of 28 s (Chroma 1.5.9)."""
_CONFIG = {"hnsw": {"sync_threshold": LOG_SYNC, "batch_size": LOG_SYNC}}
VERSION = "5"
"""The published blobs' format (in :func:`settings` and each head's ``format``): version 1
stored the state and rows uncompressed, version 2 zlib-compressed, version 3 the state's
integer arrays narrowed too, version 4 the state as it is and the rows column by column,
zstd-compressed, version 5 (:mod:`norax_core.published_payload`) the vectors first, at an
aligned offset, and the rows' few-valued text columns keyed."""
FORMAT = int(VERSION)
_PLACEHOLDER = [1.0]  # Chroma needs an embedding per record; never used


def settings(collection_id: str, schema: object, tokenizer: object) -> str:
    """What a blob must name to be served by a store: collection, layout, schema, tokenizer.

    ``<VERSION>-<hash>``: the format is readable in the head record itself, which a client of
    an older version rewrites whole when it publishes over a blob (Chroma keeps the keys an
    upsert leaves out, ``format`` included).
    """
    tok = json.dumps(tokenizer, sort_keys=True)
    parts = [VERSION, collection_id, snapshots.layout(), str(schema), tok]
    return f"{VERSION}-" + hashlib.sha1("|".join(parts).encode()).hexdigest()[:24]


def _digest(payload: bytes) -> str:
    """A payload's checksum: finds a corrupt or half-replaced blob (not a forged one).

    ``m<hash>-<length>``: the 128-bit MurmurHash3 (x64) of the payload, read in 0.23 ms for
    the 1.9 MB of a 1k-memory namespace against 0.44 for its ``crc32`` (the form
    ``<crc32>-<length>`` of formats 1-4, still checked by :func:`_matches`). Without mmh3
    (chromadb's dependency) the ``crc32`` form.
    """
    if _mmh3 is None:  # pragma: no cover - mmh3 comes with chromadb
        return _crc(payload)
    return f"m{_mmh3.hash_bytes(payload).hex()}-{len(payload)}"  # hash128(...) may be signed


def _crc(payload: bytes) -> str:
    return f"{zlib.crc32(payload):08x}-{len(payload)}"


def _matches(payload: bytes, digest: str) -> bool:
    """Whether ``payload`` is the one ``digest`` (of :func:`_digest`, either form) names."""
    if not digest.endswith(f"-{len(payload)}"):
        return False
    if digest.startswith("m"):
        return _mmh3 is not None and _digest(payload) == digest
    return _crc(payload) == digest


def key(namespace: str) -> str:
    """The id stem of a namespace's records."""
    return "s" + hashlib.sha1(namespace.encode()).hexdigest()[:32]


def part_ids(namespace: str) -> list[str]:
    """Every record id a namespace's blob may use."""
    stem = key(namespace)
    return [f"{stem}-h", *(f"{stem}-{i}" for i in range(MAX_PARTS))]


class Published:
    """The published snapshots of one memory collection.

    Args:
        client: The Chroma client holding the memory collection.
        name: The memory collection's name.
        settings: This store's :func:`settings`.
        counted: Told how many records each write asks Chroma to log (an embedded store
            counts them to keep its write position, :mod:`norax_core.store.position`).
        known: Whether only this process writes (an embedded store): the namespaces with a
            blob are then listed once, and a write deletes only theirs.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        settings: str,
        counted: Callable[[int], None] | None = None,
        known: bool = False,
    ) -> None:
        self.client = client
        self.name = name + SUFFIX
        self.settings = settings
        self._counted = counted
        self._col: Any = None
        self._known: dict[str, int] | None = {} if known else None  # namespace -> parts
        self._other: set[str] = set()  # of _known: blobs of other settings (an old format)
        self._listed = not known
        self._waiting: tuple[list[str], list[dict[str, Any]]] = ([], [])
        self._waiting_chars = 0

    def _collection(self, create: bool) -> Any:
        if self._col is None:
            if create:
                self._col = self.client.get_or_create_collection(
                    self.name,
                    embedding_function=None,
                    metadata={"norax_snap": 1},
                    configuration=_CONFIG,
                )
            else:
                try:
                    self._col = self.client.get_collection(self.name, embedding_function=None)
                except Exception:  # noqa: BLE001 - nothing published yet
                    return None
            _tune(self._col)
        return self._col

    def prepare(self) -> None:
        """Get the companion collection's handle now, if it exists (a client's open).

        And open the connection its first read takes (:func:`norax_core.fast_get.connect`).
        """
        col = self._collection(create=False)
        if col is not None:
            fast_get.connect(col)

    def _count(self, n: int) -> None:
        if self._counted is not None:
            self._counted(n)

    def held(self) -> set[str] | None:
        """An embedded store's namespaces with a blob of its settings (listed once), else ``None``.

        ``None``: unknown (a client). A blob of other settings (an older format) is not held:
        it is published again over it.
        """
        if self._known is None:
            return None
        if not self._listed:
            self._listed = True
            col = self._collection(create=False)
            if col is not None:
                got = col.get(include=["metadatas"], where={"head": True})
                for m in got["metadatas"]:
                    if m and isinstance(m.get("parts"), int):
                        self._known[str(m.get("ns"))] = int(m["parts"])
                        if m.get("settings") != self.settings:
                            self._other.add(str(m.get("ns")))
        return set(self._known) - self._other

    def get(self, namespace: str) -> tuple[float, bytes, memoryview | None, Sequence[Any]] | None:
        """``(taken, state, vectors or None, rows)`` of ``namespace``'s blob, if it has one.

        Raises:
            ValueError: The blob is there but unreadable or of parts that disagree (the
                caller drops it and loads the namespace from Chroma).
        """
        col = self._collection(create=False)
        if col is None:
            return None
        found = dict(zip(*fast_get.get(col, part_ids(namespace), b64="b"), strict=True))
        stem = key(namespace)
        head = found.get(f"{stem}-h")
        if not head or head.get("ns") != namespace:
            return None
        if head.get("settings") != self.settings:
            return None  # another store's (other settings or collection): not ours to judge
        try:
            n, digest, taken = int(head["parts"]), str(head["digest"]), float(head["taken"])
            chunks = [found[f"{stem}-{i}"] or {} for i in range(n)]
            if any(c.get("digest") != digest for c in chunks):
                raise ValueError("its parts are of different blobs")
            texts = [c["b"] for c in chunks]
            if all(type(t) is bytes for t in texts):  # decoded by fast_get from the body
                payload = b"".join(texts)
            else:
                payload = b64decode("".join(str(t) for t in texts))
        except (KeyError, TypeError, ValueError) as exc:  # binascii.Error is a ValueError
            raise ValueError(f"unreadable published snapshot: {exc}") from exc
        if not _matches(payload, digest):
            raise ValueError("its digest does not match")
        return (taken, *unpack(payload))

    def put(
        self,
        namespace: str,
        taken: float,
        state: bytes,
        vectors: bytes | None,
        rows: list[tuple[object, ...]],
        *,
        defer: bool = False,
    ) -> bool:
        """Publish (replace) the blob of ``namespace``, whose rows were read at ``taken``.

        ``defer``: written with others by :meth:`flush` (or once :data:`BATCH_CHARS` wait),
        for an embedded store publishing many namespaces: each write call costs Chroma 1.5.9
        more than the last within a process (200 calls of 0.5 MB: 62 s; 8 calls of 25: 7 s).

        Returns whether it was written (not when larger than :data:`MAX_PARTS` parts).
        """
        payload = pack(state, vectors, rows)
        text = b64encode(payload)
        chunks = [text[i : i + PART_CHARS] for i in range(0, len(text), PART_CHARS)]
        if len(chunks) > MAX_PARTS:
            return False
        digest = _digest(payload)
        stem = key(namespace)
        head: dict[str, Any] = {
            "head": True,
            "format": FORMAT,
            "ns": namespace,
            "parts": len(chunks),
            "digest": digest,
            "taken": taken,
            "settings": self.settings,
        }
        metas: list[dict[str, Any]] = [head, *({"digest": digest, "b": c} for c in chunks)]
        ids = [f"{stem}-h", *(f"{stem}-{i}" for i in range(len(chunks)))]
        self.held()
        self._waiting[0].extend(ids)
        self._waiting[1].extend(metas)
        self._waiting_chars += len(text)
        if not defer or self._waiting_chars >= BATCH_CHARS:
            self.flush()
        if self._known is not None:
            old = self._known.get(namespace, 0)
            self._known[namespace] = len(chunks)
            self._other.discard(namespace)
            if old > len(chunks):  # its former blob's last parts
                self._delete([f"{stem}-{i}" for i in range(len(chunks), old)])
        return True

    def flush(self) -> None:
        """Write the deferred blobs (one Chroma call)."""
        ids, metas = self._waiting
        if not ids:
            return
        self._waiting, self._waiting_chars = ([], []), 0
        col = self._collection(create=True)
        col.upsert(ids=ids, metadatas=metas, embeddings=[_PLACEHOLDER] * len(ids))
        self._count(len(ids))

    def drop(self, namespaces: Iterable[str]) -> None:
        """Delete the blobs of ``namespaces`` (after a write to them)."""
        self.held()
        known = self._known
        wanted = [ns for ns in dict.fromkeys(namespaces) if known is None or ns in known]
        if known is None:  # any part may exist
            ids = [i for ns in wanted for i in part_ids(ns)]
        else:  # exactly those that exist: the write position counts every id deleted
            ids = [i for ns in wanted for i in part_ids(ns)[: 1 + known.pop(ns)]]
            self._other.difference_update(wanted)
        self._delete(ids)

    def _delete(self, ids: list[str]) -> None:
        self.flush()  # in the order asked
        if not ids:
            return
        col = self._collection(create=False)
        if col is None:
            return
        col.delete(ids=ids)
        self._count(len(ids))

    def drop_all(self) -> None:
        """Delete every published blob of the collection (a repair, a rebuild)."""
        col = self._collection(create=False)
        if col is None:
            return
        got = col.get(include=[])
        if got["ids"]:
            col.delete(ids=got["ids"])
            self._count(len(got["ids"]))
        if self._known is not None:
            self._known.clear()
            self._other.clear()

    def namespaces(self) -> set[str]:
        """The namespaces with a blob of this store's settings."""
        col = self._collection(create=False)
        if col is None:
            return set()
        got = col.get(include=["metadatas"], where={"head": True})
        return {str(m["ns"]) for m in got["metadatas"] if m and m.get("settings") == self.settings}


def _tune(col: Any) -> None:
    """Give a collection created before :data:`LOG_SYNC` (or by another client) its setting."""
    try:
        # the raw JSON: ``col.configuration`` warns of a legacy embedding function config
        hnsw = (col.configuration_json or {}).get("hnsw") or {}
        if int(hnsw.get("sync_threshold") or LOG_SYNC) > LOG_SYNC:
            col.modify(configuration=_CONFIG)
    except Exception as exc:  # noqa: BLE001 - slower writes, nothing wrong
        logger.warning("norax: could not set %s's sync_threshold: %s", col.name, exc)


def vouched(log: Any, namespace: str, taken: float) -> bool | None:
    """Whether the change log lets a blob of ``namespace`` taken at ``taken`` be served.

    ``True``: no entry since ``taken - lookback`` names it (or none can: no log, or the blob
    is older than what the log keeps, and every Norax write deleted the blobs it outdated).
    ``None``: an entry names it (the blob is stale). ``False``: an entry names an unknown
    namespace (maybe stale).
    """
    if log is None:
        return True
    if not log.holds(taken):
        return True
    touched = log.touched(taken - log.config.lookback)
    if touched is None:
        return False
    return None if namespace in touched else True


def publish_checked(
    published: Published,
    log: Any,
    namespace: str,
    taken: float,
    parts: Callable[[], tuple[bytes, bytes | None, list[tuple[object, ...]]]],
) -> bool:
    """Publish a client's snapshot of rows read at ``taken``, unless a write may outdate it.

    Not published when ``taken`` is too old for the log to hold every later entry. After
    storing, the log is read again: an entry naming the namespace (or an unknown one) since
    ``taken - lookback`` means a write raced with this publish, and the blob is deleted.
    Returns whether a blob was left published.
    """
    if not log.holds(taken):
        return False
    if not published.put(namespace, taken, *parts()):
        return False
    touched = log.recheck(taken - log.config.lookback)
    if touched is None or namespace in touched:
        published.drop([namespace])
        return False
    return True
