"""Entity extraction: the normalised names, nouns and identifiers that feed the entity graph.

An entity is one of

* a named entity found by spaCy's NER, except the numeric and temporal labels in
  :data:`DEFAULT_DROP_LABELS` (unless kept with ``keep_labels``);
* a proper noun, or a run of adjacent proper nouns ("Visual Studio Code");
* a key noun: the head noun of a noun phrase ("the team wallet" -> ``wallet``);
* a code-like identifier that spaCy tokenises or tags badly, found by regex over the raw text:
  mixed case (``TypeORM``, ``iPhone``), ``snake_case``, ``dotted.names`` (``os.path.join``),
  ``@handles``, ``0x`` hex addresses and ``#hashtags``.

Every entity goes through :func:`normalize_entity` (lowercase, collapsed whitespace, leading
determiners and possessives and trailing ``'s`` stripped, stop words, pronouns, number-only and
one-character junk dropped); common nouns are lemmatised first ("wallets" -> ``wallet``).

Multiword names are kept whole ("colby smith"). A ``PERSON`` span also yields its proper-noun
parts ("colby", "smith"), because people are mostly referred to by one name later in a
conversation; other spans (``bank of america``, ``new york``) are only kept whole, since their
parts ("new", "bank") would be hubs that join unrelated memories.

Without a parser, noun phrases are found from POS tags (:attr:`NounMode.POS`, the default): a
common noun is a phrase head unless the next token is a noun too (an English compound modifier,
"team" in "team wallet"); capitalised modifiers are kept, since they are mostly names the tagger
took for nouns ("Base fees"). :attr:`NounMode.PARSER` uses ``doc.noun_chunks`` instead.

Only the first :data:`MAX_CHARS` (100,000) characters of a text are read, cut at a space when
there is one in the last thousand (spaCy's time and memory grow with the text; a memory that
long is a document, and its opening names what it is about). Control characters and lone
surrogates are replaced, and a text that makes spaCy fail gets the rule-based extractor
instead, so extraction never raises on arbitrary unicode.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Sequence
from enum import Enum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from norax_core.errors import ModelNotFoundError

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_DROP_LABELS",
    "DEFAULT_MODEL",
    "MAX_CHARS",
    "MODEL_ENV_VAR",
    "EntityExtractor",
    "NounMode",
    "RuleBasedExtractor",
    "SpacyExtractor",
    "find_code_identifiers",
    "load_extractor",
    "normalize_entity",
    "word_key",
]

MAX_CHARS = 100_000
"""Only the first this many characters of a text are searched for entities."""

DEFAULT_MODEL = "en_core_web_sm"
MODEL_ENV_VAR = "NORAX_SPACY_MODEL"

DEFAULT_DROP_LABELS: frozenset[str] = frozenset(
    {"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"}
)
"""NER labels whose spans are not entities: values, not things to link memories by."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NEEDED_PIPES = frozenset(
    {"tok2vec", "tagger", "attribute_ruler", "lemmatizer", "ner", "entity_ruler"}
)

_LEADING_WORDS = _words(
    "the a an this that these those my your his her its our their some any every each all no "
    "another such"
)
_EXTRA_STOP_WORDS = _words(
    # Chat filler and nouns too generic to link two memories by.
    "thing things stuff lot lots kind sort bit way ones "
    "hey hi hello thanks thank lol yeah yes yep ok okay oh wow congrats "
    "somebody anybody everybody u ya"
)
_EDGE_PUNCT = " \t\n\"'`()[]{}<>,;:!?.*~|\\/-\u2013\u2014\u2026"
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
# C0 controls (but tab and newline) and DEL become spaces, one for one, so offsets stay valid.
_CONTROL = str.maketrans({c: " " for c in [*range(0, 9), *range(11, 32), 127]})

_LAST_WORD_RE = re.compile(r"\s\S*\Z")
_CODE_RE = re.compile(
    r"""
      (?P<handle>(?<![\w@.])@[A-Za-z0-9_](?:[A-Za-z0-9_.]*[A-Za-z0-9_])?)
    | (?P<hex>(?<![\w])0[xX][0-9a-fA-F]{3,}(?![\w]))
    | (?P<hashtag>(?<![\w#&])\#[^\W\d_][\w-]*)
    | (?P<dotted>(?<![\w.@])[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
    | (?P<snake>(?<![\w.])_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*(?![\w]))
    | (?P<camel>(?<![\w.@\#])(?=[A-Za-z0-9]*[a-z])[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*(?![\w]))
    """,
    re.VERBOSE,
)


