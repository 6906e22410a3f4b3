"""The pure conversions behind NoraxStore: namespaces, ids, field metadata, filters."""

from __future__ import annotations

import pytest
from langgraph.store.base import InvalidNamespaceError, MatchCondition

from norax_core import InvalidInputError
from norax_langgraph import _codec as codec


def test_namespaces_round_trip_and_refuse_what_langgraph_refuses() -> None:
    for ns in [("a",), ("users", "ü", "日本"), ("x y", "z")]:
        assert codec.langgraph_namespace(codec.norax_namespace(ns)) == ns
    assert codec.langgraph_namespace("default") is None
    for bad in [(), ("a.b",), ("",), ("a\x00",), ("x" * 300,)]:
        with pytest.raises(InvalidNamespaceError):
            codec.norax_namespace(bad)
    with pytest.raises(InvalidInputError):
        codec.norax_namespace(("a.b",))


def test_ids_differ_per_namespace_and_key() -> None:
    ids = {codec.item_id(ns, k) for ns in [("a",), ("a", "b"), ("ab",)] for k in ["", "b", "a.b"]}
    assert len(ids) == 9
    assert codec.item_id(("a",), "k") == codec.item_id(("a",), "k")


def test_match_conditions_with_wildcards() -> None:
    ns = ("users", "alice", "prefs")
    assert codec.matches(MatchCondition("prefix", ("users", "*")), ns)
    assert codec.matches(MatchCondition("suffix", ("*", "prefs")), ns)
    assert not codec.matches(MatchCondition("suffix", ("alice",)), ns)
    assert not codec.matches(MatchCondition("prefix", ("users", "alice", "prefs", "x")), ns)


def test_field_metadata_is_typed_and_nested() -> None:
    meta = codec.field_metadata(
        {"s": "x", "n": 2, "b": True, "o": {"y": 1.5}, "l": [1.0, True], "z": None}
    )
    assert meta['lgs:["s"]'] == "x"
    assert meta['lgn:["n"]'] == 2.0 and meta['lgn:["b"]'] == 1.0
    assert meta['lgd:["o"]'] is True and meta['lgn:["o", "y"]'] == 1.5
    assert meta['lgj:["l"]'] == "[1,1]"
    assert 'lgp:["z"]' not in meta and meta['lgp:["s"]'] is True


def test_filters_become_chroma_where() -> None:
    assert codec.filter_where(None) is None and codec.filter_where({}) is None
    assert codec.filter_where({"s": "x"}) == {'lgs:["s"]': "x"}
    assert codec.filter_where({"n": {"$gte": 2}}) == {'lgn:["n"]': {"$gte": 2.0}}
    assert codec.filter_where({"z": None}) == {'lgp:["z"]': {"$ne": True}}
    assert codec.filter_where({"o": {"y": 1}}) == {
        "$and": [{'lgd:["o"]': True}, {'lgn:["o", "y"]': 1.0}]
    }
    assert codec.filter_where({"l": [1, True]}) == {'lgj:["l"]': "[1,1]"}
    for bad in [
        {"n": {"$in": [1]}},
        {"n": {"$gt": "3"}},
        {"o": {"$eq": {"y": 1}}},
        {"n": float("nan")},
    ]:
        with pytest.raises(InvalidInputError):
            codec.filter_where(bad)


def test_index_text_follows_langgraph_paths() -> None:
    value = {"content": "tea", "tags": ["a", "b"], "meta": {"t": "x"}, "blank": " "}
    assert codec.index_text(value, ["content", "tags[*]"]) == "tea\na\nb"
    assert codec.index_text(value, ["meta.t", "missing", "blank"]) == "x"
    assert codec.index_text(value, None) is None
    assert codec.index_text(value, ["missing"]) is None
