"""Named fusion presets.

- ``seed``: the reference formula, 0.25 BM25 + 0.35 dense + 0.20 temporal + 0.20 graph.
- ``rrf``: reciprocal rank fusion of the four signals with equal weights.
- ``default``, ``chat``, ``project``: weights and engine ``params`` learned on the LoCoMo /
  BEAM dev data (``default`` on both, ``chat`` on LoCoMo, ``project`` on BEAM 100K), shipped
  as package data (``norax_core/data/weights_*.json``).
- Single-signal presets ``bm25``, ``dense``, ``temporal``, ``graph`` for ablations. With one
  of them only that signal's proposals are candidates, so
  :meth:`~norax_core.NoraxMemory.search` may return fewer than ``k`` results: ``bm25``
  proposes only memories that share a query term, ``graph`` only memories that share or sit
  near a query entity.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources

from norax_core.errors import InvalidInputError, WeightsError
from norax_core.models import SIGNALS
from norax_core.weights import FusionMethod, Weights, weights_from_dict

SEED = Weights(0.25, 0.35, 0.20, 0.20, name="seed")
RRF = Weights(1.0, 1.0, 1.0, 1.0, method=FusionMethod.RRF, name="rrf")


def _single(signal: str) -> Weights:
    return Weights.from_mapping({signal: 1.0}, name=signal)


def _packaged(name: str) -> Weights:
    ref = resources.files("norax_core") / "data" / f"weights_{name}.json"
    return weights_from_dict(json.loads(ref.read_text()), source=f"preset {name!r}")


_BUILTIN: dict[str, Weights] = {"seed": SEED, "rrf": RRF, **{s: _single(s) for s in SIGNALS}}
_PACKAGED = ("default",)


def preset_names() -> list[str]:
    """All preset names, packaged ones included."""
    packaged = [
        p.name.removeprefix("weights_").removesuffix(".json")
        for p in (resources.files("norax_core") / "data").iterdir()
        if p.name.startswith("weights_") and p.name.endswith(".json")
    ]
    return sorted(set(_BUILTIN) | set(packaged) | set(_PACKAGED))


def get_preset(name: str) -> Weights:
    """Return the named preset; an unknown name raises :class:`WeightsError` listing them."""
    if name in _BUILTIN:
        return _BUILTIN[name]
    try:
        return _packaged(name)
    except FileNotFoundError:
        if name == "default":  # no learned weights shipped yet: the seed formula
            return Weights.from_mapping(SEED.as_dict(), name="default")
        raise WeightsError(f"unknown preset {name!r}; valid: {preset_names()}") from None


WeightsLike = Weights | str | Mapping[str, float] | None
"""What every ``weights=`` argument takes."""


def resolve_weights(value: WeightsLike) -> Weights:
    """A :class:`Weights` from weights, a preset name, or a mapping of signal -> weight."""
    if value is None:
        return get_preset("default")
    if isinstance(value, Weights):
        return value
    if isinstance(value, str):
        return get_preset(value)
    if isinstance(value, Mapping):
        return Weights.from_mapping(value)
    raise InvalidInputError(f"weights must be Weights, a preset name or a mapping, got {value!r}")
