"""Snapshots published in Chroma (norax_core/published.py) over a real ``chroma run``.

A client that loaded a namespace from Chroma's rows publishes its snapshot at close; a
process with no snapshot file of its own then loads the namespace from it. Any write
through Norax (a client's in another process, an embedded store's) makes it unused,
including a write that lands between the publisher's read and its publish; a corrupt blob
and one of other settings are not served; ``repair`` and a re-created collection too.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import struct
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import chromadb
import pytest
import zstandard
from _support import open_store, rewrite_text
from test_client_snapshots import NOW, _client, _fill, _from_rows, _open, _search, _write

from norax_core import NoraxMemory, published
from norax_core.maintenance import check_store, repair_store
from norax_core.published import FORMAT, LOG_SYNC, SUFFIX, part_ids

pytestmark = pytest.mark.server


def _blob(client: chromadb.ClientAPI, collection: str, ns: str = "a") -> dict[str, dict]:
    got = client.get_collection(collection + SUFFIX).get(ids=part_ids(ns), include=["metadatas"])
    return dict(zip(got["ids"], got["metadatas"], strict=True))


def _seed(url: str, collection: str, tmp: Path) -> list[tuple[str, float]]:
    """Namespaces a and b; a first client reads a from Chroma and publishes it at close."""
    _fill(url, collection)
    with _open(url, collection, tmp / "first.sqlite3") as mem:
        got = _search(mem)
        assert mem.store.indexes.restored == 0 and mem.rows_read == ["a"]
    assert _blob(_client(url), collection)  # published at close
    return got


def _tamper(url: str, collection: str, record: str, change: Callable[[dict], dict]) -> None:
    """Overwrite some metadata of one record of namespace a's published blob."""
    meta = _blob(_client(url), collection)[record]
    snaps = _client(url).get_collection(collection + SUFFIX)
    snaps.update(ids=[record], metadatas=[{**meta, **change(meta)}])


def _fresh(url: str, collection: str, tmp: Path) -> NoraxMemory:
    """A client process with no snapshot file of its own."""
    return _open(url, collection, tmp / f"{uuid.uuid4().hex}.sqlite3")


def test_a_published_snapshot_is_served_with_the_rows_a_chroma_read_caches(
    chroma_url: str, tmp_path: Path
) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        assert _search(mem) == before
        assert mem.store.indexes.restored == 1 and mem.rows_read == []
        served = sorted(mem.store.indexes.sidecar.namespace_records("a"))
        assert all(r[9] is not None and r[10] is not None for r in served)  # with records
        standing = mem.store.indexes.standing("a")
        assert check_store(mem).ok
    _client(chroma_url).delete_collection(collection + SUFFIX)
    with open_store(client=_client(chroma_url), collection=collection) as mem:  # from rows
        _search(mem)
        assert mem.store.indexes.restored == 0
        rows = mem.store.indexes.sidecar.namespace_records("a")
        assert sorted(rows) == served  # the rows and their records, as Chroma's read gives
        assert mem.store.indexes.standing("a") == standing


def test_a_write_by_another_client_unpublishes(chroma_url: str, tmp_path: Path) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    _seed(chroma_url, collection, tmp_path)
    _write(chroma_url, collection, "a")
    assert not _blob(_client(chroma_url), collection)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        assert _search(mem)[0][0] == "new-a"
        assert mem.store.indexes.restored == 0 and mem.rows_read == ["a"]


def test_a_write_between_the_publishers_read_and_its_publish(
    chroma_url: str, tmp_path: Path
) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    _seed(chroma_url, collection, tmp_path)
    _client(chroma_url).delete_collection(collection + SUFFIX)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        _search(mem)  # rows read now...
        assert mem.rows_read == ["a"]
        _write(chroma_url, collection, "a")  # ...written by another process (nothing to delete)
    # ...published at close: the publisher found the write's log entry and took it back
    assert not _blob(_client(chroma_url), collection)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        assert _search(mem)[0][0] == "new-a" and mem.store.indexes.restored == 0


def test_a_corrupt_blob_loads_from_rows_and_is_deleted(chroma_url: str, tmp_path: Path) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    _tamper(chroma_url, collection, part_ids("a")[1], lambda m: {"b": "QUJD" + m["b"][4:]})
    with _fresh(chroma_url, collection, tmp_path) as mem:
        _from_rows(mem, before)
        assert not _blob(_client(chroma_url), collection)  # deleted...
    assert _blob(_client(chroma_url), collection)  # ...and published afresh at close


