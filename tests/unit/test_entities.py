"""Entity extraction with deterministic fakes: a blank spaCy pipeline plus rulers."""

from __future__ import annotations

import warnings

import pytest
import spacy
from spacy.language import Language

from norax_core.entities import (
    DEFAULT_DROP_LABELS,
    EntityExtractor,
    NounMode,
    RuleBasedExtractor,
    SpacyExtractor,
    find_code_identifiers,
    load_extractor,
    normalize_entity,
)
from norax_core.errors import ModelNotFoundError

POS = {
    # word -> (POS, lemma): what a tagger and lemmatizer would say, for the fake pipeline
    "colby": ("PROPN", "Colby"),
    "smith": ("PROPN", "Smith"),
    "base": ("PROPN", "Base"),
    "visual": ("PROPN", "Visual"),
    "studio": ("PROPN", "Studio"),
    "code": ("PROPN", "Code"),
    "team": ("NOUN", "team"),
    "wallet": ("NOUN", "wallet"),
    "wallets": ("NOUN", "wallet"),
    "fees": ("NOUN", "fee"),
    "chain": ("NOUN", "chain"),
    "payments": ("NOUN", "payment"),
    "yesterday": ("NOUN", "yesterday"),
    "group": ("NOUN", "group"),
    "support": ("NOUN", "support"),
    "things": ("NOUN", "thing"),
    "we": ("PRON", "we"),
    "it": ("PRON", "it"),
    "the": ("DET", "the"),
}


@Language.component("norax_test_boom")
def _boom(doc):  # type: ignore[no-untyped-def]
    if "BOOM" in doc.text:
        raise RuntimeError("boom")
    return doc


def test_failing_component_is_not_disabled() -> None:
    # The failure test below relies on the extractor running a component named "lemmatizer".
    assert "lemmatizer" not in SpacyExtractor(fake_nlp(boom=True))._disable


def fake_nlp(*, boom: bool = False) -> Language:
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    for word, (pos, lemma) in POS.items():
        ruler.add([[{"LOWER": word}]], {"POS": pos, "LEMMA": lemma})
    ents = nlp.add_pipe("entity_ruler")
    ents.add_patterns(
        [
            {"label": "PERSON", "pattern": "Colby Smith"},
            {"label": "ORG", "pattern": "Acme Corp"},
            {"label": "ORG", "pattern": "TypeORM"},
            {"label": "DATE", "pattern": [{"LOWER": "yesterday"}]},
            {"label": "CARDINAL", "pattern": "three"},
        ]
    )
    if boom:
        nlp.add_pipe("norax_test_boom", name="lemmatizer")  # a component extraction runs
    return nlp


@pytest.fixture
def ex() -> SpacyExtractor:
    return SpacyExtractor(fake_nlp())


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("the wallet", "wallet"),
        ("  The   Wallet. ", "wallet"),
        ("Wallet", "wallet"),
        ("Colby's", "colby"),
        ("Colby\u2019s", "colby"),
        ("our team's", "team"),
        ("Colby\tSmith", "colby smith"),
        ("they", ""),
        ("the", ""),
        ("x", ""),
        ("2023", ""),
        ("3.5", ""),
        ("!!", ""),
        ("thing", ""),
        ("@Colby_S", "@colby_s"),
        ("#Web3", "#web3"),
        ("os.path.join.", "os.path.join"),
        ("Ünïcödé", "ünïcödé"),
    ],
)
def test_normalize_entity(raw: str, expected: str) -> None:
    assert normalize_entity(raw) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("we use TypeORM and iPhone apps", ["typeorm", "iphone"]),
        ("call snake_case_names or MAX_RETRIES", ["snake_case_names", "max_retries"]),
        ("os.path.join(a) and np.linalg.norm", ["os.path.join", "np.linalg.norm"]),
        ("ping @colby_s now", ["@colby_s"]),
        ("send to 0xAbC123 or 0xabc", ["0xabc123", "0xabc"]),
        ("tag #web3 and #ai-agents, not #1", ["#web3", "#ai-agents"]),
        ("It ended. Then we left. e.g. the U.S. team", []),
        ("mail bob@example.com today", []),
        ("see https://github.com/x/y and db/migrate.py", ["github.com", "migrate.py"]),
        ("JavaScript is fine. Normal Words Only", ["javascript"]),
    ],
)
def test_code_identifiers(text: str, expected: list[str]) -> None:
    assert [e for _, _, e in find_code_identifiers(text)] == expected


