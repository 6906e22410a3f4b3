"""The seed's own promises on small stores (issue 13, last target): pass rate per family.

    python benchmarks/seed_promises.py --json benchmarks/results/seed_promises.json
    python benchmarks/seed_promises.py --per-family 20 --seed 3 --weights my_weights.json

Generates ``--per-family`` scenarios of each family (``norax_core.bench.scenarios``: graph,
recency, scratchpad, meaning, keywords; 5-10 memories each, distractors that share the query's
words), writes them into a persistent store in a temporary directory (embedded Chroma, the
real ONNX embedder and spaCy pipeline from ../shared/models), one namespace per scenario, and
searches each with the scenario's pinned ``now`` under every preset: ``default``, ``chat``,
``project``, ``seed`` and each signal alone, plus any ``--weights`` files. A scenario passes
when its target is in the top 3 (and, for recency and scratchpad, above the memory it
replaces). The ``chat`` preset gets a store of its own, created with its weights, since it
embeds each memory with the ones before it.

``--intents`` also reads every question's intent with the classifier alone and with the
current-state cues (``norax_core.query.intents.with_cues``): the generated recency questions
(all current-state), and the datasets' labelled questions in ``--data`` (LoCoMo dev + BEAM
100K, which the classifier was fitted on, and BEAM 500K).

For the shipped ``default`` the JSON also keeps every failed scenario's ranking with each
result's signals, explanation, matched entities and the query's plan: the material of the
diagnosis in the README.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from norax_core import NoraxMemory, load_weights
from norax_core.bench.intent_labels import LabelledQuestion, beam_questions, locomo_questions
from norax_core.bench.scenarios import FAMILIES, Scenario, generate, indexes, load, passes, ranked
from norax_core.embedders import default_embedder
from norax_core.entities import load_extractor
from norax_core.query import Intent
from norax_core.query.intents import features, load_intent_model, with_cues
from norax_core.query.periods import find_periods
from norax_core.weights import Weights

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
PRESETS = ("default", "chat", "project", "seed", "bm25", "dense", "temporal", "graph")
OWN_STORE = ("chat",)  # presets whose add-time settings differ from default's


def _failure(s: Scenario, results: list[Any]) -> dict[str, Any]:
    plan = results[0].query_plan if results else None
    return {
        "id": s.id,
        "query": s.query,
        "intent": plan.intent if plan else None,
        "target": s.target,
        "older": s.older,
        "ranking": [
            {
                "memory": i,
                "text": r.text,
                "kind": r.kind,
                "age_days": round((s.now - r.created_at).total_seconds() / 86400, 2),
                "score": round(r.score, 4),
                "signals": {k: round(v, 3) for k, v in r.signals.items()},
                "explanation": {k: round(v, 4) for k, v in r.explanation.to_dict().items()},
                "matched_entities": list(r.matched_entities),
            }
            for i, r in zip(indexes(results), results, strict=True)
        ],
    }


def _intents(text: str, now: datetime) -> tuple[Intent, Intent]:
    """The classifier's intent alone, and with the current-state cues."""
    model = load_intent_model()
    if model is None:
        raise SystemExit("no intent model shipped")
    probs = model.scores(features(text, bool(find_periods(text, now))))
    cued = with_cues(text, probs)
    return max(probs, key=lambda i: probs[i]), max(cued, key=lambda i: cued[i])


