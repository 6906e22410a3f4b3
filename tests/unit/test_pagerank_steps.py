"""The graph signal's personalised PageRank takes the plain power iteration's steps.

Its steps are written for speed (the damping folded into the edge shares, the restart added
once): on random directed graphs with dangling nodes, at the signal's own tolerance, they
stop at the same step as the plain iteration and give its values to rounding.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from norax_core.signals.graph import personalized_pagerank


def _plain(
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    p: np.ndarray,
    damping: float,
    max_iter: int,
    tol: float,
) -> np.ndarray:
    share = weight / np.bincount(src, weights=weight, minlength=n)[src]
    dangling = np.bincount(src, weights=weight, minlength=n) == 0
    x = p.copy()
    for _ in range(max_iter):
        new = np.bincount(dst, weights=share * x[src], minlength=n)
        new = damping * (new + x[dangling].sum() * p) + (1 - damping) * p
        change = np.abs(new - x).sum()
        x = new
        if change < n * tol:
            break
    return x


@pytest.mark.parametrize("seed", range(30))
def test_the_steps_equal_the_plain_power_iteration(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(2, 120)
    m = rng.randrange(1, 6 * n)
    src = np.array([rng.randrange(n) for _ in range(m)])
    dst = np.array([rng.randrange(n) for _ in range(m)])
    if rng.random() < 0.7:  # some nodes send nothing: their mass restarts
        quiet = np.array([rng.random() < 0.3 for _ in range(n)])
        keep = ~quiet[src]
        src, dst = src[keep], dst[keep]
    weight = np.array([rng.uniform(0.1, 3.0) for _ in src])
    p = np.zeros(n)
    p[rng.sample(range(n), rng.randrange(1, min(n, 5) + 1))] = 1.0
    p /= p.sum()
    damping = rng.choice([0.5, 0.5, 0.3, 0.85])
    max_iter, tol = rng.choice([(50, 1e-6), (50, 1e-6), (7, 1e-6), (200, 1e-10)])
    got = personalized_pagerank(n, src, dst, weight, p, damping=damping, max_iter=max_iter, tol=tol)
    want = _plain(n, src, dst, weight, p, damping, max_iter, tol)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