def test_code_identifier_offsets() -> None:
    text = "use TypeORM now"
    [(start, end, entity)] = find_code_identifiers(text)
    assert text[start:end] == "TypeORM" and entity == "typeorm"


def test_named_entities_proper_nouns_and_head_nouns(ex: SpacyExtractor) -> None:
    out = ex.extract_query("Colby set up the team wallet on Base")
    assert out == ["colby", "wallet", "base"]  # "team" modifies "wallet": not a head


def test_person_span_keeps_whole_and_parts(ex: SpacyExtractor) -> None:
    assert ex.extract_query("I met Colby Smith.") == ["colby smith", "colby", "smith"]


def test_other_spans_are_kept_whole(ex: SpacyExtractor) -> None:
    assert ex.extract_query("I work at Acme Corp now") == ["acme corp"]


def test_proper_noun_runs_are_one_entity(ex: SpacyExtractor) -> None:
    assert ex.extract_query("I use Visual Studio Code daily") == ["visual studio code"]


def test_dropped_labels_keep_their_words_out(ex: SpacyExtractor) -> None:
    # "yesterday" is tagged NOUN but sits in a DATE span: neither an entity nor a compound
    # modifier, so "group" stays a head.
    assert ex.extract_query("the support group yesterday") == ["group"]
    assert ex.extract_query("three wallets") == ["wallet"]


def test_keep_labels() -> None:
    ex = SpacyExtractor(fake_nlp(), keep_labels=["DATE"])
    assert "yesterday" in ex.extract_query("the support group yesterday")
    assert ex.drop_labels == DEFAULT_DROP_LABELS - {"DATE"}


def test_capitalised_compound_modifier_is_kept(ex: SpacyExtractor) -> None:
    nlp = fake_nlp()
    nlp.get_pipe("attribute_ruler").add([[{"TEXT": "Base"}]], {"POS": "NOUN", "LEMMA": "base"})
    out = SpacyExtractor(nlp).extract_query("Base fees are low")
    assert out == ["base", "fee"]


def test_normalisation_meets(ex: SpacyExtractor) -> None:
    out = ex.extract(["the wallet", "Wallet", "wallets", "Colby's wallets"])
    assert out == [["wallet"], ["wallet"], ["wallet"], ["colby", "wallet"]]


def test_pronouns_stop_words_and_generic_nouns_dropped(ex: SpacyExtractor) -> None:
    assert ex.extract_query("we did it with the things") == []


def test_code_identifiers_win_over_tokens(ex: SpacyExtractor) -> None:
    out = ex.extract_query("TypeORM calls os.path.join via snake_case_names for @colby")
    assert out == ["typeorm", "os.path.join", "snake_case_names", "@colby"]


def test_dedup_in_first_seen_order(ex: SpacyExtractor) -> None:
    assert ex.extract_query("wallet Colby wallets colby Wallet") == ["wallet", "colby"]


def test_batches_keep_input_order(ex: SpacyExtractor) -> None:
    texts = [f"wallet {i} Colby" if i % 2 else "fees" for i in range(10)]
    assert ex.extract(texts, batch_size=3) == ex.extract(texts, batch_size=256)
    assert ex.extract([]) == []


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00\x01\x02 wallet \x7f",
        "lone \ud800 surrogate wallet",
        "\u202eRTL\u202c emoji 🎉🎉 wallet",
        "tabs\tand\nnewlines\r\nwallet",
        "\ufeffBOM wallet",
    ],
)
def test_never_raises_on_odd_unicode(ex: SpacyExtractor, text: str) -> None:
    out = ex.extract_query(text)
    assert all(isinstance(e, str) and e for e in out)
    assert RuleBasedExtractor().extract_query(text) is not None


def test_long_text_is_capped() -> None:
    ex = SpacyExtractor(fake_nlp(), max_chars=1_000)
    text = "wallet " * 500 + "Colby"  # Colby sits past the cap
    assert ex.extract_query(text) == ["wallet"]
    big = "wallet and fees " * 65_000  # ~1 MB
    assert SpacyExtractor(fake_nlp()).extract_query(big) == ["wallet", "fee"]


def test_failing_batch_falls_back_per_text() -> None:
    ex = SpacyExtractor(fake_nlp(boom=True))
    out = ex.extract(["Colby wallet", "BOOM TypeORM wallets", "fees"])
    # The failing text gets the rule-based extractor's entities; the others are unaffected.
    assert out == [["colby", "wallet"], ["boom", "typeorm", "wallet"], ["fee"]]