@cache
def _stop_words() -> frozenset[str]:
    try:
        from spacy.lang.en.stop_words import STOP_WORDS
    except ImportError:  # pragma: no cover - spaCy is a core dependency
        return _EXTRA_STOP_WORDS | _LEADING_WORDS
    return frozenset(w.replace("\u2019", "'") for w in STOP_WORDS) | _EXTRA_STOP_WORDS


def normalize_entity(text: str) -> str:
    """Return the canonical form of one entity, or ``""`` when it is not an entity.

    Lowercases, collapses whitespace, strips edge punctuation, a trailing possessive and
    leading determiners or possessive pronouns, then rejects stop words, pronouns, strings
    without a letter and anything shorter than two characters. Lemmatisation is the caller's
    job (it needs the token's part of speech).

    Examples:
        >>> normalize_entity("  The   Wallet. ")
        'wallet'
        >>> normalize_entity("Colby\u2019s")
        'colby'
        >>> normalize_entity("they")
        ''
    """
    s = " ".join(text.translate(_APOSTROPHES).lower().split()).strip(_EDGE_PUNCT)
    if s.endswith("'s"):
        s = s[:-2]
    words = s.rstrip("'").split(" ")
    while words and words[0] in _LEADING_WORDS:
        words.pop(0)
    s = " ".join(words).strip(_EDGE_PUNCT)
    if len(s) < 2 or not any(c.isalpha() for c in s):
        return ""
    stop = _stop_words()
    if all(w in stop for w in s.split(" ")):
        return ""
    return s


_CAMEL_EDGE = re.compile(r"[A-Za-z0-9][A-Z]")
"""A capital right after a letter or digit: in every camelCase match of :data:`_CODE_RE`."""


def _maybe_code(text: str) -> bool:
    """Whether ``text`` holds what every match of :data:`_CODE_RE` holds.

    Its ``@``, ``#``, dot, underscore or ``0x``, or (camelCase) :data:`_CODE_RE`'s capital
    after a letter or digit. Most queries hold none: not scanned with the six alternatives
    at every position (1 us instead of 15 for a 100-character query).
    """
    return (
        "@" in text
        or "#" in text
        or "." in text
        or "_" in text
        or "0x" in text
        or "0X" in text
        or _CAMEL_EDGE.search(text) is not None
    )


def find_code_identifiers(text: str) -> list[tuple[int, int, str]]:
    """Return ``(start, end, entity)`` for each code-like identifier in ``text``.

    Abbreviations made of one-letter parts ("e.g.", "U.S.") are not dotted names, and a
    dotted name has no space after its dots, so sentence ends are never joined; file names
    and domains are dotted names too ("db/migrate.py" gives ``migrate.py``, a URL its domain).
    A full stop typed without a following space ("done.Next") is read as a dotted name: a
    known limit. E-mail addresses give nothing.
    """
    found: list[tuple[int, int, str]] = []
    if not _maybe_code(text):
        return found
    for m in _CODE_RE.finditer(text):
        if m.lastgroup == "dotted" and all(len(p) < 2 for p in m.group().split(".")):
            continue
        entity = normalize_entity(m.group())
        if entity:
            found.append((m.start(), m.end(), entity))
    return found


def _clean(text: str, max_chars: int) -> str:
    if len(text) > max_chars:  # cut at a space when one is near, not inside a word
        text = text[:max_chars]
        cut = _LAST_WORD_RE.search(text, max(0, max_chars - 1000))
        if cut:
            text = text[: cut.start()]
    text = text.translate(_CONTROL)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: spaCy's string store cannot hash them
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _dedupe(found: Iterable[tuple[int, str]]) -> list[str]:
    return list(dict.fromkeys(e for _, e in sorted(found, key=lambda f: f[0])))


def word_key(word: str) -> str:
    """``word`` lowercased, its edge punctuation stripped.

    An entity :func:`normalize_entity` makes of words starting with ``word``, without dropping
    any, starts with a word of this key (so stripped).

    Examples:
        >>> word_key("(New"), word_key("Colby\u2019s,")
        ('new', "colby's")
    """
    return word.translate(_APOSTROPHES).lower().strip(_EDGE_PUNCT)


