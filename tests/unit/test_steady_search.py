"""What a steady search no longer recomputes, and that the shortcuts score the same."""

from __future__ import annotations

import math

import numpy as np

from norax_core.config import NoraxConfig
from norax_core.signals import temporal as temporal_mod
from norax_core.signals.base import Query
from norax_core.signals.bm25 import BM25Index, BM25Signal
from norax_core.signals.temporal import TemporalSignal
from norax_core.store.chroma import memory_from_record
from norax_core.tokenize import Tokenizer

TOK = Tokenizer()


def test_bm25_view_with_other_params_is_kept_so_a_search_scores_its_query_once(monkeypatch):
    index = BM25Index()
    index.add_many("ns", [("a", TOK("red apples")), ("b", TOK("green apples and pears"))])
    signal = BM25Signal(index, TOK)
    calls = []
    search = index.search
    monkeypatch.setattr(index, "search", lambda *a, **kw: calls.append(a) or search(*a, **kw))
    query = Query(text="apples", namespace="ns", now=0.0, tokens=tuple(TOK("apples")))
    view = signal.with_params(1.2, 0.5)
    assert view is signal.with_params(1.2, 0.5)  # a search asks again as its table grows
    top = view.top(query, 2)
    assert signal.with_params(1.2, 0.5).score(query, ["a", "b"]) == top
    assert len(calls) == 1
    index.add("ns", "c", TOK("apples apples"))  # a write: scored again, with the new document
    assert set(signal.with_params(1.2, 0.5).score(query, ["a", "b", "c"])) == {"a", "b", "c"}
    assert len(calls) == 2


def test_neighbours_are_kept_until_the_timeline_changes(monkeypatch):
    sig = TemporalSignal(NoraxConfig().tau_days)
    for i, name in enumerate("abcd"):
        sig.add("ns", name, 1000.0 + i, "episodic")
    calls = []
    real = temporal_mod.view_neighbours  # what an unfiltered search reads (the time order's arrays)
    monkeypatch.setattr(
        temporal_mod, "view_neighbours", lambda *a, **kw: calls.append(a[1]) or real(*a, **kw)
    )
    assert sig.neighbours("ns", ["d", "b"], 1, 60.0) == {"d": ("c",), "b": ("a", "c")}
    assert sig.neighbours("ns", ["b", "zz", "d"], 1, 60.0) == {"b": ("a", "c"), "d": ("c",)}
    assert calls == [["d", "b"], ["zz"]]  # only the id never asked about is looked up
    sig.add("ns", "e", 1004.0, "episodic")  # d gains a neighbour after it
    assert sig.neighbours("ns", ["d"], 1, 60.0) == {"d": ("c", "e")}
    sig.remove("ns", "c")
    assert sig.neighbours("ns", ["d"], 2, 60.0) == {"d": ("b", "a", "e")}
    assert sig.neighbours("ns", ["d"], 1, 60.0, allowed={"a", "d"}) == {"d": ("a",)}


def test_created_and_kinds_of_a_table_mark_ids_outside_the_namespace():
    sig = TemporalSignal(NoraxConfig().tau_days)
    sig.add("ns", "a", 1000.0, "episodic")
    sig.add("ns", "b", 2000.5, "semantic")
    sig.add("other", "c", 3000.0, "procedural")
    created = sig.created("ns", ["b", "c", "a", "zz"])
    assert created[0] == 2000.5 and created[2] == 1000.0
    assert math.isnan(created[1]) and math.isnan(created[3])
    assert sig.kinds("ns", ["b", "c", "a"]) == ["semantic", "", "episodic"]
    sig.remove("ns", "a")
    sig.remove("ns", "b")  # a namespace with no memory left
    assert sig.kinds("ns", ["a"]) == [""] and math.isnan(sig.created("ns", ["a"])[0])


def test_a_plan_is_resolved_once_per_weights_config_and_intent():
    from norax_core.presets import resolve_weights
    from norax_core.ranking import Plan
    from norax_core.weights import Weights

    weights, config = resolve_weights("default"), NoraxConfig()
    plan = Plan.of(weights, config, "lookup")
    assert Plan.of(weights, config, "lookup") is plan
    other = NoraxConfig(pool_min=config.pool_min + 7)
    assert Plan.of(weights, other, "lookup") == Plan._of(weights, other, "lookup")
    plain = Weights(1.0, 0.0, 0.0, 0.0)  # no params: the config's pool_min counts
    assert Plan.of(plain, other).pool_min == Plan.of(plain, config).pool_min + 7
    assert Plan.of(weights, config, "lookup") is plan
    assert Plan.of(weights, config) == Plan._of(weights, config, None)


def test_varied_copies_as_dataclasses_replace_would():
    import dataclasses

    from norax_core.models import Memory, QueryInfo, varied
    from norax_core.retrieval import Candidates

    # varied() skips __init__: it is only right while these classes have no __post_init__
    for cls in (Query, Candidates, QueryInfo, Memory):
        assert not hasattr(cls, "__post_init__")
    q = Query("q", "ns", 1.0, tokens=("q",), embedding=np.ones(2))
    cands = Candidates(q, 3, ["a"], {"bm25": {"a": 1.0}}, {})
    info = QueryInfo("lookup", (), ("Ann",))
    mem = memory_from_record("a", "Ann", {"norax_namespace": "ns", "topic": "x"})
    for obj, changes in (
        (q, {"entities": ("ann",)}),
        (cands, {"matched": {"a": ("ann",)}}),
        (info, {"weights_intent": "lookup"}),
        (mem, {"metadata": {"topic": "y"}}),
    ):
        got, want = varied(obj, **changes), dataclasses.replace(obj, **changes)
        assert type(got) is type(want) and vars(got).keys() == vars(want).keys()
        assert all(getattr(got, k) is getattr(want, k) for k in vars(want))
        assert vars(obj) != vars(got)  # the original is unchanged


def test_a_record_is_assembled_as_its_constructor_would_build_it():
    from dataclasses import fields

    from norax_core.models import Memory
    from norax_core.store.chroma import copied

    meta = {"norax_namespace": "ns", "norax_kind": "semantic", "norax_created_at": 5.0, "t": 1}
    mem = memory_from_record("a", "Ann likes tea.", meta)
    assert list(vars(mem)) == [f.name for f in fields(Memory)]
    assert Memory(**vars(mem)) == mem and mem.namespace == "ns" and mem.metadata == {"t": 1}
    twin = copied(mem)
    assert twin == mem and twin.metadata is not mem.metadata
