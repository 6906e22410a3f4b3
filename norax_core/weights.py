"""Fusion weights, named presets and versioned weights files.

A weights file holds the four fusion weights, the fusion method and learned engine
``params``, and (version 2) optional per-intent overrides under ``intents``: for a query whose
:class:`~norax_core.query.Intent` has one, the override's weights (and method / ``rrf_k`` if it
gives them) replace the global ones and its ``params`` are merged over the global ``params``
(:meth:`Weights.for_intent`). Files without ``intents`` are written as version 1, which every
Norax reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from norax_core.config import NoraxConfig
from norax_core.errors import InvalidInputError, WeightsError
from norax_core.models import SIGNALS
from norax_core.query.intents import Intent

WEIGHTS_FORMAT = "norax-weights"
WEIGHTS_VERSION = 2
"""The newest weights-file version: 2 adds per-intent overrides (``intents``)."""
READ_VERSIONS = (1, 2)
"""Versions this Norax reads (a file without ``intents`` is written as version 1)."""
INTENTS = tuple(i.value for i in Intent)
"""The intent names an override may be keyed by (:class:`~norax_core.query.Intent` values)."""


TOKENIZER_PARAMS = frozenset({"stem", "stopwords"})
""":class:`NoraxConfig` fields a weights file cannot carry: the BM25 index is tokenised when
memories are added, so a search's weights cannot change the tokenizer (set them on the store,
``NoraxMemory(config=NoraxConfig(stem=..., stopwords=...))``)."""

PARAMS = frozenset(NoraxConfig.__dataclass_fields__) - TOKENIZER_PARAMS
"""The learned engine parameters a weights file may carry in ``params``."""

STORE_PARAMS = frozenset({"embed_context", "dense_exact_limit", "dense_cache_mb"})
"""Parameters of the store, not of one search: global ``params`` may carry them, a per-intent
override may not (memories are embedded before any query's intent is known)."""


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
        mark = (key, repr(value)) if _plain(value) else None
        if mark is not None and mark in _VALID:
            continue
        try:
            NoraxConfig().with_params({key: value})
        except (InvalidInputError, TypeError, ValueError) as exc:
            raise WeightsError(f"params[{key!r}] = {value!r} is invalid: {exc}") from None
        if mark is not None:
            if len(_VALID) >= 4096:
                _VALID.clear()
            _VALID.add(mark)


_VALID: set[tuple[str, str]] = set()
"""``(key, repr(value))`` of the params :func:`check_params` has accepted (plain values only):
the check is a pure function of both, and a query of an intent with an override builds that
intent's weights, checking the same params again (a ``NoraxConfig`` per key, ~0.6 ms)."""


def _plain(value: Any) -> bool:
    """Whether ``repr(value)`` tells the value exactly.

    A number, string or bool, or a dict of strings to numbers (``decay_days``).
    """
    if type(value) in (int, float, str, bool):
        return True
    return type(value) is dict and all(
        type(k) is str and type(v) in (int, float) for k, v in value.items()
    )


def shares(weights: Sequence[float]) -> tuple[float, ...]:
    """Weights as shares that sum to 1, computed without overflow or underflow.

    Fusion divides by the sum of the weights, so only their ratios matter; ranking with
    shares keeps every product and sum finite whatever the scale (1e308 each sums to
    ``inf``; 5e-324 each underflows when multiplied by a score). Dividing by the largest
    weight first keeps the sum below the number of weights.

    Raises:
        ValueError: A weight is negative or not finite, or none is positive.
    """
    top = max(weights)
    if min(weights) < 0 or not (0 < top < math.inf):
        raise ValueError(f"weights must be finite, >= 0, with one > 0; got {tuple(weights)}")
    scaled = [w / top for w in weights]
    total = math.fsum(scaled)
    return tuple(w / total for w in scaled)


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
        intents: Per-intent overrides, keyed by :class:`~norax_core.query.Intent` value (an
            unknown name raises :class:`WeightsError`): for a query of that intent the
            override's four weights, ``method`` and ``rrf_k`` replace these and its
            ``params`` are merged over these ``params`` (:meth:`for_intent`). An override has
            no overrides of its own and no store parameters (:data:`STORE_PARAMS`).
    """

    bm25: float = 0.25
    dense: float = 0.35
    temporal: float = 0.20
    graph: float = 0.20
    method: FusionMethod = FusionMethod.WEIGHTED_SUM
    rrf_k: float = 60.0
    params: Mapping[str, Any] = field(default_factory=dict)
    name: str = "custom"
    intents: Mapping[str, Weights] = field(default_factory=dict)

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
        object.__setattr__(self, "intents", _check_intents(self.intents, self.name))
        # Derived values a search asks for every time (its intent's weights, the config
        # they apply to), computed once: both are pure functions of frozen objects.
        object.__setattr__(self, "_by_intent", {})
        object.__setattr__(self, "_applied", (None, None))

    def for_intent(self, intent: Intent | str | None) -> Weights:
        """The weights a query of ``intent`` is ranked with (these when it has no override).

        Raises:
            WeightsError: ``intent`` is not an :class:`~norax_core.query.Intent` value.
        """
        if intent is None or not self.intents:
            return self
        key = _intent_name(intent)
        over = self.intents.get(key)
        if over is None:
            return self
        got: Weights | None = self._by_intent.get(key)  # type: ignore[attr-defined]
        if got is None:
            got = replace(
                over, params=merge_params(self.params, over.params), name=f"{self.name}[{key}]"
            )
            self._by_intent[key] = got  # type: ignore[attr-defined]
        return got

    def applied(self, config: NoraxConfig) -> NoraxConfig:
        """``config`` with these weights' ``params`` applied.

        The global ones: select a query's weights with :meth:`for_intent` first.
        """
        if not self.params:
            return config
        seen, out = self._applied  # type: ignore[attr-defined]
        if seen is not config:  # the last config asked (a store asks with its own)
            out = config.with_params(self.params)
            object.__setattr__(self, "_applied", (config, out))
        return out  # type: ignore[no-any-return]

    def with_params(self, **params: Any) -> Weights:
        """These weights with ``params`` set for every query: globally and in each override.

        ``default.with_params(lane_slots=0)`` turns the lane off for every intent (an
        override's own ``lane_slots`` would otherwise win over the global one).
        """
        intents = {i: replace(o, params={**o.params, **params}) for i, o in self.intents.items()}
        return replace(self, params={**self.params, **params}, intents=intents)

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
        out: dict[str, Any] = {
            "format": WEIGHTS_FORMAT,
            "version": WEIGHTS_VERSION if self.intents else 1,
            "name": self.name,
            "method": self.method.value,
            "rrf_k": self.rrf_k,
            "weights": self.as_dict(),
            "params": dict(self.params),
        }
        if self.intents:
            out["intents"] = {
                i: {
                    "weights": o.as_dict(),
                    "method": o.method.value,
                    "rrf_k": o.rrf_k,
                    "params": dict(o.params),
                }
                for i, o in self.intents.items()
            }
        return {**out, **info}


def _intent_name(intent: Intent | str) -> str:
    try:
        return Intent(intent).value
    except ValueError:
        raise WeightsError(f"unknown intent {intent!r}; valid: {list(INTENTS)}") from None


def _check_intents(intents: Any, name: str) -> dict[str, Weights]:
    """Validated per-intent overrides keyed by intent value, named ``name[intent]``."""
    if not isinstance(intents, Mapping):
        raise WeightsError(f"intents must be a mapping of intent -> Weights, got {intents!r}")
    out: dict[str, Weights] = {}
    for key, over in intents.items():
        key_name = _intent_name(key)
        if not isinstance(over, Weights):
            raise WeightsError(f"intents[{key_name!r}] must be Weights, got {over!r}")
        if over.intents:
            raise WeightsError(f"intents[{key_name!r}] cannot hold per-intent overrides of its own")
        store = sorted(STORE_PARAMS & set(over.params))
        if store:
            raise WeightsError(
                f"intents[{key_name!r}]: params[{store[0]!r}] is a store parameter, not a "
                "per-intent one (set it in the global params)"
            )
        label = f"{name}[{key_name}]"
        out[key_name] = over if over.name == label else replace(over, name=label)
    return out


def merge_params(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over``'s params over ``base``'s (``decay_days`` merged kind by kind)."""
    out = {**base, **over}
    if "decay_days" in base and "decay_days" in over:
        out["decay_days"] = {**base["decay_days"], **over["decay_days"]}
    return out


def save_weights(weights: Weights, path: str | Path, **info: Any) -> None:
    """Write a versioned weights file (``info`` adds fields such as metrics)."""
    Path(path).write_text(json.dumps(weights.to_file_dict(**info), indent=2) + "\n")


def weights_from_dict(data: Any, *, source: str = "weights") -> Weights:
    """Validate a weights-file dict and build :class:`Weights` from it."""
    if not isinstance(data, dict):
        raise WeightsError(f"{source}: expected a JSON object")
    if data.get("format") != WEIGHTS_FORMAT:
        raise WeightsError(f"{source}: not a Norax weights file (format != {WEIGHTS_FORMAT!r})")
    version = data.get("version")
    if isinstance(version, bool) or version not in READ_VERSIONS:
        raise WeightsError(
            f"{source}: weights file version {version!r} is not supported "
            f"(this Norax reads versions {list(READ_VERSIONS)})"
        )
    name = str(data.get("name", source))
    method = data.get("method", FusionMethod.WEIGHTED_SUM.value)
    rrf_k = data.get("rrf_k", 60.0)
    raw_intents = data.get("intents", {})
    if raw_intents and version < 2:
        raise WeightsError(f"{source}: 'intents' needs a version 2 weights file")
    if not isinstance(raw_intents, dict):
        raise WeightsError(f"{source}: 'intents' must be an object of intent -> override")
    intents = {}
    for key, over in raw_intents.items():
        where = f"{source}: intents[{key!r}]"
        try:
            intent = _intent_name(key)
        except WeightsError as exc:
            raise WeightsError(f"{source}: {exc}") from None
        if not isinstance(over, dict):
            raise WeightsError(f"{where} must be an object with 'weights' (and 'params')")
        unknown = sorted(set(over) - _OVERRIDE_KEYS)
        if unknown:
            raise WeightsError(
                f"{where}: unknown key {unknown[0]!r}; valid: {sorted(_OVERRIDE_KEYS)}"
            )
        try:
            intents[intent] = _weights_of(
                over,
                method=over.get("method", method),
                rrf_k=over.get("rrf_k", rrf_k),
                name=f"{name}[{intent}]",
            )
        except WeightsError as exc:
            raise WeightsError(f"{where}: {exc}") from None
    try:
        return _weights_of(data, method=method, rrf_k=rrf_k, name=name, intents=intents)
    except WeightsError as exc:
        raise WeightsError(f"{source}: {exc}") from None


_OVERRIDE_KEYS = frozenset({"weights", "method", "rrf_k", "params"})


def _weights_of(data: Mapping[str, Any], **extra: Any) -> Weights:
    """:class:`Weights` from an object with ``weights`` and optional ``params``."""
    raw = data.get("weights")
    if not isinstance(raw, dict):
        raise WeightsError("'weights' must be an object of signal -> number")
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise WeightsError("'params' must be an object")
    return Weights.from_mapping(raw, params=params, **extra)


def load_weights(path: str | Path) -> Weights:
    """Read and validate a weights file.

    Raises:
        WeightsError: The file is missing or unreadable, not UTF-8 JSON, not a weights file,
            or holds an invalid
            weight or ``params`` entry (the message names it).
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WeightsError(f"weights file not found: {p}") from None
    except json.JSONDecodeError as exc:
        raise WeightsError(f"weights file {p} is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise WeightsError(f"weights file {p} is not UTF-8 text: {exc}") from None
    except OSError as exc:
        raise WeightsError(f"cannot read weights file {p}: {exc.strerror or exc}") from None
    return weights_from_dict(data, source=str(p))
