"""Benchmarks on real agent-memory data (LoCoMo, BEAM) and fusion-weight fitting.

``norax bench locomo|beam`` measures recall@k of every signal alone and of fused presets;
``norax fit`` learns fusion weights and signal parameters from a benchmark, and
:func:`fit_weights` learns them from a user's own relevance feedback.
"""