class NounMode(str, Enum):
    """How :class:`SpacyExtractor` finds the head nouns of noun phrases."""

    POS = "pos"
    """From part-of-speech tags alone (no parser; faster)."""
    PARSER = "parser"
    """From the dependency parser's ``noun_chunks`` (needs a ``parser`` component)."""


class EntityExtractor(ABC):
    """Turns texts into deduplicated, normalised entity lists, in first-seen order.

    Both implementations share the normalisation (:func:`normalize_entity`) and the code
    identifier regexes (:func:`find_code_identifiers`), so their outputs meet in one graph.
    """

    def __init__(self, *, max_chars: int = MAX_CHARS) -> None:
        if max_chars < 1:
            raise ValueError(f"max_chars must be positive, got {max_chars}")
        self.max_chars = max_chars

    @property
    @abstractmethod
    def name(self) -> str:
        """Identifies the extractor, so a store can record which one built its entities."""

    @abstractmethod
    def _extract_clean(self, texts: list[str], batch_size: int) -> list[list[str]]:
        """Extract from texts already capped and cleaned by :meth:`extract`."""

    def extract(self, texts: Sequence[str], batch_size: int = 256) -> list[list[str]]:
        """Return the entities of each text, one list per text, in input order.

        Raises:
            TypeError: If an element of ``texts`` is not a string.
            ValueError: If ``batch_size`` is not positive.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
        return self._extract_clean([_clean(t, self.max_chars) for t in texts], batch_size)

    def extract_query(self, text: str) -> list[str]:
        """Return the entities of one query, normalised like stored texts."""
        return self.extract([text])[0]


class SpacyExtractor(EntityExtractor):
    """Entity extraction with a spaCy pipeline plus the code-identifier regexes.

    Args:
        nlp: A loaded pipeline. Components that entity extraction does not use (parser,
            senter, ...) are disabled while it runs; the object itself is not changed.
        keep_labels: NER labels from :data:`DEFAULT_DROP_LABELS` to keep anyway.
        noun_mode: How head nouns are found; see :class:`NounMode`.
        max_chars: Characters of each text that are processed.
    """

    def __init__(
        self,
        nlp: Language,
        *,
        keep_labels: Collection[str] = (),
        noun_mode: NounMode | str = NounMode.POS,
        max_chars: int = MAX_CHARS,
    ) -> None:
        super().__init__(max_chars=max_chars)
        try:
            self.noun_mode = NounMode(noun_mode)
        except ValueError:
            valid = ", ".join(m.value for m in NounMode)
            raise ValueError(f"unknown noun_mode {noun_mode!r}; valid: {valid}") from None
        if self.noun_mode is NounMode.PARSER and "parser" not in nlp.pipe_names:
            raise ValueError("noun_mode 'parser' needs a pipeline with a 'parser' component")
        self.nlp = nlp
        self.drop_labels = DEFAULT_DROP_LABELS - frozenset(keep_labels)
        needed = _NEEDED_PIPES | ({"parser"} if self.noun_mode is NounMode.PARSER else set())
        self._disable = [p for p in nlp.pipe_names if p not in needed]
        meta = nlp.meta
        self._name = f"spacy:{meta.get('lang', 'xx')}_{meta.get('name', 'pipeline')}-" + str(
            meta.get("version", "0.0.0")
        )

    @property
    def name(self) -> str:
        """``spacy:<lang>_<name>-<version>``, e.g. ``spacy:en_core_web_sm-3.8.0``."""
        return self._name

    def _extract_clean(self, texts: list[str], batch_size: int) -> list[list[str]]:
        out: list[list[str]] = []
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            try:
                docs = list(self.nlp.pipe(chunk, batch_size=batch_size, disable=self._disable))
            except Exception:  # noqa: BLE001 - one bad text must not lose the batch
                logger.warning("spaCy failed on a batch; retrying its texts one by one")
                out.extend(self._one_by_one(chunk))
                continue
            out.extend(self._from_doc(doc) for doc in docs)
        return out

    def _one_by_one(self, texts: list[str]) -> Iterator[list[str]]:
        for text in texts:
            try:
                doc = next(iter(self.nlp.pipe([text], disable=self._disable)))
            except Exception:  # noqa: BLE001
                logger.warning("spaCy failed on a text; using the rule-based extractor for it")
                yield RuleBasedExtractor(max_chars=self.max_chars)._extract_one(text)
            else:
                yield self._from_doc(doc)

    def _from_doc(self, doc: Doc) -> list[str]:
        text = doc.text
        found: list[tuple[int, str]] = []
        claimed = bytearray(len(text))  # characters owned by a code identifier
        for start, end, entity in find_code_identifiers(text):
            found.append((start, entity))
            claimed[start:end] = b"\x01" * (end - start)
        used = bytearray(len(doc))  # tokens consumed by a span or the regexes
        for tok in doc:
            if claimed.find(1, tok.idx, tok.idx + len(tok.text)) != -1:
                used[tok.i] = 1
        for ent in doc.ents:
            if any(used[ent.start : ent.end]):
                continue
            used[ent.start : ent.end] = b"\x01" * (ent.end - ent.start)
            if ent.label_ in self.drop_labels:
                continue  # dropped spans also keep their words ("May", "year") out
            entity = normalize_entity(ent.text)
            if entity:
                found.append((ent.start_char, entity))
            if ent.label_ == "PERSON" and len(ent) > 1:
                for tok in ent:
                    part = normalize_entity(tok.text) if tok.pos_ == "PROPN" else ""
                    if part and part != entity:
                        found.append((tok.idx, part))
        self._proper_nouns(doc, used, found)
        if self.noun_mode is NounMode.PARSER:
            heads = [chunk.root for chunk in doc.noun_chunks]
        else:
            heads = [tok for tok in doc if tok.pos_ == "NOUN" and self._is_head(doc, tok.i, used)]
        for tok in heads:
            if tok.pos_ == "NOUN" and not used[tok.i]:
                entity = normalize_entity(tok.lemma_ or tok.text)
                if entity:
                    found.append((tok.idx, entity))
        return _dedupe(found)

    @staticmethod
    def _is_head(doc: Doc, i: int, used: bytearray) -> bool:
        """Whether noun ``i`` heads its phrase: no free noun follows it.

        A capitalised compound modifier is kept as well: the tagger often reads a name in front
        of a noun as a common noun ("Base fees").
        """
        nxt = i + 1
        return (
            nxt == len(doc)
            or doc[nxt].pos_ != "NOUN"
            or bool(used[nxt])
            or doc[i].text[:1].isupper()
        )

    @staticmethod
    def _proper_nouns(doc: Doc, used: bytearray, found: list[tuple[int, str]]) -> None:
        i = 0
        while i < len(doc):
            if doc[i].pos_ != "PROPN" or used[i]:
                i += 1
                continue
            j = i
            while j < len(doc) and doc[j].pos_ == "PROPN" and not used[j]:
                j += 1
            entity = normalize_entity(doc[i:j].text)
            if entity:
                found.append((doc[i].idx, entity))
            i = j


_WORD_RE = re.compile(r"[^\W\d_][\w'\u2019-]*")
_SENTENCE_END_RE = re.compile(r"[.!?\n]")
_NOT_NOUN_SUFFIXES = ("ly", "ing", "ed", "ful", "ous", "ive", "able", "ible", "est", "ish")


def _singular(word: str) -> str:
    """Crude English singular for the rule-based extractor ("wallets" -> "wallet")."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


