"""``norax bench locomo|beam`` and ``norax fit``: the benchmark sub-commands."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from norax_core.errors import InvalidInputError

__all__ = ["register"]


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--k expects numbers like 1,5,10,25, got {text!r}"
        ) from None
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError("--k values must be integers >= 1")
    return ks


def _load(kind: str, path: str) -> Any:
    from norax_core.bench.data import load_beam, load_locomo

    if kind == "locomo":
        return load_locomo(path)
    if kind == "beam":
        return load_beam(path)
    raise InvalidInputError(f"unknown dataset {kind!r}; valid: locomo, beam")


def _fused_weights(args: argparse.Namespace) -> Any:
    from norax_core.presets import get_preset
    from norax_core.weights import load_weights

    if args.weights:
        return load_weights(args.weights)
    return get_preset(args.preset or "default")


def _table(result: dict[str, Any]) -> str:
    ks = result["k"]
    head = f"{'method':<10}" + "".join(f"{'R@' + str(k):>9}" for k in ks)
    lines = [head]
    for m, vals in result["methods"].items():
        lines.append(f"{m:<10}" + "".join(f"{vals[f'recall@{k}']:>9.3f}" for k in ks))
    cats = result.get("by_category", {})
    if cats:
        key = "recall@10" if 10 in ks else f"recall@{ks[-1]}"
        methods = list(result["methods"])
        lines += [
            "",
            f"{key} by category",
            f"{'category':<26}" + "".join(f"{m:>9}" for m in methods),
        ]
        for c in sorted(cats):
            lines.append(
                f"{c:<26}" + "".join(f"{cats[c].get(m, {}).get(key, 0.0):>9.3f}" for m in methods)
            )
    if "latest_wins" in result:
        lines += ["", "latest wins (knowledge_update)"]
        lines += [f"{m:<10}{v:>9.3f}" for m, v in result["latest_wins"].items()]
    return "\n".join(lines)


def _cmd_bench(args: argparse.Namespace) -> int:
    from norax_core.bench.harness import default_methods, run_benchmark

    t0 = time.perf_counter()
    dataset = _load(args.dataset, args.data)
    methods = default_methods(_fused_weights(args))
    run, _ = run_benchmark(dataset, methods, args.k, cache=args.cache, progress=not args.quiet)
    result = run.to_json()
    print(_table(result))
    timing = ", ".join(f"{k} {v:.1f}s" for k, v in run.timings.items())
    print(f"\n{dataset.n_questions} questions; {timing} (wall {time.perf_counter() - t0:.1f}s)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        from norax_core.bench.plot import plot_run

        plot_run(result, args.plot)
    return 0


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=_ks, default=(1, 5, 10, 25), help="cut-offs (default 1,5,10,25)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--weights", help="weights file for 'fused' (default: the 'default' preset)")
    g.add_argument("--preset", help="preset name for 'fused'")
    p.add_argument("--json", help="write the results as JSON here")
    p.add_argument("--plot", help="write a PNG bar chart here (needs matplotlib)")
    p.add_argument("--cache", help="embedding/entity cache folder (default ~/.cache/norax)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def _cmd_fit(args: argparse.Namespace) -> int:
    from norax_core.bench.fitcmd import run_fit

    data: Sequence[str] = args.data
    kinds: Sequence[str] = args.dataset
    if len(data) != len(kinds):
        raise InvalidInputError("give one --dataset per --data, in the same order")
    return run_fit(
        [(_load(k, d), d) for k, d in zip(kinds, data, strict=True)],
        out=args.out,
        k=args.fit_k,
        cv=not args.no_cv,
        restarts=args.restarts,
        report=args.json,
        cache=args.cache,
        progress=not args.quiet,
        name=args.name,
        embed_context=args.embed_context,
        per_intent=args.per_intent,
        min_intent_questions=args.min_intent_questions,
    )


def register(subparsers: Any) -> None:
    """Add ``bench`` and ``fit`` to the ``norax`` command line."""
    bench = subparsers.add_parser("bench", help="recall@k on LoCoMo or BEAM, per signal and fused")
    which = bench.add_subparsers(dest="dataset", required=True)
    lo = which.add_parser("locomo", help="LoCoMo (a locomo10.json-format file)")
    lo.add_argument("--data", required=True, help="path of the LoCoMo JSON file")
    _add_common(lo)
    be = which.add_parser("beam", help="BEAM (a size folder such as beam/100K)")
    be.add_argument("--data", required=True, help="folder holding one folder per chat")
    _add_common(be)
    for p in (lo, be):
        p.set_defaults(func=_cmd_bench)

    fit = subparsers.add_parser(
        "fit", help="learn fusion weights from LoCoMo/BEAM, with leave-one-conversation-out CV"
    )
    fit.add_argument("--data", action="append", required=True, help="dataset path (repeatable)")
    fit.add_argument(
        "--dataset",
        action="append",
        required=True,
        choices=("locomo", "beam"),
        help="kind of each --data, in order",
    )
    fit.add_argument("--out", default="weights.json", help="weights file to write")
    fit.add_argument("--name", default="fitted", help="name recorded in the weights file")
    fit.add_argument("--k", dest="fit_k", type=int, default=10, help="recall cut-off to maximise")
    fit.add_argument("--restarts", type=int, default=1, help="random starts besides two fixed")
    fit.add_argument("--no-cv", action="store_true", help="skip cross-validation")
    fit.add_argument(
        "--embed-context",
        type=int,
        default=0,
        help="embed each memory with this many previous ones (add-time; default 0)",
    )
    fit.add_argument(
        "--per-intent",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also fit per-intent overrides, from the global fit (default: on)",
    )
    fit.add_argument(
        "--min-intent-questions",
        type=int,
        default=30,
        help="an intent with fewer training questions keeps the global weights (default 30)",
    )
    fit.add_argument("--json", help="write the fit and CV report as JSON here")
    fit.add_argument("--cache", help="embedding/entity cache folder (default ~/.cache/norax)")
    fit.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    fit.set_defaults(func=_cmd_fit)


def _main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - debugging aid
    parser = argparse.ArgumentParser(prog="norax")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main())
