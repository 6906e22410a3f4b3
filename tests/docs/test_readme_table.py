"""The headline table in README.md and docs/benchmarks.md is the output of its script.

``benchmarks/readme_table.py`` prints it from ``benchmarks/results/*.json``; when results are
regenerated, ``python benchmarks/readme_table.py --write`` rewrites both pages, so a figure
in the table is never typed by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import readme_table

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", ["README.md", "docs/benchmarks.md"])
def test_table_is_the_scripts_output(page: str) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    assert readme_table.in_readme(text) == readme_table.table(), (
        f"{page}'s table is stale: run python benchmarks/readme_table.py --write"
    )
    speed = readme_table.in_readme(text, readme_table.SPEED_START, readme_table.SPEED_END)
    assert speed == readme_table.speed_table(), (
        f"{page}'s speed table is stale: run python benchmarks/readme_table.py --write"
    )


def test_table_states_the_results_files(tmp_path: Path) -> None:
    """Each cell comes from its file: change one figure in a copy, and only that cell moves."""
    for f in (REPO / "benchmarks" / "results").glob("*.json"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    before = readme_table.table(tmp_path)
    beam = json.loads((tmp_path / "beam_100k.json").read_text())
    beam["methods"]["fused"]["recall@10"] = 0.1234
    (tmp_path / "beam_100k.json").write_text(json.dumps(beam))
    peers = json.loads((tmp_path / "peers.json").read_text())
    peers["datasets"]["locomo"]["systems"]["chroma"]["recall@10"] = 0.9876
    (tmp_path / "peers.json").write_text(json.dumps(peers))
    after = readme_table.table(tmp_path)
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert len(changed) == 2
    assert "**0.123**" in changed[0][1] and changed[0][1].startswith("| Norax")
    assert "0.988" in changed[1][1] and changed[1][1].startswith("| Chroma alone")


def test_speed_table_states_the_scale_run(tmp_path: Path) -> None:
    """A cell of the speed table is Norax's figure, Chroma's, and their ratio, from scale.json."""
    scale = json.loads((REPO / "benchmarks" / "results" / "scale.json").read_text())
    n = min(scale["stores"], key=int)
    scale["stores"][n]["embedded_norax"]["steady_p50_ms"] = 2.0
    scale["stores"][n]["embedded_chroma"]["steady_p50_ms"] = 8.0
    (tmp_path / "scale.json").write_text(json.dumps(scale))
    row = next(r for r in readme_table.speed_table(tmp_path).splitlines() if "| embedded |" in r)
    assert row.startswith(f"| {int(n):,} (")
    assert row.endswith("| 2.0 vs 8.0 (0.25 x) |")


def test_rewrite_replaces_only_the_table() -> None:
    start, end = readme_table.START, readme_table.END
    text = f"intro\n{start}\n| old |\n{end}\nrest\n"
    assert readme_table.rewrite(text, "| new |") == f"intro\n{start}\n| new |\n{end}\nrest\n"
    with pytest.raises(ValueError, match="readme-table"):
        readme_table.in_readme("no markers here")
