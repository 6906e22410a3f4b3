"""The inspector end to end: the real ``norax ui`` server, driven in Debian's headless Chromium.

Each test clicks through the page as a user would and checks what it shows against the
engine's own ``search`` and ``get`` over the same store. Set ``NORAX_UI_SCREENSHOT`` to a
path (``docs/img/inspector.png``) to save the screenshot the docs show.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _inspector import DEMO_NOW, XSS, build_store, demo_records

from norax_core import NoraxMemory, SearchResult

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
QUERY = "What did we decide about the wallet?"
K = 5


def _need_browser() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("playwright is not installed: .ci/run installs it with .[dev]")
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    return sync_playwright


@contextmanager
def serve(store: Path, *flags: str) -> Iterator[str]:
    """Run ``norax ui`` on a free port; yields its URL and stops it afterwards."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "norax_core.cli", "ui", "--store", store.name, "--port", "0"]
    proc = subprocess.Popen(
        [*cmd, *flags],
        cwd=store.parent,  # the page shows the store as its user named it
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()], daemon=True).start()
    try:
        seen = []
        while True:
            line = lines.get(timeout=120)
            seen.append(line)
            found = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
            if found:
                break
            assert proc.poll() is None, f"norax ui exited: {''.join(seen)}"
        # Answers as soon as it prints its address (it once printed before listening).
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        assert json.loads(direct.open(found.group(1) + "api/info", timeout=60).read())["namespaces"]
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, embedder: Any, extractor: Any) -> Any:
    """A closed store, what the engine's own search returns on it, and copies of it."""
    path = tmp_path_factory.mktemp("ui-browser") / ".norax"
    with build_store(path, embedder, extractor) as mem:
        expected = mem.search(QUERY, k=K, namespace="demo", now=DEMO_NOW)
        entities = mem.get("demo-01")[0].entities
    copies = {name: path.parent / name for name in ("writes", "read-only")}
    for copy in copies.values():
        shutil.copytree(path, copy)
    return path, expected, entities, copies


