"""Which signal earns its place? Leave-one-signal-out ablation of the shipped presets.

For each dataset, every shipped preset (``default``, ``chat``, ``project``, ``seed``, ``rrf``)
is ranked as shipped, once more with each of its signals' weights set to 0, and once more
with each ranking stage it uses switched off (context propagation, period boost, latest wins,
supersession, turns, bridges), in the global weights and every per-intent override alike (the
other weights and learned parameters unchanged, so the ranking is what a user who turned that
signal or stage off would get; nothing is refitted). The pools come from one ``norax bench``
style run per store build (``chat`` embeds context, so it gets a store of its own).

Run from the repository root (the data path is an argument; nothing is copied)::

    python benchmarks/ablation.py --data ../shared/data \
        --json benchmarks/results/ablation.json

``--data`` is the folder holding ``locomo/locomo10_dev.json`` and ``beam/100K``.

``--params JSON`` adds engine parameters to every preset, for example the bridge step
(``'{"bridge_weight": 0.1}'``). With the bridge step on, ``- graph`` drops the whole entity
graph (the graph signal and the bridge step, which walks the same graph) and ``- bridges``
only the step.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from norax_core.bench.data import BenchDataset, load_beam, load_locomo
from norax_core.bench.harness import run_benchmark
from norax_core.models import SIGNALS
from norax_core.presets import get_preset, preset_names
from norax_core.weights import Weights

PRESETS = ("default", "chat", "project", "seed", "rrf")


STAGE_PARAMS: dict[str, tuple[str, ...]] = {
    "context": ("context_weight",),
    "period": ("period_boost",),
    "latest_wins": ("latest_wins_weight",),
    "supersession": ("supersede_weight",),
    "turns": ("opener_boost", "speaker_boost"),
    "bridges": ("bridge_weight",),
}
"""Each ranking stage and the parameters that switch it on (0 switches it off)."""


def _everywhere(preset: Weights, change: Callable[[Weights], Weights]) -> Weights:
    """``change`` applied to ``preset`` and to each of its per-intent overrides."""
    intents = {name: change(over) for name, over in preset.intents.items()}
    return replace(change(preset), intents=intents)


def _stages_off(keys: Sequence[str]) -> Callable[[Weights], Weights]:
    def off(w: Weights) -> Weights:
        return replace(w, params={**w.params, **{k: 0.0 for k in keys if k in w.params}})

    return off


def _signal_off(signal: str) -> Callable[[Weights], Weights]:
    def off(w: Weights) -> Weights:
        return replace(w, **{signal: 0.0})

    return off


def _stages_on(preset: Weights) -> list[str]:
    """The stages ``preset`` switches on, for every query or for some intent."""
    params = [preset.params, *(over.params for over in preset.intents.values())]
    return [
        stage
        for stage, keys in STAGE_PARAMS.items()
        if any(float(p.get(k, 0.0) or 0.0) > 0 for p in params for k in keys)
    ]


def variants(preset: Weights) -> dict[str, Weights]:
    """The preset itself, one copy per positive-weight signal with that signal off, and one
    copy per ranking stage it uses with that stage off.

    A signal or stage is switched off in the global weights and in every per-intent
    override alike. With the bridge step on, removing the graph removes the step too.
    """
    out = {preset.name: preset}
    weights = preset.as_dict()
    live = [s for s in SIGNALS if weights[s] > 0]
    stages = _stages_on(preset)
    for s in live:
        if len(live) > 1:
            ablated = _everywhere(preset, _signal_off(s))
            if s == "graph" and "bridges" in stages:
                ablated = _everywhere(ablated, _stages_off(STAGE_PARAMS["bridges"]))
            out[f"{preset.name} - {s}"] = replace(ablated, name=f"{preset.name}-{s}")
    for stage in stages:
        ablated = _everywhere(preset, _stages_off(STAGE_PARAMS[stage]))
        out[f"{preset.name} - {stage}"] = replace(ablated, name=f"{preset.name}-{stage}")
    return out


def datasets(root: Path) -> list[tuple[str, BenchDataset]]:
    """The dev splits the project evaluates on."""
    return [
        ("locomo", load_locomo(root / "locomo" / "locomo10_dev.json")),
        ("beam_100k", load_beam(root / "beam" / "100K")),
    ]


def ablate(
    root: Path,
    ks: Sequence[int],
    cache: str | None,
    progress: bool,
    params: dict[str, object] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """``{dataset: {method: {"recall@k": value, ..., ["latest_wins": value]}}}``."""
    names = [p for p in PRESETS if p in preset_names()]
    methods: dict[str, Weights] = {}
    for p in names:
        preset = get_preset(p)
        if params:
            preset = replace(preset, params={**preset.params, **params})
        methods.update(variants(preset))
    # a preset that embeds context needs its own store build; the others get a plain one
    builds: dict[int, dict[str, Weights]] = {}
    for m, w in methods.items():
        builds.setdefault(int(w.params.get("embed_context", 0)), {})[m] = w
    out: dict[str, dict[str, dict[str, float]]] = {}
    for label, data in datasets(root):
        rows: dict[str, dict[str, float]] = {}
        for group in builds.values():
            run, _pools = run_benchmark(data, group, ks, cache=cache, progress=progress)
            doc = run.to_json()
            rows.update({m: dict(v) for m, v in doc["methods"].items()})
            for m, v in doc.get("latest_wins", {}).items():
                rows[m]["latest_wins"] = v
        out[label] = {m: rows[m] for m in methods}
    return out


def table(results: dict[str, dict[str, dict[str, float]]], k: int) -> str:
    """A plain-text table: recall@k per method, with the change against the full preset."""
    lines = []
    for label, rows in results.items():
        lines += ["", f"{label}: recall@{k} (change against the full preset)"]
        for m, v in rows.items():
            base = rows[m.split(" - ")[0]][f"recall@{k}"]
            delta = "" if " - " not in m else f"  {v[f'recall@{k}'] - base:+.3f}"
            lw = f"  latest-wins {v['latest_wins']:.3f}" if "latest_wins" in v else ""
            lines.append(f"  {m:<22}{v[f'recall@{k}']:.3f}{delta}{lw}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--data", required=True, type=Path, help="folder with locomo/ and beam/")
    ap.add_argument("--k", default="1,5,10,25", help="cut-offs")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--cache", help="embedding/entity cache folder (default ~/.cache/norax)")
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("--params", help="engine parameters (JSON) added to every preset")
    args = ap.parse_args(argv)
    ks = tuple(int(x) for x in args.k.split(","))
    params = json.loads(args.params) if args.params else None
    results = ablate(args.data, ks, args.cache, not args.quiet, params)
    print(table(results, 10 if 10 in ks else ks[-1]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
