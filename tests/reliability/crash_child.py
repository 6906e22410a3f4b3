"""The writer that test_crash.py kills: a fork server, so each round skips the imports.

``python crash_child.py STORE [--real] [--context]`` imports everything once (no store, no Chroma
client, no model session yet: nothing that must not cross a fork), prints ``ready``, then
for each ``go ROUND SEED`` line on stdin forks a writer and prints ``pid ROUND PID``; once
the writer is gone it prints ``exit ROUND STATUS``.

The writer opens the store, prints ``open``, and writes until it is killed: adds of one to
three memories, upserts and deletes of memories it knows, chosen by ``SEED``. Before each
call it prints ``B <json>`` and after the call returns ``A <json>`` (one write each), so the parent
knows every acknowledged write and the one that may have been in flight.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from _support import open_store  # noqa: E402

from norax_core import NoraxConfig  # noqa: E402
from norax_core.entities import RuleBasedExtractor  # noqa: E402

NAMESPACES = ("alpha", "beta", "gamma")
WORDS = [
    "wallet",
    "deploy",
    "invoice",
    "review",
    "migration",
    "backlog",
    "sprint",
    "refund",
    "cache",
    "schema",
    "payments",
    "roadmap",
    "incident",
    "oncall",
    "budget",
    "vendor",
]


def text_for(tag: str, rng: random.Random) -> str:
    """A memory with a unique BM25 token (zq<tag>x) and a unique entity (Proj<tag>Alpha).

    One in three is a standing instruction (its inferred kind must survive the kills too).
    """
    lead = "Always mention" if rng.random() < 1 / 3 else "Note"
    return f"{lead} zq{tag}x about Proj{tag}Alpha: {rng.choice(WORDS)} and {rng.choice(WORDS)}."


def out(line: str) -> None:
    """One line in one write(2): a kill never leaves half a line for the parent to read."""
    os.write(1, (line + "\n").encode())


def say(kind: str, payload: object) -> None:
    out(f"{kind} {json.dumps(payload)}")


def writer(store: str, rnd: int, seed: int, real: bool, context: bool) -> None:
    rng = random.Random(seed)
    kwargs: dict = {"config": NoraxConfig(embed_context=1)} if context else {}
    if real:
        from norax_core.embedders import default_embedder
        from norax_core.entities import load_extractor

        kwargs.update(embedder=default_embedder(), extractor=load_extractor())
        kwargs["embedder"].embed(["warm up the session"])  # first runs are slow: not
        kwargs["extractor"].extract(["Warm up the pipeline."])  # what the kills should hit
    mem = open_store(store, **kwargs)
    with mem.store.lock, mem.store.indexes.load_all():  # namespaces load lazily
        known = dict(mem.store.indexes.namespace_of)
    out("open")
    n = 0
    for _ in range(100_000):
        roll = rng.random()
        if roll < 0.7 or len(known) < 3:
            size = rng.randint(1, 3)
            tags = [f"{rnd}n{n + i}" for i in range(size)]
            n += size
            ids = [f"r{t}" for t in tags]
            spaces = [rng.choice(NAMESPACES) for _ in tags]
            op = {"op": "add", "ids": ids, "ns": spaces, "texts": [text_for(t, rng) for t in tags]}
            # with context embeddings, some adds land between stored memories
            back = rng.uniform(0.0, 1.0) if context and rng.random() < 0.3 else 0.0
            say("B", op)
            mem.add(op["texts"], ids=ids, namespace=spaces, created_at=time.time() - back)
            known.update(zip(ids, spaces, strict=True))
        elif roll < 0.85:
            mid = rng.choice(sorted(known))
            tag = f"{rnd}u{n}"
            n += 1
            op = {"op": "upsert", "ids": [mid], "ns": [known[mid]], "texts": [text_for(tag, rng)]}
            say("B", op)
            mem.upsert(op["texts"], ids=[mid], namespace=known[mid])
        else:
            mid = rng.choice(sorted(known))
            op = {"op": "delete", "ids": [mid]}
            say("B", op)
            mem.delete(mid)
            del known[mid]
        say("A", op)
    mem.close()


def main() -> None:
    store, real, context = sys.argv[1], "--real" in sys.argv, "--context" in sys.argv
    RuleBasedExtractor().extract(["Warm up: this imports spaCy's stop words once."])
    out("ready")
    for line in sys.stdin:
        cmd, rnd, seed = line.split()
        if cmd != "go":
            continue
        pid = os.fork()
        if pid == 0:  # the writer
            code = 0
            try:
                writer(store, int(rnd), int(seed), real, context)
            except BaseException as exc:  # reported, so a bug is not taken for a kill
                out(f"error {type(exc).__name__}: {exc}")
                code = 3
            os._exit(code)
        out(f"pid {rnd} {pid}")
        _, status = os.waitpid(pid, 0)
        out(f"exit {rnd} {status}")


if __name__ == "__main__":
    main()
