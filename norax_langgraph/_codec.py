"""How LangGraph items are stored as Norax memories (pure functions, unit-tested).

- A namespace tuple ``("users", "alice")`` is the Norax namespace ``"lg:users.alice"``:
  LangGraph forbids periods in labels, so the join is reversible, and every LangGraph
  namespace gets its own Norax namespace (its own BM25 statistics, entity graph, ...).
- A memory's id is a hash of ``(namespace, key)``, so the same key in two namespaces never
  collides.
- The value is kept whole as JSON in the metadata key ``lg_value``; every field along the
  value's nested objects is also written as a flat, typed metadata entry (``lgs:`` strings,
  ``lgn:`` numbers and booleans as floats, ``lgj:`` lists as canonical JSON, ``lgd:`` objects,
  ``lgp:`` "present and not null"), which is what a LangGraph ``filter`` becomes: a Chroma
  ``where`` that every Norax signal applies before ranking.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import InvalidNamespaceError, Item, MatchCondition, get_text_at_path
from langgraph.store.base.embed import tokenize_path

from norax_core.errors import InvalidInputError
from norax_core.models import Memory, MetadataValue

NS_PREFIX = "lg:"
"""Norax namespaces that hold LangGraph items start with this."""
MAX_NAMESPACE = 256
KEY, VALUE, CREATED, INDEXED = "lg_key", "lg_value", "lg_created_at", "lg_indexed"
NOT_INDEXED_TEXT = "-"
"""The text of an item stored with ``index=False``: no keyword, no entity. Such items are
kept out of query searches by the ``lg_indexed`` flag; only listings and fills return them."""
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


class NamespaceError(InvalidInputError, InvalidNamespaceError):
    """A namespace NoraxStore cannot hold (both a NoraxError and LangGraph's own error)."""


def check_labels(namespace: tuple[str, ...]) -> None:
    """LangGraph's label rules: non-empty strings without periods or NUL."""
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise NamespaceError(
                f"namespace labels must be non-empty strings without '.' or NUL, got "
                f"{label!r} in {namespace!r}"
            )


def norax_namespace(namespace: tuple[str, ...]) -> str:
    """The Norax namespace of a LangGraph namespace tuple."""
    check_labels(namespace)
    if not namespace:
        raise NamespaceError("an item's namespace cannot be empty")
    name = NS_PREFIX + ".".join(namespace)
    if len(name) > MAX_NAMESPACE:
        raise NamespaceError(
            f"namespace {namespace!r} is too long: joined with '.' it must stay within "
            f"{MAX_NAMESPACE - len(NS_PREFIX)} characters"
        )
    return name


def langgraph_namespace(name: str) -> tuple[str, ...] | None:
    """The LangGraph namespace of a Norax namespace, ``None`` for one NoraxStore did not write."""
    if not name.startswith(NS_PREFIX) or len(name) == len(NS_PREFIX):
        return None
    return tuple(name[len(NS_PREFIX) :].split("."))


def item_id(namespace: tuple[str, ...], key: str) -> str:
    """The memory id of ``(namespace, key)``: unique per pair, whatever the key holds."""
    raw = json.dumps([list(namespace), key], ensure_ascii=False)
    return "lg-" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` meets a prefix or suffix condition (``"*"`` matches any label)."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidInputError(f"match_type must be 'prefix' or 'suffix', got {condition!r}")
    return all(p == "*" or n == p for n, p in pairs)


# -- values -----------------------------------------------------------------------------


def value_json(value: Any) -> str:
    """The value as JSON text; a value that is not a JSON object is refused."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"a value must be a mapping, got {type(value).__name__}")
    _check_keys(value)
    try:
        return json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"a value must be JSON-serialisable: {exc}") from None


def _check_keys(obj: Any) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if not isinstance(k, str):
                raise InvalidInputError(f"value keys must be strings, got {k!r}")
            _check_keys(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _check_keys(v)


def index_text(value: Mapping[str, Any], fields: Sequence[str] | None) -> str | None:
    """The text Norax indexes for a value: each field's text (LangGraph's paths), a line each.

    ``fields=None`` means not indexed; a field that finds nothing adds nothing; ``None`` when
    no field finds text.
    """
    if fields is None:
        return None
    texts = [
        t
        for f in fields
        for t in get_text_at_path(value, f if f == "$" else tokenize_path(f))
        if t.strip()
    ]
    return "\n".join(texts) or None


def _path_key(tag: str, path: tuple[str, ...]) -> str:
    return f"{tag}:" + json.dumps(list(path), ensure_ascii=False)


def _number(v: bool | int | float) -> float | None:
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _canonical(v: Any) -> str:
    """JSON that is equal for values Python finds equal (1 == 1.0 == True, key order)."""

    def norm(x: Any) -> Any:
        if isinstance(x, bool):
            return int(x)
        if isinstance(x, float) and x.is_integer():
            return int(x)
        if isinstance(x, Mapping):
            return {k: norm(y) for k, y in x.items()}
        if isinstance(x, (list, tuple)):
            return [norm(y) for y in x]
        return x

    return json.dumps(norm(v), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def field_metadata(value: Mapping[str, Any]) -> dict[str, MetadataValue]:
    """The flat, typed metadata entries a filter is translated to (see the module doc)."""
    out: dict[str, MetadataValue] = {}

    def walk(obj: Mapping[str, Any], path: tuple[str, ...]) -> None:
        for k, v in obj.items():
            p = (*path, k)
            if v is None:
                continue
            out[_path_key("lgp", p)] = True
            if isinstance(v, Mapping):
                out[_path_key("lgd", p)] = True
                walk(v, p)
            elif isinstance(v, (bool, int, float)):
                num = _number(v)
                if num is not None:
                    out[_path_key("lgn", p)] = num
            elif isinstance(v, str):
                out[_path_key("lgs", p)] = v
            elif isinstance(v, (list, tuple)):
                out[_path_key("lgj", p)] = _canonical(v)

    walk(value, ())
    return out


def item_metadata(
    key: str, value: Mapping[str, Any], created_at: float, indexed: bool
) -> dict[str, MetadataValue]:
    """Everything a memory's metadata holds for one item."""
    return {
        KEY: key,
        VALUE: value_json(value),
        CREATED: created_at,
        INDEXED: indexed,
        **field_metadata(value),
    }


def memory_item(memory: Memory) -> Item:
    """The LangGraph item a memory holds; ``updated_at`` is the memory's own time."""
    meta = memory.metadata
    namespace = langgraph_namespace(memory.namespace) or ()
    return Item(
        value=json.loads(str(meta[VALUE])),
        key=str(meta[KEY]),
        namespace=namespace,
        created_at=datetime.fromtimestamp(float(meta[CREATED]), tz=timezone.utc),
        updated_at=memory.created_at,
    )


# -- filters ----------------------------------------------------------------------------


def filter_where(flt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A LangGraph ``filter`` as a Chroma ``where`` over :func:`field_metadata`'s entries.

    Same semantics as LangGraph's ``InMemoryStore``: a plain value is equality (a missing
    field equals ``None``; numbers and booleans compare as numbers), a nested object matches
    the fields it names, ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte`` are operators.
    Differences: comparisons match numbers only (not numeric strings), a list compares
    whole (objects inside it exactly, not by the fields they name), and ``$eq``/``$ne`` with
    an object are refused.

    Raises:
        InvalidInputError: An unknown operator or an operand this cannot translate.
    """
    if flt is None:
        return None
    if not isinstance(flt, Mapping):
        raise InvalidInputError(f"filter must be a mapping, got {type(flt).__name__}")
    return and_where([c for k, v in flt.items() for c in _conditions((str(k),), v)])


def and_where(conditions: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Chroma's ``$and`` of the conditions given (it refuses an ``$and`` of one)."""
    conds = [c for c in conditions if c]
    if not conds:
        return None
    return conds[0] if len(conds) == 1 else {"$and": conds}


def _conditions(path: tuple[str, ...], fv: Any) -> list[dict[str, Any]]:
    if isinstance(fv, Mapping):
        if any(str(k).startswith("$") for k in fv):
            return [_operator(path, str(op), ov) for op, ov in fv.items()]
        nested = [c for k, v in fv.items() for c in _conditions((*path, str(k)), v)]
        return [{_path_key("lgd", path): True}, *nested]
    return [_equals(path, fv)]


def _operator(path: tuple[str, ...], op: str, ov: Any) -> dict[str, Any]:
    if op == "$eq":
        return _equals(path, ov)
    if op == "$ne":
        return _equals(path, ov, negate=True)
    if op in OPERATORS:
        num = _number(ov) if isinstance(ov, (bool, int, float)) else None
        if num is None:
            raise InvalidInputError(f"filter {op} needs a finite number, got {ov!r}")
        return {_path_key("lgn", path): {op: num}}
    raise InvalidInputError(f"unknown filter operator {op!r}; use one of {', '.join(OPERATORS)}")


def _equals(path: tuple[str, ...], fv: Any, *, negate: bool = False) -> dict[str, Any]:
    if fv is None:  # missing or null
        return {_path_key("lgp", path): True if negate else {"$ne": True}}
    operand: MetadataValue
    if isinstance(fv, (bool, int, float)):
        num = _number(fv)
        if num is None:
            raise InvalidInputError(f"filter value {fv!r} is not a finite number")
        key, operand = _path_key("lgn", path), num
    elif isinstance(fv, str):
        key, operand = _path_key("lgs", path), fv
    elif isinstance(fv, (list, tuple)):
        key, operand = _path_key("lgj", path), _canonical(fv)
    else:
        raise InvalidInputError(
            f"filter on {'.'.join(path)!r}: cannot compare with {type(fv).__name__} {fv!r}"
        )
    return {key: {"$ne": operand}} if negate else {key: operand}
