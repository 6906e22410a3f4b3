"""What the ``norax`` sub-commands share: finding and opening the CLI's store, reading metadata."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from norax_core.errors import InvalidInputError


def store_path(args: argparse.Namespace) -> Path:
    """The store folder: ``--store``, else ``$NORAX_STORE``, else ``./.norax``.

    Raises:
        InvalidInputError: The path exists and is not a folder.
    """
    from norax_core.errors import InvalidInputError

    path = Path(args.store or os.environ.get("NORAX_STORE") or ".norax")
    if path.exists() and not path.is_dir():
        raise InvalidInputError(f"the store {path} is a file, not a folder")
    return path


def open_memory(args: argparse.Namespace, **kwargs: Any) -> Any:
    """Open the store named by ``--store`` / ``$NORAX_STORE`` / ``./.norax``."""
    from norax_core.engine import NoraxMemory

    weights = getattr(args, "weights", None) or getattr(args, "preset", None)  # None: the store's
    if getattr(args, "weights", None):
        from norax_core.weights import load_weights

        weights = load_weights(args.weights)
    return NoraxMemory(store_path(args), weights=weights, **kwargs)


def parse_meta(items: Sequence[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values that read as int, float or true/false are converted."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"--meta expects key=value, got {item!r}")
        value: Any = raw
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            for conv in (int, float):
                try:
                    value = conv(raw)
                    break
                except ValueError:
                    continue
        out[key] = value
    return out
