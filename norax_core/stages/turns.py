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

Both are multiplicative, so the candidates' order among memories alike in place and speaker is
kept. A memory whose position is unknown (negative) gains nothing from the opener boost.

References:
    Nenkova, "Automatic text summarization of newswire: lessons learned from the document
    understanding conference", AAAI 2005 (the lead baseline).
"""

from __future__ import annotations

import numpy as np

__all__ = ["opener_weight", "turns_factor"]


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
