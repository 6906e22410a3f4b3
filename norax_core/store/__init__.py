"""The storage layer: a Norax collection in Chroma, its sidecar and its derived indexes.

- :mod:`~norax_core.store.core`: :class:`Store` opens and closes them, pulls other
  processes' writes, refreshes, and reads records for the engine and the check.
- :mod:`~norax_core.store.writes`: its write path (batches, deletes, context followers).
- :mod:`~norax_core.store.chroma`: opening the collection, reading its records back.
- :mod:`~norax_core.store.consistency`: the check and repair of a store.

An internal API: :class:`~norax_core.engine.NoraxMemory` and :mod:`norax_core.maintenance`
use it, users go through ``NoraxMemory``. Nothing here imports the engine.
"""

from norax_core.store.chroma import memory_from_record
from norax_core.store.core import DEFAULT_COLLECTION, SIDECAR_FILE, Store
from norax_core.store.writes import CHROMA_BATCH, RESTATE_KEY, Followers

__all__ = [
    "CHROMA_BATCH",
    "DEFAULT_COLLECTION",
    "RESTATE_KEY",
    "SIDECAR_FILE",
    "Followers",
    "Store",
    "memory_from_record",
]
