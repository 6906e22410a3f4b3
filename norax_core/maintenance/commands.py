"""The ``norax check``, ``export``, ``import`` and ``publish`` commands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from norax_core.embedders import CallableEmbedder
from norax_core.errors import InvalidInputError, NoraxError
from norax_core.locking import StoreLock
from norax_core.maintenance.check import check_store, repair_store
from norax_core.maintenance.jsonl import export_jsonl, import_jsonl
from norax_core.store.publishing import publish_all

if TYPE_CHECKING:
    from norax_core.engine import NoraxMemory

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add ``check``, ``export``, ``import`` and ``publish`` to the ``norax`` sub-commands."""
    c = sub.add_parser("check", help="verify that Chroma and every derived index agree")
    c.add_argument("--repair", action="store_true", help="rebuild what is stale")
    c.add_argument("--quick", action="store_true", help="compare ids only, not row contents")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=_cmd_check)

    e = sub.add_parser("export", help="write every memory to a JSONL file (add --jsonl format)")
    e.add_argument("--out", required=True, help="destination .jsonl file")
    e.add_argument("--namespace", help="export this namespace only")
    e.set_defaults(func=_cmd_export)

    i = sub.add_parser("import", help="add the memories of an exported JSONL file")
    i.add_argument("file")
    i.add_argument("--preset", help="fusion preset (a new store records it as its default)")
    i.add_argument("--weights", help="weights file (overrides --preset)")
    i.set_defaults(func=_cmd_import)

    p = sub.add_parser(
        "publish", help="publish every namespace's snapshot in Chroma (for a server's clients)"
    )
    p.set_defaults(func=_cmd_publish)


def _cmd_check(args: argparse.Namespace) -> int:
    # Not reconciled at open: the check must see the indexes as they were left on disk.
    with _open_existing(args, reconcile=False) as mem:
        if not args.repair:
            report = check_store(mem, deep=not args.quick)
            print(json.dumps(report.to_dict()) if args.json else report.format())
            return 0 if report.ok else 1
        result = repair_store(mem)
    if args.json:
        print(json.dumps({"before": result.before.to_dict(), "after": result.after.to_dict()}))
    else:
        print(result.before.format())
        if not result.before.ok:
            print(
                f"repaired: {result.rederived} re-derived from Chroma, {result.dropped} dropped"
                + (", in-memory indexes rebuilt" if result.rebuilt else "")
            )
            print(result.after.format())
    return 0


def _cmd_publish(args: argparse.Namespace) -> int:
    with _open_existing(args) as mem:
        n = publish_all(mem.store, progress=True)
    print(f"published the snapshots of {n} namespaces")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    with _open_existing(args) as mem:
        n = export_jsonl(mem, args.out, namespace=args.namespace)
    print(f"exported {n} memories to {args.out}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from norax_core.cli_common import open_memory

    path = Path(args.file)
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such file")
    with open_memory(args) as mem:
        n = import_jsonl(mem, path, progress=True)
    print(f"imported {n} memories")
    return 0


def _open_existing(args: argparse.Namespace, **kwargs: Any) -> NoraxMemory:
    """Open the CLI's store for ``check`` and ``export`` without loading any model.

    These commands never embed nor extract, so the embedder is a stand-in with the name and
    dimension the store recorded: a store built with any embedder (OpenAI's included) can be
    checked or exported offline. A folder without a store is an error, not a new store.
    """
    import chromadb

    from norax_core.cli_common import open_memory, store_path
    from norax_core.store import DEFAULT_COLLECTION

    path = store_path(args)
    if not (path / "chroma.sqlite3").is_file():
        raise InvalidInputError(f"no Norax store at {path} (give --store or set NORAX_STORE)")
    lock = StoreLock(path / "norax.lock")  # read the recorded embedder only while we own it
    try:
        client = chromadb.PersistentClient(path=str(path))
        try:
            meta = dict(client.get_collection(DEFAULT_COLLECTION).metadata or {})
        except Exception as exc:  # Chroma raises several types for a missing collection
            raise InvalidInputError(f"no Norax collection in {path}: {exc}") from None
        finally:
            close = getattr(client, "close", None)
            if close is not None:
                close()
    finally:
        lock.release()
    name, dim = meta.get("norax_embedder"), meta.get("norax_dim")
    if isinstance(name, str) and isinstance(dim, int):
        kwargs["embedder"] = CallableEmbedder(_no_embedding, name=name, dim=dim)
    return open_memory(args, extractor=False, **kwargs)  # type: ignore[no-any-return]


def _no_embedding(texts: list[str]) -> list[list[float]]:
    raise NoraxError("this maintenance command opened the store without an embedder")
