"""The shipped default's ranking stages, held out: leave-one-conversation-out CV.

The ``default`` weights' fitted part (fusion weights, decay, BM25, context) has a held-out
figure of its own (``fit`` in ``norax_core/data/weights_default.json``); the stages on top of
it were chosen on all the dev data. Here, for each conversation of LoCoMo dev (7) and BEAM
100K (10), every stage of :data:`STAGES` picks its setting (off included) on the *other*
conversations, with the fitted weights fixed, and the held-out conversation is ranked with
the picks. Stages are picked one after the other in list order, each given the picks before
it (one sweep of coordinate ascent; a setting must beat the one before it strictly, so a
stage that changes nothing stays off). A stage is chosen by the measure it is for: mean
recall@10 with each dataset weighted equally (as ``norax fit`` weighs them), or, for
supersession, BEAM's latest wins (the updated fact above the one it replaces) among the
settings that keep the training recall@10 (its shipped setting was kept for that, with
recall@10 unchanged). The report gives held-out recall@10 and latest wins.

Every pool is built once (``norax bench``'s pools: :func:`norax_core.bench.harness.
pool_dataset`) and every setting ranked once over all questions by
:func:`norax_core.ranking.rank`, the function ``search`` calls (each question's ranking
depends on its own pool only, so a fold's training score is a mean over the cached
per-question recalls).

To add a stage, append a :class:`StageGrid` to :data:`STAGES`: its name, the settings to try
(``params`` of a weights file; the first is usually "off"), and the intents it is for
(``None``: every query). Its parameters are stripped from the shipped default to make the
"no stages" baseline. A per-intent setting may also carry the override's fusion weights under
:data:`WEIGHTS` (:func:`mix` builds them): the signal mix stages (``mix_<intent>``, after the
others) try a few discrete shifts of one intent's mix (the dense share of bm25 + dense, the
graph weight) against the fitted global mix, each intent on its own. They are trials
(``trial=True``, not in the shipped default: held out they lose, see the README), so the report
gives the held-out figures of the shipped stages (``held_out_stages``) and, beside them, with
the trials picked too (``held_out_with_trials``).

``--weights-out FILE`` also picks the mix stages on all the dev questions, on top of the
shipped default (its stages as shipped), and writes the shipped default with those picks: the
file to try on BEAM 500K (``norax bench beam --data ../shared/data/beam/500K --weights FILE``),
which is never used for choosing.

Run from the repository root (the data path is an argument; nothing is copied)::

    python benchmarks/stage_cv.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from norax_core.bench.data import load_beam, load_locomo
from norax_core.bench.harness import bm25_needed, pool_datasets
from norax_core.bench.metrics import latest_wins, recall_at_k
from norax_core.bench.pools import Pool, pool_table
from norax_core.presets import get_preset
from norax_core.query import Intent
from norax_core.ranking import Plan, Table, rank
from norax_core.weights import Weights, save_weights

K = 10

WEIGHTS = "weights"
"""The key of a setting that holds a per-intent override's fusion weights (not a ``params``
entry): signal -> weight, as in a weights file."""


@dataclass(frozen=True)
class StageGrid:
    """One stage's settings to choose from.

    Attributes:
        name: A label for the report.
        settings: Weights-file ``params`` to try, in order (``{}``: the stage off).
        intents: The intents whose queries get the setting (a per-intent override);
            ``None``: every query (the global ``params``).
        objective: What the setting is chosen for on the training conversations:
            ``"recall"`` (mean recall@10) or ``"latest_wins"`` (latest wins, among the
            settings whose recall@10 is not below the stage off).
        trial: A candidate the shipped default does not hold: the report's held-out figures
            are given without the trials (the shipped default's stages) and with them.

    A setting may hold the override's fusion weights under :data:`WEIGHTS` (only with
    ``intents``: the global mix is the fitted one, held fixed).
    """

    name: str
    settings: tuple[Mapping[str, Any], ...]
    intents: tuple[str, ...] | None = None
    objective: str = "recall"
    trial: bool = False

    def __post_init__(self) -> None:
        if self.intents is None and self.sets_weights:
            raise ValueError(f"stage {self.name!r}: fusion weights need intents (an override)")

    @property
    def keys(self) -> set[str]:
        """Every parameter this stage sets (fusion weights aside)."""
        return {k for s in self.settings for k in s if k != WEIGHTS}

    @property
    def sets_weights(self) -> bool:
        """Whether a setting changes its intents' fusion weights."""
        return any(WEIGHTS in s for s in self.settings)


