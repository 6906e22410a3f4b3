"""Agent turns: does what applies to a new request come back with it? Norax vs its peers.

    python benchmarks/agent_turns.py --json benchmarks/results/agent_turns.json
    python benchmarks/agent_turns.py --per-family 50 --seed 0 --systems default,no_lane,chroma

Generates ``--per-family`` scenarios of each family (``norax_core.bench.agent_turns``:
instruction, preference, current, tiny; memories written as a new user would, text, role and
times only, no kinds) and runs one ``k = 3`` search per scenario, each scenario its own
namespace, through:

* ``default``: Norax's shipped default (embedded store, real ONNX MiniLM and spaCy), with the
  scenario's pinned ``now``;
* ``no_lane``: the same with ``lane_slots`` 0 (what the lane adds); ``lane@X``: the default
  with ``lane_similarity`` X, ``lane@X/M`` also with ``lane_margin`` M (variants, to see
  where the lane's rules bite);
* ``chroma``, ``langchain_ensemble``, ``llamaindex_fusion``: the builders of
  ``benchmarks/peers.py`` (same MiniLM vectors, each library's defaults; no notion of time).

Scores hit@1 and hit@3 (for ``current`` the target must also rank above the stale fact).
The peers need ``pip install -e '.[scale]'``, as ``benchmarks/peers.py`` does; without it,
run ``--systems default,no_lane``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import BUILDERS  # noqa: E402

from norax_core import NoraxMemory  # noqa: E402
from norax_core.bench.agent_turns import (  # noqa: E402
    FAMILIES,
    AgentScenario,
    K,
    dataset,
    generate,
    hits,
    load,
    search_ids,
)
from norax_core.bench.cache import CachedEmbedder, TextCache  # noqa: E402
from norax_core.bench.harness import store_id  # noqa: E402
from norax_core.embedders import default_embedder  # noqa: E402
from norax_core.entities import load_extractor  # noqa: E402
from norax_core.presets import get_preset  # noqa: E402
from norax_core.weights import Weights  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared"
SYSTEMS = ("default", "no_lane", "chroma", "langchain_ensemble", "llamaindex_fusion")
Ranked = dict[str, list[int]]
"""Scenario id -> memory indexes, best first."""


def norax_weights(systems: list[str]) -> dict[str, Weights]:
    """``default``, ``no_lane`` (lane_slots 0), ``lane@X[/M]`` (lane_similarity X, margin M)."""
    default = get_preset("default")
    out = {}
    for name in systems:
        if name == "default":
            out[name] = default
        elif name == "no_lane":
            out[name] = default.with_params(lane_slots=0)
        elif name.startswith("lane@"):
            sim, _, margin = name.removeprefix("lane@").partition("/")
            params = {"lane_similarity": float(sim)}
            if margin:
                params["lane_margin"] = float(margin)
            out[name] = default.with_params(**params)
    return out


def norax_rankings(
    scenarios: list[AgentScenario], systems: list[str], root: Path
) -> dict[str, Ranked]:
    """Norax's k=3 rankings under each of its weights in ``systems``, one store for all."""
    weights = norax_weights(systems)
    out: dict[str, Ranked] = {}
    mem = NoraxMemory(root / "norax", embedder=default_embedder(), extractor=load_extractor())
    try:
        load(mem, scenarios)
        for name in systems:
            if name in weights:
                out[name] = {s.id: search_ids(mem, s, weights[name]) for s in scenarios}
    finally:
        mem.close()
    return out


def peer_rankings(scenarios: list[AgentScenario], system: str, root: Path) -> Ranked:
    """A peer's k=3 rankings, built by ``benchmarks/peers.py``'s builder."""
    ds = dataset(scenarios)
    emb = CachedEmbedder(default_embedder(), TextCache())
    query = BUILDERS[system](ds, emb, root / system, K)
    out: Ranked = {}
    for conv in ds.conversations:
        prefix = store_id(conv.name, "")
        got = query(conv.questions[0].text, conv.name)
        out[conv.name] = [int(i.removeprefix(prefix)) for i in got]
    return out


def score(scenarios: list[AgentScenario], ranked: Ranked) -> dict[str, dict[str, float]]:
    """hit@1 and hit@3 per family and over all."""
    by: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for s in scenarios:
        h = hits(s, ranked[s.id])
        by[s.family].append(h)
        by["all"].append(h)
    return {
        f: {"hit@1": sum(a for a, _ in v) / len(v), "hit@3": sum(b for _, b in v) / len(v)}
        for f, v in by.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--per-family", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    os.environ.setdefault("NORAX_EMBEDDING_MODEL_DIR", str(SHARED / "models" / "all-MiniLM-L6-v2"))
    os.environ.setdefault("NORAX_SPACY_MODEL", str(SHARED / "models" / "en_core_web_sm-3.8.0"))
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    load_at_start = os.getloadavg()
    systems = [s for s in args.systems.split(",") if s]
    unknown = {s for s in systems if not s.startswith("lane@")} - set(SYSTEMS)
    if unknown:
        raise SystemExit(f"unknown systems {sorted(unknown)}; valid: {list(SYSTEMS)}")
    scenarios = generate(args.per_family, seed=args.seed)
    rankings: dict[str, Ranked] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="norax-agent-turns-") as tmp:
        t0 = time.perf_counter()
        rankings.update(norax_rankings(scenarios, systems, Path(tmp)))
        if rankings:  # one store written once, then every Norax weights' searches
            seconds["norax_store_and_searches"] = round(time.perf_counter() - t0, 1)
        for system in systems:
            if system in BUILDERS:
                t0 = time.perf_counter()
                rankings[system] = peer_rankings(scenarios, system, Path(tmp))
                seconds[system] = round(time.perf_counter() - t0, 1)
    table = {name: score(scenarios, rankings[name]) for name in systems}
    cols = [*FAMILIES, "all"]
    print(f"{'hit@1 / hit@3':<20}" + "".join(f"{c:>14}" for c in cols))
    for name, rates in table.items():
        cells = [f"{rates[c]['hit@1']:.2f} / {rates[c]['hit@3']:.2f}" for c in cols]
        print(f"{name:<20}" + "".join(f"{c:>14}" for c in cells))
    if args.json:
        misses = [
            {"id": s.id, "query": s.query, "target": s.memories[s.target].text,
             "top3": [s.memories[i].text for i in rankings["default"][s.id]]}
            for s in scenarios
            if "default" in rankings and not hits(s, rankings["default"][s.id])[1]
        ]  # fmt: skip
        out: dict[str, Any] = {
            "command": "python benchmarks/agent_turns.py " + " ".join(sys.argv[1:]),
            "scenarios": len(scenarios),
            "per_family": args.per_family,
            "seed": args.seed,
            "k": K,
            "criterion": "hit@1 / hit@3 of the target; current: also above the stale fact",
            "results": table,
            "seconds": seconds,
            "default_misses_at_3": misses,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "load_avg_at_start": [round(x, 1) for x in load_at_start],
            "load_avg_at_end": [round(x, 1) for x in os.getloadavg()],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
