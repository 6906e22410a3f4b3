"""Export and import: every memory round-trips with its id, kind, time, namespace, metadata.

The export format is the one ``norax add --jsonl`` reads, so an export imports anywhere; the
import reuses ``ingest.add_jsonl``, which validates the whole file before writing.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pytest
from _support import hash_embedder, open_store

from norax_core import InvalidInputError
from norax_core.cli import main
from norax_core.entities import RuleBasedExtractor
from norax_core.ingest import FIELDS
from norax_core.maintenance import export_jsonl, import_jsonl

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
QUERIES = ["Colby wallet", "TypeORM migration", "refund retries", "notes", "über café"]
MEMORIES = [
    ("m-1", "Colby set up the team wallet on Base.", "episodic", 3, "team", {"topic": "pay"}),
    ("m 2", "TypeORM migration\nruns nightly;\ttabs\tand\nnewlines", "procedural", 40, "team", {}),
    ("m\"3'", 'Quotes " and \\ backslashes \\" survive', "semantic", 400, "team", {"n": 2**62}),
    ("ünï-4", "über café 💥 \u202eRTL\u202c and a NUL \x00 byte", "custom-kind", 0, "ns é", {}),
    ("m5", "The refund job retries three times.", "scratchpad", -2, "ops", {"f": 0.1, "b": True}),
    ("m6", "'; DROP TABLE memories; -- and \" OR NEAR( * -", "episodic", 9000, "ops", {"s": ""}),
    ("m7", "Notes from a long time ago", "semantic", 365 * 1500, "ops", {"f": -1.5e-300}),
]


def fill(mem) -> None:
    for mid, text, kind, age, ns, meta in MEMORIES:
        mem.add(text, ids=mid, kind=kind, created_at=NOW - timedelta(days=age, microseconds=7),
                namespace=ns, metadata=meta)  # fmt: skip
    mem.add("deleted before the export", ids="gone", namespace="ops")
    mem.delete("gone")
    mem.upsert("Colby moved the wallet to Base mainnet.", ids="m-1", namespace="team",
               metadata={"topic": "pay", "v": 2})  # fmt: skip


def everything(mem):
    ids = sorted(m[0] for m in MEMORIES)
    return {m.id: m for m in mem.get(ids)}


def same_metadata(a, b) -> bool:
    # Chroma returns about one float metadata value in eight one ulp off; the rest is exact.
    return a.keys() == b.keys() and all(
        math.isclose(a[k], b[k], rel_tol=1e-15) if isinstance(a[k], float) else a[k] == b[k]
        for k in a
    )


def rankings(mem):
    out = {}
    for ns in mem.namespaces():
        for q in QUERIES:
            out[ns, q] = [(r.id, r.score) for r in mem.search(q, k=5, namespace=ns, now=NOW)]
    return out


def test_round_trip_keeps_every_field_and_every_ranking(tmp_path):
    out = tmp_path / "export.jsonl"
    with open_store(tmp_path / "a") as src:
        fill(src)
        assert export_jsonl(src, out) == len(MEMORIES)
        before, ranked = everything(src), rankings(src)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(MEMORIES)  # newlines in texts are escaped, one record a line
    for line in lines:
        assert set(json.loads(line)) == FIELDS
    with open_store(tmp_path / "b") as dst:
        assert import_jsonl(dst, out) == len(MEMORIES)
        after, ranked_after = everything(dst), rankings(dst)
        assert dst.check().ok and dst.count() == len(MEMORIES)
    assert after.keys() == before.keys()
    for mid, m in before.items():
        n = after[mid]
        assert (n.text, n.kind, n.namespace, n.entities) == (
            m.text,
            m.kind,
            m.namespace,
            m.entities,
        )
        assert n.created_at == m.created_at  # microseconds, as ISO 8601 carries them
        assert same_metadata(n.metadata, m.metadata), mid
    assert ranked_after.keys() == ranked.keys()
    for key, res in ranked.items():
        assert [i for i, _ in ranked_after[key]] == [i for i, _ in res], key
        assert [s for _, s in ranked_after[key]] == pytest.approx([s for _, s in res], abs=1e-9)
    print(f"\nexport/import: {len(MEMORIES)} memories, {len(ranked)} rankings identical")


def test_one_namespace_exports_alone(tmp_path):
    out = tmp_path / "ops.jsonl"
    with open_store(tmp_path / "a") as src:
        fill(src)
        assert export_jsonl(src, out, namespace="ops") == 3
    assert {json.loads(line)["namespace"] for line in out.read_text().splitlines()} == {"ops"}


def test_import_writes_nothing_unless_the_whole_file_is_valid(tmp_path):
    out = tmp_path / "export.jsonl"
    with open_store(tmp_path / "a") as src:
        fill(src)
        export_jsonl(src, out)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(out.read_text() + '{"text": "ok", "created_at": "not a time"}\n')
    with open_store(tmp_path / "b") as dst:
        with pytest.raises(InvalidInputError, match=r"bad.jsonl:8: created_at"):
            import_jsonl(dst, bad)
        assert dst.count() == 0
        dst.add("already here", ids="m5")
        with pytest.raises(InvalidInputError, match="already stored"):
            import_jsonl(dst, out)  # an id clash is found before anything is written
        assert dst.count() == 1


def test_a_failed_export_leaves_the_previous_file_alone(tmp_path, monkeypatch):
    out = tmp_path / "export.jsonl"
    out.write_text("previous export\n")
    with open_store(tmp_path / "a") as src:
        fill(src)
        calls = []

        def boom(*args):
            calls.append(1)
            if len(calls) == 3:
                raise OSError("disk full")
            return real(*args)

        import norax_core.store as store

        real = store.memory_from_record
        monkeypatch.setattr(store, "memory_from_record", boom)
        with pytest.raises(OSError, match="disk full"):
            export_jsonl(src, out)
    assert out.read_text() == "previous export\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".export")] == []


def test_cli_export_then_import(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("norax_core.embedders.default_embedder", hash_embedder)
    monkeypatch.setattr("norax_core.engine.load_extractor", lambda _=None: RuleBasedExtractor())
    with open_store(tmp_path / "a") as src:
        fill(src)
        ranked = rankings(src)
    out = tmp_path / "dump.jsonl"
    assert main(["--store", str(tmp_path / "a"), "export", "--out", str(out)]) == 0
    assert f"exported {len(MEMORIES)} memories" in capsys.readouterr().out
    assert main(["--store", str(tmp_path / "b"), "import", str(out)]) == 0
    assert f"imported {len(MEMORIES)} memories" in capsys.readouterr().out
    with open_store(tmp_path / "b") as dst:
        assert {k: [i for i, _ in v] for k, v in rankings(dst).items()} == {
            k: [i for i, _ in v] for k, v in ranked.items()
        }
    assert main(["--store", str(tmp_path / "b"), "import", str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