def grid(param: str, *values: Any, **fixed: Any) -> tuple[Mapping[str, Any], ...]:
    """Off, then ``param`` at each of ``values`` (with the ``fixed`` parameters beside it)."""
    return ({}, *({param: v, **fixed} for v in values))


SHIPPED_SHARE = 0.610644 / (0.289356 + 0.610644)
"""The shipped default's dense share of bm25 + dense (about 0.68)."""


def mix(dense_share: float, graph: float) -> Mapping[str, Any]:
    """A setting with fusion weights summing to 1 (temporal 0, as fitted): ``graph``, and the
    rest split between dense (``dense_share`` of it) and bm25."""
    rest = 1.0 - graph
    weights = {"bm25": rest * (1.0 - dense_share), "dense": rest * dense_share}
    return {
        WEIGHTS: {k: round(v, 6) for k, v in {**weights, "temporal": 0.0, "graph": graph}.items()}
    }


MIXES: tuple[Mapping[str, Any], ...] = (
    {},
    mix(0.5, 0.1),
    mix(0.75, 0.1),
    mix(0.9, 0.1),
    mix(SHIPPED_SHARE, 0.0),
    mix(SHIPPED_SHARE, 0.2),
    mix(0.9, 0.0),
)
"""The signal mix shifts an intent may take: off (the fitted global mix: dense share 0.68,
graph 0.1), the dense share at 0.5 / 0.75 / 0.9, the graph at 0 / 0.2, and nearly dense alone."""


STAGES: list[StageGrid] = [
    StageGrid("period_boost", grid("period_boost", 0.25, 0.5, 1.0)),
    StageGrid(
        "exchange",
        grid("exchange_weight", 0.99, exchange_depth=10),
        intents=("multi_hop", "lookup", "entity", "temporal", "preference", "decision"),
    ),
    StageGrid(
        "supersession",
        grid("supersede_weight", 0.5, 1.05, supersede_depth=10, supersede_pull=False),
        intents=("current_state",),
        objective="latest_wins",
    ),
    StageGrid(
        "latest_wins",
        grid(
            "latest_wins_weight",
            1.05,
            latest_wins_depth=15,
            latest_wins_shared=3,
            latest_wins_subject=True,
        ),
        intents=("current_state",),
        objective="latest_wins",
    ),
    StageGrid(
        "temporal_latest_wins",
        grid(
            "latest_wins_weight",
            1.05,
            latest_wins_depth=10,
            latest_wins_shared=3,
            latest_wins_cues="change",
        ),
        intents=("temporal",),
    ),
    StageGrid(
        "turns",
        (
            *grid("opener_boost", 0.5, 1.0, opener_span=10.0, speaker_boost=1.0),
            *grid("opener_boost", 1.0, 2.0, opener_span=20.0, speaker_boost=1.0)[1:],
        ),
        intents=("coverage",),
    ),
    StageGrid("session_spread", grid("session_spread", 0.25, 0.5, 0.75), intents=("coverage",)),
    StageGrid(
        "bridges",
        grid("bridge_weight", 0.05, 0.1, bridge_seed_gain=True, bridge_skip_query=True),
        intents=("multi_hop", "entity"),
    ),
    StageGrid(
        "decision_bridges",
        grid("bridge_weight", 0.5, bridge_seeds=5, bridge_seed_gain=True, bridge_skip_query=True),
        intents=("decision",),
    ),
    StageGrid(
        "lane",
        (
            {},
            {
                "lane_slots": 1,
                "lane_similarity": 0.4,
                "lane_margin": 0.1,
                "lane_floor": 0.1,
                "lane_place": 1,
            },
        ),
    ),
    StageGrid(
        "preference_lane",
        grid("lane_slots", 2, 3, lane_similarity=0.3),
        intents=("preference",),
    ),
    *(StageGrid(f"mix_{i.value}", MIXES, intents=(i.value,), trial=True) for i in Intent),
]
"""The stages chosen per fold, in the order they are chosen (extend at will)."""


