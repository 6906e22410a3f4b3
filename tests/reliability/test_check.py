"""check_store, repair_store and `norax check`: every kind of damage is found and fixed."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
from _support import hash_embedder, open_store

from norax_core import IndexInconsistentError
from norax_core.cli import main
from norax_core.engine import SIDECAR_FILE
from norax_core.maintenance import SOURCES, check_store, repair_store
from norax_core.sidecar import SidecarRows

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
TEXTS = [
    "Colby moved the TypeORM migrations to the ops repo",
    "Priya reviews every PaymentService change on Tuesdays",
    "The refund job retries three times before paging Colby",
    "Base chain fees dropped after the upgrade",
    "The staging database is rebuilt every night from the seed",
    "Priya prefers short status updates in bullet points",
]


def fill(mem):
    for i, text in enumerate(TEXTS):
        mem.add(
            text,
            ids=f"m{i}",
            namespace="a" if i % 2 else "b",
            created_at=NOW - timedelta(days=i),
            metadata={"n": i},
        )


def ranking(mem, ns):
    res = mem.search("Colby Priya TypeORM refund", k=10, namespace=ns, now=NOW)
    return [(r.id, round(r.score, 9)) for r in res]


@pytest.fixture
def store(tmp_path):
    mem = open_store(tmp_path / "s")
    fill(mem)
    yield mem
    mem.close()


def test_a_healthy_store_agrees_everywhere(store):
    store.delete("m0")
    store.upsert("Priya now wants long reports", ids="m1", namespace="a")
    report = store.check()
    assert report.ok and report.total == 5 and not report.problems()
    by_ns = {n.namespace: n.counts for n in report}
    assert by_ns == {
        "a": dict.fromkeys(["chroma", *SOURCES], 3),
        "b": dict.fromkeys(["chroma", *SOURCES], 2),
    }
    assert "OK: 5 memories, 2 namespace(s)" in report.format()


def test_upsert_replaces_metadata_and_entities_instead_of_merging(store):
    # Chroma's upsert merges metadata; Norax must replace it (found by check: the old
    # entities came back from Chroma at the next open and fed the graph signal).
    store.upsert("plain words only", ids="m1", namespace="a", metadata={"other": True})
    (m,) = store.get("m1")
    assert m.metadata == {"other": True} and m.entities == ("plain", "word")
    assert store.check().ok
    assert [r.id for r in store.search("PaymentService", k=3, namespace="a", weights="graph")] != [
        "m1"
    ]


def test_every_kind_of_damage_is_found_then_repaired(tmp_path):
    path = tmp_path / "s"
    with open_store(path) as mem:
        fill(mem)
        expected = {ns: ranking(mem, ns) for ns in ("a", "b")}
    con = sqlite3.connect(path / SIDECAR_FILE)
    con.execute("DELETE FROM memories WHERE id = 'm1'")  # missing
    con.execute("UPDATE memories SET tokens = '[\"bogus\"]' WHERE id = 'm2'")  # stale
    con.execute("UPDATE memories SET namespace = 'b' WHERE id = 'm3'")  # wrong namespace
    con.execute(
        "INSERT INTO memories VALUES ('ghost', 'a', 'episodic', 0, '[\"colbi\"]', '[]', 0, '', ''"
        ", NULL, NULL)"
    )
    con.execute("INSERT INTO pending VALUES ('m4')")  # an interrupted write
    con.execute("UPDATE memories SET inferred_kind = 'instruction' WHERE id = 'm0'")  # stale
    con.commit()
    con.close()

    with open_store(path, reconcile=False) as mem:
        report = check_store(mem)
        assert not report.ok
        ns = {n.namespace: n for n in report}
        assert report.pending == ("m4",)
        for src in SOURCES:
            assert "m1" in ns["a"].missing[src] and "m3" in ns["a"].missing[src]
            assert set(ns["a"].extra[src]) == {"ghost"} and ns["b"].extra[src] == ("m3",)
        assert ns["b"].stale == {"m0": ("inferred_kind",), "m2": ("tokens",)}
        text = report.format()
        assert "INCONSISTENT" in text and "'ghost'" in text and "interrupted" in text
        assert not check_store(mem, deep=False).namespaces[0].stale  # ids only

        fixed = repair_store(mem)
        assert fixed.after.ok and fixed.rebuilt
        assert fixed.dropped == 1 and fixed.rederived == 5  # m0 m1 m2 m3 m4; ghost dropped
        assert mem.store.indexes.standing("b") == []  # m0 is no instruction again
        assert {ns: ranking(mem, ns) for ns in ("a", "b")} == expected
        assert repair_store(mem).before.ok  # idempotent
    with open_store(path) as mem:
        assert mem.check().ok and {ns: ranking(mem, ns) for ns in ("a", "b")} == expected


def test_in_memory_index_damage_is_rebuilt(store):
    expected = ranking(store, "a")
    store.store.indexes.bm25.remove("a", "m1")
    store.store.indexes.graph.remove("a", "m3")
    report = store.check(deep=False)
    (a,) = [n for n in report if n.namespace == "a"]
    assert a.missing["bm25"] == ("m1",) and a.missing["graph"] == ("m3",)
    assert not a.missing["sidecar"] and not a.missing["temporal"]
    result = store.repair()
    assert result.rebuilt and result.after.ok
    assert ranking(store, "a") == expected


def test_repair_raises_when_it_cannot_converge(store, monkeypatch):
    store.store.indexes.bm25.remove("a", "m1")
    # the rebuilt indexes load their namespaces empty: the rebuild fails
    monkeypatch.setattr(SidecarRows, "rows", lambda self, namespace: [])
    with pytest.raises(IndexInconsistentError, match="still disagrees"):
        repair_store(store)


@pytest.fixture
def cli_store(tmp_path, monkeypatch):
    monkeypatch.setattr("norax_core.embedders.default_embedder", hash_embedder)
    path = tmp_path / "cli"
    with open_store(path) as mem:
        fill(mem)
    return path


def test_cli_check_exit_codes_and_repair(cli_store, capsys):
    # The stand-in embedder (the store's recorded name and dimension) loads no model.
    assert main(["--store", str(cli_store), "check"]) == 0
    assert "OK: 6 memories" in capsys.readouterr().out
    con = sqlite3.connect(cli_store / SIDECAR_FILE)
    con.execute("DELETE FROM memories WHERE id = 'm5'")
    con.commit()
    con.close()
    assert main(["--store", str(cli_store), "check", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["namespaces"][0]["missing"]["sidecar"] == ["m5"]
    assert main(["--store", str(cli_store), "check", "--repair"]) == 0
    assert "repaired: 1 re-derived from Chroma" in capsys.readouterr().out
    assert main(["--store", str(cli_store), "check", "--quick"]) == 0


def test_cli_check_on_a_missing_store_is_an_error(tmp_path, capsys):
    assert main(["--store", str(tmp_path / "nothing"), "check"]) == 2
    assert "no Norax store" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()


def test_maintenance_public_surface():
    from norax_core import maintenance

    assert sorted(maintenance.__all__) == sorted(
        [
            "SOURCES",
            "CheckReport",
            "NamespaceCheck",
            "RepairReport",
            "check_store",
            "export_jsonl",
            "import_jsonl",
            "register",
            "repair_store",
        ]
    )
    from norax_core.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"check", "export", "import"} <= set(commands)
