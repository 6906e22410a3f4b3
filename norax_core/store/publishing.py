"""A store's snapshots published in Chroma (:mod:`norax_core.published`): its open, publish.

Kept beside :class:`~norax_core.store.core.Store`, which calls these with itself (typed
``Any`` here: this module is imported by it).
"""

from __future__ import annotations

from typing import Any

from norax_core.errors import InvalidInputError
from norax_core.indexes import DerivedIndexes
from norax_core.published import Published, settings
from norax_core.sidecar import SCHEMA_VERSION, RowSource, Sidecar
from norax_core.store.position import CountedCollection


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
    return indexes


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