def strip_stages(weights: Weights, stages: Sequence[StageGrid]) -> Weights:
    """``weights`` without any parameter a stage of ``stages`` sets, the global fusion weights
    back in the overrides whose mix a stage sets (and overrides left empty dropped)."""
    keys = set().union(*(s.keys for s in stages))
    mixed = {i for s in stages if s.sets_weights for i in s.intents or ()}
    glob = weights.as_dict()
    params = {k: v for k, v in weights.params.items() if k not in keys}
    intents = {}
    for name, over in weights.intents.items():
        if name in mixed:
            over = replace(over, **glob)
        own = {k: v for k, v in over.params.items() if k not in keys}
        same = over.as_dict() == weights.as_dict() and over.method == weights.method
        if own or not same:
            intents[name] = replace(over, params=own)
    return replace(weights, params=params, intents=intents, name=f"{weights.name}-no-stages")


def with_choices(base: Weights, choices: Mapping[str, int], stages: Sequence[StageGrid]) -> Weights:
    """``base`` with each stage's chosen setting (an index into its ``settings``)."""
    params = dict(base.params)
    intents = dict(base.intents)
    for stage in stages:
        setting = stage.settings[choices.get(stage.name, 0)]
        if not setting:
            continue
        if stage.intents is None:
            params.update(setting)
            continue
        own = {k: v for k, v in setting.items() if k != WEIGHTS}
        mixed = setting.get(WEIGHTS, {})
        for intent in stage.intents:
            over = intents.get(intent) or replace(base, params={}, intents={})
            intents[intent] = replace(over, params={**over.params, **own}, **mixed)
    return replace(base, params=params, intents=intents)


class Evaluator:
    """Recall@10 of every question under a weights setting (cached per intent group).

    Tables are built once per (dataset, intent) and store configuration; a setting only
    changes the :class:`~norax_core.ranking.Plan` each intent's group is ranked with.
    """

    def __init__(self, pools: Sequence[Pool], datasets: Sequence[str]) -> None:
        self.pools = list(pools)
        self.groups: dict[tuple[str, str], list[int]] = {}
        for i, (p, d) in enumerate(zip(self.pools, datasets, strict=True)):
            self.groups.setdefault((d, p.plan.intent.value), []).append(i)
        self._tables: dict[tuple[Any, ...], Table] = {}
        self._cache: dict[str, np.ndarray] = {}
        self._latest: dict[str, np.ndarray] = {}
        self.updates = np.array(
            [bool(p.request.original and p.request.updated) for p in self.pools], dtype=bool
        )
        """The knowledge-update questions (latest wins is defined for them)."""
        self.rank_seconds = 0.0

    def _table(self, weights: Weights, ds: str, intent: str, idx: Sequence[int]) -> Table:
        cfg = weights.for_intent(intent).applied(self.pools[0].config)
        key = (ds, intent, len(idx), tuple(sorted(cfg.decay_days.items())), cfg.bm25_k1, cfg.bm25_b)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = pool_table([self.pools[i] for i in idx], cfg)
        return table

    def _key(self, weights: Weights, intent: str) -> str:
        """What an intent's group is ranked with: its selected weights (and params)."""
        return json.dumps(weights.for_intent(intent).to_file_dict(name=""), sort_keys=True)

    def latest(self, weights: Weights) -> np.ndarray:
        """Per-question latest-wins verdict (1/0; NaN where undefined) under ``weights``."""
        out = np.full(len(self.pools), np.nan)
        base = self.pools[0].config
        for (ds, intent), every in self.groups.items():
            idx = [i for i in every if self.updates[i]]
            if not idx:
                continue
            key = f"{ds}|{intent}|{self._key(weights, intent)}"
            hit = self._latest.get(key)
            if hit is None:
                t0 = time.perf_counter()
                table = self._table(weights, ds, intent, idx)
                got = rank(table, Plan.of(weights, base, intent), table.size)
                hit = np.full(len(idx), np.nan)
                for j, i in enumerate(idx):
                    req = self.pools[i].request
                    verdict = latest_wins(got.ids(j), req.original, req.updated)
                    if verdict is not None:
                        hit[j] = float(verdict)
                self._latest[key] = hit
                self.rank_seconds += time.perf_counter() - t0
            out[idx] = hit
        return out

    def recall(self, weights: Weights) -> np.ndarray:
        """Per-question recall@10 (pool order) under ``weights``.

        Cached per (dataset, intent) group and the weights that group is ranked with, so a
        per-intent setting re-ranks its own intent's questions only.
        """
        out = np.zeros(len(self.pools))
        base = self.pools[0].config
        for (ds, intent), idx in self.groups.items():
            key = f"{ds}|{intent}|{self._key(weights, intent)}"
            hit = self._cache.get(key)
            if hit is None:
                t0 = time.perf_counter()
                table = self._table(weights, ds, intent, idx)
                got = rank(table, Plan.of(weights, base, intent), K)
                hit = np.array(
                    [
                        recall_at_k(got.ids(j), self.pools[i].request.relevant, K)
                        for j, i in enumerate(idx)
                    ]
                )
                self._cache[key] = hit
                self.rank_seconds += time.perf_counter() - t0
            out[idx] = hit
        return out


