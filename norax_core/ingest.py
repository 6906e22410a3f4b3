"""Bulk ingestion from JSONL files, validated whole before anything is written."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from norax_core import validation as check
from norax_core.errors import InvalidInputError

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


def _new_id() -> str:
    return uuid.uuid4().hex