class RuleBasedExtractor(EntityExtractor):
    """Extraction without a spaCy model: regexes and simple heuristics.

    Entities are the code identifiers, runs of capitalised words that do not start a sentence,
    and other words of four letters or more that are not stop words and do not end like an
    adverb, participle or adjective (lowercased and crudely singularised). What is lost compared
    with spaCy: NER labels (dates and numbers are not told apart from names), multiword names
    at the start of a sentence, lemmas of irregular plurals, and precision: many verbs pass as
    nouns.
    """

    @property
    def name(self) -> str:
        """Always ``"rules"``."""
        return "rules"

    def _extract_clean(self, texts: list[str], batch_size: int) -> list[list[str]]:
        return [self._extract_one(t) for t in texts]

    def _extract_one(self, text: str) -> list[str]:
        found: list[tuple[int, str]] = []
        claimed = bytearray(len(text))
        for start, end, entity in find_code_identifiers(text):
            found.append((start, entity))
            claimed[start:end] = b"\x01" * (end - start)
        run: list[str] = []
        run_start = 0
        sentence_start = True
        last_end = 0
        for m in _WORD_RE.finditer(text):
            gap = text[last_end : m.start()]
            last_end = m.end()
            if _SENTENCE_END_RE.search(gap) or (gap.strip() and run):
                self._flush(run, run_start, found)
                sentence_start = sentence_start or bool(_SENTENCE_END_RE.search(gap))
            if claimed.find(1, m.start(), m.end()) != -1:
                self._flush(run, run_start, found)
                sentence_start = False
                continue
            word = m.group()
            if word[0].isupper() and not sentence_start:
                if not run:
                    run_start = m.start()
                run.append(word)
            else:
                self._flush(run, run_start, found)
                lower = word.lower()
                if len(lower) >= 4 and lower.isalpha() and not lower.endswith(_NOT_NOUN_SUFFIXES):
                    entity = normalize_entity(_singular(lower))
                    if entity:
                        found.append((m.start(), entity))
            sentence_start = False
        self._flush(run, run_start, found)
        return _dedupe(found)

    @staticmethod
    def _flush(run: list[str], start: int, found: list[tuple[int, str]]) -> None:
        if run:
            entity = normalize_entity(" ".join(run))
            if entity:
                found.append((start, entity))
            run.clear()


