"""Fusion weights, named presets and versioned weights files."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from norax_core.config import NoraxConfig
from norax_core.errors import InvalidInputError, WeightsError
from norax_core.models import SIGNALS

WEIGHTS_FORMAT = "norax-weights"
WEIGHTS_VERSION = 1


TOKENIZER_PARAMS = frozenset({"stem", "stopwords"})
""":class:`NoraxConfig` fields a weights file cannot carry: the BM25 index is tokenised when
memories are added, so a search's weights cannot change the tokenizer (set them on the store,
``NoraxMemory(config=NoraxConfig(stem=..., stopwords=...))``)."""

PARAMS = frozenset(NoraxConfig.__dataclass_fields__) - TOKENIZER_PARAMS
"""The learned engine parameters a weights file may carry in ``params``."""


def check_params(params: Any) -> None:
    """Refuse ``params`` that are unknown, out of range or tokenizer settings.

    Raises:
        WeightsError: Naming the first offending key.
    """
    if not isinstance(params, Mapping):
        raise WeightsError(f"params must be a mapping of parameter -> value, got {params!r}")
    for key, value in params.items():
        if key in TOKENIZER_PARAMS:
            raise WeightsError(
                f"params[{key!r}]: the BM25 tokenizer is a store setting, "
                f"NoraxConfig({key}=...), not a weights parameter (the index is tokenised "
                "when memories are added; a search's weights cannot change it)"
            )
        if key not in PARAMS:
            raise WeightsError(f"unknown params key {key!r}; valid: {sorted(PARAMS)}")
        try:
            NoraxConfig().with_params({key: value})
        except (InvalidInputError, TypeError, ValueError) as exc:
            raise WeightsError(f"params[{key!r}] = {value!r} is invalid: {exc}") from None


class FusionMethod(str, Enum):
    """How per-signal scores become one score."""

    WEIGHTED_SUM = "weighted_sum"
    RRF = "rrf"


@dataclass(frozen=True)
class Weights:
    """Per-signal fusion weights.

    Attributes:
        bm25: Weight of the keyword signal.
        dense: Weight of the embedding signal.
        temporal: Weight of the recency signal.
        graph: Weight of the entity-graph signal.
        method: Weighted sum of normalised scores, or reciprocal rank fusion.
        rrf_k: The RRF constant (Cormack et al. 2009 use 60).
        params: Learned engine parameters (:data:`PARAMS`, fields of :class:`NoraxConfig`)
            that travel with the weights, for example ``{"decay_days": {"episodic": 90}}``;
            unknown or out-of-range ones, and the tokenizer's (:data:`TOKENIZER_PARAMS`),
            raise :class:`WeightsError`.
        name: A label for reports.
    """

    bm25: float = 0.25
    dense: float = 0.35
    temporal: float = 0.20
    graph: float = 0.20
    method: FusionMethod = FusionMethod.WEIGHTED_SUM
    rrf_k: float = 60.0
    params: Mapping[str, Any] = field(default_factory=dict)
    name: str = "custom"

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "method", FusionMethod(self.method))
        except ValueError:
            valid = [m.value for m in FusionMethod]
            raise WeightsError(f"unknown fusion method {self.method!r}; valid: {valid}") from None
        values = self.as_dict()
        for sig, w in values.items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
                raise WeightsError(f"weight {sig!r} must be a finite number, got {w!r}")
            if w < 0:
                raise WeightsError(f"weight {sig!r} must be >= 0, got {w!r}")
        if sum(values.values()) <= 0:
            raise WeightsError("at least one weight must be > 0")
        if not (math.isfinite(self.rrf_k) and self.rrf_k > 0):
            raise WeightsError(f"rrf_k must be a finite number > 0, got {self.rrf_k!r}")
        check_params(self.params)

    def as_dict(self) -> dict[str, float]:
        """The four weights keyed by signal name."""
        return {s: getattr(self, s) for s in SIGNALS}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], **extra: Any) -> Weights:
        """Build weights from ``{"bm25": .., "dense": .., ...}``; missing signals get 0."""
        unknown = set(data) - set(SIGNALS)
        if unknown:
            raise WeightsError(f"unknown signals {sorted(unknown)}; valid: {list(SIGNALS)}")
        return cls(**{s: data.get(s, 0.0) for s in SIGNALS}, **extra)

    def to_file_dict(self, **info: Any) -> dict[str, Any]:
        """The versioned weights-file representation."""
        return {
            "format": WEIGHTS_FORMAT,
            "version": WEIGHTS_VERSION,
            "name": self.name,
            "method": self.method.value,
            "rrf_k": self.rrf_k,
            "weights": self.as_dict(),
            "params": dict(self.params),
            **info,
        }


def save_weights(weights: Weights, path: str | Path, **info: Any) -> None:
    """Write a versioned weights file (``info`` adds fields such as metrics)."""
    Path(path).write_text(json.dumps(weights.to_file_dict(**info), indent=2) + "\n")


def weights_from_dict(data: Any, *, source: str = "weights") -> Weights:
    """Validate a weights-file dict and build :class:`Weights` from it."""
    if not isinstance(data, dict):
        raise WeightsError(f"{source}: expected a JSON object")
    if data.get("format") != WEIGHTS_FORMAT:
        raise WeightsError(f"{source}: not a Norax weights file (format != {WEIGHTS_FORMAT!r})")
    if data.get("version") != WEIGHTS_VERSION:
        raise WeightsError(
            f"{source}: weights file version {data.get('version')!r} is not supported "
            f"(this Norax reads version {WEIGHTS_VERSION})"
        )
    raw = data.get("weights")
    if not isinstance(raw, dict):
        raise WeightsError(f"{source}: 'weights' must be an object of signal -> number")
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise WeightsError(f"{source}: 'params' must be an object")
    return Weights.from_mapping(
        raw,
        method=data.get("method", FusionMethod.WEIGHTED_SUM.value),
        rrf_k=data.get("rrf_k", 60.0),
        params=params,
        name=str(data.get("name", source)),
    )


def load_weights(path: str | Path) -> Weights:
    """Read and validate a weights file.

    Raises:
        WeightsError: The file is missing, not JSON, not a weights file, or holds an invalid
            weight or ``params`` entry (the message names it).
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise WeightsError(f"weights file not found: {p}") from None
    except json.JSONDecodeError as exc:
        raise WeightsError(f"weights file {p} is not valid JSON: {exc}") from None
    return weights_from_dict(data, source=str(p))
