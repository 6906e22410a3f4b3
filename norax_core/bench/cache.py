"""On-disk caches for embeddings and entities, so a second benchmark run skips the models.

Entries are keyed by the embedder's name and the SHA-256 of the text, in one SQLite file per
cache folder (default ``~/.cache/norax``, or ``$NORAX_CACHE_DIR``). Both wrappers are drop-in:
:class:`CachedEmbedder` is an :class:`~norax_core.embedders.Embedder` and
:class:`CachedExtractor` an :class:`~norax_core.entities.EntityExtractor`, reporting the
wrapped model's name so stores built through the cache are indistinguishable. The name must
therefore change with anything that changes the vectors:
:class:`~norax_core.embedders.OnnxMiniLMEmbedder` appends
its long-text variant to it (``onnx:all-MiniLM-L6-v2[mean:256/32x16]``) whenever that is not
the default, so a cache never serves one variant's vectors to another.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from norax_core.embedders import Embedder
from norax_core.entities import EntityExtractor

__all__ = ["CACHE_ENV", "CachedEmbedder", "CachedExtractor", "TextCache", "default_cache_dir"]

CACHE_ENV = "NORAX_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$NORAX_CACHE_DIR``, else ``~/.cache/norax``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "norax"


def _key(model: str, text: str) -> bytes:
    return hashlib.sha256(f"{model}\x00{text}".encode("utf-8", "surrogatepass")).digest()


class TextCache:
    """A SQLite table of ``(kind, model, sha256(text)) -> bytes``, safe across threads."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self.folder = Path(folder) if folder is not None else default_cache_dir()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "norax-cache.sqlite3"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS entry (kind TEXT, model TEXT, key BLOB, value BLOB,"
                " PRIMARY KEY (kind, model, key))"
            )

    def get_many(self, kind: str, model: str, texts: Sequence[str]) -> list[bytes | None]:
        """The stored value of each text, ``None`` where there is none."""
        keys = [_key(model, t) for t in texts]
        found: dict[bytes, bytes] = {}
        with self._lock:
            for s in range(0, len(keys), 500):
                chunk = keys[s : s + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, value FROM entry WHERE kind=? AND model=? AND key IN ({marks})",
                    (kind, model, *chunk),
                )
                found.update(rows.fetchall())
        return [found.get(k) for k in keys]

    def put_many(
        self, kind: str, model: str, texts: Sequence[str], values: Sequence[bytes]
    ) -> None:
        """Store one value per text."""
        rows = [(kind, model, _key(model, t), v) for t, v in zip(texts, values, strict=True)]
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO entry VALUES (?, ?, ?, ?)", rows)

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


def _extractor_key(extractor: EntityExtractor) -> str:
    """The extractor's name, settings and code version: entities depend on all three."""
    settings = {
        a: repr(getattr(extractor, a, None)) for a in ("max_chars", "noun_mode", "keep_labels")
    }
    module = sys.modules.get(type(extractor).__module__)
    source = Path(module.__file__).read_bytes() if module and module.__file__ else b""
    code = hashlib.sha256(source).hexdigest()[:16]
    return f"{extractor.name}|{json.dumps(settings, sort_keys=True)}|{code}"


class CachedEmbedder:
    """An :class:`Embedder` that remembers every vector it has computed.

    Args:
        inner: The embedder doing the work; its ``name`` and ``dim`` are reported as is.
        cache: Where vectors are kept (a :class:`TextCache` or a folder).
    """

    def __init__(self, inner: Embedder, cache: TextCache | str | Path | None = None) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dim: int = inner.dim
        self.cache = cache if isinstance(cache, TextCache) else TextCache(cache)
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``: cached ones read back, the rest computed in one batch."""
        items = list(texts)
        stored = self.cache.get_many("embedding", self.name, items)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        todo = [i for i, v in enumerate(stored) if v is None]
        for i, v in enumerate(stored):
            if v is not None:
                out[i] = np.frombuffer(v, dtype=np.float32)
        if todo:
            unique = list(dict.fromkeys(items[i] for i in todo))
            vecs = np.asarray(self.inner.embed(unique), dtype=np.float32)
            self.cache.put_many("embedding", self.name, unique, [v.tobytes() for v in vecs])
            row = {t: vecs[j] for j, t in enumerate(unique)}
            for i in todo:
                out[i] = row[items[i]]
        self.hits += len(items) - len(todo)
        self.misses += len(todo)
        return out

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed` in a worker thread."""
        return await asyncio.to_thread(self.embed, texts)

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, cache={str(self.cache.path)!r})"


class CachedExtractor(EntityExtractor):
    """An :class:`EntityExtractor` that remembers the entities of every text it has seen.

    Args:
        inner: The extractor doing the work; its ``name`` is reported as is.
        cache: Where entity lists are kept (a :class:`TextCache` or a folder).
    """

    def __init__(self, inner: EntityExtractor, cache: TextCache | str | Path | None = None) -> None:
        super().__init__(max_chars=inner.max_chars)
        self.inner = inner
        self.cache = cache if isinstance(cache, TextCache) else TextCache(cache)
        self._model = _extractor_key(inner)

    @property
    def name(self) -> str:
        """The wrapped extractor's name."""
        return self.inner.name

    def _extract_clean(self, texts: list[str], batch_size: int) -> list[list[str]]:
        stored = self.cache.get_many("entities", self._model, texts)
        out: list[list[str]] = [json.loads(v) if v is not None else [] for v in stored]
        todo = [i for i, v in enumerate(stored) if v is None]
        if todo:
            unique = list(dict.fromkeys(texts[i] for i in todo))
            got = self.inner.extract(unique, batch_size=batch_size)
            self.cache.put_many(
                "entities", self._model, unique, [json.dumps(e).encode() for e in got]
            )
            row = dict(zip(unique, got, strict=True))
            for i in todo:
                out[i] = list(row[texts[i]])
        return out
