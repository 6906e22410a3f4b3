"""Re-deriving inferred kinds when the rule that reads them changes (:data:`KIND_RULE`).

Each memory's inferred kind (:mod:`norax_core.kinds`) is derived once, at write time, and
stored in Chroma (``norax_inferred_kind``, filterable) and in the sidecar's rows. The
sidecar keeps the rule's version in its ``kind_rule`` meta key; a store opened under another
version re-derives every memory's inferred kind from its text, kind and role, stores the
changed ones in Chroma and re-derives their rows. Crash-safe like a write: the changed ids
are logged as pending before Chroma is written, and the version is recorded last, so an
interrupted pass is finished (or done again, with the same result) at the next open.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from norax_core.indexes import DerivedIndexes, chroma_pages
from norax_core.kinds import KIND_RULE
from norax_core.models import INFERRED_KIND_KEY
from norax_core.sidecar import IndexRow
from norax_core.store.chroma import derive_kind
from norax_core.store.writes import CHROMA_BATCH

logger = logging.getLogger("norax")

RULE_KEY = "kind_rule"
"""Sidecar meta key: the :data:`KIND_RULE` the stored inferred kinds were derived under."""


def rederive_kinds(
    collection: Any,
    indexes: DerivedIndexes,
    row_from_record: Callable[[str, str, dict[str, Any]], IndexRow],
    changed: Callable[[list[str]], None] | None = None,
) -> int:
    """Bring every memory's inferred kind up to :data:`KIND_RULE`; returns how many changed.

    Does nothing when the sidecar already records this version. ``changed`` is told the ids
    whose Chroma record changed (the change log, so other processes re-read them).
    """
    sidecar = indexes.sidecar
    if sidecar.get_meta(RULE_KEY) == KIND_RULE:
        return 0
    stale: dict[str, str] = {}
    for got in chroma_pages(collection, ["documents", "metadatas"]):
        for mid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
            now = derive_kind(doc or "", dict(meta or {}))
            if (meta or {}).get(INFERRED_KIND_KEY) != now:
                stale[mid] = now
    ids = sorted(stale)
    if ids:
        sidecar.mark_pending(ids)
        for s in range(0, len(ids), CHROMA_BATCH):
            chunk = ids[s : s + CHROMA_BATCH]
            collection.update(ids=chunk, metadatas=[{INFERRED_KIND_KEY: stale[m]} for m in chunk])
        indexes.resync(collection, ids, row_from_record)
        if changed is not None:
            changed(ids)
        logger.info("norax: re-derived %d inferred kinds under rule %s", len(ids), KIND_RULE)
    sidecar.set_meta({RULE_KEY: KIND_RULE})
    return len(ids)
