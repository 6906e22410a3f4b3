"""Supersession links are derived data: crash-safe, repaired, isolated, filtered, concurrent.

Every test writes into a real persistent store (embedded Chroma, the sidecar on disk) with
the fast hashed embedder and the rules extractor, whose entities are the capitalised words:
"Apollo" is the entity two deadline memories share, and "moved" the update cue.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _support import open_store

from norax_core import Weights
from norax_core.sidecar import SCHEMA_VERSION
from norax_core.store.core import SIDECAR_FILE

HERE = Path(__file__).resolve().parent
OLD = "The Apollo launch deadline is Monday, per the kickoff memo."
NEW = "The Apollo launch deadline moved to Friday."
FILLER = ["Lunch with Dana on Tuesday.", "The Zephyr budget review is done.", "Rain all week."]
ON = Weights(1.0, 0.0, 0.0, 0.0, params={"supersede_weight": 1.1})
OFF = {"bm25": 1.0}


def _links(mem, ns: str = "default") -> dict[str, tuple[str, ...]]:
    with mem.store.lock:  # namespaces load lazily: this one now
        mem.store.indexes.ensure(ns)
        return mem.store.indexes.supersede.links(ns)


def _seed(mem, ns: str = "default", **kw) -> None:
    mem.add(FILLER, ids=[f"{ns}-f{i}" for i in range(3)], namespace=ns, created_at=1_000.0, **kw)
    mem.add(OLD, ids=f"{ns}-old", namespace=ns, created_at=2_000.0, **kw)
    mem.add(NEW, ids=f"{ns}-new", namespace=ns, created_at=3_000.0, **kw)


def test_links_persist_and_reload(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        _seed(mem)
        assert _links(mem) == {"default-new": ("default-old",)}
    with open_store(tmp_path / "s", reconcile=False) as mem:  # read back, nothing re-derived
        assert _links(mem) == {"default-new": ("default-old",)}
        assert mem.check().ok


def test_search_pulls_the_newer_memory_only_the_older_matched(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        _seed(mem)
        # only the old memory holds "kickoff memo": BM25 alone proposes nothing else
        assert [r.id for r in mem.search("kickoff memo", k=2, weights=OFF)] == ["default-old"]
        got = mem.search("kickoff memo", k=2, weights=ON)
        assert [r.id for r in got] == ["default-new", "default-old"]
        assert got[0].explanation is not None and got[0].explanation.supersede > 0
        assert got[1].explanation is not None and got[1].explanation.supersede == 0


def test_deleting_the_newer_unsupersedes_and_upsert_rederives(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        _seed(mem)
        mem.delete("default-new")
        assert _links(mem) == {}
        assert [r.id for r in mem.search("kickoff memo", k=2, weights=ON)] == ["default-old"]
        mem.add(NEW, ids="default-new", created_at=3_000.0)
        assert _links(mem) == {"default-new": ("default-old",)}
        mem.upsert("Rain moved the picnic indoors.", ids="default-new")  # no longer a restatement
        assert _links(mem) == {}
        assert mem.check().ok
    with open_store(tmp_path / "s", reconcile=False) as mem:
        assert _links(mem) == {} and mem.check().ok


def test_links_never_cross_namespaces(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        _seed(mem, "a")
        mem.add(NEW, ids="b-new", namespace="b", created_at=4_000.0)
        assert _links(mem, "a") == {"a-new": ("a-old",)}
        assert _links(mem, "b") == {}
        got = mem.search("kickoff memo", k=5, namespace="a", weights=ON)
        assert "b-new" not in {r.id for r in got}
        assert mem.search("kickoff memo", k=5, namespace="b", weights=ON) == []


def test_a_filtered_out_newer_memory_never_appears(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        _seed(mem, metadata={"team": "x"})
        mem.upsert(NEW, ids="default-new", metadata={"team": "y"})
        assert _links(mem) == {"default-new": ("default-old",)}
        got = mem.search("kickoff memo", k=5, where={"team": "x"}, weights=ON)
        assert [r.id for r in got] == ["default-old"]
        got = mem.search("kickoff memo", k=5, where={"team": "y"}, weights=ON)
        assert got == []


CRASH_IN_WRITE = """
import os, sys
sys.path.insert(0, sys.argv[2])
from _support import open_store
from norax_core.indexes import DerivedIndexes
mem = open_store(sys.argv[1])
mem.add(["Lunch with Dana on Tuesday.", "Rain all week.", sys.argv[3]], ids=["f1", "f2", "old"],
        created_at=[1000.0, 1000.0, 2000.0])
