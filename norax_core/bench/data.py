"""Loaders for the LoCoMo and BEAM agent-memory benchmarks.

Both become a :class:`BenchDataset`: conversations (one memory namespace each) holding dated
memories and the questions asked after the last session, with their gold memory ids.

Conventions (see ``DATA.md``):

* every LoCoMo turn / BEAM message is one memory, stamped with its session's date;
  within a session the n-th message is stamped ``n`` seconds after the session start so that
  memories keep their order (a real chat log has distinct times; the offset is far below
  any decay scale);
* questions are asked right after the last message (``now``);
* LoCoMo memory text is ``"<speaker>: <text>"``, plus ``" (shared a photo: <caption>)"``
  when the turn carries an image caption (the paper's stand-in for the image);
* BEAM memory text is the message content without its trailing `` ->-> 1,1`` marker.

Nothing here reads the answers: only questions and the gold ids used for scoring.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from norax_core.errors import InvalidInputError

T = TypeVar("T")

__all__ = [
    "LOCOMO_CATEGORIES",
    "BenchDataset",
    "BenchMemory",
    "BenchQuestion",
    "Conversation",
    "flatten_ids",
    "load_beam",
    "load_locomo",
    "normalize_evidence",
    "parse_beam_date",
    "parse_locomo_date",
    "strip_beam_marker",
]

LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi_hop",
    2: "temporal",
    3: "open_domain",
    4: "single_hop",
    5: "adversarial",
}
"""LoCoMo's numeric question categories, named as in the paper."""

_LOCOMO_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I
)
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
)
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES.split(), start=1)}
_BEAM_DATE = re.compile(r"^\s*([A-Za-z]+)-(\d{1,2})-(\d{4})\s*$")
_BEAM_MARKER = re.compile(r"\s*->->[^\n]*\s*$")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class BenchMemory:
    """One memory to ingest.

    Attributes:
        id: Id within its conversation (LoCoMo ``dia_id``, BEAM message id as text).
        text: The memory text.
        created_at: Epoch seconds (UTC).
        session: Session number, from 1.
        speaker: Speaker name or role.
        role: ``"user"`` or ``"assistant"`` where the data says (BEAM), else ``""`` (LoCoMo:
            two people, neither an assistant); stored as the ``role`` metadata that
            :mod:`norax_core.conversation` writes.
    """

    id: str
    text: str
    created_at: float
    session: int
    speaker: str
    role: str = ""


@dataclass(frozen=True)
class BenchQuestion:
    """One question with the memories that answer it.

    Attributes:
        id: Unique id within the dataset.
        text: The question.
        category: Category name.
        gold: Relevant memory ids (union of all groups, order kept, no repeats).
        original: knowledge_update only: ids of the superseded information.
        updated: knowledge_update only: ids of the newer information.
    """

    id: str
    text: str
    category: str
    gold: tuple[str, ...]
    original: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()


@dataclass(frozen=True)
class Conversation:
    """One memory space: its memories and the questions asked after the last one.

    Attributes:
        name: Namespace name (``conv-26``, ``beam-100K-1``).
        memories: Memories in conversation order.
        questions: Questions with gold ids.
        now: Question time, epoch seconds.
    """

    name: str
    memories: list[BenchMemory]
    questions: list[BenchQuestion]
    now: float


@dataclass(frozen=True)
class BenchDataset:
    """A benchmark: ``name`` is ``"locomo"`` or ``"beam"``."""

    name: str
    conversations: list[Conversation] = field(default_factory=list)

    @property
    def n_questions(self) -> int:
        """Questions over all conversations."""
        return sum(len(c.questions) for c in self.conversations)


def _epoch(dt: datetime) -> float:
    return dt.replace(tzinfo=timezone.utc).timestamp()


