"""benchmarks/ablation.py: a signal or stage is switched off in every per-intent override too."""

from __future__ import annotations

from benchmarks.ablation import variants
from norax_core.config import NoraxConfig
from norax_core.models import SIGNALS
from norax_core.presets import get_preset
from norax_core.query import Intent
from norax_core.ranking import Plan


def test_signals_and_stages_are_off_for_every_intent() -> None:
    shipped = get_preset("default")
    out = variants(shipped)
    cfg = NoraxConfig()
    for signal in ("bm25", "dense", "graph"):
        for intent in (None, *Intent):
            weights = Plan.of(out[f"default - {signal}"], cfg, intent).weights
            assert weights[SIGNALS.index(signal)] == 0.0
    expected = {"context", "period", "supersession", "turns", "bridges"}
    assert expected <= {name.split(" - ")[1] for name in out if " - " in name}
    for intent in (None, *Intent):
        assert Plan.of(out["default - bridges"], cfg, intent).bridge_weight == 0.0
        assert Plan.of(out["default - graph"], cfg, intent).bridge_weight == 0.0
        assert Plan.of(out["default - supersession"], cfg, intent).supersede_weight == 0.0
        assert Plan.of(out["default - period"], cfg, intent).period_boost == 0.0
    # the shipped default does switch them on for some intent
    assert Plan.of(shipped, cfg, Intent.MULTI_HOP).bridge_weight > 0
    assert Plan.of(shipped, cfg, Intent.CURRENT_STATE).supersede_weight > 0
