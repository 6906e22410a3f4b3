"""The local default embedder: all-MiniLM-L6-v2 on onnxruntime, with the model lookup."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from norax_core.embedders.base import Embedder, _check_texts, _l2_normalise
from norax_core.errors import InvalidInputError, ModelNotFoundError, NoraxError

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Encoding, Tokenizer


logger = logging.getLogger("norax")

MODEL_DIR_ENV = "NORAX_EMBEDDING_MODEL_DIR"
"""Environment variable naming a folder that holds ``onnx/model.onnx`` and its tokenizer."""

_MINILM = "all-MiniLM-L6-v2"
_MINILM_DIM = 384
SPIN_KEY = "session.intra_op.allow_spinning"
"""onnxruntime session option: whether idle intra-op threads busy-wait (off here)."""
_NAME = f"onnx:{_MINILM}"
_REQUIRED_FILES = ("model.onnx", "tokenizer.json")


def _onnx_folder(path: Path) -> Path | None:
    """Returns the folder holding the model files: ``path`` itself or ``path/onnx``."""
    for candidate in (path, path / "onnx"):
        if all((candidate / f).is_file() for f in _REQUIRED_FILES):
            return candidate
    return None


def _chroma_cache_dir() -> Path:
    """The folder where Chroma's ``ONNXMiniLM_L6_V2`` keeps the extracted model."""
    return Path.home() / ".cache" / "chroma" / "onnx_models" / _MINILM / "onnx"


def _locate_model(model_dir: str | Path | None) -> tuple[Path | None, list[str]]:
    """Finds the model locally; ``None`` means "download it into Chroma's cache".

    Returns the folder (or ``None``) and the places looked at, for error messages.
    """
    expected = "a folder holding onnx/model.onnx and onnx/tokenizer.json (or the onnx folder)"
    if model_dir is not None:
        found = _onnx_folder(Path(model_dir).expanduser())
        if found is None:
            raise ModelNotFoundError(f"model_dir={str(model_dir)!r} is not {expected}")
        return found, [str(model_dir)]
    env = os.environ.get(MODEL_DIR_ENV)
    if env:
        # An explicit setting that is wrong should fail loudly, not trigger a download.
        found = _onnx_folder(Path(env).expanduser())
        if found is None:
            raise ModelNotFoundError(f"{MODEL_DIR_ENV}={env!r} is not {expected}")
        return found, [env]
    cache = _chroma_cache_dir()
    return _onnx_folder(cache), [f"{MODEL_DIR_ENV} (not set)", str(cache)]


def _download_with_chroma(target: Path) -> None:
    """Lets Chroma fetch the model into ``target``, exactly as it does on first use."""
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    ef = ONNXMiniLM_L6_V2()
    ef.DOWNLOAD_PATH = target.parent
    ef(["warm-up"])  # the public call downloads, verifies and extracts when needed


def _hidden_size(folder: Path | None) -> int:
    try:
        config = json.loads((folder / "config.json").read_text()) if folder else {}
    except (OSError, ValueError):
        config = {}
    return int(config.get("hidden_size", _MINILM_DIM))


class LongText(str, Enum):
    """What :class:`OnnxMiniLMEmbedder` does with a text longer than ``max_length`` pieces."""

    TRUNCATE = "truncate"
    """Embed its beginning only (the model's own behaviour; sentence-transformers does this)."""
    MEAN = "mean"
    """Embed overlapping windows that cover it and keep their normalised mean."""


