"""The math of :func:`norax_core.ranking.rank`'s adaptive stages, one module each.

Each stage works on plain arrays (scores, times, sessions, links of a table's rows), so
:mod:`norax_core.ranking` calls it the same way for a search's table of one query and for the
benchmark's batches; ranking owns the order of the stages and their gating by the plan.
"""
