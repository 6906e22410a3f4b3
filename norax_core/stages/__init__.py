"""Query-aware ranking stages: the math of the steps :func:`norax_core.ranking.rank` runs.

Each module holds one stage's pure functions over arrays (a batch of queries at once) and a
plain reference for one query, which the unit tests check them against. ``rank`` calls them,
gated by a :class:`~norax_core.ranking.Plan` field that is off by default.
"""
