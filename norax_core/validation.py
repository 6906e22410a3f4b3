"""Input validation: every check runs before anything is written."""

from __future__ import annotations

import logging
import math
import numbers
import uuid
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Any, TypeVar

import numpy as np

from norax_core.errors import DuplicateIdError, InvalidInputError
from norax_core.models import DEFAULT_NAMESPACE, INFERRED_KIND_KEY, RESERVED_PREFIX, MetadataValue

T = TypeVar("T")
logger = logging.getLogger("norax")
MAX_ID_LEN = 512
CHROMA_RESERVED_KEYS = frozenset({"chroma:document"})
"""Metadata keys Chroma refuses, besides any starting with ``#`` or ``$``."""


def unicode_text(value: str, what: str) -> str:
    """Return ``value`` if it is valid Unicode.

    Lone surrogates (U+D800 to U+DFFF, left by a bad decode) cannot be stored, embedded or
    tokenized by the libraries underneath.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} contains a lone surrogate {value[exc.start]!r} at position {exc.start}, "
            "which is not valid Unicode; decode the input with errors='replace'"
        ) from None
    return value


TIME_SCALARS = (numbers.Real, str, date)
"""What one ``created_at`` (or ``now``) can be: epoch seconds (any real number, numpy's
included), an ISO 8601 string, a date or a datetime. Checked further by :func:`timestamp`."""


def as_list(
    value: T | Sequence[T] | None, n: int, name: str, scalar: type | tuple[type, ...]
) -> list[Any]:
    """Broadcast a scalar (or ``None``) to ``n`` items, or check a list has ``n`` items.

    ``scalar`` is the type (or types) a single value has; a bool is never a list.
    """
    if value is None or isinstance(value, (scalar, str, Mapping, datetime, bool)):
        return [value] * n
    if not isinstance(value, Sequence):
        what = scalar.__name__ if isinstance(scalar, type) else "single value"
        raise InvalidInputError(
            f"{name} must be a {what} or a list of them, got {type(value).__name__}"
        )
    if len(value) != n:
        raise InvalidInputError(f"{name} has {len(value)} items but there are {n} texts")
    return list(value)


def texts(value: Any) -> list[str]:
    """One text or a list of texts; each a non-blank string."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or isinstance(items, (bytes, bytearray)):
        raise InvalidInputError("texts must be a string or a list of strings")
    if not items:
        raise InvalidInputError("no texts given")
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise InvalidInputError(f"text #{i} is a {type(t).__name__}, not a string")
        if not t.strip():
            raise InvalidInputError(f"text #{i} is empty or whitespace only")
        unicode_text(t, f"text #{i}")
    return list(items)


def ids(value: Any, n: int) -> list[str]:
    """Given ids (checked, unique within the batch) or ``n`` generated ones."""
    if value is None:
        return [uuid.uuid4().hex for _ in range(n)]
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or len(items) != n:
        raise InvalidInputError(f"ids must be a list of {n} strings")
    seen: set[str] = set()
    for i in items:
        memory_id(i)
        if i in seen:
            raise DuplicateIdError(f"id {i!r} appears more than once in the batch")
        seen.add(i)
    return list(items)