def parse_locomo_date(text: str) -> float:
    """Parse a LoCoMo session time such as ``"1:56 pm on 8 May, 2023"`` to epoch seconds (UTC).

    Raises:
        InvalidInputError: The text is not in that format.
    """
    m = _LOCOMO_DATE.match(text)
    month = _MONTHS.get(m.group(5).lower()) if m else None
    if m is None or month is None:
        raise InvalidInputError(f"not a LoCoMo date ('1:56 pm on 8 May, 2023'): {text!r}")
    hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0)
    return _epoch(datetime(int(m.group(6)), month, int(m.group(4)), hour, int(m.group(2))))


def parse_beam_date(text: str) -> float:
    """Parse a BEAM time anchor such as ``"March-15-2024"`` to epoch seconds (UTC midnight).

    Raises:
        InvalidInputError: The text is not in that format.
    """
    m = _BEAM_DATE.match(text)
    month = _MONTHS.get(m.group(1).lower()) if m else None
    if m is None or month is None:
        raise InvalidInputError(f"not a BEAM date ('March-15-2024'): {text!r}")
    return _epoch(datetime(int(m.group(3)), month, int(m.group(2))))


def strip_beam_marker(text: str) -> str:
    """Remove BEAM's trailing position marker (`` ->-> 1,1``) from a message."""
    return _BEAM_MARKER.sub("", text).strip()


def normalize_evidence(evidence: Iterable[Any]) -> tuple[str, ...]:
    """LoCoMo evidence ids, cleaned of the published file's typing slips.

    A few entries hold several ids (``"D8:6; D9:17"``, ``"D9:1 D4:4"``) or a stray colon
    (``"D:11:26"``); they are split and repaired. A fragment that names no turn (``"D"``) is
    dropped. Repeats are removed, order is kept.
    """
    out: dict[str, None] = {}
    for item in evidence:
        for d, t in _DIA_ID.findall(str(item)):
            out[f"D{int(d)}:{int(t)}"] = None
    return tuple(out)


def flatten_ids(value: Any) -> tuple[str, ...]:
    """Message ids from a BEAM ``source_chat_ids``: a list, a dict of lists, or nested.

    Returns them as text, order kept, no repeats; ``None`` gives ``()``.
    """
    out: dict[str, None] = {}

    def walk(v: Any) -> None:
        if v is None:
            return
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        else:
            out[str(v)] = None

    walk(value)
    return tuple(out)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path} is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text: {exc}") from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _shaped(path: Path | str, kind: str, build: Callable[[], T]) -> T:
    """``build()``, with a malformed file's KeyError/TypeError/... as a clear error."""
    try:
        return build()
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, InvalidInputError):
            raise
        raise InvalidInputError(f"{path}: not in the {kind} format ({exc!r})") from None


# -- LoCoMo -------------------------------------------------------------------------------


def _locomo_text(turn: dict[str, Any]) -> str:
    text = f"{turn.get('speaker', '')}: {turn.get('text', '')}".strip()
    caption = turn.get("blip_caption")
    if caption:
        text += f" (shared a photo: {caption})"
    return text


def _locomo_conversation(sample: dict[str, Any], index: int) -> Conversation:
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        raise InvalidInputError(f"LoCoMo sample #{index} has no 'conversation' object")
    name = str(sample.get("sample_id", f"conv-{index}"))
    sessions = sorted(
        (int(m.group(1)), key)
        for key in conv
        if (m := _SESSION.fullmatch(key)) and isinstance(conv[key], list) and conv[key]
    )
    memories: list[BenchMemory] = []
    now = 0.0
    for n, key in sessions:
        start = parse_locomo_date(str(conv.get(f"{key}_date_time", "")))
        for i, turn in enumerate(conv[key]):
            ts = start + i
            memories.append(
                BenchMemory(str(turn["dia_id"]), _locomo_text(turn), ts, n, str(turn["speaker"]))
            )
            now = max(now, ts + 1)
    questions = []
    for qi, qa in enumerate(sample.get("qa", [])):
        cat = qa.get("category")
        questions.append(
            BenchQuestion(
                id=f"{name}/q{qi}",
                text=str(qa["question"]),
                category=LOCOMO_CATEGORIES.get(cat, str(cat)),
                gold=normalize_evidence(qa.get("evidence") or ()),
            )
        )
    return Conversation(name, memories, questions, now)


