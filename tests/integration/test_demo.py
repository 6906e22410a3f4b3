"""``norax demo`` on the real models: the current fact wins, an instruction is applied, and
the printed results say why."""

from __future__ import annotations

from pathlib import Path

import pytest

from norax_core.demo import run_demo

pytestmark = pytest.mark.integration


def _block(out: str, query: str) -> str:
    return out.split(f"Query: {query}\n", 1)[1].split("\nQuery: ", 1)[0]


def test_the_demo_shows_the_current_fact_and_the_applied_instruction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_demo(tmp_path / "store") == 0
    out = capsys.readouterr().out
    sync = _block(out, "When is the weekly sync?")
    assert sync.index("from Monday to Tuesday") < sync.index("The weekly sync is on Monday")
    assert "why: latest wins" in sync
    request = _block(out, "Add a last_login column to the user_profiles table with a migration.")
    assert "Always write database migrations so they can be rolled back." in request
    assert "episodic / instruction /" in request  # no kind given: the store inferred it
    assert "why: lane: a standing instruction that applies to this request" in request
    assert "kind / inferred / created" in out
