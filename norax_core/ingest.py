"""Bulk ingestion: JSONL files, and the framework documents the adapters convert.

A JSONL file is validated whole before anything is written (:func:`add_jsonl`). The adapters
(``norax_langchain.add_documents``, ``norax_llamaindex.add_nodes``) turn each document into a
:class:`MemoryRecord` with :func:`memory_record` and write them with :func:`write_records`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from tqdm.auto import tqdm

from norax_core import validation as check
from norax_core.errors import InvalidInputError
from norax_core.models import MetadataValue

if TYPE_CHECKING:
    from norax_core.engine import NoraxMemory

FIELDS = {"text", "id", "kind", "created_at", "namespace", "metadata"}
BATCH = 256


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Parse and validate every line; raises :class:`InvalidInputError` naming the line."""
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from None
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path}:{no}: not valid JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise InvalidInputError(f"{path}:{no}: expected a JSON object")
        unknown = set(rec) - FIELDS
        if unknown:
            raise InvalidInputError(f"{path}:{no}: unknown fields {sorted(unknown)}")
        try:
            check.texts(rec.get("text"))
            if rec.get("id") is not None:
                check.memory_id(rec["id"])
                if rec["id"] in seen:
                    raise InvalidInputError(f"id {rec['id']!r} repeats")
                seen.add(rec["id"])
            check.name(rec.get("kind", "episodic"), "kind")
            if rec.get("created_at") is not None:
                check.timestamp(rec["created_at"])
            check.namespace(rec.get("namespace"))
            check.metadata(rec.get("metadata"))
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path}:{no}: {exc}") from None
        records.append(rec)
    return records


def add_jsonl(memory: Any, path: Path, *, progress: bool = True) -> int:
    """Add every record of a JSONL file to ``memory``; returns how many were added.

    The whole file is validated first, so a bad line writes nothing. Records are then added
    in batches with a progress bar.
    """
    records = read_jsonl(path)
    ids = [r["id"] for r in records if r.get("id") is not None]
    if ids and memory.get(ids):
        raise InvalidInputError(f"{path}: some ids are already stored; delete them first")
    with tqdm(total=len(records), desc="adding", unit="mem", disable=not progress) as bar:
        for s in range(0, len(records), BATCH):
            batch = records[s : s + BATCH]
            memory.add(
                [r["text"] for r in batch],
                ids=[r.get("id") or _new_id() for r in batch],
                kind=[r.get("kind", "episodic") for r in batch],
                created_at=[r.get("created_at") for r in batch],
                namespace=[r.get("namespace") for r in batch],
                metadata=[r.get("metadata") or {} for r in batch],
            )
            bar.update(len(batch))
    return len(records)


class MemoryRecord(NamedTuple):
    """A framework document (LangChain ``Document``, LlamaIndex node) as a memory to write."""

    id: str | None
    """The memory id; ``None`` has :func:`write_records` generate one."""
    text: str
    created_at: Any
    """Datetime, ISO 8601 string, epoch seconds, or ``None`` (now)."""
    kind: str | None
    """The document's own kind, or ``None``."""
    metadata: dict[str, MetadataValue]


def memory_record(
    mid: str | None,
    text: str,
    metadata: Mapping[str, Any],
    *,
    time_key: str,
    skip: tuple[str, ...] = (),
) -> MemoryRecord:
    """The record of a document with this id, text and (foreign) metadata.

    ``created_at`` is ``metadata[time_key]`` (``None`` when absent) and ``kind`` the ``kind``
    metadata value when it is a string. The stored metadata is what
    :func:`~norax_core.validation.storable_metadata` keeps, without ``time_key`` and the
    ``skip`` keys (an adapter passes the keys its searches add, so a retrieved document
    re-ingests as the memory it came from).
    """
    kind = metadata.get("kind")
    return MemoryRecord(
        mid,
        text,
        metadata.get(time_key),
        kind if isinstance(kind, str) else None,
        check.storable_metadata(metadata, skip=(time_key, *skip)),
    )


def write_records(
    memory: NoraxMemory,
    records: Sequence[MemoryRecord],
    *,
    namespace: str | None = None,
    kind: str | None = None,
    upsert: bool = False,
) -> list[str]:
    """Add (or upsert) ``records`` as one batch; returns their ids in order.

    ``kind`` applies to all of them; ``None`` takes each record's own kind, else
    ``"episodic"``. A record without an id gets a new one. Validation is the memory's: a bad
    record writes nothing.
    """
    if not records:
        return []
    write = memory.upsert if upsert else memory.add
    return write(
        [r.text for r in records],
        ids=[_new_id() if r.id is None else r.id for r in records],
        kind=[kind or r.kind or "episodic" for r in records],
        created_at=[r.created_at for r in records],
        namespace=namespace,
        metadata=[r.metadata for r in records],
    )


def _new_id() -> str:
    return uuid.uuid4().hex
