"""``norax bench`` / ``norax fit`` on a tiny slice of LoCoMo, with the real models.

The slice (one conversation, two sessions, a few questions) is cut from
``$NORAX_DATA_DIR/locomo/locomo10_dev.json`` at test time; the tests skip if it is absent.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from norax_core.cli import main

pytestmark = pytest.mark.integration

METHODS = {"fused", "bm25", "dense", "temporal", "graph", "seed"}


def _source() -> Path:
    root = Path(os.environ.get("NORAX_DATA_DIR", Path(__file__).parents[3] / "shared" / "data"))
    return root / "locomo" / "locomo10_dev.json"


@pytest.fixture(scope="module")
def tiny_locomo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = _source()
    if not src.is_file():
        pytest.skip(f"LoCoMo dev data not found at {src}")
    sample = json.loads(src.read_text())[0]
    conv = sample["conversation"]
    keep = {"speaker_a", "speaker_b"} | {
        k for k in conv if (m := re.match(r"session_(\d+)", k)) and int(m.group(1)) <= 2
    }
    sample["conversation"] = {k: v for k, v in conv.items() if k in keep}
    in_slice = re.compile(r"D[12]:\d+$")
    qa = [q for q in sample["qa"] if all(in_slice.match(e) for e in q.get("evidence", []))]
    sample["qa"] = qa[:5]
    path = tmp_path_factory.mktemp("locomo") / "tiny.json"
    path.write_text(json.dumps([sample]))
    return path


def test_bench_locomo_writes_the_documented_json(
    tiny_locomo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    png = tmp_path / "r.png"
    code = main(
        [
            "bench",
            "locomo",
            "--data",
            str(tiny_locomo),
            "--json",
            str(out),
            "--plot",
            str(png),
            "--cache",
            str(tmp_path / "cache"),
            "-q",
        ]
    )
    assert code == 0
    doc: dict[str, Any] = json.loads(out.read_text())
    assert set(doc) == {"dataset", "n_questions", "k", "methods", "by_category"}
    assert doc["dataset"] == "locomo" and doc["n_questions"] == 5 and doc["k"] == [1, 5, 10, 25]
    assert set(doc["methods"]) == METHODS
    for vals in doc["methods"].values():
        assert set(vals) == {"recall@1", "recall@5", "recall@10", "recall@25"}
        assert all(0.0 <= v <= 1.0 for v in vals.values())
        assert vals["recall@1"] <= vals["recall@5"] <= vals["recall@10"] <= vals["recall@25"]
    for per_method in doc["by_category"].values():
        assert set(per_method) == METHODS
        assert all(0.0 <= v["recall@10"] <= 1.0 for v in per_method.values())
    assert png.stat().st_size > 10_000
    assert "recall@10 by category" in capsys.readouterr().out


def test_pooled_rankings_equal_search(tiny_locomo: Path, tmp_path: Path) -> None:
    """Every method's ranking re-derived from one pool equals what search() returns."""
    from norax_core.bench.data import load_locomo
    from norax_core.bench.harness import (
        bm25_needed,
        default_methods,
        documents_for,
        ingest,
        open_store,
        pool_dataset,
        requests_for,
    )
    from norax_core.bench.pools import add_bm25_variants, rank_pool
    from norax_core.weights import Weights

    ds = load_locomo(tiny_locomo)
    methods = default_methods()
    methods["ctx"] = Weights(
        0.3,
        0.5,
        0.05,
        0.15,
        params={"bm25_k1": 1.2, "bm25_b": 0.3, "context_window": 2, "context_weight": 0.75},
    )
    methods["tuned"] = Weights(
        0.2,
        0.5,
        0.1,
        0.2,
        params={"pool_min": 5, "recency_candidates": 2, "decay_days": {"episodic": 3.0}},
    )
    methods["latest"] = Weights(
        0.2, 0.6, 0.1, 0.1, params={"latest_wins_weight": 1.05, "latest_wins_shared": 1}
    )
    methods["latest_ctx"] = Weights(
        0.3,
        0.5,
        0.05,
        0.15,
        params={
            "context_window": 1,
            "context_weight": 0.5,
            "latest_wins_weight": 2.0,
            "latest_wins_shared": 1,
            "latest_wins_depth": 30,
        },
    )
    with open_store(tmp_path / "cache") as mem:
        ingest(mem, ds, progress=False)
        pools = pool_dataset(mem, requests_for(ds), progress=False)
        add_bm25_variants(pools, documents_for(ds), sorted(bm25_needed(pools, methods)))
        for pool in pools:
            req = pool.request
            for name, w in methods.items():
                for k in (1, 5, 10, 25):
                    expected = [
                        r.id
                        for r in mem.search(
                            req.query, k=k, namespace=req.namespace, now=req.now, weights=w
                        )
                    ]
                    assert rank_pool(pool, w, k) == expected, (name, k, req.query)
    # the latest-wins weighting really reorders something here
    plain = Weights(0.2, 0.6, 0.1, 0.1)
    assert any(rank_pool(p, methods["latest"], 10) != rank_pool(p, plain, 10) for p in pools)


