"""A batch of writes made ready: validated, tokenised, entities extracted, embedded.

:meth:`NoraxMemory.add` and :meth:`~NoraxMemory.upsert` call :func:`prepare` before they
take the store's lock; nothing here writes.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from norax_core import validation as check
from norax_core.config import NoraxConfig
from norax_core.embedders import Embedder
from norax_core.errors import NoraxError
from norax_core.kinds import inferred_kinds, role_of
from norax_core.models import INFERRED_KIND_KEY
from norax_core.sidecar import IndexRow
from norax_core.signals.context import batch_preceding, embedding_text, following
from norax_core.signals.dense import NAMESPACE_KEY
from norax_core.signals.temporal import TemporalSignal

KIND_KEY = "norax_kind"
CREATED_KEY = "norax_created_at"
ENTITIES_KEY = "norax_entities"
SEQ_KEY = "norax_seq"
"""Chroma metadata key of a memory's write sequence number (:func:`sequence_numbers`)."""
MODEL_CHARS = 10_000
"""The embedder and the entity extractor read at most this many characters of a text (or
query); the whole text is stored and BM25-indexed. The embedding model reads 256 word pieces
anyway, but tokenizing a 1 MB text first took seconds, and spaCy over 100,000 characters
(the extractor's own cap) took 8 to 19 s on a busy 2-core box: a hostile text must not hold
a core for that long."""

_WORKERS: ThreadPoolExecutor | None = None
_WORKERS_LOCK = threading.Lock()


