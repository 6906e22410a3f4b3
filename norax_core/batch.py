"""A batch of writes made ready: validated, tokenised, entities extracted, embedded.

:meth:`NoraxMemory.add` and :meth:`~NoraxMemory.upsert` call :func:`prepare` before they
take the store's lock; nothing here writes.
"""

from __future__ import annotations

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
from norax_core.sidecar import IndexRow
from norax_core.signals.context import batch_preceding, embedding_text, following
from norax_core.signals.dense import NAMESPACE_KEY
from norax_core.signals.temporal import TemporalSignal

KIND_KEY = "norax_kind"
CREATED_KEY = "norax_created_at"
ENTITIES_KEY = "norax_entities"
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
    """A validated batch, ready to write."""

    ids: list[str]
    texts: list[str]
    embeddings: np.ndarray
    metadatas: list[dict[str, Any]]
    rows: list[IndexRow]


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
    kinds = [check.name(k, "kind") for k in check.as_list(kind, n, "kind", str)]
    now = time.time()
    times = [
        now if t is None else check.timestamp(t)
        for t in check.as_list(created_at, n, "created_at", float)
    ]
    spaces = [check.namespace(s) for s in check.as_list(namespace, n, "namespace", str)]
    metas = [check.metadata(m) for m in check.as_list(metadata, n, "metadata", dict)]

    heads = [t[:MODEL_CHARS] for t in items]
    # spaCy works in a worker thread while the batch is tokenised and embedded
    # (onnxruntime releases the GIL), so ingest costs about max(extract, embed), not both.
    extracting = in_background(extractor.extract, heads) if extractor else None
    tokens = [tuple(tokenizer(t)) for t in items]
    embeddings = embedder.embed(embedding_texts(id_list, items, times, spaces))
    entities = [tuple(e) for e in extracting.result()] if extracting else [()] * n
    checked_embeddings(embedder, embeddings, n)
    chroma_metas = []
    for ns, kd, ts, meta, ents in zip(spaces, kinds, times, metas, entities, strict=True):
        m: dict[str, Any] = {**meta, NAMESPACE_KEY: ns, KIND_KEY: kd, CREATED_KEY: ts}
        if ents:
            m[ENTITIES_KEY] = list(ents)
        chroma_metas.append(m)
    rows = [
        IndexRow(i, ns, kd, ts, tok, ents)
        for i, ns, kd, ts, tok, ents in zip(
            id_list, spaces, kinds, times, tokens, entities, strict=True
        )
    ]
    return Prepared(id_list, items, embeddings, chroma_metas, rows)


def context_texts(
    ids: list[str],
    texts: list[str],
    times: list[float],
    spaces: list[str],
    cfg: NoraxConfig,
    timeline: Callable[[str], tuple[Sequence[str], Sequence[float]]],
    stored_texts: Callable[[list[str]], Mapping[str, str]],
) -> list[str]:
    """What the embedder reads for each memory (``NoraxConfig.embed_context``).

    Args:
        ids: The batch's ids.
        texts: Their texts.
        times: Their creation times.
        spaces: Their namespaces.
        cfg: The store's add-time configuration.
        timeline: ``namespace -> (ids, times)`` of its stored memories in time order.
        stored_texts: The texts of stored memories by id (missing ids are skipped).
    """
    if cfg.embed_context <= 0:
        return [t[:MODEL_CHARS] for t in texts]
    prev = batch_preceding(ids, times, spaces, timeline, cfg.embed_context, cfg.context_gap_seconds)
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
    gone_set = set(gone)

    def timeline(ns: str) -> tuple[list[str], list[float]]:
        ordered, stamps = catalog.timeline(ns)[:2]
        if not gone_set:
            return ordered, stamps
        keep = [i for i, m in enumerate(ordered) if m not in gone_set]
        return [ordered[i] for i in keep], [stamps[i] for i in keep]

    found = following(
        [*written, *leaving],
        times,
        spaces,
        timeline,
        cfg.embed_context,
        cfg.context_gap_seconds,
        {*written, *gone_set},
    )
    if not found:
        return [], []
    f_spaces = [home[m] for m in found]
    f_times = stored_times(catalog, home, found)
    text_of = stored_texts(found)
    own = [text_of.get(m, "") for m in found]
    after = context_texts(
        [*found, *written],
        [*own, *texts],
        [*f_times, *(r.created_at for r in rows)],
        [*f_spaces, *(r.namespace for r in rows)],
        cfg,
        timeline,
        stored_texts,
    )[: len(found)]
    # what they were embedded with: an upsert that changes nothing (same text, same time)
    # re-embeds nobody
    before = context_texts(
        found, own, f_times, f_spaces, cfg, lambda ns: catalog.timeline(ns)[:2], stored_texts
    )
    changed = [i for i, (a, b) in enumerate(zip(after, before, strict=True)) if a != b]
    return [found[i] for i in changed], [after[i] for i in changed]


def replacing_metadata(
    collection: Any, ids: list[str], metas: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Metadata for an upsert that replaces the old record's instead of merging into it.

    Chroma's upsert merges metadata: the keys the new version lacks (old user metadata,
    old entities) are set to ``None``, which deletes them.
    """
    old = collection.get(ids=ids, include=["metadatas"])
    keys = {mid: set(m or {}) for mid, m in zip(old["ids"], old["metadatas"], strict=True)}
    out = []
    for mid, meta in zip(ids, metas, strict=True):
        gone = keys.get(mid, set()) - set(meta)
        out.append({**meta, **dict.fromkeys(gone)} if gone else meta)
    return out