def intent_report(scenarios: list[Scenario], data: Path) -> dict[str, Any]:
    """Current-state reading of the recency questions; label accuracy on the datasets."""
    recency = [_intents(s.query, s.now) for s in scenarios if s.family == "recency"]
    cs = Intent.CURRENT_STATE
    out: dict[str, Any] = {
        "recency_questions_read_current_state": {
            "questions": len(recency),
            "model": sum(m is cs for m, _ in recency),
            "model_with_cues": sum(c is cs for _, c in recency),
        }
    }
    sets: dict[str, list[LabelledQuestion]] = {}
    if (data / "locomo" / "locomo10_dev.json").is_file() and (data / "beam" / "100K").is_dir():
        sets["dev (fitted on)"] = locomo_questions(data / "locomo" / "locomo10_dev.json")
        sets["dev (fitted on)"] += beam_questions(data / "beam" / "100K")
    if (data / "beam" / "500K").is_dir():
        sets["beam 500K"] = beam_questions(data / "beam" / "500K")
    for name, qs in sets.items():
        read = [_intents(q.text, datetime.fromtimestamp(q.now, tz=timezone.utc)) for q in qs]
        out[name] = {
            "questions": len(qs),
            "accuracy_model": sum(m is q.intent for (m, _), q in zip(read, qs, strict=True))
            / len(qs),
            "accuracy_with_cues": sum(c is q.intent for (_, c), q in zip(read, qs, strict=True))
            / len(qs),
        }
    return out


def run(scenarios: list[Scenario], weights: dict[str, Weights | str], root: Path) -> dict[str, Any]:
    """Pass rates per preset and family; the default's failures in full."""
    embedder, extractor = default_embedder(), load_extractor()
    stores: dict[str, NoraxMemory] = {}

    def store_for(name: str) -> NoraxMemory:
        key = name if name in OWN_STORE else "default"
        if key not in stores:
            stores[key] = NoraxMemory(
                root / key, embedder=embedder, extractor=extractor, weights=key
            )
            load(stores[key], scenarios)
        return stores[key]

    rates: dict[str, dict[str, float]] = {}
    failures: list[dict[str, Any]] = []
    try:
        for name, w in weights.items():
            mem = store_for(name)
            hits: dict[str, list[bool]] = defaultdict(list)
            for s in scenarios:
                results = ranked(mem, s, w)
                ok = passes(s, indexes(results))
                hits[s.family].append(ok)
                if name == "default" and not ok:
                    failures.append(_failure(s, results))
            rates[name] = {f: sum(hits[f]) / len(hits[f]) for f in FAMILIES if hits[f]}
            everything = [h for f in hits.values() for h in f]
            rates[name]["all"] = sum(everything) / len(everything)
    finally:
        for m in stores.values():
            m.close()
    return {"pass_rate": rates, "default_failures": failures}


def main() -> None:
    """Run the benchmark and print a table of pass rates."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--per-family", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--weights", action="append", default=[], help="weights file(s) to add")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--intents", action="store_true", help="also report intent readings")
    ap.add_argument("--data", type=Path, default=SHARED / "data", help="datasets for --intents")
    args = ap.parse_args()
    os.environ.setdefault("NORAX_EMBEDDING_MODEL_DIR", str(SHARED / "models" / "all-MiniLM-L6-v2"))
    os.environ.setdefault("NORAX_SPACY_MODEL", str(SHARED / "models" / "en_core_web_sm-3.8.0"))
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

    scenarios = generate(args.per_family, seed=args.seed)
    weights: dict[str, Weights | str] = {p: p for p in args.presets.split(",") if p}
    for f in args.weights:
        weights[Path(f).stem] = load_weights(f)
    with tempfile.TemporaryDirectory(prefix="norax-promises-") as tmp:
        out = run(scenarios, weights, Path(tmp))
    out = {
        "scenarios": len(scenarios),
        "per_family": args.per_family,
        "seed": args.seed,
        "criterion": "target in the top 3; recency and scratchpad: also above the older memory",
        **out,
    }
    cols = [*FAMILIES, "all"]
    width = max(14, *(len(n) + 2 for n in out["pass_rate"]))
    print(f"{'weights':<{width}}" + "".join(f"{c:>11}" for c in cols))
    for name, r in out["pass_rate"].items():
        print(f"{name:<{width}}" + "".join(f"{r.get(c, float('nan')):>11.2f}" for c in cols))
    if args.intents:
        out["intents"] = intent_report(scenarios, args.data)
        print(json.dumps(out["intents"], indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
