"""OnnxMiniLMEmbedder against the real all-MiniLM-L6-v2 and Chroma's own implementation."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from norax_core import embedders
from norax_core.embedders import MODEL_DIR_ENV, OnnxMiniLMEmbedder, default_embedder

pytestmark = pytest.mark.integration

MODEL_DIR = Path(
    os.environ.get(MODEL_DIR_ENV)
    or Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "all-MiniLM-L6-v2"
).resolve()
if not (MODEL_DIR / "onnx" / "model.onnx").is_file():
    pytest.skip(
        f"all-MiniLM-L6-v2 not found at {MODEL_DIR} (set {MODEL_DIR_ENV})", allow_module_level=True
    )

LONG = " ".join(f"token{i} and the meeting notes continue" for i in range(120))  # > 256 pieces

TEXTS = [
    "hi",
    "ok",
    "Hey Mel! Good to see you! How have you been?",
    "I went to a LGBTQ support group yesterday and it was so powerful.",
    "My new crypto wallet has an EVM address on Base.",
    "What's your favourite chocolate cake recipe?",
    "",
    "Caroline is thinking about adopting kids and researching adoption agencies this spring.",
    "Melanie painted a lake sunrise last year and she's proud of it.",
    "The quarterly review moved to Thursday 3pm; bring the Q3 numbers.",
    "?",
    "Remind me to call the dentist tomorrow at 9.",
    "We hiked for six hours and camped beside the river under the stars, "
    "then drove back through the mountains on Sunday morning.",
    "Python 3.11 added exception groups and a faster interpreter.",
    "She said: « c'est la vie » — and laughed.",
    "emoji test 🎉🎉 party time",
    "The user prefers dark mode and short answers.",
    "A " + "very " * 60 + "long sentence that is still under the limit.",
    LONG,
    "Order #4521 shipped via UPS on 2024-03-15 to 221B Baker Street.",
]


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder(MODEL_DIR)


@pytest.fixture(scope="module")
def chroma_vectors() -> np.ndarray:
    """Chroma's ONNXMiniLM_L6_V2 (pads every text to 256) on the same files: the reference."""
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    reference = ONNXMiniLM_L6_V2()
    reference.DOWNLOAD_PATH = MODEL_DIR  # on the instance: it reads <DOWNLOAD_PATH>/onnx/
    return np.asarray(reference(TEXTS), dtype=np.float32)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_shape_dtype_and_unit_norm(embedder: OnnxMiniLMEmbedder) -> None:
    out = embedder.embed(TEXTS)
    assert embedder.name == "onnx:all-MiniLM-L6-v2"
    assert embedder.dim == 384
    assert out.shape == (len(TEXTS), 384)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_empty_batch(embedder: OnnxMiniLMEmbedder) -> None:
    out = embedder.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32


@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_matches_chroma_reference(batch_size: int, chroma_vectors: np.ndarray) -> None:
    out = OnnxMiniLMEmbedder(MODEL_DIR, batch_size=batch_size).embed(TEXTS)
    assert cosines(out, chroma_vectors).min() > 0.9999
    np.testing.assert_allclose(out, chroma_vectors, atol=1e-4)


def test_order_is_preserved_with_mixed_lengths(embedder: OnnxMiniLMEmbedder) -> None:
    one_by_one = np.concatenate([embedder.embed([t]) for t in TEXTS])
    reversed_batch = embedder.embed(TEXTS[::-1])[::-1]
    np.testing.assert_allclose(embedder.embed(TEXTS), one_by_one, atol=1e-5)
    np.testing.assert_allclose(reversed_batch, one_by_one, atol=1e-5)


def test_long_text_is_truncated_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    emb = OnnxMiniLMEmbedder(MODEL_DIR, max_length=256)
    with caplog.at_level(logging.WARNING, logger="norax"):
        emb.embed(["short", LONG])
        emb.embed([LONG])
    warnings = [r for r in caplog.records if r.name == "norax"]
    assert len(warnings) == 1
    assert "truncated" in warnings[0].getMessage() and "256" in warnings[0].getMessage()
    # Everything after the first 256 pieces is ignored.
    np.testing.assert_allclose(emb.embed([LONG]), emb.embed([LONG + " more words here"]), atol=1e-6)


def test_short_text_logs_nothing(
    embedder: OnnxMiniLMEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="norax"):
        OnnxMiniLMEmbedder(MODEL_DIR).embed(TEXTS[:-2])
    assert not [r for r in caplog.records if r.name == "norax"]


def test_semantic_sanity(embedder: OnnxMiniLMEmbedder) -> None:
    query, near, far = embedder.embed(
        ["crypto wallet", "EVM address on Base", "chocolate cake recipe"]
    )
    assert float(query @ near) > float(query @ far)


def test_concurrent_calls_agree_with_serial(embedder: OnnxMiniLMEmbedder) -> None:
    serial = embedder.embed(TEXTS)
    chunks = [TEXTS[i::4] for i in range(4)] * 2
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(embedder.embed, chunks))
    for chunk, result in zip(chunks, results, strict=True):
        expected = serial[[TEXTS.index(t) for t in chunk]]
        np.testing.assert_allclose(result, expected, atol=1e-5)


