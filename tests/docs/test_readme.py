"""Every code block in README.md and in the docs site (docs/**/*.md) runs as written.

A block that appears on several pages (the README's examples are repeated in the guides) runs
once, under the id of its first page.

- ``python`` blocks run in a fresh interpreter (a subprocess of this Python) in a temporary
  working directory, with the environment conftest.py sets (the local models). A block that
  opens a ``chromadb.HttpClient`` gets the tests' Chroma server in ``NORAX_CHROMA_URL``; a
  block that uses ``OpenAIEmbedder`` gets a local server that speaks the OpenAI API
  (tests/openai_server.py) through ``OPENAI_BASE_URL`` and a dummy ``OPENAI_API_KEY``.
- ``bash`` blocks run command by command (``&&`` chains and lines) in a temporary working
  directory, so every ``./.norax`` store is a temporary one:
    * ``norax ...`` runs through the installed console script (``python -m norax_core.cli``
      when there is none) and must exit 0; ``--json`` output must parse. Files that a command
      reads with ``--jsonl`` are created first; ``norax bench``/``fit`` get a slice of the
      dev data instead of the whole split, so the test stays short: LoCoMo's smallest
      conversation, or the first session of BEAM's smallest chat with its questions (the
      commands run whole, on every question, outside the tests).
    * ``export`` lines are applied to the following commands; relative paths are read from
      the repository root, where the README's commands run, and must exist.
    * ``chroma run ...`` is checked, not run (the ``chroma`` command must exist): the tests
      bring their own server.
    * Setup lines are checked, not run: ``python3 -m venv``, activating it, and
      ``pip install -e ".[extra]"``, whose extras must exist in pyproject.toml (``[dev]``
      wherever the block runs the tests). ``python -m pytest`` is not run from inside the test
      suite; it must be the command ``.ci/run`` runs.
    * Anything else fails the test: teach it here, or change the block.
- Blocks without a language are diagrams and are not run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
SHELL = {"bash", "sh", "shell", "console"}

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Block:
    page: str
    lang: str
    code: str
    line: int

    @property
    def id(self) -> str:
        return f"{self.page}:{self.lang or 'text'}-line{self.line}"


def pages() -> list[Path]:
    """The README and every page of the docs site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def _blocks() -> list[Block]:
    out = []
    for path in pages():
        text = path.read_text(encoding="utf-8")
        page = path.relative_to(REPO).as_posix()
        out += [
            Block(page, m.group(1).lower(), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)
        ]
    return out


def _runnable(lang: str) -> list[Block]:
    """The blocks of ``lang`` (``bash``: any shell), each distinct code once."""
    seen: dict[str, Block] = {}
    for b in _blocks():
        if (b.lang in SHELL if lang == "bash" else b.lang == lang) and b.code not in seen:
            seen[b.code] = b
    return list(seen.values())


def test_doc_blocks_are_known_languages() -> None:
    blocks = _blocks()
    assert _runnable("python") and _runnable("bash")
    assert {b.page for b in blocks} >= {"README.md", "docs/getting-started.md"}
    unknown = [b.id for b in blocks if b.lang and b.lang != "python" and b.lang not in SHELL]
    assert not unknown, f"doc blocks this test cannot run: {unknown}"
    for b in blocks:
        if not b.lang:  # diagrams only: a command or code here would go untested
            assert not re.search(
                r"^\s*(\$ |norax |pip |python|import |from \w+ import)", b.code, re.M
            ), f"{b.page} block at line {b.line} looks like code: give it a language"


# -- python -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def openai_url() -> Iterator[str]:
    """A local server that speaks the OpenAI embeddings API, for the OpenAI guide."""
    sys.path.insert(0, str(REPO / "tests"))
    from openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server.base_url


