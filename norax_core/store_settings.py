"""What a store remembers about itself: its default weights and how its memories were embedded.

Both live in the Chroma collection's metadata, beside the embedder's name and dimension, so a
store opened later (by another process, or over a Chroma server) finds them without a sidecar.

* The **default weights** are what :meth:`NoraxMemory.search` fuses with when a search names
  none. ``NoraxMemory(path)`` without ``weights`` uses the recorded ones, so a store built
  with ``weights="chat"`` keeps searching as a chat store.
* The **embedding settings** (``embed_context`` and the ``context_gap_seconds`` it used) are
  add-time: they decide what the embedder read for every stored memory. Once a store holds
  memories they are fixed, and later adds use them whatever weights the store is opened
  with; otherwise the store would silently hold vectors of two kinds.

While a store is empty, each open records the settings it is opened with.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from norax_core.config import NoraxConfig
from norax_core.errors import WeightsError
from norax_core.presets import get_preset
from norax_core.weights import Weights, weights_from_dict

logger = logging.getLogger("norax")

WEIGHTS_KEY = "norax_weights"
EMBED_CONTEXT_KEY = "norax_embed_context"
EMBED_GAP_KEY = "norax_embed_context_gap_seconds"


@dataclass(frozen=True)
class EmbedSettings:
    """How memories are embedded (see :attr:`NoraxConfig.embed_context`)."""

    embed_context: int = 0
    context_gap_seconds: float = 3600.0

    @classmethod
    def of(cls, config: NoraxConfig) -> EmbedSettings:
        """The settings a configuration embeds with."""
        return cls(config.embed_context, float(config.context_gap_seconds))

    def describe(self) -> str:
        """For messages: ``embed_context=2 (gap 3600 s)``."""
        if self.embed_context == 0:
            return "embed_context=0"
        return f"embed_context={self.embed_context} (gap {self.context_gap_seconds:g} s)"


@dataclass(frozen=True)
class StoreSettings:
    """The settings a collection's metadata records (``None``: not recorded)."""

    weights: Weights | None = None
    embed: EmbedSettings | None = None


def read_settings(
    metadata: Mapping[str, Any] | None, *, collection: str, weights: bool = True
) -> StoreSettings:
    """The settings recorded in a collection's metadata.

    Args:
        metadata: The collection's metadata.
        collection: Its name, for error messages.
        weights: Read the recorded weights (``False`` leaves them ``None``: the caller has
            its own).

    Raises:
        WeightsError: The recorded weights are not a valid weights file (for example written
            by a newer Norax); open the store with explicit ``weights``.
    """
    meta = dict(metadata or {})
    recorded = None
    raw = meta.get(WEIGHTS_KEY)
    if weights and isinstance(raw, str):
        source = f"the default weights recorded in collection {collection!r}"
        hint = "open the store with explicit weights="
        try:
            recorded = weights_from_dict(json.loads(raw), source=source)
        except json.JSONDecodeError as exc:
            raise WeightsError(f"{source} are not valid JSON ({exc}); {hint}") from None
        except WeightsError as exc:
            raise WeightsError(f"{exc}; {hint}") from None
    embed = None
    n = meta.get(EMBED_CONTEXT_KEY)
    if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
        gap = meta.get(EMBED_GAP_KEY)
        embed = EmbedSettings(n, float(gap) if isinstance(gap, (int, float)) else 3600.0)
    return StoreSettings(recorded, embed)


def settings_metadata(weights: Weights, embed: EmbedSettings) -> dict[str, Any]:
    """The metadata entries that record ``weights`` and ``embed``."""
    return {
        WEIGHTS_KEY: json.dumps(weights.to_file_dict(), sort_keys=True),
        EMBED_CONTEXT_KEY: embed.embed_context,
        EMBED_GAP_KEY: embed.context_gap_seconds,
    }


def settle(
    collection: Any,
    name: str,
    weights: Weights | None,
    config_for: Callable[[Weights], NoraxConfig],
    *,
    record: bool,
    holds: Callable[[], bool] | None = None,
) -> tuple[Weights, EmbedSettings]:
    """A store's default weights and embedding settings at open; records them if it is empty.

    Args:
        collection: The Chroma collection.
        name: Its name, for messages.
        weights: The weights the store is opened with, or ``None`` for the recorded ones
            (else ``"default"``).
        config_for: The store's configuration with a weights' parameters applied.
        record: Write the settings into an empty (or unrecorded) collection's metadata.
        holds: Whether the collection holds a memory (default: ask Chroma for its count).

    Returns:
        ``(default weights, embedding settings for every add)``.
    """
    meta = dict(collection.metadata or {})
    stored = read_settings(meta, collection=name, weights=weights is None)
    chosen = weights or stored.weights or get_preset("default")
    asked = EmbedSettings.of(config_for(chosen))
    if stored == StoreSettings(chosen, asked):
        # Nothing to warn about or record, empty or not: no read of the collection's data
        # (a Chroma server's first read of a collection loads its index, in proportion to
        # the store).
        return chosen, asked
    held = holds if holds is not None else lambda: collection.count() > 0
    if stored.embed is not None and held():
        if asked != stored.embed:
            logger.warning(
                "norax: collection %r was embedded with %s; memories added now use the same, "
                "not the %s these weights ask for",
                name,
                stored.embed.describe(),
                asked.describe(),
            )
        return chosen, stored.embed
    if record and stored != StoreSettings(chosen, asked):
        collection.modify(metadata={**meta, **settings_metadata(chosen, asked)})
    return chosen, asked
