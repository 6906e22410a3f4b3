"""Latest wins: a newer memory that restates an older one ranks above it.

Agent memories go stale: "the API answers in 250 ms" replaces "the API answers in 400 ms",
"Kenji moved to Sapporo" replaces "Kenji lives in Osaka". Relevance alone often prefers the
older wording (it was the fuller statement), so a question about the current value gets the
stale one first. After fusion, among the best ``depth`` candidates, a newer memory that
restates an OLDER, better-scored candidate passes it. Only the best ``depth`` candidates move
and only upwards, so they stay the best ``depth``.

"Restates" is **the attribute rule** (:func:`state_wins`, shipped in ``default`` for
``current_state`` and ``temporal`` questions): the two state the same attribute of the same
subject, read from the question (both hold its words, :func:`same_attribute`), and the newer
one says that something changed (an update cue); an assistant's reply never counts. For a
current-state question the subject alone can do, with the change said in other words
("Jonas took over the on-call rotation" after "Rosa is on call for payments"; the question
read without its "these days", :data:`NOW_WORDS`). On BEAM
100K it lifts latest wins from 0.55 to 0.90 (the ceiling: 2 of 20 questions name one message
as both original and update) with recall@10 0.636 -> 0.640 and LoCoMo unchanged
(``docs/ranking.md``). An earlier cosine rule (the two memories' stored embeddings at least
this alike) shipped off in every preset and was removed: an update is no more like its
original (cosine 0.28-0.78, median 0.57) than the other newer/older pairs of the top 10 are,
and with it recall@1 fell from 0.238 to 0.022 (README, component table).

The functions are pure; :func:`norax_core.ranking.rank` (what search, the benchmarks and the
fitter call) calls :func:`state_wins` per query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CUE_LEVELS",
    "NOW_WORDS",
    "SHIFT_WORDS",
    "Statements",
    "same_attribute",
    "state_wins",
]

CUE_LEVELS = ("update", "change")
"""Which cue words make a newer memory an update in the attribute rule (:func:`state_wins`):
``update``, any update cue (:data:`~norax_core.link_rule.CUE_WORDS`: "recently improved to",
"has grown to", "moved", "rescheduled"); ``change``, only the outright change cues
(:data:`~norax_core.link_rule.CHANGE_CUE_WORDS`: "moved", "switched", "no longer")."""
NOW_WORDS = "now nowadays currently current these days moment present presently"
"""How a question asks for the current state ("these days", "at the moment"): never what it
asks about, so the attribute rule reads the question without them."""
SHIFT_WORDS = (
    "migrated migrate took sold cancelled canceled joined quit became promoted upgraded "
    "downgraded reorg transferred relocated"
)
"""Verbs by which a fact about someone or something says it changed, beside the outright
change cues (:data:`~norax_core.link_rule.CHANGE_CUE_WORDS`): "we migrated staging to
Fly.io", "Jonas took over the on-call rotation", "Dmitri sold the Corolla". Too common in
chat to link memories at write time; the current-state rule reads them only for a pair that
already shares the question's subject (:func:`same_attribute`)."""


@dataclass(frozen=True)
class Statements:
    """What the attribute rule reads of a table's rows (:class:`~norax_core.ranking.Table`).

    Attributes:
        query: Per query, the words of its text (the store's tokenizer).
        words: ``(query, rows) -> `` each row's words (its tokens, as the store indexed them).
        replies: ``(wanted=None) -> (q, n)`` whether each row is an assistant's reply
            (``role`` metadata ``"assistant"``; with a mask ``wanted``, only those rows need be
            read): a reply restates what it answers, it updates nothing.
        cues: The update cues, tokenised (:data:`~norax_core.link_rule.CUE_WORDS`).
        change: The outright change cues among them (:data:`~norax_core.link_rule.
            CHANGE_CUE_WORDS`).
        now: :data:`NOW_WORDS`, tokenised: left out of the query's words.
        shift: :data:`SHIFT_WORDS`, tokenised: change cues of the subject clause.
    """

    query: Sequence[frozenset[str]]
    words: Callable[[int, Sequence[int]], list[frozenset[str]]]
    replies: Callable[..., np.ndarray]
    cues: frozenset[str]
    change: frozenset[str]
    now: frozenset[str] = frozenset()
    shift: frozenset[str] = frozenset()

    def cue_set(self, level: str) -> frozenset[str]:
        """The cues of a :data:`CUE_LEVELS` level."""
        return self.change if level == "change" else self.cues


