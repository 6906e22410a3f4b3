"""Ranking stages: the math of each step of :func:`norax_core.ranking.rank`, one per module."""