@pytest.mark.parametrize("block", _runnable("python"), ids=lambda b: b.id)
def test_python_block(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = dict(os.environ)
    if "HttpClient" in block.code:
        env["NORAX_CHROMA_URL"] = request.getfixturevalue("chroma_url")
    if "OpenAIEmbedder" in block.code or '"openai' in block.code:
        env.update(OPENAI_BASE_URL=request.getfixturevalue("openai_url"), OPENAI_API_KEY="test")
    proc = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{block.id} failed:\n{proc.stderr}"


# -- bash ---------------------------------------------------------------------------------


def _commands(code: str) -> list[list[str]]:
    """Shell lines (continuations joined, comments dropped) split into ``&&``-chained commands."""
    out: list[list[str]] = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        cmd: list[str] = []
        for w in words:
            if w == "&&":
                out.append(cmd)
                cmd = []
            else:
                cmd.append(w)
        if cmd:
            out.append(cmd)
    for cmd in out:
        assert not any(w in ("|", ";", "||", ">", "<") for w in cmd), f"unsupported shell: {cmd}"
    return out


def _extras() -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+)\s*=", section, re.M))


def _norax() -> list[str]:
    script = Path(sys.executable).with_name("norax")
    return [str(script)] if script.exists() else [sys.executable, "-m", "norax_core.cli"]


