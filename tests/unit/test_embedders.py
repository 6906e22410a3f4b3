"""Unit tests for norax_core.embedders that need neither the model nor a server."""

from __future__ import annotations

import asyncio
import math
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from norax_core import embedders
from norax_core.embedders import (
    MODEL_DIR_ENV,
    CallableEmbedder,
    Embedder,
    OnnxMiniLMEmbedder,
    OpenAIEmbedder,
    default_embedder,
    resolve_embedder,
    token_windows,
)
from norax_core.errors import InvalidInputError, ModelNotFoundError, NoraxError


class Counting:
    """``fn`` returning fixed-dim vectors derived from text length; counts its calls."""

    def __init__(self, dim: int = 3) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[float(len(t) + 1)] + [1.0] * (self.dim - 1) for t in texts]


def fake_model_dir(root: Path, *, nested: bool = True, hidden_size: int | None = None) -> Path:
    """A folder that looks like the model to the lookup (files exist, contents fake)."""
    onnx = root / "onnx" if nested else root
    onnx.mkdir(parents=True, exist_ok=True)
    for name in ("model.onnx", "tokenizer.json"):
        (onnx / name).write_bytes(b"")
    if hidden_size is not None:
        (onnx / "config.json").write_text(f'{{"hidden_size": {hidden_size}}}')
    return root


# --- CallableEmbedder ------------------------------------------------------------------------


def test_callable_discovers_dim_with_one_probe() -> None:
    fn = Counting(dim=5)
    emb = CallableEmbedder(fn, name="t")
    assert emb.dim == 5
    assert len(fn.calls) == 1


def test_callable_given_dim_does_not_probe() -> None:
    fn = Counting(dim=4)
    emb = CallableEmbedder(fn, name="t", dim=4)
    assert fn.calls == []
    assert emb.embed([]).shape == (0, 4)
    assert fn.calls == []


def test_callable_normalises_rows_and_returns_float32() -> None:
    emb = CallableEmbedder(lambda texts: [[3.0, 4.0]] * len(texts), name="t", dim=2)
    out = emb.embed(["a", "b"])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.6, 0.8]], rtol=1e-6)


def test_callable_accepts_numpy_float64_output() -> None:
    emb = CallableEmbedder(lambda texts: np.ones((len(texts), 4)) * 2.0, name="t")
    out = emb.embed(["a", "b", "c"])
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)


def test_callable_keeps_zero_rows_zero() -> None:
    emb = CallableEmbedder(lambda texts: [[0.0, 0.0]] * len(texts), name="t", dim=2)
    assert np.all(emb.embed(["a"]) == 0.0)


def test_callable_rejects_wrong_dim() -> None:
    emb = CallableEmbedder(lambda texts: [[1.0, 2.0, 3.0]] * len(texts), name="t", dim=2)
    with pytest.raises(NoraxError, match="dimension 3, expected 2"):
        emb.embed(["a"])


def test_callable_rejects_dim_change_after_probe() -> None:
    state = {"dim": 3}
    emb = CallableEmbedder(lambda texts: [[1.0] * state["dim"]] * len(texts), name="t")
    state["dim"] = 4
    with pytest.raises(NoraxError, match="expected 3"):
        emb.embed(["a"])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e300])
def test_callable_rejects_non_finite(bad: float) -> None:
    emb = CallableEmbedder(lambda texts: [[1.0, 1.0], [bad, 1.0]], name="t", dim=2)
    with pytest.raises(NoraxError, match="NaN or infinite values for text #1"):
        emb.embed(["a", "b"])


@pytest.mark.parametrize("rows", [[[1.0, 2.0]], [[1.0, 2.0]] * 3, []])
def test_callable_rejects_wrong_row_count(rows: list[list[float]]) -> None:
    emb = CallableEmbedder(lambda texts: rows, name="t", dim=2)
    with pytest.raises(NoraxError, match="for 2 texts"):
        emb.embed(["a", "b"])


@pytest.mark.parametrize("rows", [[[1.0, 2.0], [1.0]], [["x", "y"], [1.0, 2.0]], [1.0, 2.0]])
def test_callable_rejects_malformed_output(rows: object) -> None:
    emb = CallableEmbedder(lambda texts: rows, name="t", dim=2)  # type: ignore[arg-type,return-value]
    with pytest.raises(NoraxError):
        emb.embed(["a", "b"])


def test_callable_bad_probe_raises_at_construction() -> None:
    with pytest.raises(NoraxError, match="NaN"):
        CallableEmbedder(lambda texts: [[math.nan]], name="t")


def test_callable_constructor_validation() -> None:
    with pytest.raises(InvalidInputError):
        CallableEmbedder(Counting(), name="")
    with pytest.raises(InvalidInputError):
        CallableEmbedder(Counting(), name="t", dim=0)
    with pytest.raises(TypeError):
        CallableEmbedder("not callable", name="t")  # type: ignore[arg-type]