def open_page(browser: Any, url: str) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.set_default_timeout(60_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(url)
    page.wait_for_selector("#memories-table tbody tr")
    return page, errors


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_playwright = _need_browser()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def live(built: Any) -> Iterator[str]:
    with serve(built[0], "--allow-writes") as url:
        yield url


@pytest.fixture
def page(browser: Any, live: str) -> Iterator[Any]:
    page, errors = open_page(browser, live)
    yield page
    assert page.evaluate("window.__xss") is None, "a memory's text ran as markup"
    assert errors == []
    page.close()


def rows(page: Any) -> list[str]:
    return page.eval_on_selector_all("#memories-table tbody tr", "rs => rs.map(r => r.dataset.id)")


def test_browse_shows_the_namespace_newest_first_and_filters(page: Any) -> None:
    want = [r["id"] for r in sorted(demo_records(), key=lambda r: r["created_at"], reverse=True)]
    assert rows(page) == want
    assert page.inner_text("#count").startswith("25 memories")
    assert page.inner_text("#page-info") == "1–25 of 25"
    page.fill("#f-kind", "procedural")
    page.click("#filters button")
    page.wait_for_function(
        "() => document.querySelectorAll('#memories-table tbody tr').length < 25"
    )
    procedural = [r["id"] for r in demo_records() if r.get("kind") == "procedural"]
    assert sorted(rows(page)) == sorted(procedural)


def test_markup_in_a_memory_is_shown_as_text(page: Any) -> None:
    page.select_option("#namespace", "other")
    page.wait_for_function("() => document.querySelector('#count').textContent.startsWith('2 ')")
    assert page.inner_text("#memories-table tbody tr[data-id='x-1'] td.text") == XSS
    page.click("#memories-table a[data-id='x-1']")
    page.wait_for_selector("#graph svg")
    assert page.inner_text("#d-text") == XSS
    page.click("#tab-search")
    page.fill("#q", "img script bold")
    page.click("#search-form button")
    page.wait_for_selector(".result[data-id='x-1']")
    assert page.inner_text(".result[data-id='x-1'] .text") == XSS


def test_search_shows_what_search_returns_with_its_explanation(
    page: Any, built: Any, tmp_path: Path
) -> None:
    expected: list[SearchResult] = built[1]
    page.click("#tab-search")
    page.fill("#q", QUERY)
    page.fill("#now", DEMO_NOW)
    page.fill("#k", str(K))
    page.click("#search-form button")
    page.wait_for_selector(".result")
    shown = page.eval_on_selector_all(".result", "rs => rs.map(r => r.dataset.id)")
    assert shown == [r.id for r in expected]
    for rank, r in enumerate(expected, start=1):
        card = f".result[data-id='{r.id}']"
        assert page.inner_text(f"{card} .rank") == f"#{rank}"
        assert page.inner_text(f"{card} .score") == f"{r.score:.3f}"
        for s, v in r.signals.items():
            assert page.inner_text(f"{card} .signals [data-key='{s}'] .value") == f"{v:.3f}"
        for stage, v in r.to_dict()["explanation"].items():
            assert page.inner_text(f"{card} .stages [data-key='{stage}'] .value") == f"{v:+.3f}"
        why = page.inner_text(f"{card} .why li")
        assert why.startswith(f"#{rank} of {K} with {r.score:.3f}")
        chips = page.eval_on_selector_all(
            f"{card} .entities .chip", "cs => cs.map(c => c.textContent)"
        )
        assert chips == list(r.matched_entities)
    assert page.inner_text("#plan").count(expected[0].query_plan.intent) >= 1
    page.click(f".result[data-id='{expected[0].id}'] a.id")
    page.wait_for_selector("#graph svg")
    target = os.environ.get("NORAX_UI_SCREENSHOT")
    shot = Path(target) if target else tmp_path / "inspector.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000


def test_the_graph_draws_the_memorys_entities(page: Any, built: Any) -> None:
    page.click("#memories-table a[data-id='demo-01']")
    page.wait_for_selector("#graph svg")
    seeds = page.eval_on_selector_all("#graph g.node.seed", "gs => gs.map(g => g.dataset.label)")
    assert sorted(seeds) == sorted(built[2])
    assert page.locator("#graph g.node.memory").count() == 1
    assert page.locator("#graph line.edge").count() >= len(built[2])


def test_edit_and_delete_through_the_page(browser: Any, built: Any) -> None:
    store = built[3]["writes"]
    with serve(store, "--allow-writes") as url:
        page, errors = open_page(browser, url)
        assert page.inner_text("#mode") == "writes allowed"
        page.click("#memories-table a[data-id='demo-02']")
        page.wait_for_selector("#graph svg")
        page.click("#edit-btn")
        page.fill("#e-text", "Base fees went up to a few dollars.")
        page.click("#edit-form button")
        page.wait_for_function(
            "() => document.querySelector('#d-text').textContent.startsWith('Base fees went up')"
        )
        page.click("#memories-table a[data-id='demo-23']")
        page.wait_for_function("() => document.querySelector('#d-id').textContent === 'demo-23'")
        page.click("#delete-btn")  # the confirm dialog is accepted
        page.wait_for_function("() => !document.querySelector(\"tr[data-id='demo-23']\")")
        assert page.inner_text("#count").startswith("24 memories")
        assert errors == []
        page.close()
    with NoraxMemory(store) as mem:  # the server has let go of the store
        assert mem.get("demo-23") == []
        assert mem.count("demo") == 24
        assert mem.get("demo-02")[0].text == "Base fees went up to a few dollars."


def test_a_read_only_page_offers_no_writes(browser: Any, built: Any) -> None:
    with serve(built[3]["read-only"]) as url:
        page, errors = open_page(browser, url)
        assert page.inner_text("#mode") == "read-only"
        page.click("#memories-table a[data-id='demo-01']")
        page.wait_for_selector("#graph svg")
        assert page.is_disabled("#delete-btn") and page.is_disabled("#edit-btn")
        status = page.evaluate(
            "fetch('/api/memories/demo-01?namespace=demo', {method: 'DELETE'}).then(r => r.status)"
        )
        assert status == 403
        assert errors == []
        page.close()
