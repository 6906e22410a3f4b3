"""Memory kinds inferred at write time: which memories are standing instructions or preferences.

An agent queries its memory with the user's new request, and what must come back is what
applies to it: the rule the user set ("Always include version numbers when I ask about
libraries"), the preference they stated ("I prefer minimal dependencies"). Those share few
words with the request, so the store marks them when they are written, and a search gives
the matching ones reserved places (:mod:`norax_core.stages.lane`).

:func:`infer_kind` reads a memory's text and the ``role`` of its author (a memory whose
metadata ``role`` is not the user's is never the user's instruction or preference) and
returns one of :data:`INFERRED_KINDS`:

* ``instruction``: a standing rule for the agent, phrased as one: a sentence that starts
  with *always* / *never* / *from now on* / *make sure to* / *please don't* ..., or that
  sets a rule for every time ("whenever I ask", "every time you");
* ``preference``: the user's own taste or constraint ("I prefer", "I'd rather", "I'm trying
  to keep", "I can't stand", "I dislike", "I don't drink", "I'm allergic to", "I'm
  vegetarian", "I'm into", ...);
* ``event``: something that happened or is planned at a time (a past-tense verb of doing
  or a date);
* ``scratchpad``: a question or a request of the moment;
* ``fact``: anything else (a state of the world or of the user).

The rule is cue phrases only (no model: a logistic regression over cheap features did not
beat it on the dev labels, see ``benchmarks/kind_cv.py``); it is versioned by
:data:`KIND_RULE`, and a store written under another version re-derives every memory's
inferred kind when it opens.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

__all__ = [
    "INFERRED_KINDS",
    "KIND_RULE",
    "STANDING",
    "given_kind",
    "infer_kind",
    "inferred_kinds",
    "role_of",
]

KIND_RULE = "2"
"""The version of :func:`infer_kind`; bumped whenever its output can change."""
INFERRED_KINDS = ("instruction", "preference", "fact", "event", "scratchpad")
"""What :func:`infer_kind` returns."""
STANDING = frozenset({"instruction", "preference"})
"""Inferred kinds that apply to every later request they match (the lane's)."""

_GIVEN = {"procedural": "instruction", "semantic": "fact", "scratchpad": "scratchpad"}
"""Built-in kinds a caller gives that say what the memory is (``episodic`` says nothing:
it was the default, and callers pass it without meaning it)."""
_NOT_USER = frozenset({"assistant", "ai", "bot", "system", "tool", "function", "agent"})

_S = r"(?:^|(?<=[.!?;:\n])\s*|\bso\s+|\band\s+|\bbut\s+|,\s*)"  # a sentence or clause start
_INSTRUCTION = re.compile(
    _S + r"(?:please\s+|and\s+)?(?:always|never)\s+(?!been\b|had\b|have\b|was\b|were\b)[a-z]+"
    r"|\bfrom now on\b|\bgoing forward\b|\bfrom here on\b"
    r"|(?:^|(?<=[.!?\n])\s*)(?:please\s+)?(?:make sure (?:to|you)|be sure to|remember to|"
    r"don't ever|do not ever|don't forget to)\b"
    r"|" + _S + r"please (?:don't|do not|avoid|stop|refrain)\b"
    r"|\b(?:i want|i need|i'd like) you to (?:always|never)\b"
    r"|\b(?:whenever|every time|each time) (?:i ask|i mention|you (?:write|answer|reply|give))\b"
    r"|\bwhen i ask (?:about|for|you)\b.*\b(?:include|use|provide|format|give|show)\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\bi (?:really |strongly |usually |generally |much |would |'d )?(?:prefer|rather)\b"
    r"|\bi'd rather\b|\bi would rather\b|\bmy preference\b|\bi'm trying to keep\b"
    r"|\bi am trying to keep\b|\bi want to keep\b|\bi(?:'m| am) (?:a )?(?:vegetarian|vegan|"
    r"pescatarian|allergic|lactose intolerant|gluten[- ]free|teetotal)\b"
    r"|\bi can(?:'t|not) stand\b|\bi (?:really )?(?:hate|dislike|love|like|enjoy) (?:it when|"
    r"using|to|working|writing|having)\b|\bi don't like\b|\bi do not like\b"
    r"|\bi(?:'m| am) not a fan of\b|\bi'm a big fan of\b"
    r"|\bi (?:only|never) (?:eat|drink|use|fly|work)\b"
    r"|\bi (?:really |absolutely |just )?(?:dislike|detest|loathe)\b"
    r"|\bi (?:don't|do not|no longer|can't|cannot) (?:eat|drink)\b"
    r"|\bi(?:'m| am) (?:really |not )?(?:into|keen on)\b",
    re.IGNORECASE,
)
_QUESTION = re.compile(
    r"^\s*(?:hmm+,?\s*|so,?\s*|ok(?:ay)?,?\s*)?(?:can|could|would|will|how|what|why|which|"
    r"where|when|who|is|are|do|does|should|shall)\b",
    re.IGNORECASE,
)
_EVENT = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|last (?:week|month|year|night|weekend)|"
    r"next (?:week|month|year|weekend)|ago|on (?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]* \d{1,2}\b|"
    r"\d{1,2} (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|"
    r"went|visited|attended|met|moved|started|finished|submitted|completed|bought|"
    r"happened|joined|launched|scheduled)\b",
    re.IGNORECASE,
)


def given_kind(kind: str | None) -> str | None:
    """The inferred kind a caller's ``kind`` settles, or ``None`` when the rule decides.

    ``None`` (not given) and ``episodic`` (the old default) leave it to :func:`infer_kind`;
    ``procedural``, ``semantic`` and ``scratchpad`` map to instruction, fact and
    scratchpad; a custom kind named like an inferred one is taken as given.
    """
    if kind is None or kind == "episodic":
        return None
    if kind in INFERRED_KINDS:
        return kind
    return _GIVEN.get(kind)


def infer_kind(text: str, role: object = None) -> str:
    """The kind of a memory with ``text`` written by ``role`` (its metadata ``role``).

    Args:
        text: The memory's text (the first 2,000 characters are read).
        role: Who wrote it: ``"user"``, ``"assistant"``, ... or ``None`` when unknown
            (read as possibly the user's).

    Returns:
        One of :data:`INFERRED_KINDS`.

    Examples:
        >>> infer_kind("Always add type hints to code you write for me.", "user")
        'instruction'
        >>> infer_kind("I'm vegetarian, so no meat in the recipes please.")
        'preference'
        >>> infer_kind("Always add type hints.", "assistant")
        'fact'
    """
    head = text[:2_000]
    users = not (isinstance(role, str) and role.strip().lower() in _NOT_USER)
    if users and _INSTRUCTION.search(head):
        return "instruction"
    if users and _PREFERENCE.search(head):
        return "preference"
    if _EVENT.search(head):
        return "event"
    if _QUESTION.search(head) or head.rstrip().endswith("?"):
        return "scratchpad"
    return "fact"


def inferred_kinds(
    texts: Sequence[str], kinds: Sequence[str | None], metadatas: Sequence[Mapping[str, object]]
) -> list[str]:
    """Each memory's inferred kind: the caller's where it settles it, else the rule's."""
    out = []
    for text, kind, meta in zip(texts, kinds, metadatas, strict=True):
        given = given_kind(kind)
        out.append(given if given is not None else infer_kind(text, meta.get("role")))
    return out


def role_of(meta: Mapping[str, object]) -> str:
    """A memory's metadata ``role`` as the indexes keep it (``""`` when none or not a string)."""
    role = meta.get("role")
    return role if isinstance(role, str) else ""
