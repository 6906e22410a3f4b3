"""Tokens stored by one PyStemmer release are not searched with another's.

Snowball's English rules change between PyStemmer releases (``organizations`` stems to
``organ`` under 2.2 and to ``organiz`` under 3.1). The sidecar records the stemmer's version
with the tokenizer settings, so a store opened under another release re-derives its tokens
instead of matching stale stems against the query's fresh ones.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from _support import open_store

from norax_core import tokenize
from norax_core.engine import SIDECAR_FILE

NOW = 1_700_000_000.0


def _tokens(store: Path, mid: str) -> list[str]:
    with sqlite3.connect(store / SIDECAR_FILE) as db:
        row = db.execute("SELECT tokens FROM memories WHERE id = ?", (mid,)).fetchone()
    return list(json.loads(row[0]))


def test_a_store_written_under_another_stemmer_release_is_re_derived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "s"
    with monkeypatch.context() as old:
        old.setattr(tokenize, "_stemmer_version", lambda: "2.2.0.3", raising=False)
        with open_store(store) as mem:
            mem.add(
                ["The organizations met on Friday", "Volunteering programs start soon"],
                ids=["a", "b"],
                namespace="n",
                created_at=NOW,
            )
        # what that release wrote: its own stem of "organizations"
        with sqlite3.connect(store / SIDECAR_FILE) as db:
            db.execute(
                """UPDATE memories SET tokens = '["organ", "met", "friday"]' WHERE id = 'a'"""
            )
    assert _tokens(store, "a") == ["organ", "met", "friday"]
    with open_store(store) as mem:
        assert mem.check().ok
        hits = mem.search("organizations", k=2, namespace="n", now=NOW)
        assert hits[0].id == "a" and hits[0].signals["bm25"] > 0
    assert _tokens(store, "a") == tokenize.Tokenizer()("The organizations met on Friday")


def test_the_signature_names_the_stemmer_only_when_stemming() -> None:
    assert tokenize.Tokenizer().signature()["stemmer"].startswith("PyStemmer ")
    assert "stemmer" not in tokenize.Tokenizer(stem=False).signature()
    assert tokenize.Tokenizer().signature() != {**tokenize.Tokenizer().to_dict()}
