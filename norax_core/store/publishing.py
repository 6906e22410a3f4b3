"""A store's snapshots published in Chroma (:mod:`norax_core.published`): its open, publish.

Kept beside :class:`~norax_core.store.core.Store`, which calls these with itself (typed
``Any`` here: this module is imported by it).
"""

from __future__ import annotations

import logging
from typing import Any

from norax_core.errors import InvalidInputError
from norax_core.indexes import DerivedIndexes
from norax_core.published import Published, settings
from norax_core.sidecar import SCHEMA_VERSION, RowSource, Sidecar
from norax_core.store.position import CountedCollection

logger = logging.getLogger("norax")


def derived(
    store: Any, sidecar: Sidecar, source: RowSource | None, shared: Any, client: Any
) -> DerivedIndexes:
    """The derived indexes of ``store`` at its open, with its published snapshots.

    ``client``: the Chroma client the store was given (``None``: embedded or in memory,
    the only writer of its collection, which lists its blobs once; an embedded store counts
    their writes in its Chroma write position).
    """
    indexes = DerivedIndexes(sidecar, store.config, source, shared, log=store.sync)
    collection = store.collection

    def counted(records: int) -> None:  # publishing writes Chroma records too
        if isinstance(collection, CountedCollection):
            collection.written += records

    indexes.published = Published(
        store.client,
        store.name,
        settings(str(collection.id), SCHEMA_VERSION, indexes.tokenizer.signature()),
        counted=counted if store.path is not None else None,
        known=client is None,
    )
    if client is not None:
        _prepare(indexes.published, store.sync)
    return indexes


def _prepare(published: Published, log: Any) -> None:
    """At a client's open: what its first cold namespace would otherwise ask Chroma first.

    The companion collection's handle, and the change log's entries of the last
    ``retention`` (whatever blob or snapshot file a cold namespace is served from, its check
    is then answered from them, :meth:`~norax_core.sync.ChangeLog.touched`): the first
    query pays the blob's ``get`` alone (two requests of 2-7 ms fewer, on a 10k store's
    ``chroma run``). Nothing published yet or the server slow: the first query asks.
    """
    try:
        published.prepare()
        if log is not None:
            log.touched(log.clock() - log.config.retention)
    except Exception as exc:  # noqa: BLE001 - asked again when needed
        logger.info("norax: could not prepare the published snapshots: %s", exc)


def publish_all(store: Any, *, progress: bool = False) -> int:
    """Publish every namespace's snapshot of an embedded ``store`` in Chroma.

    An embedded store publishes the namespaces it wrote or loaded when it closes; this
    publishes all of them (``norax publish``: a store built before publishing existed), so
    that a client of a Chroma server over its folder loads a namespace in one request. A
    namespace with a complete sidecar snapshot is published from it, any other is loaded
    and snapshotted first (one at a time: the memory budget holds). ``progress``: a
    progress bar on stderr. Returns how many namespaces are published.

    Raises:
        InvalidInputError: The store is a client of a server, not embedded.
    """
    from tqdm.auto import tqdm

    indexes = store.indexes
    with store.lock:
        if not indexes.source.complete or indexes.sidecar.path is None:
            raise InvalidInputError("publish is for an embedded store (path=...)")
        total = len(indexes.namespaces())
        with tqdm(total=total, desc="publishing", unit="ns", disable=not progress) as bar:
            done = indexes.publish_all(store.vectors_of, bar.update)
        store.checkpoint()
        return done
