"""Several Norax processes sharing one Chroma server see each other's writes (norax_core.sync).

Two real subprocesses open the same collection through ``chromadb.HttpClient``; each answers
commands on stdin. One writes, the other polls its *derived* indexes (``count`` and a
recency-only search, whose candidates never come from Chroma) until the write shows, and the
delay is checked against the documented bound: the sync interval plus the pull's own time.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.server]

INTERVAL = 0.5
SLACK = 1.5  # the pull itself, process scheduling on a busy 2-core machine

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from urllib.parse import urlparse
    import chromadb
    from norax_core import NoraxMemory

    url, collection, interval = sys.argv[1], sys.argv[2], float(sys.argv[3])
    u = urlparse(url)
    mem = NoraxMemory(
        client=chromadb.HttpClient(host=u.hostname, port=u.port),
        collection=collection,
        extractor="rules",
        sync_interval=interval,
    )

    def visible(mid, text):
        hits = mem.search(text, k=5, namespace="team", weights={"temporal": 1.0})
        return mid in {h.id for h in hits}

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "add":
            mem.add(cmd["text"], ids=cmd["id"], namespace="team")
            out = {"done": time.time()}
        elif op == "delete":
            out = {"deleted": mem.delete(cmd["id"]), "done": time.time()}
        elif op == "wait":  # poll until the id's visibility is as wanted
            # Both the search and the indexes (count): a search stops showing a memory another
            # process deleted as soon as Chroma has dropped it, before this process's indexes
            # pull the change (CI once caught the count at 1 there).
            deadline = time.time() + cmd["timeout"]
            while True:
                started = time.time()
                seen = visible(cmd["id"], cmd["text"])
                count = mem.count("team")
                if seen == (count > 0) == cmd["present"] or time.time() > deadline:
                    break
                time.sleep(0.02)
            out = {"seen": seen, "count": count, "at": started}
        elif op == "count":
            out = {"count": mem.count("team")}
        else:
            break
        print(json.dumps(out), flush=True)
    mem.close()
    """
)


class Child:
    def __init__(self, url: str, collection: str, interval: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, url, collection, str(interval)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        assert self.read()["ready"]

    def read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"child exited with {self.proc.wait(timeout=30)}")
        return json.loads(line)

    def ask(self, **cmd: Any) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps(cmd) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(RuntimeError, BrokenPipeError, ValueError):
                self.ask(op="quit")
            self.proc.wait(timeout=60)


@pytest.fixture
def pair(chroma_url: str):  # type: ignore[no-untyped-def]
    collection = f"mp-{uuid.uuid4().hex[:10]}"
    a = Child(chroma_url, collection, INTERVAL)
    b = Child(chroma_url, collection, INTERVAL)
    yield a, b
    a.close()
    b.close()


def test_two_processes_see_each_others_adds_and_deletes(pair) -> None:  # type: ignore[no-untyped-def]
    a, b = pair
    text = "The quarterly kayak budget was approved by Ottoline"
    base = a.ask(op="count")["count"]
    assert base == b.ask(op="count")["count"] == 0

    added = a.ask(op="add", id="kayak-1", text=text)
    seen = b.ask(op="wait", id="kayak-1", text=text, present=True, timeout=INTERVAL + SLACK + 5)
    assert seen["seen"] and seen["count"] == 1
    assert seen["at"] - added["done"] <= INTERVAL + SLACK

    # And the other way round: b deletes what a wrote; a's indexes drop it.
    deleted = b.ask(op="delete", id="kayak-1")
    assert deleted["deleted"] == 1
    gone = a.ask(op="wait", id="kayak-1", text=text, present=False, timeout=INTERVAL + SLACK + 5)
    assert not gone["seen"] and gone["count"] == 0
    assert gone["at"] - deleted["done"] <= INTERVAL + SLACK

    # b adds, a sees it; several writes in a row all arrive.
    last = {}
    for i in range(3):
        last = b.ask(op="add", id=f"note-{i}", text=f"Reminder {i}: water the ficus in room {i}")
    seen = a.ask(
        op="wait",
        id="note-2",
        text="Reminder 2: water the ficus in room 2",
        present=True,
        timeout=INTERVAL + SLACK + 5,
    )
    assert seen["seen"] and seen["count"] == 3
    assert seen["at"] - last["done"] <= INTERVAL + SLACK


def test_without_sync_only_refresh_catches_up(chroma_url: str) -> None:
    """The control: with sync off, another process's add stays invisible to the indexes."""
    from urllib.parse import urlparse

    import chromadb

    from norax_core import NoraxMemory

    collection = f"mp-{uuid.uuid4().hex[:10]}"
    writer = Child(chroma_url, collection, INTERVAL)
    u = urlparse(chroma_url)
    mem = NoraxMemory(
        client=chromadb.HttpClient(host=u.hostname, port=u.port),
        collection=collection,
        extractor="rules",
        sync_interval=0,
    )
    try:
        # loaded before the write (a namespace that is not loaded is read fresh from Chroma)
        assert mem.count("team") == 0
        writer.ask(op="add", id="x-1", text="A note about the lighthouse keeper")
        time.sleep(INTERVAL * 3)
        assert mem.count("team") == 0
        assert mem.refresh() == (1, 0)
        assert mem.count("team") == 1
    finally:
        writer.close()
        mem.close()


def test_sync_interval_is_validated() -> None:
    from norax_core import NoraxMemory
    from norax_core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="sync_interval"):
        NoraxMemory(sync_interval=-1, extractor="rules")
