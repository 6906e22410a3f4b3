"""A change-log pull that fails to apply is retried by the next pull (norax_core.sync).

Two stores share one real Chroma client (as two processes share a server). The reader's
first pull reads the writer's entry but applying it fails; the next pull must apply it, not
leave it for the periodic full reconcile minutes later.
"""

from __future__ import annotations

import time
from typing import Any

import chromadb
import pytest
from _support import open_store

import norax_core.sync
from norax_core import NoraxMemory

INTERVAL = 0.05


@pytest.fixture
def pair(tmp_path):  # type: ignore[no-untyped-def]
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    writer = open_store(client=client, collection="shared", sync_interval=INTERVAL)
    reader = open_store(client=client, collection="shared", sync_interval=INTERVAL)
    yield writer, reader
    writer.close()
    reader.close()


def _settle(mem: NoraxMemory, namespace: str) -> int:
    time.sleep(INTERVAL * 2)  # a pull is due
    return mem.count(namespace)


def test_a_failed_apply_is_retried_by_the_next_pull(pair, monkeypatch):
    writer, reader = pair
    real = norax_core.sync.apply_changes
    calls: list[list[str]] = []

    def fail_once(collection: Any, ids: Any, *args: Any) -> tuple[int, int]:
        if not ids:  # a pull that found nothing (the writer's own, before it writes)
            return real(collection, ids, *args)
        calls.append(list(ids))
        if len(calls) == 1:
            raise ConnectionError("Chroma went away mid-pull")
        return real(collection, ids, *args)

    # The reader has the namespace loaded (a namespace loads lazily, straight from Chroma)
    assert reader.count("team") == 0
    monkeypatch.setattr(norax_core.sync, "apply_changes", fail_once)
    writer.add("The lighthouse keeper retires in May.", ids="m1", namespace="team")
    assert _settle(reader, "team") == 0  # the failed pull: logged, not raised
    assert calls == [["m1"]]
    assert _settle(reader, "team") == 1  # the next pull applies it
    assert calls[-1] == ["m1"]
    assert [r.id for r in reader.search("lighthouse keeper", k=3, namespace="team")] == ["m1"]

    # A delete that fails to apply once is retried the same way.
    calls.clear()
    monkeypatch.setattr(norax_core.sync, "apply_changes", fail_once)
    writer.delete("m1")
    assert _settle(reader, "team") == 1
    assert _settle(reader, "team") == 0
    assert calls == [["m1"], ["m1"]]


def test_applied_entries_are_not_applied_again(pair, monkeypatch):
    writer, reader = pair
    real = norax_core.sync.apply_changes
    calls: list[list[str]] = []

    def counting(collection: Any, ids: Any, *args: Any) -> tuple[int, int]:
        calls.append(list(ids))
        return real(collection, ids, *args)

    monkeypatch.setattr(norax_core.sync, "apply_changes", counting)
    writer.add(["one", "two"], ids=["a", "b"], namespace="team")
    assert _settle(reader, "team") == 2
    assert _settle(reader, "team") == 2
    # once applied, the entry is seen: later pulls (within the lookback) skip it
    assert [c for c in calls if c] == [["a", "b"]]
