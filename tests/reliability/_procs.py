"""Norax processes over one ``chroma run`` server, driven by JSON commands (shared scaffolding).

:class:`Proc` starts a real OS process that opens a collection of the server through
``chromadb.HttpClient`` with the reliability tests' store (:func:`_support.open_store`: hashed
embedder, rules extractor) and answers one command a line on stdin. :func:`serving` yields a
:class:`Serving` on a fresh collection and removes it after.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CHILD = textwrap.dedent(
    """
    import json, sys
    from urllib.parse import urlparse
    sys.path.insert(0, sys.argv[4])
    import chromadb
    from _support import open_store
    from norax_core import NoraxConfig

    u = urlparse(sys.argv[1])
    mem = open_store(client=chromadb.HttpClient(host=u.hostname, port=u.port),
                     collection=sys.argv[2], sync_interval=float(sys.argv[3]),
                     config=NoraxConfig(index_cache_mb=float(sys.argv[5])))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op, args = cmd.pop("op"), cmd
        try:
            if op == "add":
                out = mem.add(args["text"], ids=args["id"], namespace=args["ns"],
                              created_at=args.get("at"))
            elif op == "upsert":
                out = mem.upsert(args["text"], ids=args["id"], namespace=args["ns"],
                                 created_at=args.get("at"))
            elif op == "delete":
                out = mem.delete(args["id"], namespace=args.get("ns"))
            elif op == "count":
                out = mem.count(args["ns"])
            elif op == "search":
                out = [h.id for h in mem.search(args["text"], k=5, namespace=args["ns"])]
            elif op == "indexed":  # what the derived indexes hold for a namespace
                mem.count(args["ns"])
                out = sorted(mem.store.indexes.temporal.ids(args["ns"]))
            elif op == "links":  # the namespace's supersession links as this process has them
                mem.count(args["ns"])
                out = {m: list(o) for m, o in mem.store.indexes.supersede.links(args["ns"]).items()}
            elif op == "check":
                out = mem.check().problems()
            else:
                break
            reply = {"ok": out}
        except Exception as exc:  # the error's type is what the test asserts
            reply = {"error": type(exc).__name__, "message": str(exc)}
        print(json.dumps(reply), flush=True)
    mem.close()
    """
)


class Proc:
    """One Norax process over the server, driven by commands (see :data:`CHILD`)."""

    def __init__(self, url: str, collection: str, interval: float, cache_mb: float = 64.0) -> None:
        here = str(Path(__file__).parent)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, url, collection, str(interval), here, str(cache_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._read()["ready"]

    def _read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"child exited with {self.proc.wait(timeout=30)}")
        return json.loads(line)  # type: ignore[no-any-return]

    def ask(self, op: str, **args: Any) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self._read()

    def ok(self, op: str, **args: Any) -> Any:
        reply = self.ask(op, **args)
        assert "error" not in reply, reply
        return reply["ok"]

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(RuntimeError, BrokenPipeError, ValueError):
                self.ask("quit")
            self.proc.wait(timeout=60)


OpenProc = Callable[..., Proc]
Records = Callable[[], dict[str, tuple[str, str]]]


class Serving:
    """A fresh collection of the server: processes on it, and what Chroma itself holds."""

    def __init__(self, chroma_url: str, prefix: str) -> None:
        from urllib.parse import urlparse

        import chromadb

        self.url = chroma_url
        self.collection = f"{prefix}-{uuid.uuid4().hex[:10]}"
        u = urlparse(chroma_url)
        self.client = chromadb.HttpClient(host=u.hostname, port=u.port)
        self.procs: list[Proc] = []

    def open(self, interval: float, cache_mb: float = 64.0) -> Proc:
        """Start a process on the collection (``interval``: its sync interval)."""
        self.procs.append(Proc(self.url, self.collection, interval, cache_mb))
        return self.procs[-1]

    def records(self) -> dict[str, tuple[str, str]]:
        """``id -> (namespace, text)`` as the collection holds them."""
        got = self.client.get_collection(self.collection).get(include=["documents", "metadatas"])
        return {
            m: (meta["norax_namespace"], doc)
            for m, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        }

    def close(self) -> None:
        for p in self.procs:
            p.close()
        with contextlib.suppress(Exception):
            self.client.delete_collection(self.collection)


@contextlib.contextmanager
def serving(chroma_url: str, prefix: str) -> Iterator[Serving]:
    """A :class:`Serving` on a fresh collection, its processes stopped and it removed after."""
    srv = Serving(chroma_url, prefix)
    try:
        yield srv
    finally:
        srv.close()
