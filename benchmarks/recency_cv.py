"""Per-kind recency for current-state questions: does it earn its place? (Issue 21.)

The seed formula decays memories per kind (procedural slower than scratchpad); the shipped
``default`` gives the temporal signal weight 0. This tries it back for ``current_state``
questions only, with each memory's decay read from its *inferred* kind (instructions and
preferences never decay; facts and events decay with ``tau`` days; scratch notes in a day),
at a small share of that intent's mix (the other signals keep their ratios), on top of the
shipped stages:

* ``beam``: LoCoMo dev and BEAM 100K pools (``benchmarks/stage_cv.py``'s), every setting in
  sample, then leave one BEAM chat out (the setting picked on the other nine by recall@10,
  off first on ties) and the held-out recall@10 and latest wins;
* ``agent``: the agent-turn scenarios (``norax_core.bench.agent_turns``), each memory written
  with its inferred kind as its kind, hit@1 / hit@3 per family.

Run from the repository root (the data path is an argument; nothing is copied)::

    python benchmarks/recency_cv.py --data ../shared/data beam
    python benchmarks/recency_cv.py agent --seed 0
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from norax_core import NoraxMemory  # noqa: E402
from norax_core.bench.agent_turns import (  # noqa: E402
    FAMILIES,
    generate,
    hits,
    load,
    search_ids,
)
from norax_core.presets import get_preset  # noqa: E402
from norax_core.weights import Weights  # noqa: E402

KIND_OF = {"instruction": "standing", "preference": "standing", "scratchpad": "scratch"}
"""Inferred kind -> the kind whose decay it gets (facts and events: ``state``)."""
GRID = [(0.0, 0.0)] + [(w, t) for w in (0.02, 0.05, 0.1, 0.2) for t in (7.0, 30.0, 180.0)]
"""``(share of the current_state mix, tau days of facts and events)``; the first is off."""


def recency(w: float, tau: float) -> Weights:
    """The shipped default with per-kind recency at share ``w`` for current-state questions."""
    default = get_preset("default")
    if w <= 0:
        return default
    over = default.intents["current_state"]
    mix = over.as_dict()
    rest = mix["bm25"] + mix["dense"] + mix["graph"]
    keep = {s: v / rest * (1 - w) for s, v in mix.items() if s != "temporal"}
    decay = {"standing": 1e9, "state": tau, "scratch": 1.0}
    params = {**over.params, "decay_days": decay}
    new = replace(over, **keep, temporal=w, params=params)
    return replace(default, intents={**default.intents, "current_state": new})


def kind_of(inferred: str) -> str:
    """The decay kind of an inferred kind."""
    return KIND_OF.get(inferred, "state")


def beam(data: Path) -> None:
    """In-sample figures per setting, then leave one BEAM 100K chat out."""
    import stage_cv

    pools, names = stage_cv.pool_all(data, get_preset("default"))
    pools = [replace(p, kinds=[kind_of(k) for k in p.inferred or ()]) for p in pools]
    ev = stage_cv.Evaluator(pools, names)
    ds = np.array(names)
    cat = np.array([p.request.category for p in pools])
    conv = np.array([p.request.namespace for p in pools])
    got = {g: (ev.recall(recency(*g)), ev.latest(recency(*g))) for g in GRID}
    b = ds == "beam"
    for g, (r, lt) in got.items():
        cats = " ".join(
            f"{d[0]}:{c[:12]} {r[(ds == d) & (cat == c)].mean():.3f}"
            for d in ("beam", "locomo")
            for c in sorted(set(cat[ds == d]))
        )
        print(
            f"{g} BEAM {r[b].mean():.4f} latest {np.nanmean(lt[b]):.3f} LoCoMo "
            f"{r[~b].mean():.4f} | {cats}"
        )
    held, held_lt, picks = np.zeros(len(pools)), np.full(len(pools), np.nan), []
    for c in sorted(set(conv[b])):
        train, test = b & (conv != c), b & (conv == c)
        best = max(GRID, key=lambda g: (round(float(got[g][0][train].mean()), 9), -GRID.index(g)))
        picks.append(best)
        held[test], held_lt[test] = got[best][0][test], got[best][1][test]
    print("picks", picks)
    print(
        f"held out BEAM 100K recall@10 {held[b].mean():.4f} latest wins "
        f"{np.nanmean(held_lt[b]):.3f}"
    )


def agent(seed: int) -> None:
    """hit@1 / hit@3 per family, memories written with their inferred kind as their kind."""
    from norax_core.embedders import default_embedder
    from norax_core.entities import load_extractor

    scenarios = generate(50, seed)
    root = Path(tempfile.mkdtemp())
    emb, ext = default_embedder(), load_extractor()
    kinds: dict[str, list[str]] = {}
    with NoraxMemory(root / "probe", embedder=emb, extractor=ext) as probe:
        load(probe, scenarios)
        for s in scenarios:
            ids = [f"{s.id}:{i}" for i in range(len(s.memories))]
            inferred = {m.id: m.inferred_kind for m in probe.get(ids, namespace=s.id)}
            kinds[s.id] = [kind_of(inferred[i]) for i in ids]
    with NoraxMemory(root / "store", embedder=emb, extractor=ext) as mem:
        load(mem, scenarios, kinds)
        for g in [x for x in GRID if x[1] in (0.0, 30.0)]:
            row = []
            for fam in FAMILIES:
                xs = [
                    hits(s, search_ids(mem, s, recency(*g))) for s in scenarios if s.family == fam
                ]
                row.append(
                    f"{fam} {np.mean([a for a, _ in xs]):.2f}/{np.mean([h for _, h in xs]):.2f}"
                )
            print(g, " | ".join(row))


def main() -> None:
    """Command line: ``beam`` or ``agent``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["beam", "agent"])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.what == "beam":
        beam(args.data)
    else:
        agent(args.seed)


if __name__ == "__main__":
    main()
