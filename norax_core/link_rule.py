"""The supersession link rule: when a newer memory restates an attribute of an older one.

The cue words, :class:`LinkRule`, and the pairwise tests it combines (:func:`link_score`,
:func:`quantities`, :func:`value_changed`); :mod:`norax_core.supersession` applies them to a
namespace's rows and keeps the links.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CHANGE_CUE_WORDS",
    "CUE_WORDS",
    "NUMBER_WORDS",
    "VALUE_CUE_WORDS",
    "LinkRule",
    "Quantities",
    "link_score",
    "quantities",
    "value_changed",
]

CHANGE_CUE_WORDS = (
    "changed change changes switched switch moved move instead rescheduled postponed delayed "
    "revised adjusted replaced anymore longer"
)
"""Words by which a memory says outright that something changed ("moved to Friday",
"switched to Neovim", "no longer"): enough for a link. Tokenised with the store's own
tokenizer, so they match its stems (``moved`` and ``move`` alike)."""

VALUE_CUE_WORDS = (
    "update updated updating increased increase decreased decrease improved grown grew reached "
    "extended shortened raised lowered dropped recently latest currently new"
)
"""Words that say a change only together with a changed value ("has recently improved to
78 %", "increased to 7 mentees"): a memory whose only cues are these links to an older one
only if the two give one quantity different values (:func:`value_changed`). Alone they are
too common: on BEAM 100K most of the links they made joined an assistant's reply ("the new
version ...") to the user message it answered."""

NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million dozen half"
)
"""Numbers written as words ("the team has five people"), read as values like digits."""

CUE_WORDS = f"{CHANGE_CUE_WORDS} {VALUE_CUE_WORDS}"
"""Every update cue. On BEAM 100K, 73 % of the updated messages of knowledge-update
questions hold one, against 23 % of the other user messages."""


@dataclass(frozen=True)
class LinkRule:
    """When a newer memory supersedes an older one (see the module docstring).

    Attributes:
        min_score: Least :func:`link_score` of a link.
        min_shared: Least number of words, update cues aside, the two share.
        max_links: Most older memories one memory supersedes (its best-scored ones).
        cues: The cues that say a change outright, as words (default
            :data:`CHANGE_CUE_WORDS`).
        value_cues: The cues that need a changed value too (default
            :data:`VALUE_CUE_WORDS`; empty: every cue is enough alone).
        skip_reply: Whether a memory never supersedes the one written just before it
            (write sequence numbers one apart): a reply restates what it answers ("the new
            schema looks right" after "the new schema is ..."), an update comes later.
    """

    min_score: float = 0.1
    min_shared: int = 2
    max_links: int = 2
    cues: str = CHANGE_CUE_WORDS
    value_cues: str = VALUE_CUE_WORDS
    skip_reply: bool = True


def link_score(
    tokens_a: frozenset[str],
    tokens_b: frozenset[str],
    entities_a: frozenset[str],
    entities_b: frozenset[str],
) -> float:
    """How much two memories speak of the same things, in [0, 1].

    The mean of the Jaccard similarities of their token sets and of their entity sets:
    pairwise only (no corpus statistics), so a link does not change when other memories
    are written.

    Examples:
        >>> link_score(frozenset("ab"), frozenset("bc"), frozenset("x"), frozenset("x"))
        0.6666666666666666
    """
    tok = len(tokens_a & tokens_b) / max(1, len(tokens_a | tokens_b))
    ent = len(entities_a & entities_b) / max(1, len(entities_a | entities_b))
    return (tok + ent) / 2


def quantities(
    tokens: Sequence[str],
    ignore: frozenset[str] = frozenset(),
    numbers: frozenset[str] = frozenset(),
) -> Quantities:
    """The values a memory gives to quantities, read from its tokens in text order.

    A number (digits, or a token of ``numbers``: the tokenised :data:`NUMBER_WORDS`) names
    the word after it as its unit (``52 sources``: ``u:sourc`` is 52) and the word before it
    as its attribute (``coverage 78``: ``a:coverag`` is 78); words in ``ignore`` (the update
    cues: "increased 7") and other numbers are neither.

    Examples:
        >>> dict(quantities(["zotero", "52", "sourc"]))
        {'a:zotero': frozenset({'52'}), 'u:sourc': frozenset({'52'})}
    """
    if numbers.isdisjoint(tokens) and not any(map(str.isdigit, tokens)):
        return {}  # most memories give no number: no pass over their tokens
    out: dict[str, set[str]] = {}
    num = [t.isdigit() or t in numbers for t in tokens]
    for i in range(len(tokens) - 1):
        a, b = tokens[i], tokens[i + 1]
        if num[i] and not num[i + 1] and b not in ignore:
            out.setdefault(f"u:{b}", set()).add(a)
        if num[i + 1] and not num[i] and a not in ignore:
            out.setdefault(f"a:{a}", set()).add(b)
    return {k: frozenset(v) for k, v in out.items()}


def value_changed(newer: Quantities, older: Quantities) -> bool:
    """Whether some quantity both memories give has other values in the newer one.

    The attribute-level test of a link: "the number of sources has grown to 52" changes
    "45 sources" (``u:sourc``), not "3 chapters".

    Examples:
        >>> value_changed({"u:sourc": frozenset({"52"})}, {"u:sourc": frozenset({"45"})})
        True
        >>> value_changed({"u:sourc": frozenset({"52"})}, {"u:chapter": frozenset({"3"})})
        False
    """
    return any(k in older and v != older[k] for k, v in newer.items())


Quantities = Mapping[str, frozenset[str]]
"""``{"u:<unit>" or "a:<attribute>": values}``: see :func:`quantities`."""
