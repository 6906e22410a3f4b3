"""Per-intent weights against global weights, held out: grouped leave-conversations-out CV.

LoCoMo dev and BEAM 100K are pooled once (as ``norax fit`` pools them); their conversations
are dealt round-robin (per dataset, in name order) into ``--folds`` folds. For each fold, the
global weights and the per-intent overrides are refitted on the other folds
(:func:`norax_core.bench.fit.fit_pools` with ``per_intent=True``, as ``norax fit`` calls it)
and the held-out conversations are ranked twice: with the fold's per-intent weights, and with
its global weights alone. The report gives recall@10 per dataset, category and intent, and
each held-out conversation's gain (the noise of the comparison). ``--folds 0`` is leave one
conversation out (17 fits: too slow for a loaded 2-core machine; 4 folds took 45 minutes per
fold there, folds run as separate processes with ``--only``).

Run from the repository root (the data path is an argument; nothing is copied)::

    python benchmarks/intent_cv.py --data ../shared/data --folds 4 --restarts 0 \
        --min-intent-questions 20 --json benchmarks/results/intent_cv.json
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from norax_core.bench.data import load_beam, load_locomo
from norax_core.bench.fit import B_GRID, K1_GRID, fit_pools
from norax_core.bench.fitcmd import _balance
from norax_core.bench.harness import bm25_needed, default_methods, pool_datasets
from norax_core.bench.intentfit import recall_by_intent
from norax_core.bench.pools import Pool


def pool_dev(data: Path) -> tuple[list[Pool], list[str]]:
    """LoCoMo dev and BEAM 100K pools, as ``norax fit`` builds them."""
    locomo = load_locomo(data / "locomo" / "locomo10_dev.json")
    datasets = (locomo, load_beam(data / "beam" / "100K"))
    grid = {(k1, b) for k1 in K1_GRID for b in B_GRID}
    return pool_datasets(datasets, lambda got: grid | bm25_needed(got, default_methods()))


def summary(
    test: np.ndarray, plain: np.ndarray, ds: np.ndarray, pools: list[Pool]
) -> dict[str, Any]:
    """Per dataset: recall@10 per-intent vs global, per category and intent, per conversation."""
    cats = np.array([p.request.category for p in pools])
    intents = np.array([p.plan.intent.value for p in pools])
    conv = np.array([p.request.namespace for p in pools])
    out: dict[str, Any] = {}
    for d in dict.fromkeys(ds.tolist()):
        m = ~np.isnan(test) & (ds == d)
        if not m.any():
            continue

        def split(labels: np.ndarray, m: np.ndarray = m) -> dict[str, dict[str, float]]:
            return {
                c: {
                    "n": int((m & (labels == c)).sum()),
                    "per_intent": round(float(test[m & (labels == c)].mean()), 4),
                    "global": round(float(plain[m & (labels == c)].mean()), 4),
                }
                for c in sorted(set(labels[m].tolist()))
            }

        gains = [
            float(test[m & (conv == c)].mean() - plain[m & (conv == c)].mean())
            for c in sorted(set(conv[m].tolist()))
        ]
        out[d] = {
            "n": int(m.sum()),
            "per_intent": round(float(test[m].mean()), 4),
            "global": round(float(plain[m].mean()), 4),
            "gain_se": round(float(np.std(gains, ddof=1) / np.sqrt(len(gains))), 4)
            if len(gains) > 1
            else None,
            "per_conversation_gain": [round(g, 4) for g in gains],
            "by_category": split(cats),
            "by_intent": split(intents),
        }
    return out


def main() -> None:
    """Pool, fit per fold, write the report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="folder holding locomo/ and beam/")
    ap.add_argument("--folds", type=int, default=4, help="folds (0: one per conversation)")
    ap.add_argument("--only", help="comma-separated fold numbers to run (default: all)")
    ap.add_argument("--restarts", type=int, default=0)
    ap.add_argument("--min-intent-questions", type=int, default=20)
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    pools, names = pool_dev(args.data)
    ds = np.array(names)
    sw = _balance(pools, names)
    conv = [p.request.namespace or "" for p in pools]
    fold_of: dict[str, str] = {}
    for d in dict.fromkeys(names):
        for i, c in enumerate(sorted({c for c, x in zip(conv, names, strict=True) if x == d})):
            fold_of[c] = str(i % args.folds) if args.folds > 0 else c
    only = None if args.only is None else set(args.only.split(","))
    test, plain = np.full(len(pools), np.nan), np.full(len(pools), np.nan)
    report: dict[str, Any] = {"folds": [], "args": {k: str(v) for k, v in vars(args).items()}}
    for f in dict.fromkeys(fold_of[c] for c in conv):
        if only is not None and f not in only:
            continue
        held = [i for i, c in enumerate(conv) if fold_of[c] == f]
        train = [i for i, c in enumerate(conv) if fold_of[c] != f]
        t0 = time.perf_counter()
        fit = fit_pools(
            [pools[i] for i in train],
            k=10,
            sample_weight=sw[train],
            restarts=args.restarts,
            per_intent=True,
            min_intent_questions=args.min_intent_questions,
        )
        part = [pools[i] for i in held]
        test[held] = recall_by_intent(part, fit.weights, 10)
        plain[held] = recall_by_intent(part, replace(fit.weights, intents={}), 10)
        report["folds"].append(
            {
                "fold": f,
                "held_out": sorted({conv[i] for i in held}),
                "seconds": round(time.perf_counter() - t0),
                "train": fit.score,
                "train_global": fit.global_score,
                "test": float(test[held].mean()),
                "test_global": float(plain[held].mean()),
                "intents": fit.intents,
            }
        )
        report["datasets"] = summary(test, plain, ds, pools)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
        print(f"fold {f}: test {test[held].mean():.4f}, global weights {plain[held].mean():.4f}")


if __name__ == "__main__":
    main()
