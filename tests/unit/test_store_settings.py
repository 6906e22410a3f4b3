"""A store remembers its default weights and how its memories were embedded."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import chromadb
import numpy as np
import pytest

from norax_core import NoraxConfig, NoraxMemory, Weights
from norax_core.cli import main as cli_main
from norax_core.embedders import CallableEmbedder
from norax_core.errors import WeightsError
from norax_core.presets import get_preset
from norax_core.store_settings import (
    EMBED_CONTEXT_KEY,
    WEIGHTS_KEY,
    EmbedSettings,
    read_settings,
    settings_metadata,
)

T0 = 1_700_000_000.0


class Recorder:
    """An embedder that records what it was asked to embed."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.embedder = CallableEmbedder(self._embed, name="rec", dim=8)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        out = np.ones((len(texts), 8), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, 1 + len(t) % 7] += 1.0
        return out


def _open(path: Path, rec: Recorder, **kwargs) -> NoraxMemory:
    return NoraxMemory(path, embedder=rec.embedder, extractor=False, **kwargs)


def _metadata(path: Path) -> dict:
    client = chromadb.PersistentClient(path=str(path))
    try:
        return dict(client.get_collection("norax").metadata or {})
    finally:
        client.close()


def test_read_settings_of_an_unrecorded_collection_is_empty() -> None:
    got = read_settings({"norax_embedder": "x", "norax_dim": 3}, collection="c")
    assert got.weights is None and got.embed is None


def test_settings_round_trip_through_metadata() -> None:
    w = get_preset("chat")
    meta = settings_metadata(w, EmbedSettings(2, 600.0))
    json.dumps(meta)  # plain Chroma metadata values
    got = read_settings(meta, collection="c")
    assert got.weights == w
    assert got.embed == EmbedSettings(2, 600.0)


def test_reopened_store_keeps_its_preset_and_embedding(tmp_path: Path) -> None:
    rec = Recorder()
    with _open(tmp_path, rec, weights="chat") as mem:
        mem.add(["a1", "a2"], created_at=[T0, T0 + 1])
    assert rec.seen == ["a1", "a2\na1"]
    rec.seen.clear()
    with _open(tmp_path, rec) as mem:  # no weights: the store's
        assert mem.weights == get_preset("chat")
        assert mem.add_config.embed_context == get_preset("chat").params["embed_context"]
        mem.add("a3", created_at=T0 + 2)
    assert rec.seen == ["a3\na1\na2"]


def test_other_weights_search_but_do_not_change_how_memories_are_embedded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder()
    with _open(tmp_path, rec, weights="chat") as mem:
        mem.add(["a1", "a2"], created_at=[T0, T0 + 1])
    rec.seen.clear()
    with (
        caplog.at_level(logging.WARNING, logger="norax"),
        _open(tmp_path, rec, weights="default") as mem,
    ):
        assert mem.weights.name == "default"  # searches fuse with the weights given
        assert mem.add_config.embed_context == 2  # adds stay as the store was built
        mem.add("a3", created_at=T0 + 2)
    assert rec.seen == ["a3\na1\na2"]
    assert any("embed_context=2" in r.getMessage() for r in caplog.records)
    assert read_settings(_metadata(tmp_path), collection="norax").weights == get_preset("chat")


def test_an_empty_store_records_the_settings_it_is_opened_with(tmp_path: Path) -> None:
    rec = Recorder()
    _open(tmp_path, rec, weights="chat").close()
    assert _metadata(tmp_path)[EMBED_CONTEXT_KEY] == 2
    with _open(tmp_path, rec, weights={"bm25": 1.0}) as mem:  # still empty: re-recorded
        mem.add(["b1", "b2"], created_at=[T0, T0 + 1])
    assert rec.seen == ["b1", "b2"]
    meta = _metadata(tmp_path)
    assert meta[EMBED_CONTEXT_KEY] == 0
    assert meta["norax_embedder"] == "rec"  # the embedder's record is kept beside them
    with _open(tmp_path, rec) as mem:
        assert mem.weights == Weights.from_mapping({"bm25": 1.0})


def test_unreadable_recorded_weights_are_a_typed_error(tmp_path: Path) -> None:
    rec = Recorder()
    with _open(tmp_path, rec) as mem:
        mem.add("x", created_at=T0)
    client = chromadb.PersistentClient(path=str(tmp_path))
    col = client.get_collection("norax")
    col.modify(metadata={**dict(col.metadata or {}), WEIGHTS_KEY: '{"format": "other"}'})
    client.close()
    with pytest.raises(WeightsError, match="recorded in collection 'norax'"):
        _open(tmp_path, rec)
    with _open(tmp_path, rec, weights="seed") as mem:  # explicit weights still open it
        assert mem.count() == 1


def test_cli_search_uses_the_recorded_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder()
    with _open(tmp_path, rec, weights="project") as mem:
        mem.add("the wallet lives on Base", created_at=T0)
    import norax_core.cli as cli

    seen: list[str] = []
    real = cli.open_memory

    def spy(args, **kwargs):  # the CLI's real opener, with this test's embedder
        mem = real(args, embedder=rec.embedder, extractor=False, **kwargs)
        seen.append(mem.weights.name)
        return mem

    monkeypatch.setattr(cli, "open_memory", spy)
    assert cli_main(["--store", str(tmp_path), "search", "wallet", "--json"]) == 0
    assert seen == ["project"]
    out = json.loads(capsys.readouterr().out)
    assert out["results"][0]["text"] == "the wallet lives on Base"


def test_cli_add_with_a_preset_creates_a_store_that_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder()
    import norax_core.cli as cli

    names: list[str] = []
    real = cli.open_memory

    def spy(args, **kwargs):
        mem = real(args, embedder=rec.embedder, extractor=False, **kwargs)
        names.append(mem.weights.name)
        return mem

    monkeypatch.setattr(cli, "open_memory", spy)
    store = ["--store", str(tmp_path)]
    assert cli_main([*store, "add", "--text", "first", "--preset", "chat"]) == 0
    assert cli_main([*store, "add", "--text", "second"]) == 0
    assert names == ["chat", "chat"]
    assert rec.seen[-1] == "second\nfirst"  # embedded with its context, as chat asks


class _Reads:
    """A Chroma collection that records which of its data reads were called."""

    def __init__(self, collection: object) -> None:
        self._collection = collection
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> object:
        if name in ("count", "get", "peek", "query"):
            self.reads.append(name)
        return getattr(self._collection, name)


def test_settling_a_recorded_store_reads_no_data(tmp_path: Path) -> None:
    # A Chroma server's first read of a collection loads its index (0.3-0.9 s at 100k
    # memories): a client's open must not read data when the recorded settings apply.
    from norax_core.store_settings import settle

    rec = Recorder()
    with _open(tmp_path, rec, weights="chat") as mem:
        mem.add(["a1", "a2"], created_at=[T0, T0 + 1])
    client = chromadb.PersistentClient(path=str(tmp_path))
    try:
        col = _Reads(client.get_collection("norax"))
        chat = get_preset("chat")
        got = settle(col, "norax", None, lambda w: w.applied(NoraxConfig()), record=True)
        assert got == (chat, EmbedSettings(2, 3600.0))
        assert col.reads == []
        # Other weights than recorded: the count decides (non-empty: the store's embedding).
        other = get_preset("default")
        got = settle(col, "norax", other, lambda w: w.applied(NoraxConfig()), record=True)
        assert got == (other, EmbedSettings(2, 3600.0)) and col.reads == ["count"]
    finally:
        client.close()
