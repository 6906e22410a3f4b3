"""Query analysis (issue 13 item 1): intent accuracy against the datasets' labels, periods, cost.

    python benchmarks/query_plan.py --data ../shared/data --json benchmarks/results/query_plan.json
    python benchmarks/query_plan.py --write-model   # refit norax_core/data/query_intents.json

Intents: the dataset categories mapped by ``norax_core/bench/intent_labels.py``. The
classifier is cross-validated leave-one-conversation-out on the dev questions (LoCoMo's seven
conversations and BEAM 100K's ten chats); BEAM 500K is never fitted on and is scored by the
model fitted on all dev questions (the shipped one). Three variants: the keyword rules alone,
the regression on words only, and the regression on words plus the rules' cues (shipped).

Periods: on LoCoMo, for each question that names a period, whether its evidence turns were
said inside it (session dates). Cost: ``plan_query`` p50/p95 over every question, beside the
BM25 tokenizer on the same queries (a step every search already pays).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from norax_core.bench.data import load_locomo
from norax_core.bench.intent_labels import LabelledQuestion, beam_questions, locomo_questions
from norax_core.query import Intent, plan_query
from norax_core.query.intents import IntentModel, features, fit_intent_model, rule_intent
from norax_core.query.periods import find_periods
from norax_core.tokenize import Tokenizer

REPO = Path(__file__).resolve().parents[1]
MODEL_PATH = REPO / "norax_core" / "data" / "query_intents.json"
L2 = 1e-3
INTENTS = list(Intent)


def _feats(q: LabelledQuestion, rules: bool) -> list[str]:
    now = datetime.fromtimestamp(q.now, tz=timezone.utc)
    fs = features(q.text, bool(find_periods(q.text, now)))
    return fs if rules else [f for f in fs if not f.startswith("rule:")]


def _predict(model: IntentModel, feats: list[str]) -> Intent:
    scores = model.scores(feats)
    return max(scores, key=lambda i: scores[i])


def report(truth: list[Intent], pred: list[Intent]) -> dict[str, object]:
    """Accuracy, macro F1, per-intent precision/recall/support, confusion (rows: truth)."""
    per: dict[str, dict[str, float]] = {}
    f1s = []
    for i in INTENTS:
        tp = sum(t is i and p is i for t, p in zip(truth, pred, strict=True))
        n_true, n_pred = truth.count(i), pred.count(i)
        prec = tp / n_pred if n_pred else 0.0
        rec = tp / n_true if n_true else 0.0
        if n_true:
            f1s.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
        per[i.value] = {
            "precision": round(prec, 3),
            "recall": round(rec, 3),
            "support": n_true,
            "predicted": n_pred,
        }
    confusion = {
        t.value: {
            p.value: sum(a is t and b is p for a, b in zip(truth, pred, strict=True))
            for p in INTENTS
        }
        for t in INTENTS
        if t in truth
    }
    acc = sum(a is b for a, b in zip(truth, pred, strict=True)) / len(truth)
    return {
        "n": len(truth),
        "accuracy": round(acc, 3),
        "macro_f1": round(float(np.mean(f1s)), 3),
        "per_intent": per,
        "confusion": confusion,
    }


def by_category(qs: list[LabelledQuestion], pred: list[Intent]) -> dict[str, dict[str, int]]:
    """For each dataset category, how many of its questions got each intent."""
    out: dict[str, Counter[str]] = {}
    for q, p in zip(qs, pred, strict=True):
        out.setdefault(q.category, Counter())[p.value] += 1
    return {c: dict(v.most_common()) for c, v in sorted(out.items())}


def cross_validate(qs: list[LabelledQuestion], rules: bool, l2: float) -> list[Intent]:
    """Leave-one-conversation-out predictions of the regression."""
    feats = [_feats(q, rules) for q in qs]
    pred: list[Intent | None] = [None] * len(qs)
    for conv in dict.fromkeys(q.conversation for q in qs):
        train = [j for j, q in enumerate(qs) if q.conversation != conv]
        model = fit_intent_model([feats[j] for j in train], [qs[j].intent for j in train], l2=l2)
        for j, q in enumerate(qs):
            if q.conversation == conv:
                pred[j] = _predict(model, feats[j])
    return [p for p in pred if p is not None]


def period_hits(locomo: Path) -> dict[str, object]:
    """LoCoMo questions naming a period: are their evidence turns inside it?"""
    data = load_locomo(locomo)
    named = hit_any = hit_all = 0
    by_cat: Counter[str] = Counter()
    for conv in data.conversations:
        times = {m.id: m.created_at for m in conv.memories}
        now = datetime.fromtimestamp(conv.now, tz=timezone.utc)
        for q in conv.questions:
            periods = find_periods(q.text, now)
            gold = [times[g] for g in q.gold if g in times]
            if not periods or not gold:
                continue
            named += 1
            by_cat[q.category] += 1
            inside = [any(p.contains(t) for p in periods) for t in gold]
            hit_any += any(inside)
            hit_all += all(inside)
    total = sum(len(c.questions) for c in data.conversations)
    return {
        "questions": total,
        "naming_a_period": named,
        "by_category": dict(by_cat),
        "evidence_inside_any": round(hit_any / named, 3) if named else None,
        "evidence_inside_all": round(hit_all / named, 3) if named else None,
    }


def cost(qs: list[LabelledQuestion], repeats: int) -> dict[str, object]:
    """p50/p95 microseconds of plan_query and of BM25 tokenization, interleaved per query."""
    tok = Tokenizer()
    plan_us, tok_us = [], []
    for q in qs[:50]:  # warm caches (model load, regex compile)
        plan_query(q.text, q.now)
        tok(q.text)
    for _ in range(repeats):
        for q in qs:
            t0 = time.perf_counter_ns()
            plan_query(q.text, q.now)
            t1 = time.perf_counter_ns()
            tok(q.text)
            t2 = time.perf_counter_ns()
            plan_us.append((t1 - t0) / 1e3)
            tok_us.append((t2 - t1) / 1e3)

    def pct(xs: list[float], p: float) -> float:
        return round(float(np.percentile(xs, p)), 1)

    return {
        "calls": len(plan_us),
        "plan_query_us": {"p50": pct(plan_us, 50), "p95": pct(plan_us, 95)},
        "bm25_tokenize_us": {"p50": pct(tok_us, 50), "p95": pct(tok_us, 95)},
        "ratio_p50": round(statistics.median(plan_us) / statistics.median(tok_us), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data", default=os.environ.get("NORAX_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--write-model", action="store_true", help=f"refit {MODEL_PATH.name}")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    data = Path(args.data)
    locomo_file = data / "locomo" / "locomo10_dev.json"
    dev = locomo_questions(locomo_file) + beam_questions(data / "beam" / "100K")
    held_out = beam_questions(data / "beam" / "500K")
    truth = [q.intent for q in dev]

    if args.write_model:
        model = fit_intent_model(
            [_feats(q, True) for q in dev],
            truth,
            l2=L2,
            meta={
                "fitted_on": "LoCoMo dev (7 conversations) + BEAM 100K (10 chats) questions",
                "questions": len(dev),
                "l2": L2,
                "script": "benchmarks/query_plan.py --write-model",
            },
        )
        MODEL_PATH.write_text(json.dumps(model.to_json(), separators=(",", ":")) + "\n")
        print(f"wrote {MODEL_PATH} ({len(model.weights)} features)")
        return

    out: dict[str, object] = {
        "mapping": "norax_core/bench/intent_labels.py",
        "cv": "leave-one-conversation-out",
    }
    rules_pred = [rule_intent(q.text) for q in dev]
    variants: dict[str, object] = {"rules": report(truth, rules_pred)}
    shipped_pred: list[Intent] = []
    for name, rules, l2 in [
        ("words", False, L2),
        ("words+rules", True, L2),
        ("words+rules_l2_1e-2", True, 1e-2),
        ("words+rules_l2_1e-4", True, 1e-4),
    ]:
        pred = cross_validate(dev, rules, l2)
        variants[name] = report(truth, pred)
        if name == "words+rules":
            shipped_pred = pred
        r = variants[name]
        print(f"{name:24s} CV accuracy {r['accuracy']:.3f} macro-F1 {r['macro_f1']:.3f}")  # type: ignore[index]
    r = variants["rules"]
    print(f"{'rules':24s} accuracy    {r['accuracy']:.3f} macro-F1 {r['macro_f1']:.3f}")  # type: ignore[index]
    out["dev_questions"] = len(dev)
    out["dev_cv"] = variants
    out["dev_cv_shipped_by_dataset"] = {
        ds: report(
            [q.intent for q in dev if q.conversation.startswith(pre)],
            [p for q, p in zip(dev, shipped_pred, strict=True) if q.conversation.startswith(pre)],
        )
        for ds, pre in [("locomo", "conv-"), ("beam_100k", "beam-")]
    }
    out["dev_cv_shipped_by_category"] = by_category(dev, shipped_pred)

    shipped = [plan_query(q.text, q.now) for q in held_out]
    ho_pred = [p.intent for p in shipped]
    out["beam_500k_held_out"] = {
        "model": shipped[0].source,
        **report([q.intent for q in held_out], ho_pred),
        "by_category": by_category(held_out, ho_pred),
        "rules": report([q.intent for q in held_out], [rule_intent(q.text) for q in held_out]),
    }
    print(f"BEAM 500K held out: shipped accuracy {out['beam_500k_held_out']['accuracy']:.3f}")  # type: ignore[index]
    out["periods_locomo"] = period_hits(locomo_file)
    print("periods:", out["periods_locomo"])
    out["cost"] = cost(dev + held_out, args.repeats)
    print("cost:", out["cost"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
