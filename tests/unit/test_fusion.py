import json
import math

import pytest

from norax_core.errors import WeightsError
from norax_core.fusion import fuse, rank, reciprocal_rank, weighted_sum
from norax_core.presets import get_preset, preset_names
from norax_core.weights import FusionMethod, Weights, load_weights, save_weights, weights_from_dict

SCORES = {
    "bm25": {"a": 1.0, "b": 0.5, "c": 0.0},
    "dense": {"a": 0.2, "b": 0.9, "c": 0.8},
    "temporal": {"a": 0.1, "b": 0.1, "c": 1.0},
    "graph": {"a": 0.0, "b": 0.0, "c": 0.0},
}


def test_weighted_sum_matches_hand_computation():
    w = Weights(0.25, 0.35, 0.20, 0.20)
    fused = weighted_sum(SCORES, ["a", "b", "c"], w)
    assert fused["a"] == pytest.approx(0.25 * 1.0 + 0.35 * 0.2 + 0.2 * 0.1)
    assert fused["c"] == pytest.approx(0.35 * 0.8 + 0.2 * 1.0)
    assert all(0.0 <= v <= 1.0 for v in fused.values())


def test_weighted_sum_is_scale_free_in_weights():
    a = weighted_sum(SCORES, ["a", "b", "c"], Weights(1, 1, 0, 0))
    b = weighted_sum(SCORES, ["a", "b", "c"], Weights(5, 5, 0, 0))
    assert a == pytest.approx(b)


@pytest.mark.parametrize("scale", [1e308, 1e-300, 5e-324])
@pytest.mark.parametrize("method", list(FusionMethod))
def test_huge_and_tiny_weights_fuse_like_unit_weights(scale, method):
    # 1e308 each summed to inf (scores 0 and NaN, the best match last); 5e-324 underflowed
    unit = fuse(SCORES, ["a", "b", "c"], Weights(1, 1, 1, 1, method=method))
    scaled = fuse(SCORES, ["a", "b", "c"], Weights(scale, scale, scale, scale, method=method))
    assert all(math.isfinite(v) for v in scaled.values())
    assert scaled == pytest.approx(unit)
    assert rank(scaled, 3) == rank(unit, 3)


def test_missing_candidate_scores_zero_not_error():
    fused = weighted_sum({"bm25": {"a": 1.0}}, ["a", "z"], Weights(1, 0, 0, 0))
    assert fused == {"a": 1.0, "z": 0.0}


def test_rrf_ranks_by_reciprocal_rank_and_is_normalised():
    w = Weights(1, 1, 0, 0, method=FusionMethod.RRF)
    fused = reciprocal_rank(SCORES, ["a", "b", "c"], w)
    # bm25 ranks a,b ; dense ranks b,c,a
    assert fused["b"] == pytest.approx((1 / 62 + 1 / 61) / (2 / 61))
    assert rank(fused, 3)[0] == "b"
    assert max(fused.values()) <= 1.0


def test_fuse_does_not_mutate_inputs():
    before = {k: dict(v) for k, v in SCORES.items()}
    fuse(SCORES, ["a", "b", "c"], get_preset("rrf"))
    fuse(SCORES, ["a", "b", "c"], get_preset("seed"))
    assert before == SCORES


def test_rank_ties_break_by_id():
    assert rank({"b": 1.0, "a": 1.0, "c": 0.5}, 2) == ["a", "b"]


@pytest.mark.parametrize(
    "bad",
    [
        {"bm25": -0.1},
        {"bm25": math.nan},
        {"bm25": math.inf},
        {"bm25": 0.0, "dense": 0.0},
        {"bm25": "1"},
        {"bm25": True},
    ],
)
def test_weights_validation(bad):
    with pytest.raises(WeightsError):
        Weights.from_mapping(bad)


def test_unknown_signal_and_method_rejected():
    with pytest.raises(WeightsError, match="valid"):
        Weights.from_mapping({"bm26": 1.0})
    with pytest.raises(WeightsError, match="valid"):
        Weights(method="borda")  # type: ignore[arg-type]


