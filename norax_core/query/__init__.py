"""Query analysis without an LLM: what a query asks for, which periods and entities it names.

:func:`plan_query` turns a query (and ``now``) into a :class:`QueryPlan`: its
:class:`Intent`, the :class:`Period` s it names and its candidate entities.
"""

from norax_core.query.intents import Intent
from norax_core.query.periods import Period
from norax_core.query.plan import QueryPlan, plan_query

__all__ = ["Intent", "Period", "QueryPlan", "plan_query"]
