"""The ``norax`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from norax_core.cli_common import open_memory, parse_meta
from norax_core.cli_common import store_path as _store_path
from norax_core.errors import InvalidInputError, NoraxError

Handler = Callable[[argparse.Namespace], int]


def _cmd_add(args: argparse.Namespace) -> int:
    if (args.text is None) == (args.jsonl is None):
        raise InvalidInputError("give exactly one of --text or --jsonl")
    with open_memory(args) as mem:
        if args.text is not None:
            ids = mem.add(
                args.text,
                ids=args.id,
                kind=args.kind,
                created_at=args.created_at,
                namespace=args.namespace,
                metadata=parse_meta(args.meta),
            )
            print(ids[0])
            return 0
        from norax_core.ingest import add_jsonl

        n = add_jsonl(mem, Path(args.jsonl), progress=True)
        print(f"added {n} memories")
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    with open_memory(args) as mem:
        results = mem.search(args.query, k=args.k, namespace=args.namespace, now=args.now)
    if args.json:
        print(json.dumps({"results": [r.to_dict() for r in results]}, ensure_ascii=False))
    else:
        from norax_core.display import format_results

        print(format_results(results))
    return 0


def _cmd_delete(args: argparse.Namespace) -> int:
    with open_memory(args) as mem:
        n = mem.delete(args.ids, namespace=args.namespace)
    print(f"deleted {n} of {len(args.ids)}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from norax_core.demo import run_demo

    return run_demo(_store_path(args))


def _weights_options(parser: argparse.ArgumentParser, note: str) -> None:
    parser.add_argument("--preset", help=f"fusion preset ({note})")
    parser.add_argument("--weights", help="weights file (overrides --preset)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests)."""
    p = argparse.ArgumentParser(prog="norax", description="Norax agent memory")
    p.add_argument("--store", help="store folder (default: $NORAX_STORE, else ./.norax)")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser("add", help="add a memory (--text) or a JSONL file of them (--jsonl)")
    a.add_argument("--text")
    a.add_argument("--jsonl", help="one JSON object per line: text, id, kind, created_at, ...")
    a.add_argument("--kind", default="episodic")
    a.add_argument("--created-at", dest="created_at", help="ISO 8601 (default: now)")
    a.add_argument("--namespace")
    a.add_argument("--meta", nargs="*", metavar="KEY=VALUE")
    a.add_argument("--id")
    _weights_options(a, "a new store records them as its default weights")
    a.set_defaults(func=_cmd_add)

    s = sub.add_parser("search", help="search memories")
    s.add_argument("query")
    s.add_argument("--k", type=int, default=10)
    s.add_argument("--namespace")
    s.add_argument("--now", help="ISO 8601 clock for recency (default: now)")
    s.add_argument("--json", action="store_true", help="print JSON")
    _weights_options(s, "default: the weights the store recorded")
    s.set_defaults(func=_cmd_search)

    d = sub.add_parser("delete", help="delete memories by id")
    d.add_argument("ids", nargs="+")
    d.add_argument(
        "--namespace",
        help="delete only memories of this namespace (ids stored in another are left alone); "
        "without it, the ids are deleted in whatever namespace they are",
    )
    d.set_defaults(func=_cmd_delete)

    demo = sub.add_parser("demo", help="build a small store from the bundled sample and query it")
    demo.set_defaults(func=_cmd_demo)

    for register in _extensions():
        register(sub)
    return p


def _extensions() -> list[Callable[[Any], None]]:
    """Sub-commands that live in their own modules (benchmarks, maintenance, the inspector)."""
    from norax_core.bench.cli import register as bench
    from norax_core.maintenance import register as maintenance
    from norax_core.ui import register as ui

    return [bench, maintenance, ui]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``norax`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(message)s",
    )
    handler: Handler = args.func
    try:
        return handler(args)
    except NoraxError as exc:
        print(f"norax: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file or folder the user named (--json, --out, ...)
        print(f"norax: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("norax: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