def load_extractor(
    model: str | os.PathLike[str] | EntityExtractor | None = None,
    *,
    keep_labels: Collection[str] = (),
    noun_mode: NounMode | str = NounMode.POS,
    max_chars: int = MAX_CHARS,
) -> EntityExtractor:
    """Load the best available extractor.

    Resolution order: ``model`` (an extractor, returned as is; a spaCy package name; a model
    folder; or ``"rules"``); the
    ``NORAX_SPACY_MODEL`` environment variable (same forms); the ``en_core_web_sm`` package if
    installed; else a :class:`RuleBasedExtractor`, with a warning saying what is lost.

    Args:
        model: An extractor, a spaCy model name or path, or ``"rules"``.
        keep_labels: See :class:`SpacyExtractor`.
        noun_mode: See :class:`SpacyExtractor`.
        max_chars: Characters of each text that are processed.

    Returns:
        The extractor.

    Raises:
        ModelNotFoundError: If a model named explicitly (argument or environment) cannot be
            loaded.
    """
    if isinstance(model, EntityExtractor):
        return model
    model = os.fspath(model) if model is not None else None
    source = "argument"
    if model is None and os.environ.get(MODEL_ENV_VAR):
        model, source = os.environ[MODEL_ENV_VAR], f"environment variable {MODEL_ENV_VAR}"
    if model == "rules":
        return RuleBasedExtractor(max_chars=max_chars)
    try:
        import spacy
    except ImportError as exc:  # pragma: no cover - spaCy is a core dependency
        if model is not None:
            raise ModelNotFoundError(
                f"spaCy model {model!r} needs spaCy: pip install 'spacy>=3.7.5,<3.9'"
            ) from exc
        return _fallback("spaCy is not installed", max_chars)
    if model is None:
        if not spacy.util.is_package(DEFAULT_MODEL):
            return _fallback(f"spaCy model {DEFAULT_MODEL!r} is not installed", max_chars)
        model, source = DEFAULT_MODEL, "default"
    exclude = ["senter"] if NounMode(noun_mode) is NounMode.PARSER else ["parser", "senter"]
    try:
        nlp = spacy.load(Path(model) if Path(model).exists() else model, exclude=exclude)
    except Exception as exc:
        raise ModelNotFoundError(
            f"cannot load spaCy model {model!r} (from the {source}): {exc} Install it with "
            f"`python -m spacy download {DEFAULT_MODEL}`, give the path of an unpacked model "
            "folder, or use model='rules' for the rule-based extractor."
        ) from exc
    return SpacyExtractor(nlp, keep_labels=keep_labels, noun_mode=noun_mode, max_chars=max_chars)


def _fallback(reason: str, max_chars: int) -> EntityExtractor:
    message = (
        f"{reason}; using the rule-based entity extractor. Entities lose NER (names at the "
        "start of a sentence, dates vs names), lemmas of irregular plurals and precision "
        f"(verbs pass as nouns). Install {DEFAULT_MODEL} or set {MODEL_ENV_VAR} to a model path."
    )
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    logger.warning(message)
    return RuleBasedExtractor(max_chars=max_chars)