def test_embed_rejects_a_bare_string_and_non_strings() -> None:
    emb = CallableEmbedder(Counting(), name="t", dim=3)
    with pytest.raises(InvalidInputError, match="not a single string"):
        emb.embed("hello")
    with pytest.raises(InvalidInputError, match="text #1 is a int"):
        emb.embed(["a", 1])  # type: ignore[list-item]


async def test_callable_aembed_uses_afn() -> None:
    seen: list[list[str]] = []

    async def afn(texts: list[str]) -> list[list[float]]:
        seen.append(texts)
        await asyncio.sleep(0)
        return [[0.0, 2.0]] * len(texts)

    fn = Counting(dim=2)
    emb = CallableEmbedder(fn, name="t", dim=2, afn=afn)
    out = await emb.aembed(["a", "b"])
    np.testing.assert_allclose(out, [[0.0, 1.0], [0.0, 1.0]])
    assert seen == [["a", "b"]]
    assert fn.calls == []
    with pytest.raises(NoraxError):
        await CallableEmbedder(fn, name="t", dim=3, afn=afn).aembed(["a"])


async def test_callable_aembed_without_afn_runs_fn_off_the_loop() -> None:
    threads: list[int] = []

    def fn(texts: list[str]) -> list[list[float]]:
        threads.append(threading.get_ident())
        return [[1.0, 0.0]] * len(texts)

    emb = CallableEmbedder(fn, name="t", dim=2)
    out = await emb.aembed(["a"])
    np.testing.assert_allclose(out, [[1.0, 0.0]])
    assert threads and threads[0] != threading.get_ident()


def test_langchain_style_adapter_is_a_one_liner() -> None:
    class FakeLangChainEmbeddings:
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float(len(t)), 1.0] for t in texts]

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.embed_documents(texts)

    lc = FakeLangChainEmbeddings()
    emb = CallableEmbedder(lc.embed_documents, afn=lc.aembed_documents, name="langchain:fake")
    assert isinstance(emb, Embedder)
    assert emb.dim == 2
    np.testing.assert_allclose(asyncio.run(emb.aembed(["abc"])), emb.embed(["abc"]), rtol=1e-6)


# --- resolve_embedder ------------------------------------------------------------------------


def test_resolve_returns_embedders_unchanged() -> None:
    emb = CallableEmbedder(Counting(), name="t", dim=3)
    assert resolve_embedder(emb) is emb

    class Custom:
        name = "custom"
        dim = 2

        def embed(self, texts: object) -> np.ndarray:
            return np.zeros((0, 2), np.float32)

        async def aembed(self, texts: object) -> np.ndarray:
            return np.zeros((0, 2), np.float32)

    custom = Custom()
    assert resolve_embedder(custom) is custom  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", [None, "default", "onnx", "onnx:all-MiniLM-L6-v2", " onnx "])
def test_resolve_local_model(
    spec: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, str(fake_model_dir(tmp_path)))
    emb = resolve_embedder(spec)
    assert isinstance(emb, OnnxMiniLMEmbedder)
    assert emb.name == "onnx:all-MiniLM-L6-v2"
    assert emb.dim == 384


@pytest.mark.parametrize(
    ("spec", "model", "dim"),
    [
        ("openai", "text-embedding-3-small", 1536),
        ("openai:text-embedding-3-large", "text-embedding-3-large", 3072),
        ("openai:text-embedding-ada-002", "text-embedding-ada-002", 1536),
    ],
)
def test_resolve_openai(spec: str, model: str, dim: int, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "test")  # building the client needs a key, no network
    emb = resolve_embedder(spec)
    assert isinstance(emb, OpenAIEmbedder)
    assert (emb.name, emb.dim) == (f"openai:{model}", dim)


@pytest.mark.parametrize("spec", ["bogus", "openai:", "", "onnx:other-model", "OpenAI"])
def test_resolve_unknown_string_lists_valid_names(spec: str) -> None:
    with pytest.raises(ValueError, match="valid: default, onnx, .*openai:<model>"):
        resolve_embedder(spec)


def test_resolve_plain_callable_uses_qualified_name() -> None:
    def my_embed(texts: list[str]) -> list[list[float]]:
        return [[1.0, 2.0]] * len(texts)

    emb = resolve_embedder(my_embed)
    assert isinstance(emb, CallableEmbedder)
    assert (
        emb.name
        == f"callable:{__name__}.test_resolve_plain_callable_uses_qualified_name.<locals>.my_embed"
    )
    assert emb.dim == 2


def test_resolve_callable_object_uses_its_class_name() -> None:
    emb = resolve_embedder(Counting(dim=2))
    assert emb.name == f"callable:{__name__}.Counting"


def test_resolve_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="cannot use a int"):
        resolve_embedder(42)  # type: ignore[arg-type]


# --- ONNX model lookup (no model needed) -----------------------------------------------------


def test_model_dir_may_be_the_parent_or_the_onnx_folder(tmp_path: Path) -> None:
    root = fake_model_dir(tmp_path, hidden_size=7)
    assert OnnxMiniLMEmbedder(root).dim == 7
    assert OnnxMiniLMEmbedder(root / "onnx").dim == 7
    assert OnnxMiniLMEmbedder(str(root)).dim == 7


