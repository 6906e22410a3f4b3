"""Shared helpers of the reliability tests: a fast deterministic embedder and store factory."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import chromadb
import numpy as np

from norax_core import CallableEmbedder, NoraxMemory
from norax_core.entities import RuleBasedExtractor

DIM = 64
_WORD = re.compile(r"\w+")


def _hash_bag(texts: Sequence[str]) -> np.ndarray:
    """A hashed bag of words (crc32: stable across processes), plus a constant component so
    no text embeds to the zero vector."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    out[:, 0] = 0.05
    for i, text in enumerate(texts):
        for word in _WORD.findall(text[:200_000].lower()):
            h = zlib.crc32(word.encode("utf-8", "surrogatepass"))
            out[i, 1 + h % (DIM - 1)] += 1.0 if (h >> 16) & 1 else -1.0
    return out


def hash_embedder() -> CallableEmbedder:
    """The fast embedder every reliability test uses (dimension 64)."""
    return CallableEmbedder(_hash_bag, name="test:hash-bag-64", dim=DIM)


def open_store(path: Path | str | None = None, **kwargs: Any) -> NoraxMemory:
    """A store with the hashed embedder and the rules extractor (all four signals live)."""
    kwargs.setdefault("embedder", hash_embedder())
    kwargs.setdefault("extractor", RuleBasedExtractor())
    kwargs.setdefault("weights", {"bm25": 0.3, "dense": 0.3, "temporal": 0.2, "graph": 0.2})
    return NoraxMemory(path, **kwargs)


def context_vector(own: str, before: Sequence[str]) -> np.ndarray:
    """What a memory embedded with ``embed_context`` must hold: the hashed bag of its text
    followed by its predecessors' (oldest first), unit norm. Written out here, independently
    of the engine's code, so a test can check every stored vector against it."""
    vec = _hash_bag(["\n".join([own, *before])])[0]
    return vec / np.linalg.norm(vec)


def assert_context_vectors(mem: NoraxMemory, order: Sequence[str], before: int) -> None:
    """Each memory of ``order`` (one session of one namespace, in conversation order) holds
    the vector of its own text and the ``before`` texts just before it."""
    texts = {m.id: m.text for m in mem.get(list(order))}
    vectors = mem.embeddings(list(order))
    for i, mid in enumerate(order):
        prev = [texts[p] for p in order[max(0, i - before) : i]]
        want = context_vector(texts[mid], prev)
        assert np.allclose(vectors[mid], want, atol=1e-5), f"{mid} has a stale context"


def spy_chroma(
    monkeypatch: Any, names: Sequence[str] = ("count", "get", "query", "peek")
) -> list[str]:
    """Record the name of every call of ``names`` on any Chroma collection (calls pass on)."""
    from chromadb.api.models.Collection import Collection

    calls: list[str] = []
    for name in names:
        real = getattr(Collection, name)

        def spy(self: Any, *a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            calls.append(_name)
            return _real(self, *a, **k)

        monkeypatch.setattr(Collection, name, spy)
    return calls


def behind_norax(store: Path, act: Any) -> None:
    """Run ``act(collection)`` with plain Chroma on the embedded store's folder (Norax closed)."""
    client = chromadb.PersistentClient(path=str(store))  # Chroma alone: the sidecar sleeps
    try:
        act(client.get_collection("norax"))
    finally:
        client.close()


def rewrite_text(col: Any, mid: str, text: str) -> None:
    """Give memory ``mid`` the document ``text`` with plain Chroma (its metadata and vector
    kept): no change-log entry, no snapshot deleted, behind Norax's back."""
    old = col.get(ids=[mid], include=["metadatas", "embeddings"])
    col.update(
        ids=[mid], documents=[text], metadatas=old["metadatas"], embeddings=old["embeddings"]
    )


def swap_record(col: Any) -> None:
    """Replace memory a5 by x1 (same count, same namespace), behind Norax's back."""
    got = col.get(ids=["a5"], include=["embeddings", "metadatas"])
    col.delete(ids=["a5"])
    col.add(
        ids=["x1"],
        embeddings=got["embeddings"],
        documents=["a lighthouse keeper named Priya"],
        metadatas=got["metadatas"],
    )
