"""The query intent reader on everyday phrasings: its confusion matrix (issue 24 item 1).

    python benchmarks/intent_confusion.py
    python benchmarks/intent_confusion.py --data ../shared/data \
        --json benchmarks/results/intent_confusion.json

The phrasings are Norax's own labelled set, ``tests/data/intent_phrasings.tsv`` (requests to
an agent, how-to questions, current-state questions, questions about people, time,
preference, decision, coverage and multi-hop questions, over many people and domains;
nothing from LoCoMo or BEAM). Prints the confusion matrix (rows: the label, columns: what
:func:`~norax_core.plan_query` reads), accuracy per group and every misread. With ``--data``,
also the reader's accuracy on the dev questions' labels (LoCoMo dev and BEAM 100K, which the
shipped model was fitted on) and on BEAM 500K (held out), as ``benchmarks/query_plan.py``
maps them, so a fix here can be seen not to cost there.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from norax_core.query import Intent, plan_query

REPO = Path(__file__).resolve().parents[1]
PHRASINGS = REPO / "tests" / "data" / "intent_phrasings.tsv"
NOW = 1_790_000_000.0  # a fixed clock: periods, and so the shape:period feature, stay put


def load_phrasings(path: Path = PHRASINGS) -> list[tuple[str, Intent, str]]:
    """``(group, intent, text)`` rows of the labelled set (``#`` lines are comments)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            group, intent, text = line.split("\t")
            rows.append((group, Intent(intent), text))
    return rows


def confusion(truth: list[Intent], pred: list[Intent]) -> dict[str, dict[str, int]]:
    """Counts by label (rows) and reading (columns), over the intents that occur."""
    seen = [i for i in Intent if i in truth or i in pred]
    return {
        t.value: {
            p.value: sum(a is t and b is p for a, b in zip(truth, pred, strict=True)) for p in seen
        }
        for t in seen
        if t in truth
    }


def table(matrix: dict[str, dict[str, int]]) -> str:
    """The matrix as text, with each row's recall."""
    cols = list(next(iter(matrix.values())))
    short = {c: c[:8] for c in cols}
    lines = [f"{'label / read as':<16}" + "".join(f"{short[c]:>9}" for c in cols) + "   recall"]
    for row, counts in matrix.items():
        n = sum(counts.values())
        lines.append(
            f"{row:<16}"
            + "".join(f"{counts[c]:>9}" for c in cols)
            + f"   {counts.get(row, 0) / n:.2f} ({n})"
        )
    return "\n".join(lines)


def dev_accuracy(data: Path) -> dict[str, float]:
    """The shipped reader's accuracy on the datasets' mapped labels."""
    from norax_core.bench.intent_labels import beam_questions, locomo_questions

    sets = {
        "locomo_dev": locomo_questions(data / "locomo" / "locomo10_dev.json"),
        "beam_100k_dev": beam_questions(data / "beam" / "100K"),
        "beam_500k_held_out": beam_questions(data / "beam" / "500K"),
    }
    return {
        name: round(sum(plan_query(q.text, q.now).intent is q.intent for q in qs) / len(qs), 3)
        for name, qs in sets.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="also score the LoCoMo/BEAM labels under this folder")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    rows = load_phrasings()
    truth = [intent for _, intent, _ in rows]
    pred = [plan_query(text, NOW).intent for *_, text in rows]
    matrix = confusion(truth, pred)
    print(table(matrix))
    acc = sum(a is b for a, b in zip(truth, pred, strict=True)) / len(rows)
    print(f"\naccuracy {acc:.3f} over {len(rows)} phrasings")
    groups: dict[str, Counter[bool]] = {}
    for (group, intent, _), p in zip(rows, pred, strict=True):
        groups.setdefault(group, Counter())[intent is p] += 1
    by_group = {g: round(c[True] / sum(c.values()), 3) for g, c in groups.items()}
    print("by group:", ", ".join(f"{g} {v:.2f}" for g, v in by_group.items()))
    misread = [
        {"text": text, "label": intent.value, "read": p.value}
        for (_, intent, text), p in zip(rows, pred, strict=True)
        if intent is not p
    ]
    for m in misread:
        print(f"  {m['label']:>13} -> {m['read']:<13} {m['text']}")
    out: dict[str, object] = {
        "phrasings": len(rows),
        "accuracy": round(acc, 3),
        "by_group": by_group,
        "confusion": matrix,
        "misread": misread,
    }
    if args.data:
        out["dataset_labels"] = dev_accuracy(Path(args.data))
        print("dataset labels:", out["dataset_labels"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