def test_pooled_rankings_equal_search_with_context_in_the_embedding(
    tiny_locomo: Path, tmp_path: Path
) -> None:
    """The same parity on a store whose memories were embedded with their previous turns."""
    from norax_core.bench.ascent import setting_from as _setting_from
    from norax_core.bench.data import load_locomo
    from norax_core.bench.fastrank import PoolBatch
    from norax_core.bench.fit import fit_pools
    from norax_core.bench.harness import (
        ingest,
        open_store,
        pool_dataset,
        requests_for,
        store_config,
    )
    from norax_core.bench.pools import rank_pool
    from norax_core.errors import InvalidInputError
    from norax_core.presets import get_preset
    from norax_core.weights import Weights

    ds = load_locomo(tiny_locomo)
    ctx = Weights(
        0.3,
        0.5,
        0.05,
        0.15,
        params={"embed_context": 2, "context_window": 1, "context_weight": 0.5},
    )
    methods = {"ctx": ctx, "dense": get_preset("dense"), "seed": get_preset("seed")}
    config = store_config(methods)
    assert config.embed_context == 2
    with pytest.raises(InvalidInputError):
        store_config({**methods, "other": Weights(params={"embed_context": 1})})
    with open_store(tmp_path / "cache", config) as mem:
        ingest(mem, ds, progress=False)
        pools = pool_dataset(mem, requests_for(ds), progress=False)
        assert pools[0].config.embed_context == 2
        for pool in pools:
            req = pool.request
            for name, w in methods.items():
                for k in (1, 5, 10):
                    expected = [
                        r.id
                        for r in mem.search(
                            req.query, k=k, namespace=req.namespace, now=req.now, weights=w
                        )
                    ]
                    assert rank_pool(pool, w, k) == expected, (name, k, req.query)
    # weights for a store built otherwise cannot be evaluated on these pools
    plain = Weights(params={"embed_context": 0})
    with pytest.raises(ValueError, match="embed_context"):
        rank_pool(pools[0], plain, 5)
    batch = PoolBatch(pools)
    with pytest.raises(ValueError, match="embed_context"):
        _setting_from(plain, batch)
    # fitted weights carry the add-time parameter, so a bench rebuilds the same store
    fitted = fit_pools(pools, k=5, restarts=0, batch=batch)
    assert fitted.weights.params["embed_context"] == 2


def test_fit_cli_writes_a_loadable_weights_file(tiny_locomo: Path, tmp_path: Path) -> None:
    from norax_core.weights import load_weights

    out = tmp_path / "w.json"
    code = main(
        [
            "fit",
            "--data",
            str(tiny_locomo),
            "--dataset",
            "locomo",
            "--out",
            str(out),
            "--no-cv",
            "--restarts",
            "0",
            "--cache",
            str(tmp_path / "cache"),
            "-q",
        ]
    )
    assert code == 0
    w = load_weights(out)
    assert w.name == "fitted"
    assert json.loads(out.read_text())["fit"]["n_queries"] == 5


@pytest.mark.parametrize("per_intent", [True, False])
def test_fit_cli_per_intent_records_every_intent(
    tiny_locomo: Path, tmp_path: Path, per_intent: bool
) -> None:
    from norax_core.weights import load_weights

    out = tmp_path / "w.json"
    flag = ["--per-intent", "--min-intent-questions", "1"] if per_intent else ["--no-per-intent"]
    args = ["fit", "--data", str(tiny_locomo), "--dataset", "locomo", "--out", str(out)]
    code = main([*args, "--no-cv", "--restarts", "0", *flag, "--cache", str(tmp_path / "c"), "-q"])
    assert code == 0
    w = load_weights(out)
    fit = json.loads(out.read_text())["fit"]
    if not per_intent:
        assert "intents" not in fit and not w.intents
        return
    # every question's intent is reported, each fitted (min 1 question) from the global fit
    assert sum(f["n_questions"] for f in fit["intents"].values()) == 5
    for intent, f in fit["intents"].items():
        assert f["train_own"] >= f["train_global"]
        assert f["own_weights"] == (intent in w.intents)


def test_fit_weights_from_user_feedback(tiny_locomo: Path, tmp_path: Path) -> None:
    from norax_core.bench import Feedback, fit_weights
    from norax_core.bench.data import load_locomo
    from norax_core.bench.harness import ingest, open_store, store_id
    from norax_core.weights import load_weights

    ds = load_locomo(tiny_locomo)
    conv = ds.conversations[0]
    feedback = [
        Feedback(q.text, [store_id(conv.name, g) for g in q.gold], conv.name, conv.now)
        for q in conv.questions
        if q.gold
    ]
    with open_store(tmp_path / "cache") as mem:
        ingest(mem, ds, progress=False)
        res = fit_weights(mem, feedback, k=5, restarts=0)
        assert res.n_queries == len(feedback)
        assert res.score >= res.baseline  # never worse than where it started, on its data
        res.save(tmp_path / "w.json")
        assert load_weights(tmp_path / "w.json") == res.weights
        # the learned weights are usable as they are
        assert mem.search(feedback[0].query, k=3, namespace=conv.name, weights=res.weights)
