"""What the bridge step costs per query, on the largest namespace of each dev dataset.

    python benchmarks/bridges.py --data ../shared/data [--json OUT.json]

For the largest LoCoMo conversation and the largest BEAM chat (100K, and 500K with
``--beam 100K,500K``), every question is searched twice in alternation, with the ``default``
preset and with the same preset plus the bridge step (``bridge_weight`` 0.1, 5 seeds, 10
candidates), so the machine's load hits both alike; the figures are p50 / p95 milliseconds and
the ratio of the two p50s. The step's own math (:func:`~norax_core.stages.bridges.
bridge_scores` on the namespace's graph, from the first pass's best five) is timed apart,
with the first build of the namespace's memory x entity view (cached until the graph changes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from norax_core.bench.data import BenchDataset, load_beam, load_locomo
from norax_core.bench.harness import ingest, open_store
from norax_core.presets import get_preset
from norax_core.retrieval import bridge_source
from norax_core.stages.bridges import MemoryEntities, bridge_scores

DEFAULT = get_preset("default")
BRIDGES = replace(
    DEFAULT,
    params={**DEFAULT.params, "bridge_weight": 0.1, "bridge_seeds": 5, "bridge_candidates": 10},
    name="default+bridges",
)


def _ms(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "p50": round(1000 * statistics.median(xs), 3),
        "p95": round(1000 * xs[int(0.95 * (len(xs) - 1))], 3),
    }


def measure(label: str, data: BenchDataset) -> dict[str, object]:
    conv = max(data.conversations, key=lambda c: len(c.memories))
    one = BenchDataset(data.name, [conv])
    with open_store() as mem:
        ingest(mem, one, progress=False)
        ns, now = conv.name, conv.now
        questions = [q.text for q in conv.questions]
        off: list[float] = []
        on: list[float] = []
        mem.search(questions[0], namespace=ns, now=now, weights=BRIDGES)  # warm caches
        for i, text in enumerate(questions):
            order = [(DEFAULT, off), (BRIDGES, on)]
            for w, out in order if i % 2 == 0 else order[::-1]:
                t = time.perf_counter()
                mem.search(text, namespace=ns, now=now, weights=w)
                out.append(time.perf_counter() - t)
        walks: list[float] = []
        with mem.store.lock:
            space = mem.store.indexes.graph.space(ns)
            assert space is not None
            t = time.perf_counter()
            graph = MemoryEntities.of(space)
            build = time.perf_counter() - t
            for text in questions:
                cands = mem.candidates(text, namespace=ns, now=now, weights=BRIDGES)
                src = bridge_source(mem.store.indexes, cands.query)
                assert src is not None
                seeds = src.graph.rows_for(cands.ids[:5])
                t = time.perf_counter()
                bridge_scores(src.graph, seeds, np.ones(len(seeds)), src.query, src.allowed)
                walks.append(time.perf_counter() - t)
    p_off, p_on = _ms(off), _ms(on)
    return {
        "dataset": label,
        "namespace": ns,
        "memories": len(conv.memories),
        "entities": len(space.post),
        "pairs": int(len(graph.rows)),
        "questions": len(questions),
        "search_ms": {"default": p_off, "default+bridges": p_on},
        "p50_ratio": round(p_on["p50"] / p_off["p50"], 3),
        "bridge_scores_ms": _ms(walks),
        "view_build_ms": round(1000 * build, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="folder with locomo/ and beam/")
    ap.add_argument("--beam", default="100K", help="BEAM sizes, comma-separated")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    runs = [measure("locomo", load_locomo(args.data / "locomo" / "locomo10_dev.json"))]
    for size in args.beam.split(","):
        runs.append(measure(f"beam_{size}", load_beam(args.data / "beam" / size)))
    for r in runs:
        s = r["search_ms"]
        print(
            f"{r['dataset']:<10} {r['namespace']:<16} {r['memories']:>5} memories "
            f"{r['pairs']:>6} pairs: search p50 {s['default']['p50']:.1f} ms -> "  # type: ignore[index]
            f"{s['default+bridges']['p50']:.1f} ms (x{r['p50_ratio']}), bridge_scores p50 "  # type: ignore[index]
            f"{r['bridge_scores_ms']['p50']:.2f} ms p95 {r['bridge_scores_ms']['p95']:.2f} ms, "  # type: ignore[index]
            f"view build {r['view_build_ms']:.1f} ms"
        )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2) + "\n")


if __name__ == "__main__":
    main()
