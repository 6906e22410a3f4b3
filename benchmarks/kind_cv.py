"""Inferred kinds against BEAM's own labels: precision and recall of instruction and preference.

    python benchmarks/kind_cv.py --data ../shared/data --json benchmarks/results/kind_cv.json

Gold (BEAM's labels): the source message of every ``instruction_following`` question is an
instruction, of every ``preference_following`` question a preference. ``strict`` takes each
question's first source id (the message that states the rule; later ids are follow-ups that
repeat or refer to it); ``loose`` takes every source id. Predictions: ``norax_core.kinds``'s
rule (:func:`infer_kind` on every user message, with its role, as a store derives it).

Precision is read against these labels, which under-count: a chat holds "Always X when I ask
about Y" rules no question happens to test. ``tests/data/kind_hand_checked.tsv`` is a
hand-checked sample of the rule's false positives on the dev chats (each read and judged:
``rule`` a real standing instruction or preference of the user, ``not`` otherwise); the
report gives the sample's share of real ones and the precision it implies.

Nothing is fitted (the rule is cue phrases), so there is no cross-validation to run: the
100K chats are the dev set the rule was written against (session 7), the 500K chats are held
out. Per-chat figures show the spread (a leave-one-chat-out reading of a fixed rule is the
per-chat table itself).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from norax_core.bench.data import BenchDataset, load_beam
from norax_core.bench.harness import store_id
from norax_core.kinds import KIND_RULE, infer_kind

REPO = Path(__file__).resolve().parents[1]
CATEGORY = {"instruction_following": "instruction", "preference_following": "preference"}
KINDS = ("instruction", "preference")
ROLE = {"beam_100k": "(dev)", "beam_500k": "(held out)"}
HAND = REPO / "tests" / "data" / "kind_hand_checked.tsv"


def gold(ds: BenchDataset, strict: bool) -> dict[str, str]:
    """Store id -> the kind BEAM's questions label it (instruction wins a double label)."""
    out: dict[str, str] = {}
    for conv in ds.conversations:
        for q in conv.questions:
            kind = CATEGORY.get(q.category)
            if kind is None or not q.gold:
                continue
            for g in q.gold[:1] if strict else q.gold:
                key = store_id(conv.name, g)
                if out.get(key) != "instruction":
                    out[key] = kind
    return out


def predictions(ds: BenchDataset) -> dict[str, tuple[str, str, str]]:
    """Store id -> (inferred kind, text, chat) of every user message."""
    return {
        store_id(c.name, m.id): (infer_kind(m.text, m.role), m.text, c.name)
        for c in ds.conversations
        for m in c.memories
        if m.role == "user"
    }


def scores(pred: dict[str, tuple[str, str, str]], gold_: dict[str, str]) -> dict[str, Any]:
    """Precision, recall and counts per kind."""
    out: dict[str, Any] = {}
    for kind in KINDS:
        said = {k for k, (p, _, _) in pred.items() if p == kind}
        true = {k for k, g in gold_.items() if g == kind and k in pred}
        tp = len(said & true)
        out[kind] = {
            "precision": round(tp / len(said), 3) if said else None,
            "recall": round(tp / len(true), 3) if true else None,
            "predicted": len(said),
            "gold": len(true),
            "true_positives": tp,
        }
    return out


def per_chat(pred: dict[str, tuple[str, str, str]], gold_: dict[str, str]) -> dict[str, Any]:
    """:func:`scores` of each chat alone."""
    chats = sorted({c for _, _, c in pred.values()})
    return {c: scores({k: v for k, v in pred.items() if v[2] == c}, gold_) for c in chats}


def hand_checked(
    pred: dict[str, tuple[str, str, str]], gold_: dict[str, str], name: str
) -> dict[str, Any]:
    """The hand-checked sample of ``name``'s false positives: share judged real, and the
    precision it implies if the sample speaks for every false positive."""
    if not HAND.is_file():
        return {}
    with HAND.open(encoding="utf-8") as f:
        rows = list(csv.DictReader((r for r in f if not r.startswith("#")), delimiter="\t"))
    out: dict[str, Any] = {}
    for kind in KINDS:
        mine = [r for r in rows if r["predicted"] == kind and r["set"] == name]
        if not mine:
            continue
        real = sum(r["verdict"] == "rule" for r in mine) / len(mine)
        said = [k for k, (p, _, _) in pred.items() if p == kind]
        tp = sum(gold_.get(k) == kind for k in said)
        fp = len(said) - tp
        out[kind] = {
            "sampled_false_positives": len(mine),
            "judged_real": round(real, 3),
            "precision_if_sample_holds": round((tp + real * fp) / len(said), 3),
        }
    return out


def sample_false_positives(
    pred: dict[str, tuple[str, str, str]], gold_: dict[str, str], n: int
) -> list[dict[str, str]]:
    """Every ``n``-th false positive of each kind (deterministic), to judge by hand."""
    out = []
    for kind in KINDS:
        fps = sorted(k for k, (p, _, _) in pred.items() if p == kind and gold_.get(k) != kind)
        for k in fps[:: max(1, len(fps) // n)][:n]:
            out.append({"id": k, "predicted": kind, "text": pred[k][1][:300]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--sample", type=int, default=0, help="print N false positives per kind")
    args = ap.parse_args()
    sets = {"beam_100k": "beam/100K", "beam_500k": "beam/500K"}
    report: dict[str, Any] = {
        "command": "python benchmarks/kind_cv.py " + " ".join(sys.argv[1:]),
        "kind_rule": KIND_RULE,
        "sets": {},
    }
    for name, rel in sets.items():
        ds = load_beam(args.data / rel)
        pred = predictions(ds)
        entry: dict[str, Any] = {"user_messages": len(pred)}
        entry["predicted_kinds"] = dict(Counter(p for p, _, _ in pred.values()))
        for how in ("strict", "loose"):
            g = gold(ds, strict=how == "strict")
            entry[how] = scores(pred, g)
            print(f"{name + ' ' + ROLE[name]:<22} {how:<7}", end="")
            for kind in KINDS:
                s = entry[how][kind]
                print(f"  {kind} P {s['precision']} R {s['recall']} ({s['gold']} gold)", end="")
            print()
        strict = gold(ds, strict=True)
        entry["per_chat_strict"] = per_chat(pred, strict)
        entry["hand_checked"] = hand_checked(pred, strict, name)
        for kind, h in entry["hand_checked"].items():
            print(
                f"{name:<22} hand-checked {kind}: {h['judged_real']:.2f} of "
                f"{h['sampled_false_positives']} sampled false positives are real; precision "
                f"if that holds {h['precision_if_sample_holds']:.2f}"
            )
        if args.sample:
            for row in sample_false_positives(pred, strict, args.sample):
                print("\t".join([row["id"], row["predicted"], row["text"].replace("\n", " ")]))
        report["sets"][name] = entry
    report["load_avg"] = [round(x, 1) for x in os.getloadavg()]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
