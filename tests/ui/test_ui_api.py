"""The inspector's JSON API through Starlette's test client, over a real embedded store.

The store holds the bundled demo sample, embedded and tagged by the real local models; what
the API answers is checked against the engine's own ``get`` and ``search``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _inspector import DEMO_NOW, XSS, build_store, demo_records
from starlette.testclient import TestClient

from norax_core import NoraxMemory
from norax_core.cli import build_parser, main
from norax_core.errors import NoraxError
from norax_core.ui import _cmd_ui
from norax_core.ui.app import create_app

pytestmark = pytest.mark.integration
QUERY = "What did we decide about the wallet?"


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory, embedder: Any, extractor: Any
) -> Iterator[NoraxMemory]:
    mem = build_store(tmp_path_factory.mktemp("ui") / ".norax", embedder, extractor)
    yield mem
    mem.close()


@pytest.fixture(scope="module")
def client(store: NoraxMemory) -> TestClient:
    return TestClient(create_app(store), base_url="http://127.0.0.1")


@pytest.fixture
def writable(tmp_path: Path, embedder: Any, extractor: Any) -> Iterator[tuple[NoraxMemory, Any]]:
    mem = build_store(tmp_path / ".norax", embedder, extractor)
    yield mem, TestClient(create_app(mem, allow_writes=True), base_url="http://127.0.0.1")
    mem.close()


def newest_first(records: list[dict[str, Any]]) -> list[str]:
    # demo created_at values are distinct, so the tie rule does not matter here
    return [r["id"] for r in sorted(records, key=lambda r: r["created_at"], reverse=True)]


def test_info_names_the_store_its_namespaces_and_the_mode(client: TestClient) -> None:
    info = client.get("/api/info").json()
    assert info["namespaces"] == [{"name": "demo", "count": 25}, {"name": "other", "count": 2}]
    assert info["allow_writes"] is False
    assert info["store"].endswith(".norax")
    assert info["signals"] == ["bm25", "dense", "temporal", "graph"]


def test_browse_pages_newest_first(client: TestClient) -> None:
    want = newest_first(demo_records())
    got: list[str] = []
    for offset in range(0, 30, 10):
        page = client.get(
            "/api/memories", params={"namespace": "demo", "limit": 10, "offset": offset}
        )
        assert page.status_code == 200
        assert page.json()["total"] == 25
        got += [m["id"] for m in page.json()["memories"]]
    assert got == want


def test_browse_filters(client: TestClient, store: NoraxMemory) -> None:
    records = demo_records()

    def ids(**params: Any) -> list[str]:
        body = client.get("/api/memories", params={"namespace": "demo", **params}).json()
        assert body["total"] == len(body["memories"])
        return [m["id"] for m in body["memories"]]

    assert ids(kind="procedural") == newest_first(
        [r for r in records if r.get("kind") == "procedural"]
    )
    october = [r for r in records if "2026-10-01" <= r["created_at"] < "2026-11-01"]
    assert ids(since="2026-10-01", until="2026-11-01") == newest_first(october)
    colby = [r for r in records if r["metadata"].get("speaker") == "colby"]
    assert ids(meta="speaker=colby") == newest_first(colby)
    assert ids(where='{"speaker": "colby"}') == newest_first(colby)
    both = [r for r in colby if r["metadata"].get("decision") is True]
    assert both and ids(meta=["speaker=colby", "decision=true"]) == newest_first(both)
    assert ids(inferred_kind="semantic") == []  # this store records no inferred kinds
    first = client.get("/api/memories", params={"namespace": "demo", "limit": 1}).json()
    assert first["memories"][0] == {
        **first["memories"][0],
        "entities": list(store.get(want := newest_first(records)[0])[0].entities),
        "id": want,
    }


@pytest.mark.parametrize(
    "params",
    [
        {"where": "{not json"},
        {"where": '{"norax_kind": "x"}'},
        {"since": "yesterday"},
        {"limit": "0"},
        {"offset": "-1"},
        {"meta": "novalue"},
        {"meta": "norax_kind=episodic"},
        {"namespace": "x" * 300},
    ],
)
def test_bad_filters_are_400_with_the_reason(client: TestClient, params: dict[str, str]) -> None:
    r = client.get("/api/memories", params={"namespace": "demo", **params})
    assert r.status_code == 400
    assert r.json()["error"]


def test_search_answers_what_search_returns(client: TestClient, store: NoraxMemory) -> None:
    r = client.get(
        "/api/search", params={"q": QUERY, "namespace": "demo", "now": DEMO_NOW, "k": 5}
    ).json()
    want = store.search(QUERY, k=5, namespace="demo", now=DEMO_NOW)
    assert [x["id"] for x in r["results"]] == [w.id for w in want]
    for got, w in zip(r["results"], want, strict=True):
        assert got["score"] == w.score
        assert got["signals"] == dict(w.signals)
        assert got["explanation"] == w.to_dict()["explanation"]
        assert got["matched_entities"] == list(w.matched_entities)
        assert got["why"][0].startswith(f"#{got['rank']} of 5 with {w.score:.3f}")
        shares = got["contributions"]
        assert not shares or sum(shares.values()) == pytest.approx(w.explanation.fused, abs=1e-6)
    assert r["plan"] == want[0].query_plan.to_dict()
    assert r["now"] == 1795953600.0


def test_search_takes_a_where_filter_and_rejects_an_empty_query(client: TestClient) -> None:
    r = client.get(
        "/api/search",
        params={"q": QUERY, "namespace": "demo", "where": '{"speaker": "colby"}', "now": DEMO_NOW},
    ).json()
    assert r["results"] and {x["metadata"]["speaker"] for x in r["results"]} == {"colby"}
    assert client.get("/api/search", params={"q": " ", "namespace": "demo"}).status_code == 400
    assert client.get("/api/search", params={"q": "x", "k": "many"}).status_code == 400


def test_graph_is_the_memorys_entities_and_who_else_mentions_them(
    client: TestClient, store: NoraxMemory
) -> None:
    pic = client.get("/api/graph/demo-01", params={"namespace": "demo"}).json()
    mine = set(store.get("demo-01")[0].entities)
    seeds = {n["label"] for n in pic["nodes"] if n.get("seed")}
    assert seeds == mine
    assert {"memory:demo-01"} == {n["key"] for n in pic["nodes"] if n["type"] == "memory"}
    everyone = store.get([r["id"] for r in demo_records()])
    for entity, shared in pic["shared"].items():
        others = sorted(m.id for m in everyone if entity in m.entities and m.id != "demo-01")
        assert shared == {"ids": others[:10], "total": len(others)}
    assert set(pic["shared"]) == mine


def test_another_namespace_is_invisible(client: TestClient) -> None:
    assert client.get("/api/memories/demo-01", params={"namespace": "other"}).status_code == 404
    assert client.get("/api/graph/demo-01", params={"namespace": "other"}).status_code == 404
    page = client.get("/api/memories", params={"namespace": "other"}).json()
    assert [m["id"] for m in page["memories"]] == ["x-2", "x-1"]
    assert page["memories"][1]["text"] == XSS  # JSON carries text; the page never parses it


def test_read_only_refuses_writes_and_changes_nothing(
    client: TestClient, store: NoraxMemory
) -> None:
    before = store.get("demo-01")
    r = client.delete("/api/memories/demo-01", params={"namespace": "demo"})
    assert r.status_code == 403 and "--allow-writes" in r.json()["error"]
    r = client.put("/api/memories/demo-01", params={"namespace": "demo"}, json={"text": "x"})
    assert r.status_code == 403
    assert store.get("demo-01") == before


def test_edit_is_an_upsert_all_or_nothing(writable: tuple[NoraxMemory, TestClient]) -> None:
    mem, client = writable
    url, ns = "/api/memories/demo-01", {"namespace": "demo"}
    r = client.put(
        url, params=ns, json={"text": "Priya moved the wallet to Solana.", "kind": "semantic"}
    )
    assert r.status_code == 200, r.text
    now = mem.get("demo-01")[0]
    assert (now.text, now.kind, now.metadata) == (
        "Priya moved the wallet to Solana.",
        "semantic",
        {"speaker": "colby"},
    )
    assert "solana" in now.entities and r.json()["entities"] == list(now.entities)
    for bad in ({"created_at": "soon"}, {"kind": ""}, {"metadata": {"norax_x": 1}}, {"colour": 1}):
        r = client.put(url, params=ns, json={"text": "half-written", **bad})
        assert r.status_code == 400, bad
        assert mem.get("demo-01") == [now]
    assert client.put(url, params={"namespace": "other"}, json={"text": "x"}).status_code == 404
    assert (
        client.put(
            url, params=ns, content=b"[1", headers={"content-type": "application/json"}
        ).status_code
        == 400
    )


def test_delete_removes_one_memory_of_its_namespace(
    writable: tuple[NoraxMemory, TestClient],
) -> None:
    mem, client = writable
    assert client.delete("/api/memories/demo-01", params={"namespace": "other"}).status_code == 404
    assert mem.count("demo") == 25
    r = client.delete("/api/memories/demo-01", params={"namespace": "demo"})
    assert r.status_code == 200 and r.json() == {"deleted": "demo-01"}
    assert mem.get("demo-01") == [] and mem.count("demo") == 24
    assert client.get("/api/memories/demo-01", params={"namespace": "demo"}).status_code == 404
    hits = client.get("/api/search", params={"q": QUERY, "namespace": "demo", "now": DEMO_NOW})
    assert "demo-01" not in [x["id"] for x in hits.json()["results"]]


def test_other_hosts_and_origins_are_refused(writable: tuple[NoraxMemory, TestClient]) -> None:
    mem, client = writable
    # DNS rebinding: a page of evil.example resolving to 127.0.0.1 sends its own Host
    assert client.get("/api/info", headers={"host": "evil.example"}).status_code == 400
    r = client.delete(
        "/api/memories/demo-02",
        params={"namespace": "demo"},
        headers={"origin": "http://evil.example"},
    )
    assert r.status_code == 403 and mem.count("demo") == 25
    same = client.delete(
        "/api/memories/demo-02",
        params={"namespace": "demo"},
        headers={"origin": "http://127.0.0.1"},
    )
    assert same.status_code == 200


def test_the_page_loads_only_its_own_files(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for path in ("/static/app.js", "/static/app.css"):
        asset = client.get(path)
        assert asset.status_code == 200 and len(asset.text) > 1000
        assert "http://" not in asset.text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in asset.text
    assert "https://" not in page.text and "http://" not in page.text
    assert "innerHTML" not in client.get("/static/app.js").text


def test_the_command_keeps_the_global_store_and_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["--store", "a", "ui"])
    assert (args.store, args.host, args.port, args.allow_writes) == ("a", "127.0.0.1", 8787, False)
    assert build_parser().parse_args(["--store", "a", "ui", "--store", "b"]).store == "b"
    assert main(["ui", "--store", str(tmp_path / "none")]) == 2
    assert "no store at" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if the extra were not installed
    with pytest.raises(NoraxError, match=r'pip install "norax\[ui\]"'):
        _cmd_ui(argparse.Namespace(store=str(tmp_path), host="127.0.0.1", port=0))
