"""``plot_run`` draws on a detached Agg figure: a PNG on disk, the process's backend untouched."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from norax_core.errors import NoraxError

matplotlib = pytest.importorskip("matplotlib")

from norax_core.bench.plot import plot_run  # noqa: E402

METHODS = ("fused", "seed", "bm25", "dense", "temporal", "graph")


def _result(dataset: str = "locomo") -> dict[str, Any]:
    methods = {m: {"recall@5": 0.1 * i, "recall@10": 0.1 * i + 0.05} for i, m in enumerate(METHODS)}
    cats = {
        c: {m: {"recall@10": 0.05 * (i + j)} for i, m in enumerate(METHODS)}
        for j, c in enumerate(("multi_hop", "single_hop", "temporal"))
    }
    return {"dataset": dataset, "n_questions": 7, "methods": methods, "by_category": cats}


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


@pytest.fixture
def svg_backend() -> Iterator[str]:
    """Select a non-Agg backend, as a notebook would select its inline one, and restore it."""
    before = matplotlib.get_backend()
    matplotlib.use("svg")
    yield "svg"
    matplotlib.use(before)


@pytest.mark.parametrize("dataset", ["locomo", "beam"])
def test_writes_the_png_and_leaves_the_backend_alone(
    svg_backend: str, tmp_path: Path, dataset: str
) -> None:
    out = tmp_path / "run.png"
    plot_run(_result(dataset), out)
    assert matplotlib.get_backend() == svg_backend
    assert _png_size(out) == (13 * 120, 5 * 120)  # figsize (13, 5) at dpi 120
    assert out.stat().st_size > 10_000


def test_pyplot_is_never_imported(tmp_path: Path) -> None:
    doc, out = tmp_path / "run.json", tmp_path / "run.png"
    doc.write_text(json.dumps(_result()))
    code = (
        "import json, pathlib, sys\n"
        "from norax_core.bench.plot import plot_run\n"
        f"plot_run(json.loads(pathlib.Path({str(doc)!r}).read_text()), {str(out)!r})\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'plot_run imported pyplot'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert _png_size(out) == (1560, 600)


def test_missing_cut_off_is_refused_before_drawing(tmp_path: Path) -> None:
    out = tmp_path / "run.png"
    with pytest.raises(NoraxError, match="recall@25"):
        plot_run(_result(), out, k=25)
    assert not out.exists()