def load_locomo(path: str | Path) -> BenchDataset:
    """Load a LoCoMo file (``locomo10.json`` format: a list of samples).

    Raises:
        InvalidInputError: The file is missing, not JSON, or not LoCoMo-shaped.
    """
    data = _read_json(Path(path))
    if not isinstance(data, list):
        raise InvalidInputError(f"{path}: expected a JSON list of LoCoMo samples")
    return BenchDataset(
        "locomo",
        _shaped(path, "LoCoMo", lambda: [_locomo_conversation(s, i) for i, s in enumerate(data)]),
    )


# -- BEAM ---------------------------------------------------------------------------------


def _beam_conversation(folder: Path, name: str) -> Conversation:
    chat = _read_json(folder / "chat.json")
    probing = _read_json(folder / "probing_questions.json")
    if not isinstance(chat, list) or not isinstance(probing, dict):
        raise InvalidInputError(f"{folder}: chat.json must be a list, probing_questions a dict")
    memories: list[BenchMemory] = []
    start = 0.0
    now = 0.0
    for n, batch in enumerate(chat, start=1):
        messages = [m for turn in batch.get("turns", []) for m in turn]
        anchor = next(
            (
                m["time_anchor"]
                for m in messages
                if m.get("role") == "user" and m.get("time_anchor")
            ),
            batch.get("time_anchor"),
        )
        # A session without a date continues the previous one's clock.
        start = parse_beam_date(anchor) if anchor else start
        for i, m in enumerate(messages):
            text = strip_beam_marker(str(m.get("content", "")))
            if not text:
                continue
            ts = start + i
            role = str(m.get("role", ""))
            memories.append(BenchMemory(str(m["id"]), text, ts, n, role, role))
            now = max(now, ts + 1)
    questions = []
    for category, items in probing.items():
        if category == "abstention":  # no gold messages: skipped for retrieval metrics
            continue
        for qi, q in enumerate(items):
            src = q.get("source_chat_ids")
            gold = flatten_ids(src)
            if not gold:
                continue
            orig: tuple[str, ...] = ()
            upd: tuple[str, ...] = ()
            if category == "knowledge_update" and isinstance(src, dict):
                orig = flatten_ids(src.get("original_info"))
                upd = flatten_ids(src.get("updated_info"))
            questions.append(
                BenchQuestion(
                    f"{name}/{category}/{qi}", str(q["question"]), category, gold, orig, upd
                )
            )
    return Conversation(name, memories, questions, now)


def _natural(p: Path) -> tuple[int, str]:
    return (int(p.name), "") if p.name.isdigit() else (1 << 30, p.name)


def load_beam(directory: str | Path) -> BenchDataset:
    """Load a BEAM size folder (e.g. ``beam/100K``) holding one folder per chat.

    A folder that itself holds ``chat.json`` is loaded as a single chat.

    Raises:
        InvalidInputError: No chat folders, or a file that is not BEAM-shaped.
    """
    root = Path(directory)
    if (root / "chat.json").is_file():
        folders: Sequence[Path] = [root]
    else:
        folders = (
            sorted((p for p in root.iterdir() if (p / "chat.json").is_file()), key=_natural)
            if root.is_dir()
            else []
        )
    if not folders:
        raise InvalidInputError(f"{root}: no BEAM chat folders (holding chat.json) found")
    prefix = f"beam-{root.name}" if root.name else "beam"
    convs = [
        _shaped(
            f, "BEAM", partial(_beam_conversation, f, f"{prefix}-{f.name}" if f != root else prefix)
        )
        for f in folders
    ]
    return BenchDataset("beam", convs)