def in_background(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run ``fn(*args)`` on the engine's small shared thread pool (two threads).

    For work that overlaps a call that releases the GIL (onnxruntime, Chroma): spaCy while a
    batch is embedded, a Chroma query while the local signals score.
    """
    global _WORKERS
    if _WORKERS is None:
        with _WORKERS_LOCK:
            if _WORKERS is None:
                _WORKERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="norax")
    return _WORKERS.submit(fn, *args)


def resolved(value: Any) -> Future[Any]:
    """A future already holding ``value``: for a step that may run in the background or not."""
    done: Future[Any] = Future()
    done.set_result(value)
    return done


def checked_embeddings(embedder: Embedder, embeddings: np.ndarray, n: int) -> np.ndarray:
    """``embeddings`` if they are ``n`` finite vectors of the embedder's dimension.

    Raises:
        NoraxError: They are not.
    """
    if embeddings.shape != (n, embedder.dim) or not np.isfinite(embeddings).all():
        raise NoraxError(f"embedder {embedder.name!r} returned invalid embeddings")
    return embeddings


@dataclass(frozen=True)
class Prepared:
    """A validated batch, ready to write.

    Attributes:
        embedded: What the embedder read for each memory (its text, with ``embed_context``
            followed by its predecessors' as the store stood when it was prepared).
        basis: The time index's write count (``writes`` of
            :class:`~norax_core.signals.temporal.TemporalSignal`) when it was prepared: if
            another write came in between, its context is computed again under the lock
            (:func:`settled`).
    """

    ids: list[str]
    texts: list[str]
    embeddings: np.ndarray
    metadatas: list[dict[str, Any]]
    rows: list[IndexRow]
    embedded: list[str]
    basis: int = -1


def prepare(  # noqa: D417 (the batch's arguments are described together)
    texts: Any,
    ids: Any,
    kind: Any,
    created_at: Any,
    namespace: Any,
    metadata: Any,
    *,
    embedder: Embedder,
    extractor: Any,
    tokenizer: Callable[[str], Sequence[str]],
    embedding_texts: Callable[[list[str], list[str], list[float], list[str]], list[str]],
) -> Prepared:
    """Validate a batch and compute everything its write needs.

    ``texts``, ``ids``, ``kind``, ``created_at``, ``namespace`` and ``metadata`` are as
    :meth:`NoraxMemory.add` takes them (one value for the batch or one per text).

    Args:
        embedder: Embeds what ``embedding_texts`` returns.
        extractor: The entity extractor, or ``None``.
        tokenizer: The BM25 tokenizer.
        embedding_texts: ``(ids, texts, times, namespaces) -> what the embedder reads``.

    Raises:
        InvalidInputError: Bad input (nothing is computed past the first bad value).
        NoraxError: The embedder returned vectors of the wrong shape or non-finite values.
    """
    items = check.texts(texts)
    n = len(items)
    id_list = check.ids(ids, n)
    given = [check.kind(k) for k in check.as_list(kind, n, "kind", str)]
    kinds = [k or "episodic" for k in given]
    now = time.time()
    times = [
        now if t is None else check.timestamp(t)
        for t in check.as_list(created_at, n, "created_at", check.TIME_SCALARS)
    ]
    spaces = [check.namespace(s) for s in check.as_list(namespace, n, "namespace", str)]
    metas = [check.metadata(m) for m in check.as_list(metadata, n, "metadata", dict)]
    inferred, roles = inferred_kinds(items, given, metas), [role_of(m) for m in metas]

    heads = [t[:MODEL_CHARS] for t in items]
    # spaCy works in a worker thread while the batch is tokenised and embedded
    # (onnxruntime releases the GIL), so ingest costs about max(extract, embed), not both.
    extracting = in_background(extractor.extract, heads) if extractor else None
    tokens = [tuple(tokenizer(t)) for t in items]
    embedded = embedding_texts(id_list, items, times, spaces)
    embeddings = embedder.embed(embedded)
    entities = [tuple(e) for e in extracting.result()] if extracting else [()] * n
    checked_embeddings(embedder, embeddings, n)
    rows = [
        IndexRow(i, ns, kd, ts, tok, ents, 0, role, inf)
        for i, ns, kd, ts, tok, ents, role, inf in zip(
            id_list, spaces, kinds, times, tokens, entities, roles, inferred, strict=True
        )
    ]
    chroma_metas = [
        {**meta, NAMESPACE_KEY: r.namespace, KIND_KEY: r.kind, CREATED_KEY: r.created_at}
        | {INFERRED_KIND_KEY: r.inferred_kind}
        | ({ENTITIES_KEY: list(r.entities)} if r.entities else {})
        for r, meta in zip(rows, metas, strict=True)
    ]
    return Prepared(id_list, items, embeddings, chroma_metas, rows, embedded)


def sequence_numbers(
    last_seq: int, stored: Mapping[str, tuple[str, int]], ids: Sequence[str], spaces: Sequence[str]
) -> list[int]:
    """The write sequence number of each memory of a batch: its order of writing.

    Memories that share a creation time are ordered by it (list order within a call, then
    call order), not by their ids' string order (``D1:10`` sorts before ``D1:2``). A stored
    memory (same id, same namespace: an upsert) keeps its number, so a correction keeps its
    place in the conversation; new ones are numbered after every number the store holds
    (``last_seq``), from the wall clock in microseconds when that is higher (a hybrid
    logical clock), so writes from several processes on one Chroma server interleave in
    about the order they happened. Chroma stores the number (:data:`SEQ_KEY`), so a reopen,
    a rebuild from Chroma or another process sees the same order.

    Args:
        last_seq: The highest number the store holds.
        stored: ``id -> (namespace, number)`` of the batch's ids that are stored.
        ids: The batch's ids.
        spaces: Their namespaces.
    """
    start = max(last_seq + 1, int(time.time() * 1e6))
    out: list[int] = []
    for mid, ns in zip(ids, spaces, strict=True):
        held = stored.get(mid)
        if held is not None and held[0] == ns:
            out.append(held[1])
        else:
            out.append(start)
            start += 1
    return out


def settled(
    p: Prepared,
    seqs: list[int],
    embedder: Embedder,
    embedding_texts: Callable[[list[str], list[str], list[float], list[str], list[int]], list[str]],
    stale: bool,
) -> Prepared:
    """The batch numbered with ``seqs``, its context checked again if ``stale``.

    Called under the store's lock. :func:`prepare` embedded each memory with its context as
    the store stood then, outside the lock (embedding is the slow part). If another write
    came in between (``stale``), the context is computed again and only the memories whose
    embedded text changed are embedded again, here, under the lock: that is rare (two
    writers in one session at once) and keeps every vector a function of the store.
    """
    embeddings, embedded = p.embeddings, p.embedded
    if stale:
        times = [r.created_at for r in p.rows]
        spaces = [r.namespace for r in p.rows]
        now = embedding_texts(p.ids, p.texts, times, spaces, seqs)
        changed = [i for i, (a, b) in enumerate(zip(now, embedded, strict=True)) if a != b]
        if changed:
            fresh = embedder.embed([now[i] for i in changed])
            checked_embeddings(embedder, fresh, len(changed))
            embeddings = embeddings.copy()
            embeddings[changed] = fresh
            embedded = now
    rows = [dataclasses.replace(r, seq=s) for r, s in zip(p.rows, seqs, strict=True)]
    metas = [{**m, SEQ_KEY: s} for m, s in zip(p.metadatas, seqs, strict=True)]
    return dataclasses.replace(
        p, embeddings=embeddings, metadatas=metas, rows=rows, embedded=embedded
    )


def context_texts(
    ids: list[str],
    texts: list[str],
    times: list[float],
    spaces: list[str],
    seqs: list[int],
    cfg: NoraxConfig,
    timeline: Callable[[str], tuple[Sequence[str], Sequence[float], Sequence[int]]],
    stored_texts: Callable[[list[str]], Mapping[str, str]],
) -> list[str]:
    """What the embedder reads for each memory (``NoraxConfig.embed_context``).

    Args:
        ids: The batch's ids.
        texts: Their texts.
        times: Their creation times.
        spaces: Their namespaces.
        seqs: Their write sequence numbers.
        cfg: The store's add-time configuration.
        timeline: ``namespace -> (ids, times, seqs)`` of its stored memories in
            conversation order (:meth:`TemporalSignal.sequence`).
        stored_texts: The texts of stored memories by id (missing ids are skipped).
    """
    if cfg.embed_context <= 0:
        return [t[:MODEL_CHARS] for t in texts]
    prev = batch_preceding(
        ids, times, spaces, seqs, timeline, cfg.embed_context, cfg.context_gap_seconds
    )
    batch = dict(zip(ids, texts, strict=True))
    stored = [m for m in dict.fromkeys(n for p in prev.values() for n in p) if m not in batch]
    text_of = {**(stored_texts(stored) if stored else {}), **batch}
    return [
        embedding_text(
            t[:MODEL_CHARS],
            [text_of[m][:MODEL_CHARS] for m in prev[i] if m in text_of],
            MODEL_CHARS,
        )
        for i, t in zip(ids, texts, strict=True)
    ]


def stored_times(catalog: TemporalSignal, home: Mapping[str, str], ids: list[str]) -> list[float]:
    """The stored creation time of each of ``ids`` (all stored; ``home``: id -> namespace)."""
    return [catalog.created(home[m], [m])[0] for m in ids]


def follower_texts(
    rows: Sequence[IndexRow],
    texts: Sequence[str],
    gone: Sequence[str],
    cfg: NoraxConfig,
    catalog: TemporalSignal,
    home: Mapping[str, str],
    stored_texts: Callable[[list[str]], Mapping[str, str]],
) -> tuple[list[str], list[str]]:
    """The stored memories whose context a write changes, and what they now embed.

    With ``embed_context``, a memory is embedded with the memories just before it. A memory
    written into the middle of a session (added out of order, or upserted), or deleted from
    it, changes what the memories after it should have been embedded with. Re-embedding
    them keeps a memory's vector a function of the store, not of the order memories were
    added in, and a deleted text lives on in no other vector. Appending to a session (the
    usual case) finds none.

    Args:
        rows: The batch being written (empty for a delete).
        texts: Its texts.
        gone: Ids being deleted.
        cfg: The store's add-time configuration.
        catalog: The store's time index, before the write.
        home: Stored id -> namespace, before the write.
        stored_texts: Texts of stored memories by id.

    Returns:
        ``(follower ids, their embedding texts)``.
    """
    written = {r.id: r for r in rows}
    # where the written memories land, and where their stored versions (and deleted
    # memories) leave from
    leaving = [m for m in [*written, *gone] if m in home]
    spaces = [*(r.namespace for r in rows), *(home[m] for m in leaving)]
    times = [r.created_at for r in rows] + stored_times(catalog, home, leaving)
    seqs = [r.seq for r in rows] + [catalog.seqs(home[m], [m])[0] for m in leaving]
    gone_set = set(gone)

    def timeline(ns: str) -> tuple[list[str], list[float], list[int]]:
        ordered, stamps, order = catalog.sequence(ns)
        if not gone_set:
            return ordered, stamps, order
        keep = [i for i, m in enumerate(ordered) if m not in gone_set]
        return [ordered[i] for i in keep], [stamps[i] for i in keep], [order[i] for i in keep]

    found = following(
        [*written, *leaving],
        times,
        spaces,
        seqs,
        timeline,
        cfg.embed_context,
        cfg.context_gap_seconds,
        {*written, *gone_set},
    )
    if not found:
        return [], []
    f_spaces = [home[m] for m in found]
    f_times = stored_times(catalog, home, found)
    f_seqs = [catalog.seqs(ns, [m])[0] for m, ns in zip(found, f_spaces, strict=True)]
    text_of = stored_texts(found)
    own = [text_of.get(m, "") for m in found]
    after = context_texts(
        [*found, *written],
        [*own, *texts],
        [*f_times, *(r.created_at for r in rows)],
        [*f_spaces, *(r.namespace for r in rows)],
        [*f_seqs, *(r.seq for r in rows)],
        cfg,
        timeline,
        stored_texts,
    )[: len(found)]
    # what they were embedded with: an upsert that changes nothing (same text, same time)
    # re-embeds nobody
    before = context_texts(
        found, own, f_times, f_spaces, f_seqs, cfg, catalog.sequence, stored_texts
    )
    changed = [i for i, (a, b) in enumerate(zip(after, before, strict=True)) if a != b]
    return [found[i] for i in changed], [after[i] for i in changed]


Record = tuple[str, np.ndarray, dict[str, Any]]
"""A stored memory as Chroma holds it: document, embedding, metadata."""


def stored_records(collection: Any, ids: Sequence[str], page: int) -> dict[str, Record]:
    """The records Chroma holds for ``ids`` (missing ids are left out), ``page`` at a time."""
    out: dict[str, Record] = {}
    for s in range(0, len(ids), page):
        got = collection.get(
            ids=list(ids[s : s + page]), include=["documents", "metadatas", "embeddings"]
        )
        for mid, doc, vec, meta in zip(
            got["ids"], got["documents"], got["embeddings"], got["metadatas"], strict=True
        ):
            out[mid] = (doc or "", np.asarray(vec, dtype=np.float32), dict(meta or {}))
    return out


def replacing_metadata(
    old: Mapping[str, Record], ids: list[str], metas: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Metadata for an upsert that replaces the old record's instead of merging into it.

    Chroma's upsert merges metadata: the keys the new version lacks (old user metadata,
    old entities) are set to ``None``, which deletes them.
    """
    out = []
    for mid, meta in zip(ids, metas, strict=True):
        gone = set(old[mid][2]) - set(meta) if mid in old else set()
        out.append({**meta, **dict.fromkeys(gone)} if gone else meta)
    return out


def restore(
    collection: Any,
    ids: list[str],
    old: Mapping[str, Record],
    written: Mapping[str, dict[str, Any]],
    page: int,
) -> None:
    """Put Chroma back as it was before a failed write of ``ids``.

    Ids ``old`` does not hold are deleted; the others get their old document, embedding and
    metadata back (keys only the failed version had, ``written``, are removed).
    """
    new = [m for m in ids if m not in old]
    for s in range(0, len(new), page):
        collection.delete(ids=new[s : s + page])
    back = [m for m in ids if m in old]
    for s in range(0, len(back), page):
        chunk = back[s : s + page]
        collection.upsert(
            ids=chunk,
            documents=[old[m][0] for m in chunk],
            embeddings=np.stack([old[m][1] for m in chunk]),
            metadatas=[
                {**old[m][2], **dict.fromkeys(set(written.get(m, {})) - set(old[m][2]))}
                for m in chunk
            ],
        )