def memory_id(value: Any) -> str:
    """A single id: a non-blank string of at most 512 characters."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"an id must be a non-empty string, got {value!r}")
    if len(value) > MAX_ID_LEN or "\x00" in value:
        raise InvalidInputError(f"id too long (> {MAX_ID_LEN} chars) or contains a NUL byte")
    return unicode_text(value, "an id")


def id_list(value: Any) -> list[str]:
    """One id or a sequence of ids (for ``get`` and ``delete``)."""
    if isinstance(value, str):
        return [memory_id(value)]
    if not isinstance(value, Sequence) and not isinstance(value, (set, frozenset)):
        raise InvalidInputError(f"ids must be a string or a list of strings, got {value!r}")
    return [memory_id(i) for i in value]


def name(value: Any, what: str, default: str | None = None) -> str:
    """A namespace or kind: a non-blank string (``None`` takes ``default``)."""
    if value is None and default is not None:
        return default
    if isinstance(value, str) and value.strip() and "\x00" not in value and len(value) <= 256:
        return unicode_text(value, what)
    raise InvalidInputError(
        f"{what} must be a non-empty string of at most 256 characters without NUL, got {value!r}"
    )


def kind(value: Any) -> str | None:
    """A memory kind, or ``None`` when it is not given."""
    return None if value is None else name(value, "kind")


def namespace(value: Any) -> str:
    """A namespace; ``None`` means the default namespace."""
    return name(value, "namespace", DEFAULT_NAMESPACE)


def timestamp(value: Any, what: str = "created_at") -> float:
    """Epoch seconds from a datetime, a date, an ISO 8601 string or a number.

    Numbers are epoch seconds: ``int``, ``float`` and any other real number (``numpy.int64``,
    ``numpy.float32``, ``Fraction``). Naive datetimes (and ISO strings without an offset) are
    read as UTC; a date is its midnight UTC. Booleans are refused, not read as 0 and 1.
    """
    if isinstance(value, bool):
        raise InvalidInputError(
            f"{what} must be a datetime, date, ISO 8601 string or epoch seconds, got a bool"
        )
    if isinstance(value, numbers.Real):
        try:
            ts = float(value)
        except OverflowError:
            raise InvalidInputError(f"{what} {value!r} is outside the years 1-9999") from None
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInputError(f"{what}: {value!r} is not an ISO 8601 time") from None
        ts = _dt_ts(dt)
    elif isinstance(value, datetime):
        ts = _dt_ts(value)
    elif isinstance(value, date):
        ts = _dt_ts(datetime(value.year, value.month, value.day))
    else:
        raise InvalidInputError(
            f"{what} must be a datetime, date, ISO 8601 string or epoch seconds, "
            f"got {type(value).__name__}"
        )
    if not math.isfinite(ts):
        raise InvalidInputError(f"{what} must be finite, got {value!r}")
    if not (-62_135_596_800.0 <= ts <= 253_402_300_799.0):  # years 1..9999
        raise InvalidInputError(f"{what} {value!r} is outside the years 1-9999")
    return ts


def _dt_ts(dt: datetime) -> float:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return dt.timestamp()
    except (OverflowError, ValueError, OSError) as exc:
        raise InvalidInputError(f"time {dt!r} cannot be represented: {exc}") from None


def metadata(value: Any) -> dict[str, MetadataValue]:
    """Flat metadata: string keys (not ``norax_``-prefixed), str/int/float/bool values."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"metadata must be a mapping, got {type(value).__name__}")
    out: dict[str, MetadataValue] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not key or "\x00" in key:
            raise InvalidInputError(f"metadata keys must be non-empty strings, got {key!r}")
        if key.startswith(RESERVED_PREFIX):
            raise InvalidInputError(
                f"metadata key {key!r}: the prefix {RESERVED_PREFIX!r} is reserved"
            )
        if key[0] in "#$" or key in CHROMA_RESERVED_KEYS:
            raise InvalidInputError(
                f"metadata key {key!r}: keys starting with '#' or '$' (and "
                f"{', '.join(sorted(CHROMA_RESERVED_KEYS))}) are reserved by Chroma"
            )
        unicode_text(key, "a metadata key")
        if isinstance(val, str):
            unicode_text(val, f"metadata {key!r}")
        if isinstance(val, float) and not math.isfinite(val):
            raise InvalidInputError(f"metadata {key!r}: non-finite numbers cannot be stored")
        if isinstance(val, int) and not isinstance(val, bool) and not -(2**63) <= val < 2**63:
            raise InvalidInputError(f"metadata {key!r}: integer out of the 64-bit range")
        if not isinstance(val, (str, int, float, bool)):
            raise InvalidInputError(
                f"metadata {key!r}: value of type {type(val).__name__} cannot be stored "
                "(use str, int, float or bool)"
            )
        out[key] = val
    return out


def k(value: Any) -> int:
    """A result count: an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"k must be an integer >= 1, got {value!r}")
    if value < 1:
        raise InvalidInputError(f"k must be >= 1, got {value}")
    return value


def query(value: Any) -> str:
    """A search query: a non-blank string."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError("the query must be a non-empty string")
    return unicode_text(value, "the query")


def query_embedding(value: Any, dim: int) -> np.ndarray:
    """A query embedding given by the caller: ``dim`` finite numbers, not all zero.

    Returned as float32 of unit norm, as an :class:`~norax_core.embedders.Embedder` makes them.
    """
    try:
        vec = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"query_embedding must be {dim} numbers: {exc}") from exc
    if vec.shape != (dim,) or not np.isfinite(vec).all() or not vec.any():
        raise InvalidInputError(
            f"query_embedding must be {dim} finite numbers, not all zero; got shape {vec.shape}"
        )
    return (vec / np.linalg.norm(vec)).astype(np.float32)


def where(value: Any) -> dict[str, Any] | None:
    """A Chroma metadata filter (validated further by Chroma itself)."""
    if value is None or value == {}:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"where must be a mapping (a Chroma filter), got {value!r}")
    for key in value:
        if isinstance(key, str) and key.startswith(RESERVED_PREFIX) and key != INFERRED_KIND_KEY:
            raise InvalidInputError(f"where key {key!r}: use the namespace argument instead")
    return dict(value)


def storable_metadata(
    value: Mapping[str, Any], skip: tuple[str, ...] = ()
) -> dict[str, MetadataValue]:
    """The part of foreign metadata (a framework document's) that a memory can store.

    The lenient twin of :func:`metadata`, for ingesting documents whose metadata Norax did
    not write: keeps str, bool, finite floats and 64-bit ints; dates and datetimes become ISO
    strings. Drops ``skip`` keys, keys reserved by Norax (``norax_`` prefix) and every other
    value (``None``, lists, dicts, objects), logging the dropped keys at debug level.
    """
    out: dict[str, MetadataValue] = {}
    dropped = []
    for key, val in value.items():
        if key in skip:
            continue
        if isinstance(val, (date, datetime)):
            val = val.isoformat()
        ok_key = isinstance(key, str) and bool(key) and not key.startswith(RESERVED_PREFIX)
        ok_value = (
            isinstance(val, (str, bool))
            or (isinstance(val, int) and -(2**63) <= val < 2**63)
            or (isinstance(val, float) and math.isfinite(val))
        )
        if ok_key and ok_value:
            out[key] = val
        else:
            dropped.append(key)
    if dropped:
        logger.debug("norax: metadata keys not stored (unsupported key or value): %s", dropped)
    return out