def pool_all(data: Path, default: Weights) -> tuple[list[Pool], list[str]]:
    """LoCoMo dev and BEAM 100K pools (one store, one namespace per conversation)."""
    locomo = load_locomo(data / "locomo" / "locomo10_dev.json")
    datasets = (locomo, load_beam(data / "beam" / "100K"))
    return pool_datasets(datasets, lambda got: bm25_needed(got, {"d": default}))


def choose(
    ev: Evaluator,
    base: Weights,
    train: np.ndarray,
    ds: np.ndarray,
    stages: Sequence[StageGrid],
) -> dict[str, int]:
    """Each stage's setting, picked in order on the ``train`` questions (datasets weighted
    equally); ties keep the earlier setting (off first)."""

    def recall(choices: Mapping[str, int]) -> float:
        r = ev.recall(with_choices(base, choices, stages))
        return float(np.mean([r[train & (ds == d)].mean() for d in np.unique(ds[train])]))

    def latest(choices: Mapping[str, int]) -> float:
        v = ev.latest(with_choices(base, choices, stages))[train]
        return float(np.nanmean(v)) if (~np.isnan(v)).any() else 0.0

    choices: dict[str, int] = {}
    for stage in stages:
        off = {**choices, stage.name: 0}
        floor = recall(off)
        score = recall if stage.objective == "recall" else latest
        best, best_score = 0, score(off)
        for j in range(1, len(stage.settings)):
            trial = {**choices, stage.name: j}
            if stage.objective != "recall" and recall(trial) < floor - 1e-12:
                continue  # a latest-wins gain may not cost recall@10
            s = score(trial)
            if s > best_score + 1e-12:
                best, best_score = j, s
        choices[stage.name] = best
    return choices


def write_mix(ev: Evaluator, shipped: Weights, ds: np.ndarray, path: Path) -> dict[str, Any]:
    """Pick the mix stages on every dev question over ``shipped`` and save the result."""
    mixes = [s for s in STAGES if s.sets_weights]
    picks = choose(ev, shipped, np.ones(len(ds), dtype=bool), ds, mixes)
    chosen = {s.name: dict(s.settings[picks[s.name]]) for s in mixes if picks[s.name]}
    out = with_choices(shipped, picks, mixes)
    info = {"mix_chosen_on": "LoCoMo dev + BEAM 100K (all questions)", "mix_chosen": chosen}
    save_weights(replace(out, name="default-mix"), path, **info)
    print(f"\nmix chosen on all dev questions: {chosen or 'none'} -> {path}")
    return {"path": str(path), **info}


def summary(columns: Mapping[str, np.ndarray], ds: np.ndarray, cats: np.ndarray) -> dict[str, Any]:
    """Per dataset: each column's mean recall@10, overall and per category."""
    out: dict[str, Any] = {}
    for d in dict.fromkeys(ds.tolist()):
        m = ds == d
        out[d] = {
            "n": int(m.sum()),
            **{name: round(float(col[m].mean()), 4) for name, col in columns.items()},
            "by_category": {
                c: {
                    "n": int((m & (cats == c)).sum()),
                    **{
                        name: round(float(col[m & (cats == c)].mean()), 4)
                        for name, col in columns.items()
                    },
                }
                for c in sorted(set(cats[m].tolist()))
            },
        }
    return out


