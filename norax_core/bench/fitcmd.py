"""``norax fit``: learn weights on benchmark data and report cross-validated figures."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from norax_core.bench.data import BenchDataset
from norax_core.bench.fit import B_GRID, K1_GRID, cross_validate, fit_pools, summarize_weights
from norax_core.bench.harness import (
    DEFAULT_KS,
    bm25_needed,
    default_methods,
    documents_for,
    evaluate,
    ingest,
    open_store,
    pool_dataset,
    requests_for,
)
from norax_core.bench.intentfit import MIN_INTENT_QUESTIONS
from norax_core.bench.metrics import mean, mean_by
from norax_core.bench.pools import Pool, add_bm25_variants
from norax_core.config import NoraxConfig

__all__ = ["cv_report", "run_fit"]


def _balance(pools: Sequence[Pool], dataset_of: Sequence[str]) -> np.ndarray:
    """Pool weights giving every dataset the same total weight."""
    counts = {d: dataset_of.count(d) for d in set(dataset_of)}
    return np.array([1.0 / (len(counts) * counts[d]) for d in dataset_of])


def _by_category(recall: dict[int, list[float]], cats: Sequence[str]) -> dict[str, Any]:
    out: dict[str, dict[str, float]] = {}
    for kk, values in recall.items():
        for c, v in mean_by(values, cats).items():
            out.setdefault(c, {})[f"recall@{kk}"] = v
    return out


def cv_report(
    pools: Sequence[Pool],
    dataset_of: Sequence[str],
    *,
    k: int = 10,
    ks: Sequence[int] = DEFAULT_KS,
    restarts: int = 4,
    progress: bool = True,
    per_intent: bool = True,
    min_intent_questions: int = MIN_INTENT_QUESTIONS,
) -> dict[str, Any]:
    """Leave-one-conversation-out CV; held-out figures per dataset, k and category.

    Each conversation's questions are ranked with weights fitted on all other conversations
    (of every dataset given): the global weights and, with ``per_intent``, the per-intent
    overrides refitted inside the fold (``cv``; ``cv_global`` is the same fold's global
    weights alone). The fixed methods (each signal alone, ``seed``, the shipped default) are
    scored on the same questions for comparison.
    """
    groups = [p.request.namespace or "" for p in pools]
    sw = _balance(pools, dataset_of)
    names = list(dict.fromkeys(groups))
    with tqdm(total=len(names), desc="cross-validation", unit="fold", disable=not progress) as bar:
        cv = cross_validate(
            pools,
            groups,
            k=k,
            sample_weight=sw,
            restarts=restarts,
            progress=bar.update,
            per_intent=per_intent,
            min_intent_questions=min_intent_questions,
        )
    runs = {"cv": cv.weights_of, "cv_global": cv.global_of} if per_intent else {"cv": cv.weights_of}
    out: dict[str, Any] = {"folds": cv.folds, "datasets": {}}
    for ds in dict.fromkeys(dataset_of):
        idx = [i for i, d in enumerate(dataset_of) if d == ds]
        sub = [pools[i] for i in idx]
        fixed = evaluate(sub, default_methods(), ks, dataset=ds)
        # held-out weights differ per conversation: evaluate conversation by conversation
        recall: dict[str, dict[int, list[float]]] = {m: {kk: [] for kk in ks} for m in runs}
        latest: dict[str, list[bool]] = {m: [] for m in runs}
        order: list[int] = []
        for g in names:
            part = [j for j, p in enumerate(sub) if p.request.namespace == g]
            if not part:
                continue
            held = {m: w[g] for m, w in runs.items()}
            run = evaluate([sub[j] for j in part], held, ks, dataset=ds)
            for m in runs:
                for kk in ks:
                    recall[m][kk] += run.recall[m][kk]
                latest[m] += run.latest.get(m, [])
            order += part
        cats = [sub[j].request.category for j in order]
        res: dict[str, Any] = {
            "n_questions": len(sub),
            "cv_fused": {f"recall@{kk}": mean(recall["cv"][kk]) for kk in ks},
            "cv_by_category": _by_category(recall["cv"], cats),
            "fixed": fixed.to_json()["methods"],
            "fixed_by_category": {
                c: {m: v.get(f"recall@{k}") for m, v in per.items()}
                for c, per in fixed.to_json()["by_category"].items()
            },
        }
        if per_intent:
            res["cv_global_fused"] = {f"recall@{kk}": mean(recall["cv_global"][kk]) for kk in ks}
            res["cv_global_by_category"] = _by_category(recall["cv_global"], cats)
        if latest["cv"]:
            res["cv_latest_wins"] = mean(float(x) for x in latest["cv"])
            if per_intent:
                res["cv_global_latest_wins"] = mean(float(x) for x in latest["cv_global"])
            res["fixed_latest_wins"] = fixed.to_json().get("latest_wins", {})
        singles = [res["fixed"][s][f"recall@{k}"] for s in ("bm25", "dense", "temporal", "graph")]
        best = max(singles)
        res[f"cv_gain_over_best_single@{k}"] = (
            res["cv_fused"][f"recall@{k}"] / best - 1 if best else 0
        )
        out["datasets"][ds] = res
    return out


def run_fit(
    datasets: Sequence[tuple[BenchDataset, str]],
    *,
    out: str | Path = "weights.json",
    k: int = 10,
    cv: bool = True,
    restarts: int = 4,
    report: str | Path | None = None,
    cache: str | Path | None = None,
    progress: bool = True,
    name: str = "fitted",
    embed_context: int = 0,
    per_intent: bool = True,
    min_intent_questions: int = MIN_INTENT_QUESTIONS,
) -> int:
    """Ingest and pool every dataset, fit on all of it, write ``out``, then cross-validate.

    ``embed_context`` builds the store with that much context in each memory's embedding
    (an add-time parameter the fitter cannot vary); the learned weights then carry it.
    """
    t0 = time.perf_counter()
    mem = open_store(cache, NoraxConfig(embed_context=embed_context))
    pools: list[Pool] = []
    dataset_of: list[str] = []
    try:
        for ds, _ in datasets:
            ingest(mem, ds, progress=progress)
            got = pool_dataset(mem, requests_for(ds), progress=progress)
            grid = {(k1, b) for k1 in K1_GRID for b in B_GRID}
            grid |= bm25_needed(got, default_methods())
            add_bm25_variants(got, documents_for(ds), sorted(grid))
            pools += got
            dataset_of += [ds.name] * len(got)
    finally:
        mem.close()
    t1 = time.perf_counter()
    sw = _balance(pools, dataset_of)
    fit = fit_pools(
        pools,
        k=k,
        sample_weight=sw,
        restarts=restarts,
        name=name,
        per_intent=per_intent,
        min_intent_questions=min_intent_questions,
    )
    t2 = time.perf_counter()
    info: dict[str, Any] = {
        "trained_on": {ds.name: str(path) for ds, path in datasets},
        "n_questions": len(pools),
    }
    doc: dict[str, Any] = {
        "fit": {
            "weights": fit.weights.to_file_dict(),
            **info,
            f"train_recall@{k}": fit.score,
            f"seed_recall@{k}": fit.baseline,
        }
    }
    print(
        f"fitted on {len(pools)} questions in {t2 - t1:.1f}s ({fit.evaluations} settings): "
        f"train recall@{k} {fit.score:.4f} (seed {fit.baseline:.4f})"
    )
    print(f"weights: {summarize_weights(fit.weights)}")
    for intent, f in fit.intents.items():
        own = fit.weights.intents.get(intent)
        line = summarize_weights(own) if own is not None else "global weights"
        print(
            f"  {intent} ({f['n_questions']} questions): train {f['train_own']:.4f} "
            f"(global {f['train_global']:.4f}): {line}"
        )
    if cv:
        rep = cv_report(
            pools,
            dataset_of,
            k=k,
            restarts=restarts,
            progress=progress,
            per_intent=per_intent,
            min_intent_questions=min_intent_questions,
        )
        doc["cv"] = rep
        for ds, res in rep["datasets"].items():
            line = ", ".join(f"{m} {v:.3f}" for m, v in res["cv_fused"].items())
            print(f"{ds}: leave-one-conversation-out fused {line}")
            if "cv_global_fused" in res:
                line = ", ".join(f"{m} {v:.3f}" for m, v in res["cv_global_fused"].items())
                print(f"  global weights only: {line}")
            singles = {s: res["fixed"][s][f"recall@{k}"] for s in ("bm25", "dense", "graph")}
            print(
                "  fixed: "
                + ", ".join(f"{s} {v:.3f}" for s, v in singles.items())
                + f"; seed {res['fixed']['seed'][f'recall@{k}']:.3f}"
                + f"; gain over best single {res[f'cv_gain_over_best_single@{k}']:+.1%}"
            )
            if "cv_latest_wins" in res:
                print(f"  latest wins (CV) {res['cv_latest_wins']:.3f}")
        info[f"cv_recall@{k}"] = {
            ds: round(res["cv_fused"][f"recall@{k}"], 4) for ds, res in rep["datasets"].items()
        }
        if per_intent:
            info[f"cv_recall@{k} (global weights only)"] = {
                ds: round(res["cv_global_fused"][f"recall@{k}"], 4)
                for ds, res in rep["datasets"].items()
            }
    fit.save(out, **info)
    doc["seconds"] = {"pool": t1 - t0, "fit": t2 - t1, "total": time.perf_counter() - t0}
    print(f"wrote {out} ({doc['seconds']['total']:.0f}s in all)")
    if report:
        Path(report).write_text(json.dumps(doc, indent=2) + "\n")
    return 0
