"""Text to BM25 tokens: unicode words, case folding, English stop words, Snowball stems.

User text is only ever split into words, never parsed: quotes, ``OR``, ``NEAR(``, ``*`` and
``-`` are plain text, so no input can change how a search is interpreted.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import Stemmer

__all__ = ["ENGLISH_STOP_WORDS", "STOP_WORD_LISTS", "TOKENIZER_VERSION", "Tokenizer"]

TOKENIZER_VERSION = 1
"""Bumped whenever the same settings would tokenize some text differently."""

_ENGLISH = """
    a about above after again against all also am an and any are aren as at
    be because been before being below between both but by
    can cannot could couldn
    d did didn do does doesn doing don down during
    each either else etc ever every
    few for from further
    had hadn has hasn have haven having he her here hers herself him himself his how however
    i if in into is isn it its itself
    just
    ll
    m ma may me might mightn more most must mustn my myself
    needn neither no nor not now
    o of off often on once only or other otherwise ought our ours ourselves out over own
    re
    s same shall shan she should shouldn so some such
    t than that the their theirs them themselves then there these they this those through
    thus to too
    under until up upon us
    ve very
    was wasn we were weren what when where whether which while who whom whose why will with
    won would wouldn
    y yet you your yours yourself yourselves
"""
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(_ENGLISH.split())
"""English function words, contraction fragments included (``don't`` splits to ``don t``)."""

STOP_WORD_LISTS: dict[str, frozenset[str]] = {"english": ENGLISH_STOP_WORDS}
"""The stop word lists a :class:`Tokenizer` can name."""

_WORD = re.compile(r"\w+")
_local = threading.local()


def _stemmer() -> Any:
    # PyStemmer objects must not be shared between threads: one per thread.
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


@lru_cache(maxsize=1)
def _stemmer_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("PyStemmer")
    except PackageNotFoundError:  # a build without its metadata: the module's own file
        return str(Stemmer.__file__)


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    # Cached: stemming is on the ingest hot path and chat vocabulary repeats a lot.
    return str(_stemmer().stemWord(word))


@dataclass(frozen=True)
class Tokenizer:
    """Split text into BM25 tokens.

    Text is NFKC-normalised, split on runs of unicode word characters (letters, digits and
    ``_``, so ``snake_case_name`` and ``v2`` stay whole), optionally case-folded, stripped of
    stop words and of words shorter than ``min_len``, and optionally Snowball-stemmed.
    Runs made only of underscores are dropped. Any ``str`` is accepted, including control
    characters and NUL bytes, which simply separate words.

    Attributes:
        lowercase: Case-fold words (``str.casefold``, so ``Straße`` matches ``strasse``).
        stem: Reduce words to their English Snowball stem (``running`` -> ``run``).
        stopwords: Name of a list in :data:`STOP_WORD_LISTS`, or ``None`` to keep every word.
            Stop words are matched case-insensitively, before stemming.
        min_len: Drop words shorter than this many characters (before stemming).
    """

    lowercase: bool = True
    stem: bool = True
    stopwords: str | None = "english"
    min_len: int = 1

    def __post_init__(self) -> None:
        for name in ("lowercase", "stem"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"Tokenizer.{name} must be a bool, got {getattr(self, name)!r}")
        if self.stopwords is not None and self.stopwords not in STOP_WORD_LISTS:
            valid = ", ".join(sorted(STOP_WORD_LISTS))
            raise ValueError(
                f"unknown stop word list {self.stopwords!r}; valid names: {valid}, or None"
            )
        if isinstance(self.min_len, bool) or not isinstance(self.min_len, int):
            raise ValueError(f"Tokenizer.min_len must be an int, got {self.min_len!r}")
        if self.min_len < 1:
            raise ValueError(f"Tokenizer.min_len must be at least 1, got {self.min_len}")

    def __call__(self, text: str) -> list[str]:
        """Return the tokens of ``text``, in order, repeats kept."""
        if not isinstance(text, str):
            raise TypeError(f"Tokenizer expects str, got {type(text).__name__}")
        text = unicodedata.normalize("NFKC", text)
        if self.lowercase:
            text = text.casefold()
        stop = STOP_WORD_LISTS[self.stopwords] if self.stopwords is not None else None
        min_len = self.min_len
        tokens: list[str] = []
        for word in _WORD.findall(text):
            if len(word) < min_len or ("_" in word and not word.strip("_")):
                continue
            if stop is not None and (word if self.lowercase else word.casefold()) in stop:
                continue
            tokens.append(_stem(word) if self.stem else word)
        return tokens

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready description, to persist next to the index it built."""
        return {"version": TOKENIZER_VERSION, **asdict(self)}

    def signature(self) -> dict[str, Any]:
        """What the tokens of a text depend on: :meth:`to_dict` and the stemmer's version.

        Snowball's rules change between PyStemmer releases (``organizations`` stems to
        ``organ`` under 2.2 and to ``organiz`` under 3.1), so tokens stored by one release
        must not be compared with a query tokenized by another.
        """
        out = self.to_dict()
        if self.stem:
            out["stemmer"] = f"PyStemmer {_stemmer_version()}"
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tokenizer:
        """Rebuild a tokenizer saved by :meth:`to_dict`.

        Raises:
            ValueError: ``data`` has unknown keys, invalid values, or comes from a newer
                tokenizer version than this one.
        """
        fields = dict(data)
        version = fields.pop("version", TOKENIZER_VERSION)
        if version != TOKENIZER_VERSION:
            raise ValueError(
                f"tokenizer version {version!r} is not supported (this is {TOKENIZER_VERSION})"
            )
        unknown = set(fields) - {"lowercase", "stem", "stopwords", "min_len"}
        if unknown:
            raise ValueError(f"unknown tokenizer settings: {', '.join(sorted(unknown))}")
        return cls(**fields)