def token_windows(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """``[start, end)`` spans of at most ``size`` tokens that cover ``n`` tokens.

    Consecutive spans share ``overlap`` tokens; the last one ends at ``n`` and is full size
    (it may share more), so no window is a short tail that would weigh as much as a full one.
    A text that fits gives one span; an empty one gives ``[(0, 0)]``.

    Args:
        n: Number of tokens.
        size: Tokens per window (> ``overlap``).
        overlap: Tokens shared by consecutive windows (>= 0).

    Examples:
        >>> token_windows(600, 254, 32)
        [(0, 254), (222, 476), (346, 600)]

    References:
        Overlapping windows with a stride over inputs longer than the model's limit: Devlin
        et al., "BERT: Pre-training of Deep Bidirectional Transformers for Language
        Understanding" (NAACL 2019), the "doc stride" spans used for SQuAD.
    """
    if size < 1 or not 0 <= overlap < size:
        raise InvalidInputError(f"need size >= 1 and 0 <= overlap < size, got {size}, {overlap}")
    if n <= size:
        return [(0, n)]
    starts = list(range(0, n - size, size - overlap)) + [n - size]
    return [(a, a + size) for a in starts]


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Average of the token vectors that the attention mask keeps (sentence-transformers)."""
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    return summed / np.clip(weights.sum(axis=1), 1e-9, None)


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dims) on onnxruntime, with dynamic padding.

    Texts are tokenised, sorted by length and run in batches padded only to the longest text
    of each batch; results come back in input order and match Chroma's
    ``ONNXMiniLM_L6_V2`` (which pads everything to 256 tokens) several times faster.

    Text longer than ``max_length`` word pieces is TRUNCATED by default: only its beginning is
    embedded, and the first truncation is logged as a warning on the ``norax`` logger (once per
    embedder). With ``long_text="mean"`` the whole text (up to ``max_windows`` windows) is cut
    into overlapping windows of ``max_length`` pieces (:func:`token_windows`), each embedded,
    and the normalised mean of the window vectors is the text's one vector. Truncation stays the
    default because it retrieves better on the agent-memory benchmark we measured (BEAM 100K,
    where 35 % of the gold messages are longer than 256 pieces: dense recall@10 0.603
    truncated, 0.545 with the window mean, 0.540 with the best window): the opening of a long
    message usually says what it is about, and averaging in its body pulls every long
    message towards the conversation's general topic.

    The model is looked up in this order: ``model_dir``; the folder named by the environment
    variable ``NORAX_EMBEDDING_MODEL_DIR``; Chroma's cache
    ``~/.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx``; else Chroma's ``ONNXMiniLM_L6_V2``
    downloads it into that cache on first use. A folder may hold ``onnx/model.onnx`` and the
    tokenizer files, or be the ``onnx`` folder itself.

    Args:
        model_dir: Folder of the model; see the lookup order above.
        batch_size: Texts per onnxruntime call.
        max_length: Word pieces kept per text, special tokens included (model limit 512).
        threads: onnxruntime intra-op threads; ``None`` lets onnxruntime decide.
        long_text: :class:`LongText` (or its value): ``"truncate"`` or ``"mean"``.
        window_overlap: Word pieces shared by consecutive windows (``"mean"`` only).
        max_windows: Windows embedded per text at most (``"mean"`` only); the rest of a
            longer text is ignored, as truncation ignores it.

    The embedder's ``name`` records the variant whenever it is not the default (truncation at
    256 pieces), e.g. ``"onnx:all-MiniLM-L6-v2[mean:256/32x16]"``, so stores and embedding caches
    never mix vectors of different variants.

    Raises:
        ModelNotFoundError: ``model_dir`` or the environment variable names a folder without
            the model (at construction), or the download fails (on first use).

    Safe to call from several threads at once.
    """

    name = f"onnx:{_MINILM}"

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        batch_size: int = 32,
        max_length: int = 256,
        threads: int | None = None,
        long_text: LongText | str = LongText.TRUNCATE,
        window_overlap: int = 32,
        max_windows: int = 16,
    ) -> None:
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be at least 1, got {batch_size}")
        if not 3 <= max_length <= 512:
            raise InvalidInputError(f"max_length must be between 3 and 512, got {max_length}")
        if threads is not None and threads < 1:
            raise InvalidInputError(f"threads must be at least 1 or None, got {threads}")
        try:
            self.long_text = LongText(long_text)
        except ValueError:
            valid = ", ".join(repr(m.value) for m in LongText)
            raise InvalidInputError(f"unknown long_text {long_text!r}; valid: {valid}") from None
        if not 0 <= window_overlap < max_length - 2:
            raise InvalidInputError(
                f"window_overlap must be >= 0 and below max_length - 2, got {window_overlap}"
            )
        if max_windows < 1:
            raise InvalidInputError(f"max_windows must be at least 1, got {max_windows}")
        self.window_overlap = window_overlap
        self.max_windows = max_windows
        self.batch_size = batch_size
        self.max_length = max_length
        self.threads = threads
        self.name = _variant_name(self.long_text, max_length, window_overlap, max_windows)
        self._folder, self._tried = _locate_model(model_dir)
        self.dim: int = _hidden_size(self._folder)
        self._load_lock = threading.Lock()
        self._tokenize_lock = threading.Lock()
        self._tokenizer: Tokenizer | None = None
        self._session: onnxruntime.InferenceSession | None = None
        self._warned = False

    def __repr__(self) -> str:
        where = self._folder or "Chroma cache (not downloaded yet)"
        return f"OnnxMiniLMEmbedder(model_dir={str(where)!r}, batch_size={self.batch_size})"

    def _load(self) -> tuple[Tokenizer, onnxruntime.InferenceSession]:
        with self._load_lock:
            if self._tokenizer is None or self._session is None:
                folder = self._folder or self._download()
                import onnxruntime
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
                tokenizer.no_padding()  # tokenizer.json pads to 128; we pad per batch
                if self.long_text is LongText.TRUNCATE:
                    tokenizer.enable_truncation(max_length=self.max_length)
                else:  # windows are cut from the whole text
                    tokenizer.no_truncation()
                options = onnxruntime.SessionOptions()
                options.log_severity_level = 3
                if self.threads is not None:
                    options.intra_op_num_threads = self.threads
                # Idle intra-op threads sleep instead of spinning: add() runs spaCy in a
                # thread while a batch is embedded, and on a busy 2-core machine spinning
                # threads took the CPU that spaCy (and other processes) needed: 17 % more
                # CPU per embedded batch for no faster embedding (benchmarks/scale_ingest.py).
                options.add_session_config_entry(SPIN_KEY, "0")
                self._session = onnxruntime.InferenceSession(
                    str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
                )
                self._tokenizer = tokenizer
            return self._tokenizer, self._session

    def _download(self) -> Path:
        target = _chroma_cache_dir()
        try:
            _download_with_chroma(target)
        except Exception as exc:  # any failure means the same thing to the user
            raise ModelNotFoundError(
                f"the {_MINILM} ONNX model was not found (looked at: "
                f"{', '.join(self._tried)}) and Chroma could not download it ({exc}). "
                f"Set {MODEL_DIR_ENV} or pass model_dir= to a folder holding "
                "onnx/model.onnx and onnx/tokenizer.json."
            ) from exc
        found = _onnx_folder(target)
        if found is None:
            raise ModelNotFoundError(f"Chroma's download left no model in {target}")
        self._folder = found
        return found

    def _warn_truncated(self, encodings: list[Encoding]) -> None:
        if self._warned:
            return
        for i, encoding in enumerate(encodings):
            if encoding.overflowing:
                self._warned = True
                logger.warning(
                    "%s: text #%d of the batch is longer than max_length=%d word pieces and "
                    "was truncated; only its beginning is embedded. Split long texts into "
                    "chunks to embed all of them. (Logged once per embedder.)",
                    self.name,
                    i,
                    self.max_length,
                )
                return

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeds texts; see the class docstring for truncation.

        Args:
            texts: The texts, in any order and of any length.

        Returns:
            float32 array of shape ``(len(texts), dim)``, rows L2-normalised, in input order.
        """
        batch = _check_texts(texts)
        if not batch:
            return np.zeros((0, self.dim), dtype=np.float32)
        tokenizer, session = self._load()
        if self.long_text is LongText.MEAN:
            return self._embed_windows(batch, tokenizer, session)
        with self._tokenize_lock:
            encodings = tokenizer.encode_batch(batch)
        self._warn_truncated(encodings)
        return _l2_normalise(self._forward([e.ids for e in encodings], session))

    def _forward(self, seqs: list[list[int]], session: onnxruntime.InferenceSession) -> np.ndarray:
        """Mean-pooled (not normalised) vectors of token id sequences, in input order.

        Sequences are sorted by length and padded per batch to the longest of the batch.
        """
        order = np.argsort([len(ids) for ids in seqs], kind="stable")
        out = np.empty((len(seqs), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(len(seqs[i]) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(seqs[i])
                ids[r, :n] = seqs[i]
                mask[r, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            (hidden,) = session.run(["last_hidden_state"], feeds)
            out[rows] = _mean_pool(hidden, mask)
        return out

    def _embed_windows(
        self, batch: list[str], tokenizer: Tokenizer, session: onnxruntime.InferenceSession
    ) -> np.ndarray:
        """``long_text="mean"``: the normalised mean of each text's window vectors."""
        cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
        if cls is None or sep is None:
            raise NoraxError(f"{self.name}: the tokenizer has no [CLS] / [SEP] token")
        with self._tokenize_lock:
            encodings = tokenizer.encode_batch(batch, add_special_tokens=False)
        size = self.max_length - 2
        seqs: list[list[int]] = []
        owner: list[int] = []
        for i, enc in enumerate(encodings):
            spans = token_windows(len(enc.ids), size, self.window_overlap)
            if len(spans) > self.max_windows and not self._warned:
                self._warned = True
                logger.warning(
                    "%s: text #%d of the batch needs %d windows; only the first %d are "
                    "embedded. (Logged once per embedder.)",
                    self.name,
                    i,
                    len(spans),
                    self.max_windows,
                )
            for a, b in spans[: self.max_windows]:
                seqs.append([cls, *enc.ids[a:b], sep])
                owner.append(i)
        windows = _l2_normalise(self._forward(seqs, session))
        out = np.zeros((len(batch), self.dim), dtype=np.float32)
        np.add.at(out, np.asarray(owner), windows)
        return _l2_normalise(out)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        """Runs :meth:`embed` in a worker thread."""
        return await asyncio.to_thread(self.embed, texts)


def _variant_name(long_text: LongText, max_length: int, overlap: int, windows: int) -> str:
    """The embedder name: the model's for the default variant, else the variant appended."""
    if long_text is LongText.TRUNCATE:
        return _NAME if max_length == 256 else f"{_NAME}[truncate:{max_length}]"
    return f"{_NAME}[mean:{max_length}/{overlap}x{windows}]"


def default_embedder() -> Embedder:
    """The local default: :class:`OnnxMiniLMEmbedder` with the usual model lookup."""
    return OnnxMiniLMEmbedder()
