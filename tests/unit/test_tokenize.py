"""Tokenizer: words, case, stop words, stems, hostile input, persistence."""

from __future__ import annotations

import json

import pytest

from norax_core.tokenize import ENGLISH_STOP_WORDS, TOKENIZER_VERSION, Tokenizer


def test_default_pipeline() -> None:
    tokens = Tokenizer()("The engineers were Running the TypeORM migrations in 2024")
    assert tokens == ["engin", "run", "typeorm", "migrat", "2024"]


def test_identifiers_and_digits_stay_whole() -> None:
    plain = Tokenizer(stem=False, stopwords=None)
    assert plain("snake_case_name v2 HTTP/2 user_id=42") == [
        "snake_case_name",
        "v2",
        "http",
        "2",
        "user_id",
        "42",
    ]
    assert plain("___ __init__ _") == ["__init__"]


def test_stemming_on_and_off() -> None:
    assert Tokenizer(stopwords=None)("running runs ran") == ["run", "run", "ran"]
    assert Tokenizer(stem=False, stopwords=None)("running runs") == ["running", "runs"]
    # Stemming is cached per word: same input, same output.
    assert Tokenizer()("connections") == Tokenizer()("connections") == ["connect"]


def test_lowercase_off_keeps_case_but_still_drops_stop_words() -> None:
    tok = Tokenizer(lowercase=False, stem=False)
    assert tok("The Cat AND the Hat") == ["Cat", "Hat"]


def test_stop_words() -> None:
    assert Tokenizer(stem=False)("what is the plan for it") == ["plan"]
    assert Tokenizer(stem=False, stopwords=None)("what is the plan") == [
        "what",
        "is",
        "the",
        "plan",
    ]
    assert 150 <= len(ENGLISH_STOP_WORDS) <= 200
    # Contractions split on the apostrophe; their fragments are stop words too.
    assert Tokenizer(stem=False)("don't won't I'm we've") == []


def test_min_len() -> None:
    assert Tokenizer(stem=False, stopwords=None, min_len=3)("a to cat mouse") == ["cat", "mouse"]


def test_unknown_stop_word_list_raises_listing_valid_names() -> None:
    with pytest.raises(ValueError, match="english"):
        Tokenizer(stopwords="klingon")


@pytest.mark.parametrize(
    "kwargs", [{"min_len": 0}, {"min_len": 1.5}, {"stem": "yes"}, {"lowercase": None}]
)
def test_invalid_settings_raise(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Tokenizer(**kwargs)  # type: ignore[arg-type]


def test_unicode() -> None:
    tok = Tokenizer(stem=False, stopwords=None)
    assert tok("Café São Paulo 東京タワー Ελληνικά") == [
        "café",
        "são",
        "paulo",
        "東京タワー",
        "ελληνικά",
    ]
    # NFKC: compatibility forms and decomposed accents match their plain spellings.
    assert tok("ﬁle Ｔｅｓｔ cafe\u0301") == ["file", "test", "café"]
    assert tok("Straße") == tok("STRASSE") == ["strasse"]
    assert tok("emoji 🎉🚀 only") == ["emoji", "only"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00",
        "nul\x00byte",
        "\x01\x02\x1b[31mred\x1b[0m\x7f",
        "\ud800 lone surrogate",
        "\u200b\u200d\ufeff zero width",
        "a" * 100_000,
        "_" * 100_000,
        "\n\t\r\x0b\x0c",
    ],
)
def test_hostile_input_never_raises(text: str) -> None:
    for tok in (Tokenizer(), Tokenizer(stem=False, stopwords=None, lowercase=False)):
        tokens = tok(text)
        assert all(isinstance(t, str) and t for t in tokens)
        assert all("\x00" not in t for t in tokens)


def test_nul_and_control_chars_separate_words() -> None:
    assert Tokenizer(stem=False)("nul\x00byte\x07bell") == ["nul", "byte", "bell"]


def test_non_str_raises_type_error() -> None:
    with pytest.raises(TypeError):
        Tokenizer()(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"exact phrase"', ["exact", "phrase"]),
        ("cats OR dogs", ["cats", "dogs"]),
        ("NEAR(alpha beta)", ["near", "alpha", "beta"]),
        ("prefix* -excluded +required", ["prefix", "excluded", "required"]),
        ("title:secret AND body:x", ["title", "secret", "body", "x"]),
        ("'; DROP TABLE memories; --", ["drop", "table", "memories"]),
    ],
)
def test_query_syntax_is_plain_text(text: str, expected: list[str]) -> None:
    assert Tokenizer(stem=False)(text) == expected


def test_or_is_a_plain_word_without_stop_words() -> None:
    assert Tokenizer(stem=False, stopwords=None)("cats OR dogs") == ["cats", "or", "dogs"]


@pytest.mark.parametrize(
    "tok",
    [Tokenizer(), Tokenizer(lowercase=False, stem=False, stopwords=None, min_len=2)],
)
def test_to_dict_round_trip(tok: Tokenizer) -> None:
    data = json.loads(json.dumps(tok.to_dict()))
    assert data["version"] == TOKENIZER_VERSION
    assert Tokenizer.from_dict(data) == tok
    assert Tokenizer.from_dict(data)("Running TypeORM") == tok("Running TypeORM")


def test_from_dict_rejects_unknown_keys_and_versions() -> None:
    with pytest.raises(ValueError, match="unknown tokenizer settings"):
        Tokenizer.from_dict({"stem": True, "language": "fr"})
    with pytest.raises(ValueError, match="version"):
        Tokenizer.from_dict({**Tokenizer().to_dict(), "version": TOKENIZER_VERSION + 1})
    with pytest.raises(ValueError, match="english"):
        Tokenizer.from_dict({"stopwords": "french"})