def main() -> None:
    """Pool once, choose per fold, print and write the report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="folder holding locomo/ and beam/")
    ap.add_argument(
        "--json", type=Path, default=Path("benchmarks/results/stage_cv.json"), help="report"
    )
    ap.add_argument(
        "--weights-out",
        type=Path,
        help="also pick the mix stages on all dev questions over the shipped default and "
        "write it with the picks here (a weights file for norax bench --weights)",
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    shipped = get_preset("default")
    base = strip_stages(shipped, STAGES)
    pools, names = pool_all(args.data, shipped)
    t_pool = time.perf_counter() - t0
    ds = np.array(names)
    conv = np.array([f"{d}/{p.request.namespace}" for d, p in zip(names, pools, strict=True)])
    cats = np.array([p.request.category for p in pools])
    ev = Evaluator(pools, names)
    kept = [s for s in STAGES if not s.trial]
    trials = len(kept) < len(STAGES)
    held = np.full(len(pools), np.nan)
    held_latest = np.full(len(pools), np.nan)
    held_trials = np.full(len(pools), np.nan)
    held_trials_latest = np.full(len(pools), np.nan)
    folds = []
    for c in dict.fromkeys(conv.tolist()):
        test = conv == c
        fold: dict[str, Any] = {"held_out": c, "n": int(test.sum())}
        for stages, col, latest_col, tag in (
            (kept, held, held_latest, ""),
            *([(STAGES, held_trials, held_trials_latest, " with trials")] if trials else []),
        ):
            picks = choose(ev, base, ~test, ds, stages)
            chosen = with_choices(base, picks, stages)
            col[test] = ev.recall(chosen)[test]
            latest_col[test] = ev.latest(chosen)[test]
            named = {s.name: dict(s.settings[picks[s.name]]) for s in stages}
            fold[f"chosen{tag}"] = named
            fold[f"recall@10{tag}"] = round(float(col[test].mean()), 4)
            picked = " ".join(f"{k}={picks[k]}" for k in named)
            print(f"{c:24s}{tag or ':':13s} n={int(test.sum()):4d} {picked}", flush=True)
        fold["recall@10 no stages"] = round(float(ev.recall(base)[test].mean()), 4)
        folds.append(fold)
    columns = {
        "held_out_stages": held,
        **({"held_out_with_trials": held_trials} if trials else {}),
        "no_stages": ev.recall(base),
        "shipped_in_sample": ev.recall(shipped),
    }
    latest_cols = {
        "held_out_stages": held_latest,
        **({"held_out_with_trials": held_trials_latest} if trials else {}),
        "no_stages": ev.latest(base),
        "shipped_in_sample": ev.latest(shipped),
    }
    report: dict[str, Any] = {
        "what": "leave-one-conversation-out: each stage's setting chosen on the other "
        "conversations (fitted weights fixed), recall@10 of the held-out one; "
        "held_out_stages: the shipped default's stages; held_out_with_trials: with the "
        "trial stages (not shipped) picked too",
        "command": "python benchmarks/stage_cv.py --data ../shared/data",
        "k": K,
        "stages": [
            {
                "name": s.name,
                "settings": [dict(x) for x in s.settings],
                "intents": s.intents,
                "trial": s.trial,
            }
            for s in STAGES
        ],
        "datasets": summary(columns, ds, cats),
        "latest_wins": {
            d: {
                "n": int((~np.isnan(held_latest) & (ds == d)).sum()),
                **{k: round(float(np.nanmean(v[ds == d])), 4) for k, v in latest_cols.items()},
            }
            for d in dict.fromkeys(ds.tolist())
            if (~np.isnan(held_latest) & (ds == d)).any()
        },
        "folds": folds,
        "seconds": {
            "pool": round(t_pool, 1),
            "rank": round(ev.rank_seconds, 1),
            "total": round(time.perf_counter() - t0, 1),
        },
    }
    for d, r in report["datasets"].items():
        print(f"\n{d} (n={r['n']}): " + ", ".join(f"{k} {r[k]:.4f}" for k in columns))
        for c, v in r["by_category"].items():
            print(f"  {c:28s} n={v['n']:4d} " + " ".join(f"{v[k]:.4f}" for k in columns))
    for d, v in report["latest_wins"].items():
        print(
            f"\n{d} latest wins (n={v['n']}): " + ", ".join(f"{k} {v[k]:.4f}" for k in latest_cols)
        )
    if args.weights_out:
        report["weights_out"] = write_mix(ev, shipped, ds, args.weights_out)
    print(f"\nseconds: {report['seconds']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
