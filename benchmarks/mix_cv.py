"""The adaptive mix against the fixed one, held out: leave-one-conversation-out CV.

LoCoMo dev and BEAM 100K are pooled once; every query is ranked (by the one ranking
function, through :func:`~norax_core.bench.pools.plan_groups`) under the shipped ``default``
with each ``(mix_strength, mix_center, mix_peak_strength, mix_peak_center)`` of a small
grid added to its ``params``
(:mod:`norax_core.stages.mix`; strength 0 is the fixed mix). For each held-out conversation
the grid point with the best mean recall@10 on the others (each dataset weighted equally) is
chosen and the held-out conversation is scored with it. The point chosen on all of the dev
data is then evaluated, untouched, on BEAM 500K. The report gives recall@10 per dataset and
category, adaptive vs fixed, plus the per-query oracle over the grid (the mix's ceiling).

Run from the repository root (the data path is an argument; nothing is copied)::

    python benchmarks/mix_cv.py --data ../shared/data --json /tmp/mix_cv.json
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

from norax_core.bench.data import load_beam, load_locomo
from norax_core.bench.harness import pool_datasets
from norax_core.bench.metrics import recall_at_k
from norax_core.bench.pools import Pool, plan_groups
from norax_core.presets import get_preset
from norax_core.ranking import rank
from norax_core.weights import Weights

STRENGTHS = (1.0, 2.0, 4.0)
CENTERS = (0.75, 0.85)
PEAK_STRENGTHS = (0.0, 2.0, 4.0)
PEAK_CENTERS = (0.25, 0.35)
K = 10


def pool(kind: str, path: Path) -> list[Pool]:
    """One dataset's pools, as ``norax bench`` builds them."""
    return pool_datasets([load_locomo(path) if kind == "locomo" else load_beam(path)])[0]


NAMES = ("mix_strength", "mix_center", "mix_peak_strength", "mix_peak_center")


def with_mix(base: Weights, *values: float) -> Weights:
    """``base`` with the adaptive mix's parameters (:data:`NAMES`) in its global ``params``."""
    params = {**base.params, **dict(zip(NAMES, values, strict=True))}
    return Weights(**{**vars(base), "params": params})


def recalls(pools: list[Pool], weights: Weights) -> np.ndarray:
    """Recall@K of every pooled question under ``weights``."""
    out = np.zeros(len(pools))
    for idx, table, plan in plan_groups(pools, weights):
        got = rank(table, plan, K)
        for j, i in enumerate(idx):
            out[i] = recall_at_k(got.ids(j), pools[i].request.relevant, K)
    return out


def by_category(pools: list[Pool], adaptive: np.ndarray, fixed: np.ndarray) -> dict[str, Any]:
    """Mean recall@K per category, adaptive vs fixed."""
    cats = np.array([p.request.category for p in pools])
    return {
        c: {
            "n": int((cats == c).sum()),
            "adaptive": round(float(adaptive[cats == c].mean()), 4),
            "fixed": round(float(fixed[cats == c].mean()), 4),
        }
        for c in sorted(set(cats.tolist()))
    }


def main() -> None:
    """Pool, rank the grid, cross-validate, write the report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="folder holding locomo/ and beam/")
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    base = get_preset("default")
    grid = [(0.0,) * 4, *itertools.product(STRENGTHS, CENTERS, PEAK_STRENGTHS, PEAK_CENTERS)]
    grid = list(dict.fromkeys(g if g[2] else (*g[:3], 0.0) for g in grid))  # beta 0: c_p moot
    sets = {
        "locomo": pool("locomo", args.data / "locomo" / "locomo10_dev.json"),
        "beam_100k": pool("beam", args.data / "beam" / "100K"),
        "beam_500k": pool("beam", args.data / "beam" / "500K"),
    }
    # (grid point, question) recall per dataset
    table = {n: np.array([recalls(p, with_mix(base, *g)) for g in grid]) for n, p in sets.items()}
    dev = ("locomo", "beam_100k")
    conv = {n: np.array([p.request.namespace for p in sets[n]]) for n in dev}

    def best(keep: dict[str, np.ndarray]) -> int:
        means = np.mean([table[n][:, keep[n]].mean(axis=1) for n in dev], axis=0)
        return int(np.argmax(means))  # ties: the first, strength 0 (the fixed mix)

    held = {n: np.zeros(len(sets[n])) for n in dev}
    chosen: dict[str, list[float]] = {}
    for n in dev:
        for c in sorted(set(conv[n].tolist())):
            keep = {m: np.ones(len(sets[m]), dtype=bool) for m in dev}
            keep[n] = conv[n] != c
            g = best(keep)
            chosen[c] = list(grid[g])
            held[n][conv[n] == c] = table[n][g, conv[n] == c]
    full = best({m: np.ones(len(sets[m]), dtype=bool) for m in dev})
    report: dict[str, Any] = {
        "grid": dict(zip(NAMES, (STRENGTHS, CENTERS, PEAK_STRENGTHS, PEAK_CENTERS), strict=True)),
        "chosen_on_all_dev": dict(zip(NAMES, grid[full], strict=True)),
        "chosen_per_held_out_conversation": chosen,
        "datasets": {},
    }
    for n, pools in sets.items():
        fixed = table[n][0]
        adaptive = held[n] if n in held else table[n][full]
        report["datasets"][n] = {
            "n": len(pools),
            "measure": "leave-one-conversation-out" if n in held else "untouched (never fitted)",
            "adaptive": round(float(adaptive.mean()), 4),
            "fixed": round(float(fixed.mean()), 4),
            "oracle_over_grid": round(float(table[n].max(axis=0).mean()), 4),
            "by_category": by_category(pools, adaptive, fixed),
            "train_grid_mean": {
                "/".join(f"{v:g}" for v in g): round(float(table[n][i].mean()), 4)
                for i, g in enumerate(grid)
            },
        }
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    for n, d in report["datasets"].items():
        print(
            n,
            d["measure"],
            "adaptive",
            d["adaptive"],
            "fixed",
            d["fixed"],
            "oracle",
            d["oracle_over_grid"],
        )
    print("chosen on all dev:", report["chosen_on_all_dev"])


if __name__ == "__main__":
    main()