def test_dim_defaults_to_384_without_config(tmp_path: Path) -> None:
    assert OnnxMiniLMEmbedder(fake_model_dir(tmp_path, nested=False)).dim == 384


def test_explicit_model_dir_without_model_raises(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="model_dir="):
        OnnxMiniLMEmbedder(tmp_path)


def test_env_var_without_model_raises_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(ModelNotFoundError, match=MODEL_DIR_ENV):
        default_embedder()


def test_chroma_cache_is_used_when_env_is_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    cache = tmp_path / "onnx"
    fake_model_dir(cache, nested=False, hidden_size=9)
    monkeypatch.setattr(embedders.onnx, "_chroma_cache_dir", lambda: cache)
    assert default_embedder().dim == 9


def test_failed_download_raises_model_not_found_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    cache = tmp_path / "cache" / "onnx"
    monkeypatch.setattr(embedders.onnx, "_chroma_cache_dir", lambda: cache)

    def offline(target: Path) -> None:
        raise OSError("no network")

    monkeypatch.setattr(embedders.onnx, "_download_with_chroma", offline)
    emb = default_embedder()  # construction does not download
    assert emb.dim == 384
    assert emb.embed([]).shape == (0, 384)  # nor does an empty batch
    with pytest.raises(ModelNotFoundError) as info:
        emb.embed(["hello"])
    message = str(info.value)
    assert MODEL_DIR_ENV in message and str(cache) in message and "no network" in message
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.parametrize(
    "kwargs", [{"batch_size": 0}, {"max_length": 2}, {"max_length": 513}, {"threads": 0}]
)
def test_onnx_constructor_validation(kwargs: dict[str, int], tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError):
        OnnxMiniLMEmbedder(fake_model_dir(tmp_path), **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"long_text": "max"},
        {"long_text": "mean", "window_overlap": -1},
        {"long_text": "mean", "window_overlap": 254},
        {"long_text": "mean", "max_windows": 0},
    ],
)
def test_onnx_long_text_validation(kwargs: dict[str, object], tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as info:
        OnnxMiniLMEmbedder(fake_model_dir(tmp_path), **kwargs)  # type: ignore[arg-type]
    if kwargs.get("long_text") == "max":
        assert "'truncate'" in str(info.value) and "'mean'" in str(info.value)


def test_onnx_name_records_every_non_default_variant(tmp_path: Path) -> None:
    folder = fake_model_dir(tmp_path)
    names = {
        OnnxMiniLMEmbedder(folder).name,
        OnnxMiniLMEmbedder(folder, long_text="truncate", max_length=128).name,
        OnnxMiniLMEmbedder(folder, long_text="mean").name,
        OnnxMiniLMEmbedder(folder, long_text="mean", window_overlap=64).name,
        OnnxMiniLMEmbedder(folder, long_text="mean", max_windows=4).name,
    }
    assert len(names) == 5
    assert OnnxMiniLMEmbedder(folder).name == "onnx:all-MiniLM-L6-v2"  # stores keep their name


@pytest.mark.parametrize(
    ("n", "size", "overlap"),
    [
        (0, 254, 32),
        (1, 254, 32),
        (254, 254, 32),
        (255, 254, 32),
        (600, 254, 32),
        (1000, 10, 3),
        (7, 2, 1),
        (100, 10, 0),
    ],
)
def test_token_windows_cover_every_token_with_full_windows(n: int, size: int, overlap: int) -> None:
    spans = token_windows(n, size, overlap)
    assert spans[0][0] == 0 and spans[-1][1] == n
    covered = set().union(*(range(a, b) for a, b in spans))
    assert covered == set(range(n))
    if n <= size:
        assert spans == [(0, n)]
    else:
        assert all(b - a == size for a, b in spans)  # the tail window is full size too
        for (_, b1), (a2, _) in zip(spans[:-2], spans[1:-1], strict=True):
            assert b1 - a2 == overlap  # consecutive windows share exactly `overlap`
        assert spans[-1][0] >= spans[-2][0]  # the last one may share more


def test_token_windows_example_and_validation() -> None:
    assert token_windows(600, 254, 32) == [(0, 254), (222, 476), (346, 600)]
    for size, overlap in ((0, 0), (10, 10), (10, -1)):
        with pytest.raises(InvalidInputError):
            token_windows(100, size, overlap)


# --- OpenAI without a server -----------------------------------------------------------------


def test_openai_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(ImportError, match=r'pip install "norax\[openai\]"'):
        OpenAIEmbedder(api_key="test")


def test_openai_without_key_raises_norax_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(NoraxError, match="could not create the OpenAI client"):
        OpenAIEmbedder()


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"dimensions": 0}, {"model": ""}])
def test_openai_constructor_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        OpenAIEmbedder(api_key="test", **kwargs)  # type: ignore[arg-type]


def test_openai_dimensions_override_known_dim() -> None:
    pytest.importorskip("openai")
    emb = OpenAIEmbedder("text-embedding-3-large", api_key="test", dimensions=256)
    assert (emb.name, emb.dim) == ("openai:text-embedding-3-large", 256)
