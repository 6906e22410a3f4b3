import math

import numpy as np
import pytest

from norax_core.config import NoraxConfig
from norax_core.errors import InvalidInputError
from norax_core.signals.base import Query
from norax_core.signals.temporal import SECONDS_PER_DAY, TemporalSignal, decay

NOW = 1_800_000_000.0


def q(**kw):
    return Query(text="x", namespace=kw.pop("namespace", "ns"), now=NOW, **kw)


def test_decay_formula_and_future_clamp():
    out = decay(np.array([0.0, 30.0, -5.0]), np.array([30.0, 30.0, 30.0]))
    assert out.tolist() == pytest.approx([1.0, math.exp(-1), 1.0])


def test_per_kind_decay_rates():
    cfg = NoraxConfig()
    sig = TemporalSignal(cfg.tau_days)
    age = 10 * SECONDS_PER_DAY
    for kind in ("procedural", "semantic", "episodic", "scratchpad", "custom-kind"):
        sig.add("ns", kind, NOW - age, kind)
    s = sig.score(q(), ["procedural", "semantic", "episodic", "scratchpad", "custom-kind"])
    assert s["procedural"] == pytest.approx(math.exp(-10 / 365))
    assert s["scratchpad"] == pytest.approx(math.exp(-10 / 1))
    assert s["custom-kind"] == pytest.approx(math.exp(-10 / 30))
    assert s["procedural"] > s["semantic"] > s["episodic"] > s["scratchpad"]


def test_with_decay_rescored_without_reindexing():
    sig = TemporalSignal(NoraxConfig().tau_days)
    sig.add("ns", "m", NOW - 30 * SECONDS_PER_DAY, "episodic")
    slow = sig.with_decay(lambda kind: 300.0)
    assert slow.score(q(), ["m"])["m"] == pytest.approx(math.exp(-0.1))
    assert sig.score(q(), ["m"])["m"] == pytest.approx(math.exp(-1))


def test_top_respects_namespace_filter_and_n():
    sig = TemporalSignal(lambda kind: 30.0)
    for i in range(10):
        sig.add("ns", f"m{i}", NOW - i * SECONDS_PER_DAY, "episodic")
    sig.add("other", "x", NOW, "episodic")
    top = sig.top(q(), 3)
    assert set(top) == {"m0", "m1", "m2"}
    top = sig.top(q(allowed=frozenset({"m5", "m7", "x"})), 3)
    assert set(top) == {"m5", "m7"}
    assert sig.score(q(), ["x"])["x"] == 0.0


def test_remove_and_compaction_keep_scores():
    sig = TemporalSignal(lambda kind: 30.0)
    for i in range(200):
        sig.add("ns", f"m{i}", NOW - i * SECONDS_PER_DAY, "episodic")
    for i in range(0, 200, 2):
        assert sig.remove("ns", f"m{i}")
    assert not sig.remove("ns", "m0")
    assert sig.ids("ns") == {f"m{i}" for i in range(1, 200, 2)}
    assert sig.score(q(), ["m3"])["m3"] == pytest.approx(math.exp(-3 / 30))
    assert list(sig.top(q(), 1)) == ["m1"]


def test_config_validation():
    with pytest.raises(InvalidInputError):
        NoraxConfig(decay_days={"episodic": 0})
    with pytest.raises(InvalidInputError):
        NoraxConfig(default_decay_days=math.nan)
    with pytest.raises(InvalidInputError):
        NoraxConfig(bm25_b=2)
    with pytest.raises(InvalidInputError, match="unknown"):
        NoraxConfig().with_params({"nope": 1})
    cfg = NoraxConfig().with_params({"decay_days": {"episodic": 90}})
    assert cfg.tau_days("episodic") == 90 and cfg.tau_days("procedural") == 365