def _rewrite(
    client: chromadb.ClientAPI,
    collection: str,
    old: bool,
    ns: str = "a",
    bare: bool = False,
    damage: str = "zeros",
) -> None:
    """Replace the blob of ``ns`` by another of the same snapshot.

    ``old``: in format 3's layout (the state and the rows, row by row, zlib-compressed; its
    state's integer arrays were also narrowed, which does not matter here: it is never
    read), settings of version 3, ``format`` 3 in the head; ``bare``: the current format,
    its rows without records (as a client publishes the rows of its own writes); else the
    current format with its state's compressed bytes damaged under a digest that matches
    (only the decompression finds it): ``damage`` ``"zeros"`` (the frame's second half
    zeroed), ``"cut"`` (the frame truncated) or ``"rows"`` (its rows of another shape).
    """
    stem = published.key(ns)
    found = _blob(client, collection, ns)
    head = found[f"{stem}-h"]
    text = "".join(found[f"{stem}-{i}"]["b"] for i in range(head["parts"]))
    state, vec, rows = published.unpack(base64.b64decode(text))
    if old:
        z_state = zlib.compress(state, 1)
        z_rows = zlib.compress(json.dumps([list(r) for r in rows]).encode(), 1)
        sizes, body = (len(z_state), len(vec or b""), len(z_rows)), [z_state, vec or b"", z_rows]
        head = {**head, "format": 3, "settings": _settings_of(client, collection, "3")}
    elif bare:
        body = [published.pack(state, vec, [(*r[:9], None, None) for r in rows])]
    else:
        now = published.pack(state, vec, rows)
        b, a, c = struct.unpack_from("<QQQ", now)  # the vectors first
        z_state = bytearray(now[24 + b : 24 + b + a])
        z_rows = now[24 + b + a :]
        if damage == "cut":
            z_state = z_state[: len(z_state) - 100]
        elif damage == "rows":  # rows of another shape: a row more stated than they hold
            raw = zstandard.ZstdDecompressor().decompress(z_rows)
            (size,) = struct.unpack_from("<Q", raw)
            rows_head = json.loads(raw[8 : 8 + size])
            more = json.dumps({**rows_head, "n": rows_head["n"] + 1}).encode()
            z_rows = zstandard.ZstdCompressor().compress(
                struct.pack("<Q", len(more)) + more + raw[8 + size :]
            )
        else:
            z_state[len(z_state) // 2 :] = bytes(len(z_state) - len(z_state) // 2)
        sizes, body = (b, len(z_state), len(z_rows)), [now[24 : 24 + b], z_state, z_rows]
    payload = b"".join(bytes(b) for b in body)
    if not bare:
        payload = struct.pack("<QQQ", *sizes) + payload
    digest = f"{zlib.crc32(payload):08x}-{len(payload)}"
    snaps = client.get_collection(collection + SUFFIX)
    snaps.delete(ids=part_ids(ns))
    snaps.add(
        ids=[f"{stem}-h", f"{stem}-0"],
        metadatas=[
            {**head, "parts": 1, "digest": digest},
            {"digest": digest, "b": base64.b64encode(payload).decode()},
        ],
        embeddings=[[1.0], [1.0]],
    )


def _settings_of(client: chromadb.ClientAPI, collection: str, version: str) -> str:
    """The settings a store of the default tokenizer names, as version ``version`` wrote them."""
    from norax_core.sidecar import SCHEMA_VERSION
    from norax_core.tokenize import Tokenizer

    args = (str(client.get_collection(collection).id), SCHEMA_VERSION, Tokenizer().signature())
    now, published.VERSION = published.VERSION, version
    try:
        return published.settings(*args)
    finally:
        published.VERSION = now


def _head(client: chromadb.ClientAPI, collection: str, ns: str = "a") -> dict:
    return _blob(client, collection, ns)[f"{published.key(ns)}-h"]


def test_a_blob_of_the_former_format_is_read_from_rows_and_replaced(
    chroma_url: str, tmp_path: Path
) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    current = _head(_client(chroma_url), collection)
    assert current["format"] == FORMAT
    assert current["settings"] == _settings_of(_client(chroma_url), collection, str(FORMAT))
    _rewrite(_client(chroma_url), collection, old=True)
    assert _head(_client(chroma_url), collection)["format"] == 3
    with _fresh(chroma_url, collection, tmp_path) as mem:
        _from_rows(mem, before)
        # not read at all (other settings), so not found unreadable and deleted either
        assert _head(_client(chroma_url), collection)["format"] == 3
    head = _head(_client(chroma_url), collection)  # published over it at close
    assert head["format"] == FORMAT and head["settings"] == current["settings"]
    with _fresh(chroma_url, collection, tmp_path) as mem:
        assert _search(mem) == before
        assert mem.store.indexes.restored == 1 and mem.rows_read == []


@pytest.mark.parametrize("damage", ["zeros", "cut", "rows"])
def test_a_corrupt_state_or_rows_under_a_matching_digest_is_deleted(
    chroma_url: str, tmp_path: Path, damage: str
) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    _rewrite(_client(chroma_url), collection, old=False, damage=damage)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        _from_rows(mem, before)
        assert not _blob(_client(chroma_url), collection)  # deleted...
    assert _head(_client(chroma_url), collection)["format"] == FORMAT  # ...published afresh


def test_a_blob_of_other_settings_is_not_served(chroma_url: str, tmp_path: Path) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    _tamper(chroma_url, collection, part_ids("a")[0], lambda m: {"settings": "another-tokenizer"})
    with _fresh(chroma_url, collection, tmp_path) as mem:
        _from_rows(mem, before)


def test_repair_drops_them_and_a_recreated_collection_ignores_them(
    chroma_url: str, tmp_path: Path
) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    _seed(chroma_url, collection, tmp_path)
    rewrite_text(_client(chroma_url).get_collection(collection), "a3", "zebra quartz harbour")
    with _fresh(chroma_url, collection, tmp_path) as mem:
        assert not check_store(mem).ok  # the published snapshot was served: stale
        repair_store(mem)
        assert check_store(mem).ok
        assert not _blob(_client(chroma_url), collection)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        assert _search(mem)[0][0] == "a3"
    # the collection dropped and made again under its name: the blobs are another's
    assert _blob(_client(chroma_url), collection)
    _client(chroma_url).delete_collection(collection)
    with open_store(client=_client(chroma_url), collection=collection) as mem:
        mem.add(["zebra lantern"], ids=["z1"], namespace="c", created_at=[NOW])
    with _fresh(chroma_url, collection, tmp_path) as mem:
        mem.add(["zebra quartz harbour"], ids=["z2"], namespace="b", created_at=[NOW])
        assert _search(mem) == [] and mem.store.indexes.restored == 0


def test_deleting_a_namespace_unpublishes_it(chroma_url: str, tmp_path: Path) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    _seed(chroma_url, collection, tmp_path)
    with open_store(client=_client(chroma_url), collection=collection) as mem:
        mem.delete([f"a{i}" for i in range(30)])  # ids of a namespace it has not loaded
    assert not _blob(_client(chroma_url), collection)
    with _fresh(chroma_url, collection, tmp_path) as mem:
        assert _search(mem) == [] and mem.store.indexes.restored == 0


def test_an_embedded_store_publishes_at_close_and_its_writes_unpublish(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    with open_store(folder) as mem:
        mem.add(
            [f"note {i} about the harbour ship {i % 5} and Colby" for i in range(30)],
            ids=[f"a{i}" for i in range(30)],
            namespace="a",
            created_at=[NOW - 3600 * i for i in range(30)],
        )
        before = _search(mem)
    with open_store(folder) as mem:  # reopened: the position still vouches for the sidecar
        assert mem.store.position.trusted()
        assert _blob(mem.store.client, "norax")
        assert _search(mem) == before
        mem.add(["zebra quartz harbour"], ids=["new-a"], namespace="a", created_at=[NOW])
        assert not _blob(mem.store.client, "norax")  # the write unpublished it...
    client = chromadb.PersistentClient(path=str(folder))
    try:
        assert _blob(client, "norax")  # ...and the close published it again
        with open_store(client=client, collection="norax", index_path=None) as mem:
            assert _search(mem)[0][0] == "new-a"
            assert mem.store.indexes.restored == 1
    finally:
        client.close()


def test_norax_publish_publishes_a_store_built_without_them(tmp_path: Path) -> None:
    from norax_core.cli import main

    folder = tmp_path / "store"
    with open_store(folder) as mem:
        for ns in ("a", "b"):
            mem.add([f"{ns} note {i} about Colby" for i in range(5)], namespace=ns)
    client = chromadb.PersistentClient(path=str(folder))
    client.delete_collection("norax" + SUFFIX)  # as a store built before publishing
    client.close()
    assert main(["--store", str(folder), "publish"]) == 0
    client = chromadb.PersistentClient(path=str(folder))
    try:
        assert _blob(client, "norax", "a") and _blob(client, "norax", "b")
    finally:
        client.close()
    with open_store(folder) as mem:  # the publish kept the recorded Chroma position
        assert mem.store.position.trusted()


def test_norax_publish_replaces_blobs_of_the_former_format(tmp_path: Path) -> None:
    from norax_core.cli import main

    folder = tmp_path / "store"
    with open_store(folder) as mem:
        for ns in ("a", "b"):
            mem.add([f"{ns} note {i} about Colby" for i in range(5)], namespace=ns)
        before = _search(mem, "a")
    client = chromadb.PersistentClient(path=str(folder))
    try:
        _rewrite(client, "norax", old=True)  # a store published by format 3
        assert _head(client, "norax")["format"] == 3
    finally:
        client.close()
    with open_store(folder) as mem:  # the former blob is not held: not counted as published
        assert mem.store.indexes.published.held() == {"b"}
    assert main(["--store", str(folder), "publish"]) == 0
    client = chromadb.PersistentClient(path=str(folder))
    try:
        assert _head(client, "norax")["format"] == FORMAT
        with open_store(client=client, collection="norax", index_path=None) as mem:
            assert _search(mem, "a") == before
            assert mem.store.indexes.restored == 1
    finally:
        client.close()
    with open_store(folder) as mem:
        assert mem.store.position.trusted()


def _logged(folder: Path, collection_id: object) -> int:
    """Entries of a collection that Chroma's SQLite log still holds."""
    with sqlite3.connect(folder / "chroma.sqlite3") as db:
        query = "SELECT count(*) FROM embeddings_queue WHERE topic LIKE ?"
        return int(db.execute(query, (f"%{collection_id}",)).fetchone()[0])


def test_chromas_log_does_not_keep_the_published_blobs(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    client = chromadb.PersistentClient(path=str(folder))
    # as a store published before LOG_SYNC: Chroma's default keeps 1,000 writes in its log
    client.create_collection("norax" + SUFFIX, embedding_function=None)
    client.close()
    with open_store(folder) as mem:
        for ns in "abcdef":
            mem.add([f"{ns} note {i} about Colby" for i in range(5)], namespace=ns)
    client = chromadb.PersistentClient(path=str(folder))
    try:
        col = client.get_collection("norax" + SUFFIX)
        assert col.configuration_json["hnsw"]["sync_threshold"] == LOG_SYNC
        assert len(col.get(where={"head": True})["ids"]) == 6  # 6 heads and 6 parts written
        assert _logged(folder, col.id) <= LOG_SYNC
    finally:
        client.close()
    with open_store(folder) as mem:
        assert mem.store.position.trusted()


def _payload(url: str, collection: str) -> bytes:
    found = _blob(_client(url), collection)
    return base64.b64decode(found[f"{published.key('a')}-0"]["b"])


def test_a_blob_digested_by_crc32_as_before_is_served(chroma_url: str, tmp_path: Path) -> None:
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    stem, payload = published.key("a"), _payload(chroma_url, collection)
    assert _head(_client(chroma_url), collection)["digest"] == published._digest(payload)
    assert published._digest(payload).startswith("m")  # MurmurHash3, not crc32
    crc = f"{zlib.crc32(payload):08x}-{len(payload)}"
    for record in (f"{stem}-h", f"{stem}-0"):
        _tamper(chroma_url, collection, record, lambda m: {"digest": crc})
    with _fresh(chroma_url, collection, tmp_path) as mem:
        assert _search(mem) == before
        assert mem.store.indexes.restored == 1 and mem.rows_read == []


@pytest.mark.parametrize("form", ["mmh3", "crc32"])
def test_a_vector_byte_changed_under_its_digest_is_found(
    chroma_url: str, tmp_path: Path, form: str
) -> None:
    """Only the digest can find it: the vectors travel as they are, in no checked frame."""
    collection = f"pub-{uuid.uuid4().hex[:8]}"
    before = _seed(chroma_url, collection, tmp_path)
    stem, payload = published.key("a"), _payload(chroma_url, collection)
    a, b, _ = struct.unpack_from("<QQQ", payload)
    assert b > 0
    digest = published._digest(payload) if form == "mmh3" else published._crc(payload)
    damaged = bytearray(payload)
    damaged[24 + a + b // 2] ^= 0x40
    text = base64.b64encode(bytes(damaged)).decode()
    _tamper(chroma_url, collection, f"{stem}-h", lambda m: {"digest": digest})
    _tamper(chroma_url, collection, f"{stem}-0", lambda m: {"digest": digest, "b": text})
    with _fresh(chroma_url, collection, tmp_path) as mem:
        _from_rows(mem, before)
        assert not _blob(_client(chroma_url), collection)  # deleted
