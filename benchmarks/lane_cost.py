"""What the lane and kind inference cost: per search, and per ``add()`` (issue 21 targets).

    python benchmarks/lane_cost.py --data ../shared/data --json benchmarks/results/lane_cost.json

* **Search**: BEAM 100K chats (``--chats``, each its own namespace, messages added as a new
  user would: text, role and times, no kinds, so the kinds are inferred; vectors from the
  benchmark's embedding cache, the same MiniLM vectors), every probing
  question searched with ``k = 10`` under the shipped ``default`` and under the same weights
  with ``lane_slots`` 0, alternating per question in the same run, for ``--rounds`` rounds.
  The query vector is computed once and passed as ``query_embedding`` (both arms skip the
  embedder, whose time would drown the difference). Reports p50 / p90 per arm and the p50 of
  the paired differences with a bootstrap 95 % interval (target: the lane adds < 1 ms p50),
  in wall-clock time and in this process's CPU time (less moved by other processes' load).
* **add()**: ``--batches`` batches of ``--batch`` messages of the same chats written into a
  second store (fresh namespaces),
  alternating between the shipped path and the same with the kind rule stubbed out
  (``norax_core.batch.inferred_kinds`` replaced by a function that returns ``fact`` for every
  memory), with the real ONNX embedder. Reports p50 per batch and the ratio (target <= 1.1).
  Also the rule alone: microseconds per message of :func:`norax_core.kinds.infer_kind`.
  ``--cached-add`` reads the vectors from the benchmark cache instead (no embedding: the
  rule's share of the rest of an ``add()``, a stricter ratio).

Figures are wall-clock on a shared machine: the JSON keeps the load average at start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

import norax_core.batch
from norax_core import NoraxMemory
from norax_core.bench.cache import CachedEmbedder, TextCache
from norax_core.bench.data import Conversation, load_beam
from norax_core.embedders import default_embedder
from norax_core.entities import load_extractor
from norax_core.kinds import infer_kind
from norax_core.presets import get_preset

REPO = Path(__file__).resolve().parents[1]


def _ms(xs: list[float]) -> dict[str, float]:
    qs = np.percentile(np.array(xs) * 1000, [50, 90])
    return {"p50_ms": round(float(qs[0]), 3), "p90_ms": round(float(qs[1]), 3), "n": len(xs)}


def _add(mem: NoraxMemory, conv: Conversation, ns: str, rows: range | None = None) -> None:
    ms = conv.memories if rows is None else [conv.memories[i] for i in rows]
    mem.add(
        [m.text for m in ms],
        ids=[f"{ns}:{m.id}" for m in ms],
        created_at=[datetime.fromtimestamp(m.created_at, tz=timezone.utc) for m in ms],
        namespace=ns,
        metadata=[{"role": m.role} for m in ms],
    )


def search_cost(mem: NoraxMemory, convs: list[Conversation], rounds: int) -> dict[str, Any]:
    """p50/p90 of a k=10 search with the lane (shipped) and without it, paired per question."""
    default = get_preset("default")
    arms = {
        "lane": default,
        "no_lane": default.with_params(lane_slots=0),
    }
    for c in convs:
        _add(mem, c, c.name)
    questions = [(c.name, q.text, c.now) for c in convs for q in c.questions]
    vectors = mem.embedder.embed([t for _, t, _ in questions])
    times: dict[str, list[float]] = {a: [] for a in arms}
    cpu: dict[str, list[float]] = {a: [] for a in arms}
    acted = 0
    for r in range(rounds):
        for i, (ns, text, now) in enumerate(questions):
            when = datetime.fromtimestamp(now, tz=timezone.utc)
            order = list(arms) if (i + r) % 2 == 0 else list(arms)[::-1]  # alternate who goes first
            for a in order:
                t0, c0 = time.perf_counter(), time.process_time()
                got = mem.search(
                    text, k=10, namespace=ns, now=when, weights=arms[a], query_embedding=vectors[i]
                )
                times[a].append(time.perf_counter() - t0)
                cpu[a].append(time.process_time() - c0)
                if a == "lane" and r == 0:
                    acted += any(x.explanation.lane > 0 for x in got)
    diffs = [x - y for x, y in zip(times["lane"], times["no_lane"], strict=True)]
    cpu_diffs = [x - y for x, y in zip(cpu["lane"], cpu["no_lane"], strict=True)]
    return {
        "searches_per_arm": len(times["lane"]),
        "questions": len(questions),
        "memories": sum(len(c.memories) for c in convs),
        "lane_acted_on_questions": acted,
        **{a: _ms(v) for a, v in times.items()},
        "paired_difference_p50_ms": round(statistics.median(diffs) * 1000, 3),
        "paired_difference_p50_ci95_ms": _median_ci(diffs),
        "cpu": {a: _ms(v) for a, v in cpu.items()},
        "cpu_paired_difference_p50_ms": round(statistics.median(cpu_diffs) * 1000, 3),
        "cpu_paired_difference_p50_ci95_ms": _median_ci(cpu_diffs),
    }


def _median_ci(xs: list[float], draws: int = 2000) -> list[float]:
    """A 95 % bootstrap interval of the median of ``xs``, in ms (seeded)."""
    rng = np.random.default_rng(0)
    a = np.array(xs) * 1000
    meds = np.median(rng.choice(a, size=(draws, a.size), replace=True), axis=1)
    return [round(float(x), 3) for x in np.percentile(meds, [2.5, 97.5])]


@contextmanager
def _rule_stubbed() -> Iterator[None]:
    real = norax_core.batch.inferred_kinds
    norax_core.batch.inferred_kinds = lambda texts, kinds, metas: ["fact"] * len(texts)
    try:
        yield
    finally:
        norax_core.batch.inferred_kinds = real


def add_cost(
    mem: NoraxMemory, convs: list[Conversation], batch: int, batches: int
) -> dict[str, Any]:
    """p50 of one ``add()`` of ``batch`` messages, with the kind rule and with it stubbed."""
    chunks = [(c, range(s, min(s + batch, len(c.memories)))) for c in convs
              for s in range(0, len(c.memories) - batch + 1, batch)][:batches]  # fmt: skip
    times: dict[str, list[float]] = {"with_inference": [], "without_inference": []}
    for i, (c, rows) in enumerate(chunks):
        arms: list[tuple[str, Callable[[], Any]]] = [
            ("with_inference", contextmanager(lambda: iter([None]))),
            ("without_inference", _rule_stubbed),
        ]
        for name, ctx in arms if i % 2 == 0 else arms[::-1]:
            with ctx():
                t0 = time.perf_counter()
                _add(mem, c, f"add-{name}-{i}", rows)
                times[name].append(time.perf_counter() - t0)
    w, wo = _ms(times["with_inference"]), _ms(times["without_inference"])
    texts = [(m.text, m.role) for c in convs for m in c.memories]
    t0 = time.perf_counter()
    for text, role in texts:
        infer_kind(text, role)
    per_message = (time.perf_counter() - t0) / len(texts)
    return {
        "batch": batch,
        "with_inference": w,
        "without_inference": wo,
        "ratio_p50": round(w["p50_ms"] / wo["p50_ms"], 3),
        "infer_kind_us_per_message": round(per_message * 1e6, 1),
        "messages_timed": len(texts),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--chats", type=int, default=3, help="first N BEAM 100K chats")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--batches", type=int, default=12, help="add() batches per arm")
    ap.add_argument(
        "--cached-add", action="store_true", help="add() with cached vectors (no embedding)"
    )
    ap.add_argument("--parts", default="search,add", help="search, add or both")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    convs = load_beam(args.data / "beam" / "100K").conversations[: args.chats]
    load_start = os.getloadavg()
    extractor = load_extractor()
    with tempfile.TemporaryDirectory(prefix="norax-lane-cost-") as tmp:
        # search: vectors read from the benchmark cache (the same MiniLM vectors), so the
        # store fills fast; the searches pass query_embedding and never embed
        cached = CachedEmbedder(default_embedder(), TextCache())
        mem = NoraxMemory(Path(tmp) / "search", embedder=cached, extractor=extractor)
        try:
            search = search_cost(mem, convs, args.rounds) if "search" in args.parts else {}
        finally:
            mem.close()
        # add(): the real embedder, as a user's add() runs (or, stricter, cached vectors: the
        # rule's share of an add() without the embedding)
        emb = cached if args.cached_add else default_embedder()
        add: dict[str, Any] = {}
        if "add" in args.parts:
            mem = NoraxMemory(Path(tmp) / "add", embedder=emb, extractor=extractor)
            try:
                add = add_cost(mem, convs, args.batch, args.batches)
            finally:
                mem.close()
    out = {
        "command": "python benchmarks/lane_cost.py " + " ".join(sys.argv[1:]),
        "search": search,
        "add": {**add, "embedder": "cached vectors" if args.cached_add else "onnx MiniLM"},
        "machine": f"{os.cpu_count()} cores",
        "load_avg_at_start": [round(x, 1) for x in load_start],
        "load_avg_at_end": [round(x, 1) for x in os.getloadavg()],
    }
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
