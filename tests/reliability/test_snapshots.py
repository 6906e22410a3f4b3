"""Namespace snapshots (norax_core/snapshots.py): a namespace loaded in one read answers
exactly as one rebuilt from its rows; any write outdates its snapshot in the same
transaction; a bad snapshot is ignored; a lazy open still finds changes made behind the
sidecar's back; a client reads a namespace's rows and vectors in one request.

The parity test uses a whole LoCoMo conversation with the real ONNX embedder and spaCy
pipeline (embeddings cached on disk); the others use the fast hashed embedder.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import chromadb
import numpy as np
import pytest
from _support import behind_norax, open_store, swap_record

from norax_core import NoraxConfig, NoraxMemory
from norax_core.bench.cache import CachedEmbedder, CachedExtractor, TextCache
from norax_core.bench.data import load_locomo
from norax_core.embedders import default_embedder
from norax_core.engine import SIDECAR_FILE
from norax_core.entities import load_extractor
from norax_core.published import SUFFIX
from norax_core.weights import Weights

DATA = Path(os.environ.get("NORAX_DATA_DIR", Path(__file__).parents[3] / "shared" / "data"))
NOW = 1_700_000_000.0
CONTEXT = Weights(0.3, 0.5, 0.05, 0.15, params={"context_window": 2, "context_weight": 1.0})


def _snapshots(path: Path) -> dict[str, bool]:
    """Namespace -> whether its snapshot holds vectors, read from the sidecar file."""
    with sqlite3.connect(path / SIDECAR_FILE) as db:
        got = db.execute("SELECT namespace, vectors IS NOT NULL FROM snapshots").fetchall()
    return {ns: bool(v) for ns, v in got}


def _fill(mem: NoraxMemory) -> None:
    for ns in ("a", "b"):
        mem.add(
            [f"{ns} note {i} about Colby and the harbour ship {i % 7}" for i in range(40)],
            ids=[f"{ns}{i}" for i in range(40)],
            namespace=ns,
            created_at=[NOW - 3600 * i for i in range(40)],
        )


def _ranking(mem: NoraxMemory, ns: str) -> list[tuple[str, float]]:
    got = mem.search("Colby harbour ship 3", k=10, namespace=ns, now=NOW, weights=CONTEXT)
    return [(r.id, r.score) for r in got]


def test_a_snapshot_loads_the_namespace_its_rows_would(tmp_path: Path) -> None:
    path = DATA / "locomo" / "locomo10_dev.json"
    if not path.is_file():
        pytest.skip(f"LoCoMo dev data not found at {path}")
    conv = load_locomo(path).conversations[0]
    questions = conv.questions[:40]
    cache = TextCache(tmp_path / "cache")
    models = {
        "embedder": CachedEmbedder(default_embedder(), cache),
        "extractor": CachedExtractor(load_extractor(), cache),
    }
    store = tmp_path / "store"

    def answers(mem: NoraxMemory) -> list[list[tuple[str, float]]]:
        out = []
        for q in questions:
            for w in ("default", CONTEXT):
                got = mem.search(q.text, k=10, namespace="c", now=conv.now, weights=w)
                out.append([(r.id, r.score) for r in got])
        return out

    with NoraxMemory(store, **models) as mem:
        mems = conv.memories
        for s in range(0, len(mems), 200):
            batch = mems[s : s + 200]
            mem.add(
                [m.text for m in batch],
                ids=[m.id for m in batch],
                created_at=[m.created_at for m in batch],
                namespace="c",
            )
    assert _snapshots(store) == {"c": True}  # written at close, vectors read from Chroma
    with NoraxMemory(store, **models) as mem:
        from_snapshot = answers(mem)
        idx = mem.store.indexes
        assert idx.restored == 1 and idx.loads == 1
        graph = idx.graph.graph("c")
        every = sorted(idx.bm25.ids("c"))
        bm25 = idx.bm25.scores("c", idx.tokenizer("Caroline painting LGBTQ support group"), every)
        recency = idx.temporal.timeline("c")
        links = idx.supersede.links("c")
    with sqlite3.connect(store / SIDECAR_FILE) as db:
        db.execute("DELETE FROM snapshots")
    with NoraxMemory(store, **models) as mem:
        idx = mem.store.indexes
        assert answers(mem) == from_snapshot
        assert idx.restored == 0  # rebuilt from the rows, vectors read from Chroma
        rebuilt = idx.graph.graph("c")
        assert sorted(graph.nodes(data=True)) == sorted(rebuilt.nodes(data=True))
        assert sorted(graph.edges(data=True)) == sorted(rebuilt.edges(data=True))
        again = idx.bm25.scores("c", idx.tokenizer("Caroline painting LGBTQ support group"), every)
        assert again == bm25 and sorted(idx.bm25.ids("c")) == every
        assert idx.temporal.timeline("c") == recency and idx.supersede.links("c") == links


def test_every_write_outdates_the_namespace_snapshot_in_its_transaction(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
        mem.search("harbour", k=3, namespace="a", now=NOW)
    assert _snapshots(store) == {"a": True, "b": True}
    with open_store(store) as mem:
        expected = _ranking(mem, "b")
        mem.add("a fresh note about the harbour", ids="a99", namespace="a", created_at=NOW)
        assert set(_snapshots(store)) == {"b"}  # committed with the row
        mem.delete("b3", namespace="b")
        mem.add("b note moved to a", ids="b3", namespace="a", created_at=NOW)
        assert _snapshots(store) == {}
    with open_store(store) as mem:
        assert mem.count("a") == 42 and mem.count("b") == 39
        assert "b3" in {r.id for r in mem.search("moved", k=3, namespace="a", now=NOW)}
        assert "b3" not in {r.id for r in mem.search("note", k=50, namespace="b", now=NOW)}
        assert _ranking(mem, "b") != expected and mem.check().ok
    with sqlite3.connect(store / SIDECAR_FILE) as db:  # anyone's edit of the rows, too
        assert {r[0] for r in db.execute("SELECT namespace FROM snapshots")} == {"a", "b"}
        db.execute("UPDATE memories SET tokens = '[\"bogus\"]' WHERE id = 'a1'")
        db.execute("DELETE FROM supersedes WHERE namespace = 'b'")
        db.execute("INSERT INTO unlinked VALUES ('b1', 'b')")
        assert {r[0] for r in db.execute("SELECT namespace FROM snapshots")} == set()


def test_a_bad_snapshot_is_ignored(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
        expected = {ns: _ranking(mem, ns) for ns in ("a", "b")}
    with sqlite3.connect(store / SIDECAR_FILE) as db:
        db.execute("UPDATE snapshots SET state = x'00ff', vectors = x'00' WHERE namespace = 'a'")
        db.execute("UPDATE snapshots SET layout = 'other code' WHERE namespace = 'b'")
    with open_store(store) as mem:
        assert {ns: _ranking(mem, ns) for ns in ("a", "b")} == expected
        assert mem.store.indexes.restored == 0 and mem.check().ok


def test_a_lazy_open_finds_a_same_size_change_behind_the_sidecar(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
    behind_norax(store, swap_record)
    with open_store(store) as mem:  # same count: the open reads no id
        assert mem.store.indexes.loaded() == []
        hits = {r.id for r in mem.search("lighthouse Priya", k=40, namespace="a", now=NOW)}
        assert "x1" in hits and "a5" not in hits  # found when "a" loaded
        assert mem.count("a") == 40 and mem.check().ok


def test_a_client_reads_a_namespace_and_its_vectors_in_one_get(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
        expected = _ranking(mem, "a")
    client = chromadb.PersistentClient(path=str(store))
    client.delete_collection("norax" + SUFFIX)  # the close published it: read the rows
    try:
        with open_store(client=client, config=NoraxConfig(index_cache_mb=0.0)) as mem:
            col = mem.store.collection
            calls: list[list[str]] = []
            real = col.get

            def get(*args, **kwargs):  # type: ignore[no-untyped-def]
                calls.append(list(kwargs.get("include") or []))
                return real(*args, **kwargs)

            col.get = get  # type: ignore[method-assign]
            assert _ranking(mem, "a") == expected
            assert ["documents", "embeddings", "metadatas"] in [sorted(c) for c in calls]
            assert not any(c == ["embeddings"] for c in calls)  # no second read of vectors
    finally:
        client.close()


def test_a_row_replaced_into_another_namespace_outdates_both(tmp_path: Path) -> None:
    from norax_core.sidecar import IndexRow, Sidecar

    side = Sidecar(tmp_path / "side.sqlite3")
    try:
        side.upsert([IndexRow("m1", "a", "episodic", 1.0, ("x",), ())])
        for ns in ("a", "b", "c"):
            side.put_snapshot(ns, "L", b"state", None)
        side.upsert([IndexRow("m1", "b", "episodic", 1.0, ("x",), ())])  # INSERT OR REPLACE
        assert set(side.snapshot_namespaces()) == {"c"}
        assert side.snapshot("c", "L") == (b"state", None) and side.snapshot("c", "M") is None
    finally:
        side.close()


def _updates(mem: NoraxMemory, ns: str) -> None:
    mem.add(
        [
            "The Kestrel launch deadline is Monday",
            "Priya owns the Kestrel budget review",
            "The Kestrel launch deadline moved to Friday",
            "Priya no longer owns the Kestrel budget review, Omar does",
        ],
        ids=[f"{ns}u{i}" for i in range(4)],
        namespace=ns,
        created_at=[NOW - 50 + 10 * i for i in range(4)],
    )


def test_a_snapshot_is_flat_arrays_that_load_into_few_objects(tmp_path: Path) -> None:
    """BM25, recency, entity graph, supersession and vectors load from numpy arrays, not
    pickled graphs of objects: restoring a namespace of 44 memories leaves a handful of
    objects for the garbage collector to scan."""
    import gc

    from norax_core import snapshot_format, snapshots
    from norax_core.signals import graph_arrays
    from norax_core.signals.bm25 import _Partition
    from norax_core.signals.temporal import _Namespace
    from norax_core.supersession import _Space

    store = tmp_path / "s"
    with open_store(store) as mem:
        _fill(mem)
        _updates(mem, "a")
    with sqlite3.connect(store / SIDECAR_FILE) as db:
        state, vectors = db.execute(
            "SELECT state, vectors FROM snapshots WHERE namespace = 'a'"
        ).fetchone()
    meta, arrays = snapshot_format.unpack(bytes(state))
    assert all(a.dtype != object for a in arrays.values()) and meta["supersede"] is not None
    _, matrix = snapshot_format.unpack(bytes(vectors))
    assert matrix["mat"].dtype == np.float32 and matrix["mat"].shape[0] == 44

    def part(prefix: str) -> dict[str, np.ndarray]:
        return {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith(prefix + ".")}

    gc.collect()
    before = len(gc.get_objects())
    held = (
        _Partition.from_arrays(meta["bm25"], part("bm25")),
        _Namespace.from_arrays(part("temporal")),
        _Space.from_arrays(meta["supersede"], part("supersede")),
        graph_arrays.from_arrays(meta["graph"], part("graph")),
    )
    gc.collect()  # what survives it (tuples of ints do not stay tracked) is scanned again
    assert len(gc.get_objects()) - before < 30  # was about 30 per memory, unpickled
    loaded, ids = snapshots.ids_of(bytes(state))
    assert len(ids) == 44 and len(held[0]) == 44 and loaded["supersede"].ids() == held[2].ids()


def test_writes_after_a_restore_answer_as_after_a_rebuild(tmp_path: Path) -> None:
    """A restored namespace builds its write structures (BM25 lists, supersession rows) at
    its first write: adds, replacements and deletes then rank as on a rebuilt namespace."""
    runs = []
    for restored in (True, False):
        store = tmp_path / f"s{restored}"
        with open_store(store) as mem:
            _fill(mem)
            _updates(mem, "a")
        if not restored:
            with sqlite3.connect(store / SIDECAR_FILE) as db:
                db.execute("DELETE FROM snapshots")
        with open_store(store) as mem:
            before = _ranking(mem, "a")
            assert mem.store.indexes.supersede.links("a")  # the updates link to what they replace
            mem.add(
                "The Kestrel launch deadline moved again, to next Monday",
                ids="au9",
                namespace="a",
                created_at=NOW,
            )
            mem.upsert("a note 3 about Colby, rewritten: harbour ship 3", ids="a3", namespace="a")
            mem.delete(["a5", "au1"], namespace="a")
            after = _ranking(mem, "a")
            links = mem.store.indexes.supersede.links("a")
            assert mem.store.indexes.restored == int(restored) and mem.check().ok
        runs.append((before, after, links))
    assert runs[0] == runs[1]


def test_the_close_reads_a_namespaces_vectors_by_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``where`` on the namespace scans the whole collection in Chroma: a close that
    snapshots every namespace written since open must look its vectors up by id."""
    from chromadb.api.models.Collection import Collection

    store = tmp_path / "s"
    wheres: list[object] = []
    real = Collection.get

    def spy(self: Collection, *a: object, **k: object) -> object:
        if "embeddings" in (k.get("include") or ()):  # type: ignore[operator]
            wheres.append(k.get("where"))
        return real(self, *a, **k)  # type: ignore[arg-type]

    with open_store(store) as mem:
        _fill(mem)
        monkeypatch.setattr(Collection, "get", spy)
    assert _snapshots(store) == {"a": True, "b": True}
    assert wheres and all(w is None for w in wheres)


