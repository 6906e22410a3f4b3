"""A chart of a benchmark run: recall@10 by method, and by question category.

matplotlib is an optional dependency (``pip install 'norax[bench]'``), imported only here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from norax_core.errors import NoraxError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["DRAGON_LOCOMO_R10", "plot_run"]

DRAGON_LOCOMO_R10 = 0.662
"""The LoCoMo paper's DRAGON retriever over dialog turns, recall@10 (all 10 conversations)."""

_COLORS = {
    "fused": "#1b7837",
    "seed": "#7fbf7b",
    "bm25": "#4575b4",
    "dense": "#74add1",
    "temporal": "#bababa",
    "graph": "#f4a582",
}
_TITLES = {"locomo": "LoCoMo", "beam": "BEAM"}


def _figure() -> Figure:
    """A detached Agg figure: no pyplot, so the process's backend (a notebook's) is untouched."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise NoraxError("plotting needs matplotlib: pip install 'norax[bench]'") from exc
    fig = Figure(figsize=(13, 5), constrained_layout=True)
    FigureCanvasAgg(fig)
    return fig


def plot_run(result: dict[str, Any], path: str | Path, *, k: int = 10, title: str = "") -> None:
    """Write a PNG of ``result`` (a ``norax bench --json`` document) to ``path``.

    Left: recall@k per method, best first, values on the bars (plus the DRAGON reference
    for LoCoMo at k = 10). Right: recall@k per category for fused and the two text signals.
    """
    key = f"recall@{k}"
    methods = result["methods"]
    if not methods or key not in next(iter(methods.values())):
        raise NoraxError(f"the result has no {key}; run the benchmark with k including {k}")
    order = sorted(methods, key=lambda m: -methods[m][key])
    values = [methods[m][key] for m in order]
    cats = result.get("by_category", {})
    fig = _figure()
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.6]})
    bars = ax.bar(order, values, color=[_COLORS.get(m, "#999999") for m in order])
    for bar, v in zip(bars, values, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, v + 0.01, f"{v:.3f}", ha="center", fontsize=10)
    if result.get("dataset") == "locomo" and k == 10:
        ax.axhline(DRAGON_LOCOMO_R10, color="#b2182b", ls="--", lw=1.2)
        ax.text(
            len(order) - 0.5,
            DRAGON_LOCOMO_R10 + 0.01,
            f"DRAGON (paper) {DRAGON_LOCOMO_R10}",
            color="#b2182b",
            ha="right",
            fontsize=9,
        )
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(key)
    ax.set_title(f"{key} by method (n = {result.get('n_questions', '?')} questions)")
    ax.grid(axis="y", alpha=0.3)

    shown = [m for m in ("fused", "bm25", "dense") if m in methods]
    names = sorted(cats)
    width = 0.8 / max(len(shown), 1)
    for i, m in enumerate(shown):
        xs = [j + (i - (len(shown) - 1) / 2) * width for j in range(len(names))]
        ys = [cats[c].get(m, {}).get(key, 0.0) for c in names]
        bx.bar(xs, ys, width, label=m, color=_COLORS.get(m, "#999999"))
        for x, y in zip(xs, ys, strict=True):
            bx.text(x, y + 0.01, f"{y:.2f}", ha="center", fontsize=7, rotation=90)
    bx.set_xticks(range(len(names)))
    bx.set_xticklabels([c.replace("_", "\n") for c in names], fontsize=8)
    bx.set_ylim(0, 1.15)
    bx.set_title(f"{key} by question category")
    bx.legend(loc="upper right", fontsize=8, ncols=len(shown))
    bx.grid(axis="y", alpha=0.3)
    name = _TITLES.get(str(result.get("dataset")), str(result.get("dataset")))
    fig.suptitle(title or f"Norax retrieval on {name}", fontsize=13)
    fig.savefig(path, dpi=120)
