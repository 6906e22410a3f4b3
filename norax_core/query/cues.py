"""Two cues of coverage questions, read with rules: an order asked for, the user's own words.

"Timeline" is not an order cue: BEAM's summary questions ask for "the development timeline"
among a summary's parts.

"In what order did I bring up the parts of my budget app?" wants the user's messages, one per
step, spread over the conversation; "Summarize how the project went" wants the topic's main
messages, whoever wrote them. :func:`asks_order` and :func:`asks_own_words` tell them apart
(:attr:`QueryPlan.ordering <norax_core.query.QueryPlan.ordering>` and
:attr:`~norax_core.query.QueryPlan.own_words`), for the turns and coverage stages.
"""

from __future__ import annotations

import re

__all__ = ["asks_order", "asks_own_words"]

_ORDER = re.compile(
    r"\b(?:in\s+(?:what|which)\s+order|order\s+in\s+which|in\s+order(?!\s+to\b)"
    r"|(?:chronolog|sequen)\w*)\b",
    re.IGNORECASE,
)
_SAID = (
    r"(?:brought|bring|mention(?:ed)?|ask(?:ed)?|raised?|said|say|told|tell|talk(?:ed)?"
    r"|discuss(?:ed)?|shared?|describe[ds]?|explain(?:ed)?|wrote|write|asked)"
)
_OWN = re.compile(
    rf"\bI\s+(?:(?:first|initially|later|then|have|had|also)\s+)?{_SAID}\b|\bdid\s+I\s+{_SAID}\b",
    re.IGNORECASE,
)


def asks_order(text: str) -> bool:
    """Whether the query asks for a sequence: "in what order", "in sequence", "chronological".

    Examples:
        >>> asks_order("In what order did I bring up the budget, the UI and the tests?")
        True
        >>> asks_order("What did I do in order to fix the login?")
        False
    """
    return _ORDER.search(text) is not None


def asks_own_words(text: str) -> bool:
    """Whether the query asks what the user (the asker) said: "I brought up", "did I ask".

    Examples:
        >>> asks_own_words("List the order in which I brought up the app's features.")
        True
        >>> asks_own_words("Summarize how the database migration went.")
        False
    """
    return _OWN.search(text) is not None
