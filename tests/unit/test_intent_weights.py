"""Per-intent weights: the file format, the selection by the query's intent, the bench path."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from norax_core import NoraxConfig, NoraxMemory, Weights
from norax_core.bench.pools import Pool, PoolRequest, plan_groups, rank_pool
from norax_core.embedders import CallableEmbedder
from norax_core.errors import WeightsError
from norax_core.query import Intent, plan_query
from norax_core.ranking import Plan, rank
from norax_core.weights import (
    FusionMethod,
    load_weights,
    merge_params,
    save_weights,
    weights_from_dict,
)

T0 = 1_700_000_000.0
DAY = 86_400.0

CURRENT = "What is my current rent?"
OTHER = "When did I sign the rent contract?"

GLOBAL = Weights(
    1.0,
    0.0,
    0.0,
    0.0,
    params={"pool_min": 10, "decay_days": {"episodic": 30.0, "semantic": 90.0}},
    name="mine",
    intents={
        "current_state": Weights(
            0.2, 0.0, 0.8, 0.0, params={"recency_candidates": 3, "decay_days": {"episodic": 2.0}}
        )
    },
)


def _file(**over: Any) -> dict[str, Any]:
    return {**GLOBAL.to_file_dict(), **over}


def test_intents_are_what_the_query_reader_says() -> None:
    assert plan_query(CURRENT, T0).intent is Intent.CURRENT_STATE
    assert plan_query(OTHER, T0).intent is Intent.LOOKUP


def test_per_intent_file_round_trips_as_version_2(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    save_weights(GLOBAL, path, fit={"n": 1})
    data = json.loads(path.read_text())
    assert data["version"] == 2 and set(data["intents"]) == {"current_state"}
    assert data["intents"]["current_state"]["params"] == {
        "recency_candidates": 3,
        "decay_days": {"episodic": 2.0},
    }
    back = load_weights(path)
    assert back == GLOBAL
    assert back.intents["current_state"].name == "mine[current_state]"


def test_files_without_intents_stay_version_1_and_version_1_still_loads(tmp_path: Path) -> None:
    plain = Weights(0.1, 0.5, 0.1, 0.3, name="plain")
    assert plain.to_file_dict()["version"] == 1
    v1 = plain.to_file_dict()
    assert weights_from_dict(v1) == plain
    with pytest.raises(WeightsError, match="'intents' needs a version 2"):
        weights_from_dict({**v1, "intents": _file()["intents"]})
    with pytest.raises(WeightsError, match=r"versions \[1, 2\]"):
        weights_from_dict({**v1, "version": 3})


@pytest.mark.parametrize(
    "intents, msg",
    [
        ({"someday": {"weights": {"bm25": 1}}}, "unknown intent 'someday'; valid: .*temporal"),
        ([1], "'intents' must be an object"),
        ({"temporal": [1]}, r"intents\['temporal'\] must be an object"),
        ({"temporal": {"params": {}}}, r"intents\['temporal'\]: 'weights' must be an object"),
        ({"temporal": {"weights": {"bm25": -1}}}, r"intents\['temporal'\]: weight 'bm25'"),
        ({"temporal": {"weights": {"sparkle": 1}}}, r"intents\['temporal'\]: unknown signals"),
        (
            {"temporal": {"weights": {"bm25": 1}, "params": {"pool_min": 0}}},
            r"intents\['temporal'\]: params\['pool_min'\] = 0 is invalid",
        ),
        (
            {"temporal": {"weights": {"bm25": 1}, "params": {"nope": 1}}},
            r"intents\['temporal'\]: unknown params key 'nope'",
        ),
        (
            {"coverage": {"weights": {"bm25": 1}, "params": {"embed_context": 2}}},
            r"intents\['coverage'\]: params\['embed_context'\] is a store parameter",
        ),
        (
            {"temporal": {"weights": {"bm25": 1}, "method": "vote"}},
            r"intents\['temporal'\]: unknown fusion method 'vote'",
        ),
        (
            {"temporal": {"weights": {"bm25": 1}, "intents": {}}},
            r"intents\['temporal'\]: unknown key 'intents'",
        ),
    ],
)
def test_bad_overrides_raise_a_weights_error_naming_the_intent_and_key(
    intents: Any, msg: str
) -> None:
    with pytest.raises(WeightsError, match=msg):
        weights_from_dict(_file(intents=intents), source="w.json")


def test_overrides_built_in_python_are_validated_too() -> None:
    with pytest.raises(WeightsError, match="unknown intent 'later'"):
        Weights(intents={"later": Weights()})
    with pytest.raises(WeightsError, match="overrides of its own"):
        Weights(intents={"temporal": Weights(intents={"lookup": Weights()})})
    with pytest.raises(WeightsError, match="must be Weights"):
        Weights(intents={"temporal": {"bm25": 1.0}})  # type: ignore[dict-item]
    with pytest.raises(WeightsError, match="unknown intent"):
        GLOBAL.for_intent("someday")


def test_for_intent_replaces_the_weights_and_merges_the_params() -> None:
    chosen = GLOBAL.for_intent(Intent.CURRENT_STATE)
    assert chosen.as_dict() == {"bm25": 0.2, "dense": 0.0, "temporal": 0.8, "graph": 0.0}
    assert chosen.params == {
        "pool_min": 10,  # global, kept
        "recency_candidates": 3,  # the override's
        "decay_days": {"episodic": 2.0, "semantic": 90.0},  # merged kind by kind
    }
    assert chosen.name == "mine[current_state]" and not chosen.intents
    assert chosen.for_intent("current_state") is chosen
    for other in (Intent.TEMPORAL, "lookup", None):
        assert GLOBAL.for_intent(other) is GLOBAL
    assert merge_params({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}


def test_an_override_inherits_the_file_s_method_unless_it_names_one() -> None:
    data = _file(method="rrf", rrf_k=20.0)
    for key in ("method", "rrf_k"):  # written explicitly by to_file_dict: drop them
        del data["intents"]["current_state"][key]
    data["intents"]["temporal"] = {"weights": {"dense": 1.0}, "method": "weighted_sum"}
    got = weights_from_dict(data)
    assert got.for_intent("current_state").method is FusionMethod.RRF
    assert got.for_intent("current_state").rrf_k == 20.0
    assert got.for_intent("temporal").method is FusionMethod.WEIGHTED_SUM


def test_plan_of_selects_the_intent_s_weights_and_params() -> None:
    cfg = NoraxConfig()
    glob = Plan.of(GLOBAL, cfg)
    assert glob == Plan.of(GLOBAL, cfg, "temporal") == Plan.of(GLOBAL, cfg, Intent.LOOKUP)
    assert glob.weights == (1.0, 0.0, 0.0, 0.0) and glob.recency_candidates == 5
    cur = Plan.of(GLOBAL, cfg, "current_state")
    assert cur.weights == (0.2, 0.0, 0.8, 0.0)
    assert cur.pool_min == 10 and cur.recency_candidates == 3
    assert GLOBAL.for_intent("current_state").applied(cfg).tau_days("episodic") == 2.0
    assert GLOBAL.applied(cfg).tau_days("episodic") == 30.0


# -- selection in search ------------------------------------------------------------------

TEXTS = {
    "old": "My rent is 900 a month for the flat.",
    "new": "The landlord raised it: rent is now 1200.",
    "sign": "I signed the rent contract in March.",
    "cat": "The cat sleeps on the sofa all day.",
    "tea": "I drink green tea every morning.",
}
TIMES = {"old": 300 * DAY, "sign": 200 * DAY, "tea": 60 * DAY, "cat": 30 * DAY, "new": DAY}


def _bag_of_words(texts: Sequence[str]) -> np.ndarray:
    vocab = ["rent", "cat", "tea", "contract", "landlord", "flat"]
    return np.array([[float(w in t.lower()) + 1e-3 for w in vocab] for t in texts])


@pytest.fixture
def store() -> Any:
    emb = CallableEmbedder(_bag_of_words, name="bow", dim=6)
    with NoraxMemory(embedder=emb, extractor=False) as mem:
        mem.add(
            list(TEXTS.values()),
            ids=list(TEXTS),
            created_at=[T0 - TIMES[m] for m in TEXTS],
            kind="episodic",
        )
        yield mem


def _ids(mem: NoraxMemory, query: str, weights: Weights, k: int = 4) -> list[str]:
    return [r.id for r in mem.search(query, k=k, now=T0, weights=weights)]


def test_a_per_intent_override_changes_only_its_intent_s_ranking(store: NoraxMemory) -> None:
    plain = Weights(**GLOBAL.as_dict(), params=GLOBAL.params, name="mine")
    override = GLOBAL.for_intent("current_state")
    # current-state: ranked as with the override's weights alone, not the global ones
    got = _ids(store, CURRENT, GLOBAL)
    assert got == _ids(store, CURRENT, override)
    assert got != _ids(store, CURRENT, plain)
    assert got[0] == "new"  # recency decides, the newest rent statement first
    # BM25 alone proposes only memories sharing a term; the override's recency proposes
    # three more: the weights were chosen before the candidates were proposed
    assert len(_ids(store, CURRENT, plain)) == 3 and len(got) == 4
    # another intent: exactly the global ranking
    assert _ids(store, OTHER, GLOBAL) == _ids(store, OTHER, plain)
    res = store.search(CURRENT, k=2, now=T0, weights=GLOBAL)
    assert res[0].query_plan is not None
    assert res[0].query_plan.weights_intent == "current_state"
    assert res[0].query_plan.to_dict()["weights_intent"] == "current_state"
    other = store.search(OTHER, k=2, now=T0, weights=GLOBAL)[0].query_plan
    assert other is not None and other.intent == "lookup" and other.weights_intent is None


def test_a_store_s_default_weights_select_by_intent_and_record_the_overrides(
    tmp_path: Path,
) -> None:
    emb = CallableEmbedder(_bag_of_words, name="bow", dim=6)
    with NoraxMemory(tmp_path / "s", embedder=emb, extractor=False, weights=GLOBAL) as mem:
        mem.add(list(TEXTS.values()), ids=list(TEXTS), created_at=[T0 - TIMES[m] for m in TEXTS])
        before = [r.id for r in mem.search(CURRENT, k=4, now=T0)]
    with NoraxMemory(tmp_path / "s", embedder=emb, extractor=False) as mem:  # recorded
        assert mem.weights == GLOBAL
        assert [r.id for r in mem.search(CURRENT, k=4, now=T0)] == before
        assert mem.candidates(CURRENT, k=4, now=T0).weights == GLOBAL.for_intent("current_state")


# -- the bench path: pools grouped by intent ------------------------------------------------


def _pool(query: str, scores: list[list[float]], ages: list[float]) -> Pool:
    ids = [f"m{i}" for i in range(len(ages))]
    age = np.asarray(ages, dtype=np.float64)
    return Pool(
        request=PoolRequest(query, "ns", T0, relevant=("m0",)),
        ids=ids,
        scores=np.asarray(scores, dtype=np.float64),
        age_days=age,
        kinds=["episodic"] * len(ids),
        created_at=T0 - age * DAY,
        size=len(ids),
        config=NoraxConfig(),
    )


def test_plan_groups_rank_each_pool_with_its_intent_s_weights() -> None:
    # bm25 favours m0, temporal (young memories) favours m2
    scores = [[0.9, 0.5, 0.1], [0.0] * 3, [0.0] * 3, [0.0] * 3]
    ages = [300.0, 100.0, 1.0]
    pools = [_pool(OTHER, scores, ages), _pool(CURRENT, scores, ages), _pool(OTHER, scores, ages)]
    groups = plan_groups(pools, GLOBAL)
    assert [idx for idx, _, _ in groups] == [[0, 2], [1]]  # global first, then current_state
    got: dict[int, list[str]] = {}
    for idx, table, plan in groups:
        ranking = rank(table, plan, 3)
        got.update({i: ranking.ids(j) for j, i in enumerate(idx)})
    assert got[0] == got[2] == ["m0", "m1", "m2"]  # BM25 order
    assert got[1] == ["m2", "m0", "m1"]  # the override: recency (tau 2 days) lifts m2
    assert [rank_pool(p, GLOBAL, 3) for p in pools] == [got[0], got[1], got[2]]


def test_params_checked_once_per_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """An intent's weights, built at its first query, do not re-check params already checked
    (a NoraxConfig per key); a value not seen yet, or an invalid one, is checked every time."""
    from norax_core import weights as wmod

    made: list[int] = []
    real = wmod.NoraxConfig

    def counted(*a: Any, **k: Any) -> NoraxConfig:
        made.append(1)
        return real(*a, **k)

    monkeypatch.setattr(wmod, "_VALID", set())
    monkeypatch.setattr(wmod, "NoraxConfig", counted)
    params = {"context_window": 3, "decay_days": {"episodic": 45.0}}
    wmod.check_params(params)
    assert len(made) == 2
    wmod.check_params(params)
    wmod.check_params({"decay_days": {"episodic": 45.0}})
    assert len(made) == 2  # both seen
    wmod.check_params({"context_window": 4})
    assert len(made) == 3
    for _ in range(2):
        with pytest.raises(WeightsError, match="context_window"):
            wmod.check_params({"context_window": -1})
    assert len(made) == 5
    w = Weights(params=params, intents={"lookup": Weights(params={"context_window": 4})})
    before = len(made)
    assert w.for_intent("lookup").params == {"context_window": 4, "decay_days": {"episodic": 45.0}}
    assert len(made) == before
