import math
import random

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


@pytest.mark.parametrize("seed", range(5))
def test_timeline_kept_in_step_with_writes(seed):
    """Appends extend the cached time order; other writes re-sort: same as from scratch."""
    rng = random.Random(seed)
    sig = TemporalSignal(lambda kind: 30.0)
    live: dict[str, float] = {}
    t = 1_700_000_000.0
    for step in range(400):
        roll = rng.random()
        if roll < 0.6:  # append, sometimes with the same time as the last one
            t += rng.choice([0.0, 1.0, 5.0])
            mid = f"m{step}"
        elif roll < 0.75:  # back-dated
            mid, t_new = f"m{step}", t - rng.uniform(0, 50)
            sig.add("n", mid, t_new, "episodic")
            live[mid] = t_new
            mid = None
        elif roll < 0.9 and live:  # re-timed (an upsert)
            mid = rng.choice(sorted(live))
            t += 1.0
        elif live:
            gone = rng.choice(sorted(live))
            sig.remove("n", gone)
            del live[gone]
            mid = None
        else:
            mid = None
        if mid is not None:
            sig.add("n", mid, t, "episodic")
            live[mid] = t
        if rng.random() < 0.5:  # ask for it now and then, so the cache is exercised
            ordered, times, pos = sig.timeline("n")
            want = sorted(live, key=lambda m: (live[m], m))
            assert ordered == want
            assert times == [live[m] for m in want]
            assert pos == {m: i for i, m in enumerate(want)}