def test_idle_threads_sleep_and_vectors_match_a_spinning_session(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    import onnxruntime

    from norax_core.embedders.onnx import SPIN_KEY

    _, session = embedder._load()
    assert session.get_session_options().get_session_config_entry(SPIN_KEY) == "0"
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry(SPIN_KEY, "1")
    spinning = OnnxMiniLMEmbedder(MODEL_DIR)
    spinning._load()
    spinning._session = onnxruntime.InferenceSession(
        str(MODEL_DIR / "onnx" / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    assert spinning._session.get_session_options().get_session_config_entry(SPIN_KEY) == "1"
    np.testing.assert_array_equal(embedder.embed(TEXTS), spinning.embed(TEXTS))


async def test_aembed_matches_and_does_not_block_the_loop(embedder: OnnxMiniLMEmbedder) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    out = await embedder.aembed(TEXTS[:-2] * 3)
    task.cancel()
    assert ticks > 5  # the loop kept running while the model worked
    np.testing.assert_allclose(out, np.tile(embedder.embed(TEXTS[:-2]), (3, 1)), atol=1e-5)


def test_env_var_and_onnx_folder_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, str(MODEL_DIR))
    from_env = default_embedder().embed(["hello there"])
    monkeypatch.delenv(MODEL_DIR_ENV)
    from_onnx_folder = OnnxMiniLMEmbedder(MODEL_DIR / "onnx").embed(["hello there"])
    np.testing.assert_allclose(from_env, from_onnx_folder, atol=1e-6)


def test_falls_back_to_a_download_into_chroma_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The download step is replaced by a copy; everything around it is real."""
    cache = tmp_path / "all-MiniLM-L6-v2" / "onnx"
    targets: list[Path] = []

    def fake_download(target: Path) -> None:
        targets.append(target)
        shutil.copytree(MODEL_DIR / "onnx", target)

    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    monkeypatch.setattr(embedders.onnx, "_chroma_cache_dir", lambda: cache)
    monkeypatch.setattr(embedders.onnx, "_download_with_chroma", fake_download)
    emb = default_embedder()
    assert targets == []  # nothing is fetched before first use
    out = emb.embed(["hello there", "general kenobi"])
    emb.embed(["again"])
    assert targets == [cache]
    np.testing.assert_allclose(
        out, OnnxMiniLMEmbedder(MODEL_DIR).embed(["hello there", "general kenobi"]), atol=1e-6
    )


# --- long texts as windows -------------------------------------------------------------------

TRAINS = " ".join(
    f"Train {i} leaves the central station at platform {i % 7} and the timetable lists it."
    for i in range(30)
)  # well over 256 word pieces
TAIL = " My sister adopted a small grey kitten and the cat sleeps on the sofa."


@pytest.fixture(scope="module")
def windowed() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder(MODEL_DIR, long_text="mean")


def test_windows_change_nothing_for_texts_that_fit(
    embedder: OnnxMiniLMEmbedder, windowed: OnnxMiniLMEmbedder
) -> None:
    short = [t for t in TEXTS if t != LONG]
    np.testing.assert_allclose(windowed.embed(short), embedder.embed(short), atol=1e-5)


def test_windows_see_the_end_of_a_long_text(
    embedder: OnnxMiniLMEmbedder, windowed: OnnxMiniLMEmbedder
) -> None:
    query = embedder.embed(["cat kitten pet sister"])[0]
    cut, whole = embedder.embed([TRAINS + TAIL])[0], windowed.embed([TRAINS + TAIL])[0]
    assert np.isclose(np.linalg.norm(whole), 1.0, atol=1e-5)
    np.testing.assert_allclose(cut, embedder.embed([TRAINS])[0], atol=1e-6)  # tail ignored
    assert float(whole @ query) > float(cut @ query) + 0.05
    assert float(windowed.embed([TRAINS])[0] @ query) < float(whole @ query)


def test_window_cap_ignores_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    one = OnnxMiniLMEmbedder(MODEL_DIR, long_text="mean", max_windows=1)
    plain = OnnxMiniLMEmbedder(MODEL_DIR)
    with caplog.at_level(logging.WARNING, logger="norax"):
        got = one.embed([TRAINS + TAIL])
    np.testing.assert_allclose(got, plain.embed([TRAINS]), atol=1e-5)  # first window only
    assert [r for r in caplog.records if "windows" in r.getMessage()]


def test_embedding_cache_keeps_variants_apart(tmp_path: Path) -> None:
    from norax_core.bench.cache import CachedEmbedder, TextCache

    cache = TextCache(tmp_path)
    cut = CachedEmbedder(OnnxMiniLMEmbedder(MODEL_DIR), cache)
    whole = CachedEmbedder(OnnxMiniLMEmbedder(MODEL_DIR, long_text="mean"), cache)
    a = cut.embed([TRAINS + TAIL])
    b = whole.embed([TRAINS + TAIL])
    assert whole.misses == 1 and whole.hits == 0  # never served the truncated vector
    assert not np.allclose(a, b, atol=1e-3)
    np.testing.assert_array_equal(whole.embed([TRAINS + TAIL]), b)
    assert whole.hits == 1
