"""Docs that name code must name code that exists and state the defaults the code has.

- Every dotted reference in a docstring, the README or a docs page (``:func:`norax_core.x.y```,
  ``NoraxMemory._method``, ``norax_core.module.name``) resolves to an attribute.
- The configuration page's table (docs/configuration.md) states the defaults a store really
  searches with: those of the shipped ``default`` preset's ``params`` on top of ``NoraxConfig``.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import norax_core
from norax_core import NoraxConfig, get_preset

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("norax_core", "norax_langchain", "norax_llamaindex")

REFERENCE = re.compile(
    r":(?:func|meth|class|mod|data|attr):`~?(?P<role>[\w.]+)`"
    r"|``(?P<literal>(?:norax_core|norax_langchain|norax_llamaindex|NoraxMemory)\.[\w.]+)``"
    r"|`(?P<code>(?:norax_core|norax_langchain|norax_llamaindex)\.[\w.]+)`"
)


def _sources() -> list[Path]:
    files = [p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))]
    return [*files, REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _module_of(path: Path) -> str:
    if path.suffix != ".py":
        return "norax_core"
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _getattr_path(obj: object, names: list[str]) -> bool:
    for name in names:
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


def _resolves(name: str, module: str) -> bool:
    parts = name.split(".")
    if parts[0] in PACKAGES:  # absolute: the longest importable prefix, then attributes
        for i in range(len(parts), 0, -1):
            try:
                mod = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            return _getattr_path(mod, parts[i:])
        return False
    # relative to the module that mentions it, or a public name of norax_core
    return _getattr_path(importlib.import_module(module), parts) or _getattr_path(norax_core, parts)


def test_dotted_references_resolve() -> None:
    stale = []
    for path in _sources():
        text = path.read_text()
        module = _module_of(path)
        for m in REFERENCE.finditer(text):
            name = (m.group("role") or m.group("literal") or m.group("code")).rstrip(".")
            if "." not in name:
                continue  # a bare method name, relative to the class it is written in
            if not _resolves(name, module):
                line = text.count("\n", 0, m.start()) + 1
                stale.append(f"{path.relative_to(REPO)}:{line}: {name}")
    assert not stale, "references to names that do not exist:\n" + "\n".join(stale)


def _row(setting: str) -> str:
    page = (REPO / "docs" / "configuration.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith(f"| {setting}")]
    assert len(rows) == 1, setting
    return rows[0].split("|")[2]  # the "default" column


@pytest.fixture(scope="module")
def effective() -> NoraxConfig:
    """What a store searches with by default: NoraxConfig with the `default` preset's params."""
    return NoraxConfig().with_params(get_preset("default").params)


def test_configuration_table_states_the_effective_defaults(effective: NoraxConfig) -> None:
    assert f"k1 {effective.bm25_k1:g}, b {effective.bm25_b:g}" in _row("BM25")
    pool = _row("candidate pool")
    assert f"`max({effective.pool_min}, {effective.pool_factor}k)`" in pool
    assert f"{effective.recency_candidates} recency candidates" in pool
    context = _row("context propagation")
    assert f"window {effective.context_window}, `lambda` {effective.context_weight:g}" in context
    decay = _row("decay `tau`")
    for kind in ("procedural", "semantic", "episodic", "scratchpad"):
        assert f"{kind} {effective.tau_days(kind):g}" in decay
    assert f"other kinds {effective.default_decay_days:g}" in decay