def _option(cmd: list[str], name: str) -> str | None:
    for i, w in enumerate(cmd):
        if w == name and i + 1 < len(cmd):
            return cmd[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def _replace_option(cmd: list[str], name: str, value: str) -> list[str]:
    out = list(cmd)
    for i, w in enumerate(out):
        if w == name:
            out[i + 1] = value
        elif w.startswith(name + "="):
            out[i] = f"{name}={value}"
    return out


def _from_repo(value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (REPO / p).resolve()


def _small_bench_data(cmd: list[str], work: Path) -> list[str]:
    """``norax bench|fit ... --data X``: the same command on a slice of X.

    LoCoMo: its smallest conversation. BEAM: the first session of its smallest chat, with
    that chat's questions (those whose evidence lies in later sessions score 0: the test
    proves that the command runs and writes its outputs, not the figures).
    """
    data = _option(cmd, "--data")
    if data is None:
        return cmd
    src = _from_repo(data)
    if src.is_file():  # LoCoMo: the smallest conversation
        samples = json.loads(src.read_text())
        small = min(samples, key=lambda s: len(json.dumps(s)))
        dst = work / "bench-data" / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(json.dumps([small]))
    else:  # BEAM: the first session of the smallest chat
        chats = [p for p in src.iterdir() if (p / "chat.json").is_file()]
        chat = min(chats, key=lambda p: ((p / "chat.json").stat().st_size, p.name))
        dst = work / "bench-data" / src.name / chat.name
        dst.mkdir(parents=True, exist_ok=True)
        sessions = json.loads((chat / "chat.json").read_text())
        (dst / "chat.json").write_text(json.dumps(sessions[:1]))
        shutil.copy(chat / "probing_questions.json", dst / "probing_questions.json")
        dst = dst.parent
    return _replace_option(cmd, "--data", str(dst))


def _jsonl_input(path: Path) -> None:
    records = [
        {
            "id": "readme-1",
            "text": "Releases are tagged from main after the changelog is updated.",
            "kind": "procedural",
            "created_at": "2026-10-01T09:00:00Z",
            "metadata": {"topic": "ops"},
        },
        {"text": "The staging database was restored from last night's backup.", "kind": "episodic"},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _subcommand(args: list[str]) -> str:
    """The sub-command of a ``norax`` argument list (after global options such as --store)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] == "--store" else 1
    return args[i] if i < len(args) else ""


def _run_norax(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    args = cmd[1:]
    sub = _subcommand(args)
    if sub in ("bench", "fit"):
        args = _small_bench_data(args, cwd)
        for out in ("--json", "--plot", "--out"):
            value = _option(args, out)
            if value is not None:
                (cwd / value).parent.mkdir(parents=True, exist_ok=True)
    jsonl = _option(args, "--jsonl") if sub == "add" else None
    if jsonl is not None and not (cwd / jsonl).exists():
        _jsonl_input(cwd / jsonl)
    if sub == "ui":  # a server: on a free port, asked for what it shows, then stopped
        return _probe_ui([*_norax(), *args, "--port", "0"], cwd, env)
    return subprocess.run(
        [*_norax(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _probe_ui(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``norax ui``: wait for the URL it prints, read ``/api/info`` (a namespace), stop it."""
    import urllib.request

    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen = []
    try:
        for line in proc.stdout or ():  # until the server prints its URL, or exits
            seen.append(line)
            url = re.search(r" at (http://\S+/)", line)
            if url:
                direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                info = json.loads(direct.open(url.group(1) + "api/info", timeout=60).read())
                assert info["namespaces"], f"norax ui shows no namespace: {info}"
                return subprocess.CompletedProcess(cmd, 0, "".join(seen), "")
        return subprocess.CompletedProcess(cmd, proc.wait(), "", "".join(seen))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _check_setup(cmd: list[str], installs: list[str]) -> bool:
    """True if ``cmd`` is an environment-setup step (checked here, not run)."""
    if cmd[:3] in (["python3", "-m", "venv"], ["python", "-m", "venv"]):
        return True
    if cmd[0] in (".", "source"):
        assert cmd[1:] == [".venv/bin/activate"], cmd
        return True
    pip = cmd[:2] == ["pip", "install"] or cmd[1:4] == ["-m", "pip", "install"]
    if pip:
        target = cmd[cmd.index("-e") + 1] if "-e" in cmd else None
        assert target is not None, f"the README installs the project editable: {cmd}"
        m = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", target)
        assert m, f"unexpected install target {target!r}"
        extras = set((m.group(1) or "").split(",")) - {""}
        assert extras <= _extras(), f"unknown extras {extras - _extras()} in {cmd}"
        installs.extend(extras)
        return True
    return False


@pytest.mark.parametrize("block", _runnable("bash"), ids=lambda b: b.id)
def test_bash_block(block: Block, tmp_path: Path) -> None:
    env = dict(os.environ)
    installs: list[str] = []
    ran = 0
    for cmd in _commands(block.code):
        where = f"{block.id}: {shlex.join(cmd)}"
        if _check_setup(cmd, installs):
            continue
        if cmd[:2] == ["chroma", "run"]:  # the tests run their own server
            beside = Path(sys.executable).with_name("chroma")
            assert beside.exists() or shutil.which("chroma"), f"{where}: no chroma command"
            installs.append("chromadb")
            continue
        if cmd[0] == "export":
            for assignment in cmd[1:]:
                name, _, value = assignment.partition("=")
                if "/" in value:
                    assert _from_repo(value).exists(), f"{where}: {value} does not exist"
                    value = str(_from_repo(value))
                env[name] = value
            continue
        if cmd[1:3] == ["-m", "pytest"]:
            assert "dev" in installs, f"{where}: the tests need pip install -e '.[dev]'"
            ci = (REPO / ".ci" / "run").read_text()
            assert re.search(rf"^{re.escape(shlex.join(cmd))}\s*$", ci, re.M), (
                f"{where}: .ci/run does not run this command"
            )
            continue
        assert cmd[0] == "norax", f"{where}: this test does not know how to run it"
        proc = _run_norax(cmd, tmp_path, env)
        assert proc.returncode == 0, f"{where} exited {proc.returncode}:\n{proc.stderr}"
        # the examples must show something: results found, memories deleted, a demo printed
        sub = _subcommand(cmd[1:])
        if sub == "search" and "--json" in cmd:
            assert json.loads(proc.stdout)["results"], f"{where}: no results"
        if sub == "delete":
            assert re.fullmatch(r"deleted (\d+) of \1\s*", proc.stdout), f"{where}: {proc.stdout}"
        if sub == "demo":
            assert "Query:" in proc.stdout and "score" in proc.stdout, proc.stdout
        ran += 1
    assert ran or installs, f"{block.id} ran nothing"
