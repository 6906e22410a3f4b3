"""Store maintenance: consistency check and repair, JSONL export and import.

- :mod:`~norax_core.maintenance.check`: :func:`check_store` compares Chroma, which holds the
  truth, with every index derived from it (sidecar rows, id catalog, BM25, temporal, graph);
  :func:`repair_store` re-derives what disagrees.
- :mod:`~norax_core.maintenance.jsonl`: :func:`export_jsonl` / :func:`import_jsonl` move or
  back up a store as JSONL (the format of ``norax add --jsonl``).
- :mod:`~norax_core.maintenance.commands`: the ``norax check [--repair]``, ``export`` and
  ``import`` commands (:func:`register`).
"""

from norax_core.maintenance.check import (
    SOURCES,
    CheckReport,
    NamespaceCheck,
    RepairReport,
    check_store,
    repair_store,
)
from norax_core.maintenance.commands import register
from norax_core.maintenance.jsonl import export_jsonl, import_jsonl

__all__ = [
    "SOURCES",
    "CheckReport",
    "NamespaceCheck",
    "RepairReport",
    "check_store",
    "export_jsonl",
    "import_jsonl",
    "register",
    "repair_store",
]