def test_seed_preset_is_the_reference_formula():
    assert get_preset("seed").as_dict() == {
        "bm25": 0.25,
        "dense": 0.35,
        "temporal": 0.20,
        "graph": 0.20,
    }
    assert {"seed", "rrf", "default", "bm25", "dense", "temporal", "graph"} <= set(preset_names())
    with pytest.raises(WeightsError, match="valid"):
        get_preset("nope")


def test_weights_file_round_trip(tmp_path):
    w = Weights(0.1, 0.5, 0.1, 0.3, params={"decay_days": {"episodic": 90.0}}, name="mine")
    p = tmp_path / "w.json"
    save_weights(w, p, metrics={"recall@10": 0.8})
    back = load_weights(p)
    assert back.as_dict() == w.as_dict()
    assert back.params == {"decay_days": {"episodic": 90.0}}
    assert back.name == "mine"


@pytest.mark.parametrize(
    "data, msg",
    [
        ([], "JSON object"),
        ({"format": "x", "version": 1}, "not a Norax"),
        ({"format": "norax-weights", "version": 99, "weights": {}}, "version"),
        ({"format": "norax-weights", "version": 1, "weights": [1]}, "weights"),
        ({"format": "norax-weights", "version": 1, "weights": {"bm25": -1}}, ">= 0"),
    ],
)
def test_weights_file_validation(data, msg):
    with pytest.raises(WeightsError, match=msg):
        weights_from_dict(data)


def test_weights_file_errors_name_the_file(tmp_path):
    with pytest.raises(WeightsError, match="not found"):
        load_weights(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(WeightsError, match="not valid JSON"):
        load_weights(bad)


def _file(params):
    return {"format": "norax-weights", "version": 1, "weights": {"bm25": 1}, "params": params}


@pytest.mark.parametrize(
    "params, key",
    [
        ({"bogus": 1, "bm25_b": 0.5}, "bogus"),
        ({"bm25_b": 7}, "bm25_b"),
        ({"bm25_k1": -1.0}, "bm25_k1"),
        ({"bm25_k1": "high"}, "bm25_k1"),
        ({"pool_min": 0}, "pool_min"),
        ({"pool_min": 10.5}, "pool_min"),
        ({"pool_factor": True}, "pool_factor"),
        ({"recency_candidates": -1}, "recency_candidates"),
        ({"decay_days": 30}, "decay_days"),
        ({"decay_days": {"episodic": 0}}, "decay_days"),
        ({"context_window": -1}, "context_window"),
        ({"context_weight": math.inf}, "context_weight"),
        ({"context_gap_seconds": 0}, "context_gap_seconds"),
        ({"embed_context": 1.5}, "embed_context"),
        ({"latest_wins_shared": 0}, "latest_wins_shared"),
        ({"latest_wins_depth": 1}, "latest_wins_depth"),
        ({"default_decay_days": None}, "default_decay_days"),
    ],
)
def test_weights_params_are_validated_naming_the_key(tmp_path, params, key):
    with pytest.raises(WeightsError, match=key):
        weights_from_dict(_file(params))
    path = tmp_path / "w.json"
    path.write_text(json.dumps(_file(params)))
    with pytest.raises(WeightsError, match=key):
        load_weights(path)
    with pytest.raises(WeightsError, match=key):
        Weights(1, 0, 0, 0, params=params)


@pytest.mark.parametrize("params", [{"stem": False}, {"stopwords": None}, {"stem": True}])
def test_tokenizer_params_are_refused(params):
    """The BM25 index is tokenised when memories are added: a search's weights cannot
    change the tokenizer, so a weights file that asks for it is refused, not ignored."""
    with pytest.raises(WeightsError, match=f"{next(iter(params))}.*NoraxConfig"):
        weights_from_dict(_file(params))


@pytest.mark.parametrize("name", ["default", "chat", "project"])
def test_shipped_weights_files_load(name):
    w = get_preset(name)
    assert w.name == name and w.params


def test_valid_params_still_load():
    params = {
        "bm25_b": 0.0,
        "bm25_k1": 2.0,
        "pool_min": 10,
        "decay_days": {"episodic": 90.0, "custom": 3},
        "context_window": 2,
        "context_weight": 0.5,
        "embed_context": 2,
        "latest_wins_weight": 0.5,
    }
    assert weights_from_dict(_file(params)).params == params