DerivedIndexes.apply = lambda self, rows: os._exit(0)  # dies after Chroma, before the sidecar
mem.add(sys.argv[4], ids="new", created_at=3000.0)
"""


def test_a_crash_between_chroma_and_the_sidecar_links_at_the_next_open(tmp_path: Path) -> None:
    store = tmp_path / "s"
    args = [sys.executable, "-c", CRASH_IN_WRITE, str(store), str(HERE), OLD, NEW]
    subprocess.run(args, check=True)
    with open_store(store, reconcile=False) as mem:  # as the crash left it
        assert mem.check().pending == ("new",)
        assert _links(mem) == {}
    with open_store(store) as mem:  # an ordinary open reconciles the interrupted write
        assert _links(mem) == {"new": ("old",)}
        assert mem.check().ok


def test_a_failed_sidecar_transaction_keeps_rows_and_links_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(tmp_path / "s") as mem:
        _seed(mem)
        sidecar = type(mem.store.indexes.sidecar)
        real = sidecar._write_links
        calls: list[int] = []

        def broken(self, links):  # the rows are written, then the transaction fails (once)
            real(self, links)
            calls.append(1)
            if len(calls) == 1:
                raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(sidecar, "_write_links", broken)
        newest = "The Apollo launch deadline moved to Sunday."
        with pytest.raises(Exception, match="disk I/O"):
            mem.add(newest, ids="newest", created_at=4_000.0)
        # nothing of the failed write anywhere: Chroma undone, rows and links rolled back
        assert mem.get("newest") == []
        assert mem.check().ok
        assert _links(mem) == {"default-new": ("default-old",)}
        assert calls
        mem.add(newest, ids="newest", created_at=4_000.0)  # the same write, now succeeding
        assert _links(mem)["newest"] and mem.check().ok


def test_repair_rebuilds_lost_or_wrong_links(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        _seed(mem)
    db = sqlite3.connect(tmp_path / "s" / SIDECAR_FILE)
    with db:
        db.execute("DELETE FROM supersedes")
        db.execute(
            "INSERT INTO supersedes VALUES (?, ?, ?)", ("default-f0", "default", '["default-f1"]')
        )
    db.close()
    with open_store(tmp_path / "s", reconcile=False) as mem:
        report = mem.check()
        assert not report.ok
        assert report.namespaces[0].stale == {
            "default-f0": ("supersedes",),
            "default-new": ("supersedes",),
        }
        mem.repair()
        assert mem.check().ok
        assert _links(mem) == {"default-new": ("default-old",)}
    with open_store(tmp_path / "s", reconcile=False) as mem:
        assert _links(mem) == {"default-new": ("default-old",)} and mem.check().ok


def test_a_sidecar_of_the_previous_schema_is_rebuilt_with_links(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        _seed(mem)
    db = sqlite3.connect(tmp_path / "s" / SIDECAR_FILE)
    with db:
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
        db.execute("DELETE FROM supersedes")
    db.close()
    assert SCHEMA_VERSION != "2"
    with open_store(tmp_path / "s") as mem:
        assert _links(mem) == {"default-new": ("default-old",)} and mem.check().ok


def test_links_of_the_previous_link_rule_are_re_derived_at_open(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        _seed(mem)
        derived = _links(mem)
    db = sqlite3.connect(tmp_path / "s" / SIDECAR_FILE)
    with db:  # what schema 3 could hold: a link today's rule does not make
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema'")
        db.execute(
            "INSERT OR REPLACE INTO supersedes (id, namespace, older) VALUES (?, ?, ?)",
            ("default-old", "default", json.dumps(["default-new"])),
        )
    db.close()
    assert SCHEMA_VERSION != "3"
    with open_store(tmp_path / "s") as mem:
        assert _links(mem) == derived and mem.check().ok


def test_concurrent_writers_leave_the_links_a_rebuild_derives(tmp_path: Path) -> None:
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
    with open_store(tmp_path / "s") as mem:
        mem.add(FILLER, ids=[f"f{i}" for i in range(3)], created_at=0.0)

        def write(w: int) -> None:
            for i in range(12):
                verb = "moved to" if (i + w) % 2 else "is"
                text = f"The Apollo launch deadline {verb} {days[i % 5]} (note {w}-{i})."
                mem.add(text, ids=f"w{w}-{i}", created_at=1_000.0 + 10 * i + w)
                if i % 5 == 4:
                    mem.delete(f"w{w}-{i - 2}")

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert _links(mem)  # restatements were linked
        assert mem.check().ok  # sidecar == memory == derived from Chroma


def test_writes_to_an_unloaded_namespace_are_linked_when_it_loads(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as mem:
        mem.add(FILLER, ids=[f"f{i}" for i in range(3)], created_at=1_000.0)
        mem.add(OLD, ids="old", created_at=2_000.0)
    with open_store(tmp_path / "s") as mem:  # nothing loaded: the write goes to the sidecar
        mem.add(NEW, ids="new", created_at=3_000.0)
        assert "default" not in mem.store.indexes.loaded()
        assert mem.store.indexes.sidecar.unlinked("default") == ["new"]
    with open_store(tmp_path / "s") as mem:
        assert _links(mem) == {"new": ("old",)}  # derived at load, and stored
        assert mem.store.indexes.sidecar.unlinked("default") == []
        assert mem.check().ok
    with open_store(tmp_path / "s") as mem:  # deleting the older one while unloaded
        mem.delete("old")
        assert "default" not in mem.store.indexes.loaded()
    with open_store(tmp_path / "s") as mem:
        assert _links(mem) == {} and mem.check().ok
        assert mem.store.indexes.sidecar.links("default") == {}
