"""Turns: a memory's place in the conversation, for questions about the conversation itself.

"Summarize how my budget tracker went" and "In what order did I bring up ..." ask about the
conversation's course, and their query shares little with any one message: it names the whole
topic, which every message of the chat touches. What marks their evidence is where it sits:

- **openers**: a session's first turns state what the session is about (the lead bias of
  summaries: a text's opening carries its topic). A memory at position ``p`` of its session
  (0 opens it) scores ``1 + b * exp(-p / span)`` times its score.
- **the speaker**: "what did *I* bring up" is answered by the user's messages, not the
  assistant's replies that restate them. When the query asks for the user's own words
  (:attr:`QueryPlan.own_words <norax_core.query.QueryPlan.own_words>`), a memory whose
  ``role`` metadata is ``"user"`` scores ``1 + s`` times its score.

On BEAM 100K, for the ``default`` ranking of its event-ordering questions, the gold messages
are all user messages (106 of 106) and sit among the first 12 turns of a session 3.5 times as
often as elsewhere (summarization: 4 times), while they share no more words or entities with
the question than the rest of the chat does.

- **the spread**: "in what order did I bring up ..." asks for items spread over the
  conversation's course (:attr:`QueryPlan.ordering <norax_core.query.QueryPlan.ordering>`),
  not for the ten best messages of the one session that talks most about the topic. For
  such a query the ``j``-th best candidate of a session (``j = 0`` for its best) keeps
  ``(1 - spread) ** j`` of its score, so each session's best comes before any session's
  second. Summary questions are left alone: their evidence is request-and-reply pairs that
  sit together (on BEAM 100K spreading them too cost summarization 0.254 -> 0.171).

The boosts are multiplicative, so the candidates' order among memories alike in place and
speaker is kept. A memory whose position is unknown (negative) gains nothing from the opener
boost; one whose session is unknown (negative) is not spread.

References:
    Nenkova, "Automatic text summarization of newswire: lessons learned from the document
    understanding conference", AAAI 2005 (the lead baseline).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np

__all__ = ["opener_weight", "spread_factor", "spread_one", "turns_factor"]


def opener_weight(position: np.ndarray, span: float) -> np.ndarray:
    """``exp(-position / span)`` where ``position >= 0``, else 0.

    Args:
        position: Each memory's position in its session (0: it opens it; negative: unknown).
        span: Positions over which the weight falls by ``e``; ``> 0``.

    Examples:
        >>> opener_weight(np.array([0, 10, -1]), 10.0).round(3).tolist()
        [1.0, 0.368, 0.0]
    """
    p = np.asarray(position, dtype=np.float64)
    return np.where(p >= 0, np.exp(-np.maximum(p, 0.0) / span), 0.0)  # type: ignore[no-any-return]


def turns_factor(
    shape: tuple[int, int],
    position: np.ndarray | None,
    user: np.ndarray | None,
    own_words: np.ndarray,
    opener_boost: float,
    span: float,
    speaker_boost: float,
) -> np.ndarray:
    """What each score is multiplied by: ``(1 + b * opener) * (1 + s * user * own_words)``.

    Args:
        shape: ``(q, n)``.
        position: ``(q, n)`` positions in the session (``None`` when the opener boost is 0).
        user: ``(q, n)`` written by the user (``None`` when the speaker boost is 0).
        own_words: ``(q,)`` whether each query asks for the user's own words.
        opener_boost: ``b >= 0``.
        span: The opener weight's span.
        speaker_boost: ``s >= 0``.

    Returns:
        ``(q, n)`` factors, each ``>= 1``.
    """
    out = np.ones(shape)
    if opener_boost > 0 and position is not None:
        out *= 1.0 + opener_boost * opener_weight(position, span)
    if speaker_boost > 0 and user is not None:
        out *= 1.0 + speaker_boost * (np.asarray(user, dtype=bool) & own_words[:, None])
    return out


def spread_factor(
    score: np.ndarray,
    cand: np.ndarray,
    sessions: np.ndarray,
    tie: np.ndarray | None,
    on: np.ndarray,
    spread: float,
) -> np.ndarray:
    """What each score is multiplied by to spread a query's results over sessions.

    Args:
        score: ``(q, n)`` scores.
        cand: ``(q, n)`` candidate mask (only candidates count and are spread).
        sessions: ``(q, n)`` each row's session (negative: unknown, never spread).
        tie: ``(q, n)`` tie keys (the smaller ranks first among equal scores), or ``None``
            for rows in tie order.
        on: ``(q,)`` the queries to spread (those asking for an order).
        spread: ``s`` in [0, 1); 0 returns ones.

    Returns:
        ``(q, n)`` factors ``(1 - s) ** j``, ``j`` the number of better candidates of the same
        session (ties to the smaller tie key); 1 for other rows and queries.
    """
    q, n = score.shape
    out = np.ones((q, n))
    if spread <= 0:
        return out
    for i in np.flatnonzero(on):
        rows = np.flatnonzero(cand[i] & (sessions[i] >= 0))
        if rows.size < 2:
            continue
        key = rows if tie is None else tie[i, rows]
        rows = rows[np.lexsort((key, -score[i, rows]))]  # best first
        ses = sessions[i, rows]
        grouped = np.argsort(ses, kind="stable")  # by session, best first within each
        s = ses[grouped]
        start = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        ahead = np.arange(s.size) - np.repeat(start, np.diff(np.r_[start, s.size]))
        out[i, rows[grouped]] = (1.0 - spread) ** ahead
    return out


def spread_one(
    scores: Mapping[str, float], sessions: Mapping[str, int], spread: float
) -> dict[str, float]:
    """Plain reference of :func:`spread_factor` for one query: ``{id: spread score}``.

    Args:
        scores: Each candidate's score.
        sessions: Each candidate's session (missing or negative: unknown).
        spread: ``s`` in [0, 1).
    """
    ahead: Counter[int] = Counter()
    out = {}
    for m in sorted(scores, key=lambda m: (-scores[m], m)):
        s = sessions.get(m, -1)
        out[m] = scores[m] * (1.0 - spread) ** ahead[s] if s >= 0 else scores[m]
        ahead[s] += 1
    return out
