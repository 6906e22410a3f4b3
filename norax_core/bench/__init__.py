"""Benchmarks on real agent-memory data (LoCoMo, BEAM) and fusion-weight fitting.

``norax bench locomo|beam`` measures recall@k of every signal alone and of fused presets;
``norax fit`` learns fusion weights and engine parameters from a benchmark with
leave-one-conversation-out cross-validation. With your own relevance feedback::

    from norax_core.bench import Feedback, fit_weights

    result = fit_weights(memory, [Feedback("where did I park?", ["m-17"], now=...)])
    result.save("weights.json")          # a versioned weights file
    memory.search("...", weights=result.weights)
"""

from norax_core.bench.fit import CVResult, Feedback, FitResult, cross_validate, fit_weights

__all__ = ["CVResult", "Feedback", "FitResult", "cross_validate", "fit_weights"]
