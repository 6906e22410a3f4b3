"""Ranking stages that :func:`norax_core.ranking.rank` applies after fusion, one per module."""
