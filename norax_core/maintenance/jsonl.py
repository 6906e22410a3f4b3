"""JSONL export and import of a whole store (``norax export`` / ``norax import``).

:func:`export_jsonl` writes every memory in the format ``norax add --jsonl`` reads (``text``,
``id``, ``kind``, ``created_at`` as ISO 8601, ``namespace``, ``metadata``);
:func:`import_jsonl` reads it back through :func:`norax_core.ingest.add_jsonl`, which
validates the whole file before writing anything. Entities are not exported: the importing
store extracts them again with its own extractor.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from norax_core.errors import InvalidInputError
from norax_core.indexes import CHROMA_PAGE
from norax_core.models import DEFAULT_NAMESPACE

if TYPE_CHECKING:
    from norax_core.engine import NoraxMemory

__all__ = ["export_jsonl", "import_jsonl"]


def export_jsonl(memory: NoraxMemory, path: str | Path, *, namespace: str | None = None) -> int:
    """Write every memory (or one namespace's) to a JSONL file; returns how many.

    Memories are written namespace by namespace in conversation order (time, then the order
    they were written in, then id), so an import, which numbers them in file order, keeps
    the order of memories that share a time. The file is written next to its destination and
    renamed into place, so an interrupted export never leaves a truncated file under the
    final name. Runs under the store's lock (writes wait), so the file is one consistent
    snapshot.

    Raises:
        InvalidInputError: ``path`` is a folder, or its folder cannot be created or written.
    """
    from norax_core import validation as check
    from norax_core.signals.dense import NAMESPACE_KEY
    from norax_core.store import memory_from_record

    ns = None if namespace is None else check.namespace(namespace)
    dest = Path(path)
    if dest.is_dir():
        raise InvalidInputError(f"{dest} is a folder: give the path of the .jsonl file to write")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    except OSError as exc:
        raise InvalidInputError(f"cannot write {dest}: {exc.strerror or exc}") from None
    n = 0
    try:
        store = memory.store
        with os.fdopen(fd, "w", encoding="utf-8") as out, store.lock:
            where = {NAMESPACE_KEY: ns} if ns is not None else None
            keys = sorted(
                _order_key(mid, dict(meta or {}))
                for got in store.pages(["metadatas"], where)
                for mid, meta in zip(got["ids"], got["metadatas"], strict=True)
            )
            order = [k[-1] for k in keys]
            for start in range(0, len(order), CHROMA_PAGE):
                got = store.collection.get(
                    ids=order[start : start + CHROMA_PAGE], include=["documents", "metadatas"]
                )
                records = {
                    mid: memory_from_record(mid, doc, dict(meta or {}))
                    for mid, doc, meta in zip(
                        got["ids"], got["documents"], got["metadatas"], strict=True
                    )
                }
                for mid in order[start : start + CHROMA_PAGE]:
                    m = records[mid]
                    rec = {
                        "id": m.id,
                        "text": m.text,
                        "kind": m.kind,
                        "created_at": m.created_at.isoformat(),
                        "namespace": m.namespace,
                        "metadata": dict(m.metadata),
                    }
                    out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    n += 1
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


def _order_key(mid: str, meta: dict[str, Any]) -> tuple[str, float, int, str]:
    """Where a Chroma record sorts in an export: namespace, then conversation order."""
    from norax_core.batch import CREATED_KEY, SEQ_KEY
    from norax_core.signals.dense import NAMESPACE_KEY
    from norax_core.store.chroma import seq

    ns = str(meta.get(NAMESPACE_KEY, DEFAULT_NAMESPACE))
    return ns, float(meta.get(CREATED_KEY, 0.0)), seq(meta.get(SEQ_KEY)), mid


def import_jsonl(memory: NoraxMemory, path: str | Path, *, progress: bool = False) -> int:
    """Add every memory of an exported (or hand-written) JSONL file; returns how many.

    The whole file is validated first and ids already stored are refused, so a bad file
    writes nothing (see :func:`norax_core.ingest.add_jsonl`).
    """
    from norax_core.ingest import add_jsonl

    return add_jsonl(memory, Path(path), progress=progress)
