"""Every CLI command that reads or writes a file the user names: a bad one is a message.

A file that is not UTF-8, a folder where a file is expected, a missing file or a file of
the wrong shape must end the command with ``norax: error: ...`` on stderr and exit 2,
never a traceback (the README's promise for the CLI).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from norax_core.cli import main

SAMPLE = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I moved the repo to the new server."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Great, the deploy script works."},
        ],
    },
    "qa": [
        {
            "question": "Where is the repo?",
            "answer": "new server",
            "evidence": ["D1:1"],
            "category": 4,
        }
    ],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli-files")
    out = {
        "latin1": root / "latin1.json",  # valid JSON in Latin-1, not UTF-8
        "folder": root / "folder",
        "missing": root / "missing.json",
        "list": root / "list.json",
        "file": root / "a-file",
        "locomo": root / "locomo.json",
        "ints": root / "ints.json",
        "beam_latin1": root / "beam",
    }
    out["latin1"].write_bytes('{"weights": {"bm25": 1}, "name": "café"}'.encode("latin-1"))
    out["folder"].mkdir()
    out["list"].write_text("[1, 2]\n", encoding="utf-8")
    out["file"].write_text("not a store\n", encoding="utf-8")
    out["locomo"].write_text(json.dumps([SAMPLE]), encoding="utf-8")
    out["ints"].write_text("[1, 2]\n", encoding="utf-8")
    (out["beam_latin1"] / "1").mkdir(parents=True)
    (out["beam_latin1"] / "1" / "chat.json").write_bytes('[{"x": "é"}]'.encode("latin-1"))
    (out["beam_latin1"] / "1" / "probing_questions.json").write_text("{}", encoding="utf-8")
    out["jsonl_latin1"] = root / "m.jsonl"
    out["jsonl_latin1"].write_bytes('{"text": "café"}\n'.encode("latin-1"))
    return out


CASES = [
    ("search --weights latin1", ["search", "x", "--weights", "{latin1}"], "not UTF-8"),
    ("search --weights folder", ["search", "x", "--weights", "{folder}"], "cannot read"),
    ("search --weights missing", ["search", "x", "--weights", "{missing}"], "not found"),
    ("search --weights list", ["search", "x", "--weights", "{list}"], "expected a JSON object"),
    ("add --weights latin1", ["add", "--text", "hi", "--weights", "{latin1}"], "not UTF-8"),
    ("add --jsonl latin1", ["add", "--jsonl", "{jsonl_latin1}"], "utf-8"),
    ("add --jsonl folder", ["add", "--jsonl", "{folder}"], "cannot read"),
    ("import latin1", ["import", "{jsonl_latin1}"], "utf-8"),
    ("import --weights latin1", ["import", "{locomo}", "--weights", "{latin1}"], "not UTF-8"),
    ("export --out folder", ["export", "--out", "{folder}"], "is a folder"),
    ("--store file", ["--store", "{file}", "search", "x"], "is a file"),
    ("bench --data latin1", ["bench", "locomo", "--data", "{latin1}", "-q"], "not UTF-8"),
    ("bench --data folder", ["bench", "locomo", "--data", "{folder}", "-q"], "cannot read"),
    ("bench --data ints", ["bench", "locomo", "--data", "{ints}", "-q"], "LoCoMo format"),
    ("bench beam latin1", ["bench", "beam", "--data", "{beam_latin1}", "-q"], "not UTF-8"),
    (
        "bench --weights latin1",
        ["bench", "locomo", "--data", "{locomo}", "--weights", "{latin1}", "-q"],
        "not UTF-8",
    ),
    (
        "bench --json folder",
        ["bench", "locomo", "--data", "{locomo}", "--json", "{folder}", "-q"],
        "Is a directory",
    ),
    ("fit --data latin1", ["fit", "--data", "{latin1}", "--dataset", "locomo", "-q"], "not UTF-8"),
    ("fit --data beam", ["fit", "--data", "{beam_latin1}", "--dataset", "beam", "-q"], "UTF-8"),
]


@pytest.mark.parametrize(("argv", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_file_is_a_message_and_exit_2(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], argv, says
) -> None:
    args = [a.format(**files) for a in argv]
    if args[0] != "--store":
        store = str(tmp_path / "store")
        if args[0] == "export":  # exports an existing store
            assert main(["--store", store, "add", "--text", "one memory"]) == 0
        args = ["--store", store, *args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("norax: error: ") and says in err, err
    assert "Traceback" not in err