def test_input_validation(ex: SpacyExtractor) -> None:
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        ex.extract(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="batch_size"):
        ex.extract(["ok"], batch_size=0)
    with pytest.raises(ValueError, match="noun_mode"):
        SpacyExtractor(fake_nlp(), noun_mode="nope")
    with pytest.raises(ValueError, match="parser"):
        SpacyExtractor(fake_nlp(), noun_mode=NounMode.PARSER)
    with pytest.raises(ValueError, match="max_chars"):
        RuleBasedExtractor(max_chars=0)


def test_docstring_examples() -> None:
    import doctest

    import norax_core.entities

    assert doctest.testmod(norax_core.entities).failed == 0


def test_names() -> None:
    assert SpacyExtractor(fake_nlp()).name == "spacy:en_pipeline-0.0.0"
    assert RuleBasedExtractor().name == "rules"


def test_unused_components_are_disabled_not_removed() -> None:
    nlp = fake_nlp()
    nlp.add_pipe("sentencizer")
    ex = SpacyExtractor(nlp)
    assert "sentencizer" in ex._disable
    assert "sentencizer" in nlp.pipe_names  # the caller's pipeline is untouched


def test_rule_based_extractor() -> None:
    rb = RuleBasedExtractor()
    # Capitalised words inside a sentence are names; the first word is judged as a noun.
    assert rb.extract_query("Yesterday I met Colby Smith at Acme.") == [
        "yesterday",
        "colby smith",
        "acme",
    ]
    assert rb.extract_query("Colby set up the team wallet on Base") == [
        "colby",
        "team",
        "wallet",
        "base",
    ]
    assert rb.extract_query("wallets, batteries and glasses") == ["wallet", "battery", "glass"]
    assert rb.extract_query("quickly running tested") == []
    assert rb.extract_query("TypeORM with snake_case and 0xabc") == [
        "typeorm",
        "snake_case",
        "0xabc",
    ]


def test_load_extractor_rules_and_instances() -> None:
    rb = load_extractor("rules")
    assert isinstance(rb, RuleBasedExtractor)
    assert load_extractor(rb) is rb


def test_load_extractor_explicit_missing_model_raises(tmp_path: object) -> None:
    with pytest.raises(ModelNotFoundError, match="no_such_model_xyz.*python -m spacy download"):
        load_extractor("no_such_model_xyz")


def test_load_extractor_env_missing_model_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NORAX_SPACY_MODEL", "/nonexistent/model/dir")
    with pytest.raises(ModelNotFoundError, match="environment variable NORAX_SPACY_MODEL"):
        load_extractor()


def test_load_extractor_falls_back_with_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NORAX_SPACY_MODEL", raising=False)
    monkeypatch.setattr(spacy.util, "is_package", lambda name: False)
    with pytest.warns(RuntimeWarning, match="rule-based entity extractor.*lose NER"):
        ex = load_extractor()
    assert isinstance(ex, RuleBasedExtractor)


def test_load_extractor_prefers_installed_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NORAX_SPACY_MODEL", raising=False)
    monkeypatch.setattr(spacy.util, "is_package", lambda name: name == "en_core_web_sm")
    loaded: list[object] = []

    def fake_load(name: object, exclude: list[str]) -> Language:
        loaded.append((name, tuple(exclude)))
        return fake_nlp()

    monkeypatch.setattr(spacy, "load", fake_load)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ex = load_extractor()
    assert isinstance(ex, SpacyExtractor)
    assert loaded == [("en_core_web_sm", ("parser", "senter"))]


def test_extractors_share_the_interface() -> None:
    for ex in (SpacyExtractor(fake_nlp()), RuleBasedExtractor()):
        assert isinstance(ex, EntityExtractor)
        assert ex.extract_query("the wallets") == ["wallet"]


@pytest.mark.parametrize("seed", range(2))
def test_code_identifier_pre_check_skips_only_text_without_identifiers(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    from norax_core import entities

    rng = random.Random(seed)
    alphabet = "aAbBzZ09 _.@#-xX,?'\u00e9\u00c9\u2019\u03a9\u03c9\n"
    texts = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(20_000)
    ]
    texts += [
        "Gary at TechWorld Store",
        "ask @ann_b about 0xFFAA",
        "see utils.py #ops",
        "Plain text.",
    ]
    checked = [find_code_identifiers(t) for t in texts]
    monkeypatch.setattr(entities, "_maybe_code", lambda text: True)  # the regex at every position
    assert checked == [find_code_identifiers(t) for t in texts]
    monkeypatch.undo()
    assert find_code_identifiers("Gary at TechWorld Store") == [(8, 17, "techworld")]
