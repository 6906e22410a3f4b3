"""Shared fixtures: the real models from ../shared/models, a pinned clock, Chroma server."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

try:  # `python -m pytest` puts the repo root on sys.path, this file's folder too
    from tests.chroma_server import free_port, start, stop, wait_heartbeat
except ImportError:
    from chroma_server import free_port, start, stop, wait_heartbeat

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# Tests use the shared local models unless told otherwise; nothing downloads.
os.environ.setdefault("NORAX_EMBEDDING_MODEL_DIR", str(SHARED / "models" / "all-MiniLM-L6-v2"))
os.environ.setdefault("NORAX_SPACY_MODEL", str(SHARED / "models" / "en_core_web_sm-3.8.0"))
os.environ.setdefault("NORAX_DATA_DIR", str(SHARED / "data"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def now() -> datetime:
    """The pinned clock every time-dependent test uses."""
    return NOW


@pytest.fixture(scope="session")
def embedder():  # type: ignore[no-untyped-def]
    """The real local all-MiniLM-L6-v2 (one instance per session)."""
    from norax_core.embedders import default_embedder

    return default_embedder()


@pytest.fixture(scope="session")
def extractor():  # type: ignore[no-untyped-def]
    """The real spaCy pipeline from ../shared/models."""
    from norax_core.entities import load_extractor

    return load_extractor()


@pytest.fixture
def memory(embedder, extractor):  # type: ignore[no-untyped-def]
    """An in-memory store with the real models."""
    from norax_core import NoraxMemory

    mem = NoraxMemory(embedder=embedder, extractor=extractor, weights="seed")
    yield mem
    mem.close()


@pytest.fixture(scope="session")
def chroma_url() -> Iterator[str]:
    """A Chroma server on 127.0.0.1: ``$NORAX_CHROMA_URL`` (CI starts one) or our own."""
    url = os.environ.get("NORAX_CHROMA_URL")
    if url:
        if not wait_heartbeat(url, 30):
            pytest.fail(f"NORAX_CHROMA_URL={url} does not answer")
        yield url
        return
    port = free_port()
    path = tempfile.mkdtemp(prefix="norax-chroma-")
    proc = start(path, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
        shutil.rmtree(path, ignore_errors=True)