def same_attribute(
    query: frozenset[str],
    older: frozenset[str],
    newer: frozenset[str],
    shared: int,
    change: frozenset[str] | None = None,
) -> bool:
    """Whether two memories state what the query asks about: the same subject and attribute.

    Both hold at least ``shared`` of the query's words (all of them when it has fewer): "How
    many commits have been merged into the main branch?" asks about ``commit`` and ``merg``,
    which "150 commits and 12 branches merged" and "commits merged into the main branch has
    now reached 165" both state, though their embeddings are far apart (cosine 0.28).

    With ``change`` (current-state questions), a newer memory that says its subject changed
    (a word of ``change``) and shares a query word with the older one also states the same
    attribute when the older holds two of the query's words (the subject and the attribute:
    "Kenji lives in Osaka" for "Which city is Kenji living in?"; all of them for a shorter
    query), or when the two share another word beside the cues ("After the reorg Aiko
    reports to Rosa" after "Aiko reports to Farah", asked "Who is Aiko's manager?").

    Examples:
        >>> q = frozenset({"weekli", "sync"})
        >>> old, new = frozenset({"weekli", "sync", "monday"}), frozenset({"weekli", "sync"})
        >>> same_attribute(q, old, new, 3)
        True
        >>> same_attribute(q, frozenset({"weekli", "monday"}), new, 3)
        False
    """
    need = min(shared, len(query))
    if need == 0:
        return False
    both = query & older & newer
    if len(both) >= need:
        return True
    # an outright change of a subject the query names ("Kenji moved to Sapporo" after "Kenji
    # lives in Osaka", asked "Where does Kenji live?"): the newer shares its subject and says
    # it changed, and the older states the attribute with the query's words, or the two share
    # a word beside the subject ("After the reorg Aiko reports to Rosa" after "Aiko reports
    # to Farah", asked "Who is Aiko's manager?")
    if change is None or not both or not newer & change:
        return False
    return len(query & older) >= min(need, 2) or len((older & newer) - change) >= 2


def state_wins(
    score: Sequence[float],
    times: Sequence[float],
    words: Sequence[frozenset[str]],
    replies: Sequence[bool],
    query: frozenset[str],
    cues: frozenset[str],
    shared: int,
    weight: float,
    change: frozenset[str] | None = None,
) -> list[float]:
    r"""The attribute rule of latest wins: the newer statement of what the query asks passes.

    .. math::

        s'(j) = \max\Bigl(s(j),\ \max_{o} s(o) + (\lambda - 1)\, s(j)\Bigr)

    over the older memories ``o`` of the same list that state the same attribute of the same
    subject as ``j`` (:func:`same_attribute`), where ``j`` carries an update cue (a word of
    ``cues``) and neither is a reply. With ``weight`` above 1 the newer memory passes the
    older one, and several newer ones keep their own order among themselves.

    Args:
        score: Scores of the best candidates (the only ones compared and moved).
        times: Their creation times.
        words: Their words.
        replies: Whether each is an assistant's reply.
        query: The query's words.
        cues: The cue words that make a memory an update.
        shared: Query words both memories must hold (:func:`same_attribute`).
        weight: ``lambda``; at most 1 returns the scores unchanged.
        change: The outright change cues: with them, a newer memory that says its subject
            changed outright needs to share only that subject (:func:`same_attribute`).

    Returns:
        The new scores, in the same order.
    """
    out = [float(x) for x in score]
    if weight <= 1:
        return out
    for j in range(len(out)):
        if replies[j] or not (words[j] & cues):
            continue
        best = max(
            (
                score[o]
                for o in range(len(out))
                if o != j
                and times[o] < times[j]
                and not replies[o]
                and same_attribute(query, words[o], words[j], shared, change)
            ),
            default=-np.inf,
        )
        out[j] = max(out[j], float(best + (weight - 1) * score[j]))
    return out