def test_a_restored_namespace_reads_its_labels_from_the_covering_index(tmp_path: Path) -> None:
    texts = [
        "Always add type hints to Python code.",  # instruction
        "I'm vegetarian, so no meat in the recipes.",  # preference
        "The harbour ship left at noon.",
        "Colby moved the wallet to Base.",
    ]
    roles = [{"role": "user"}, {"role": "user"}, {"role": "assistant"}, {}]
    with open_store(tmp_path) as mem:
        mem.add(texts, ids=["i", "p", "s", "w"], namespace="a", metadata=roles, created_at=NOW)
        idx = mem.store.indexes
        standing, every_role = idx.standing("a"), idx.roles("a", ["i", "p", "s", "w"])
    assert standing == ["i", "p"]
    assert every_role == {"i": "user", "p": "user", "s": "assistant", "w": ""}
    with sqlite3.connect(tmp_path / SIDECAR_FILE) as db:  # a file made before the index
        db.execute("DROP INDEX memories_labels")
    with open_store(tmp_path) as mem:
        mem.search("type hints", namespace="a", now=NOW)
        idx = mem.store.indexes
        assert idx.restored == 1
        assert idx.standing("a") == standing
        assert idx.roles("a", ["i", "p", "s", "w"]) == every_role
    with sqlite3.connect(tmp_path / SIDECAR_FILE) as db:
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT id, inferred_kind, role FROM memories WHERE namespace = ?",
            ("a",),
        ).fetchall()
    assert "COVERING INDEX memories_labels" in str(plan)  # the open made it again
