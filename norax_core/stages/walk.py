"""The bridge walk: its pairs and shares, and its power iteration.

:class:`Step` is one walk over a namespace's ``(memory, entity)`` pairs (what
:mod:`norax_core.stages.bridges` keeps walkable), :func:`iterate` the personalised PageRank's
power iteration on it, run along one direction's pairs per step: the restart is on one side
of the bipartite graph, so every ``W^j p`` is too. Numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_ITER", "TOL", "Step", "iterate"]

MAX_ITER = 30
TOL = 1e-7
"""The walk stops at the first step whose L1 change is below ``TOL`` (at most ``MAX_ITER``
steps: the error shrinks by the damping per step)."""


def iterate(walk: Step, p: np.ndarray, on_mem: bool, damping: float) -> tuple[np.ndarray, float]:
    r"""The power iteration's memory masses and its last restart, from ``p`` on one side.

    The iteration is the plain one, ``x_{t+1} = d W x_t + r_t p`` from ``x_0 = p``, with
    ``r_t = 1 - d + d lost(x_t)`` (the restart and what the dangling memories hold), stopped
    at the first step whose L1 change is below :data:`TOL` (at most :data:`MAX_ITER`), written
    over the vectors ``u_j = W^j p``. The graph is bipartite and ``p`` is on one side, so each
    ``u_j`` is on one side too and a step multiplies by one direction's pairs only: half the
    plain step's work. A dangling memory has no pair, so it receives nothing: ``lost(x_t) =
    r_{t-1} δ``, ``δ`` the mass ``p`` puts on them, and ``r_t = 1 - d + d δ r_{t-1}``
    (``r_{-1} = 1``) is known beforehand. Then ``x_t = \sum_{j \le t} r_{t-1-j} d^j u_j``
    and the change is measured without ``x``: see :func:`_stop`. The steps are taken in
    batches, the first up to where the change should fall below :data:`TOL`, then one at a
    time, and measured at each batch's end (a step past the stop costs only time). The same
    steps, stop and values as the plain iteration, up to rounding (~1e-16;
    ``tests/unit/test_bridges.py`` compares the two on random graphs).
    """
    d = damping
    rows, ents, to_ent, to_mem = walk.rows, walk.ents, walk.to_ent, walk.to_mem
    n, e = len(walk.strength), len(walk.has)
    delta = float(p.take(walk.dangling).sum()) if on_mem and len(walk.dangling) else 0.0
    r = [1.0]  # r[k + 1] = r_k, the restart of step k; r[0] = 1: x_0 = p
    scale = [1.0]  # d^j
    for _ in range(MAX_ITER):
        r.append(1.0 - d + d * (delta * r[-1]))
        scale.append(scale[-1] * d)
    gap, scales = np.abs(np.diff(r)), np.array(scale)
    # u_0 = p, on the memories if ``on_mem``: then every u_j of an even j is, else of an odd j
    us, odd = [p], 0 if on_mem else 1
    pair = np.empty(len(rows))
    done, end, upto = 0, 0, _expected_end(d, delta)
    while not end:
        # ``take`` into ``out`` with mode "raise" buffers (about 3 x slower); "wrap" reads
        # the same values for indices in range.
        u = us[-1]
        for t in range(done, upto):
            if t % 2 == odd:  # u_t on the memories: u_{t+1} on the entities
                np.multiply(u.take(rows, out=pair, mode="wrap"), to_ent, out=pair)
                u = np.bincount(ents, weights=pair, minlength=e)
            else:
                np.multiply(u.take(ents, out=pair, mode="wrap"), to_mem, out=pair)
                u = np.bincount(rows, weights=pair, minlength=n)
            us.append(u)
        stacks = np.array(us[0::2]), np.array(us[1::2])  # u_j in row j // 2 of stack j % 2
        end = _stop(stacks, done, upto, gap, scales, delta)
        done, upto = upto, upto + 1
        if not end and done == MAX_ITER:
            end = MAX_ITER
    back = [r[end - j] * scale[j] for j in range(odd, end + 1, 2)]  # the memories' u_j
    return np.dot(back, stacks[odd][: len(back)]), r[end]


def _expected_end(d: float, delta: float) -> int:
    """The step where the change of :func:`_iterate` should fall below :data:`TOL`.

    With ``|u_j| = 1 - δ`` (``j > 0``), about ``d^{t+1} (1 - δ) (2 - δ)``: only a guess of
    where to measure first (the measured change decides).
    """
    c = (1.0 - delta) * (2.0 - delta)
    if not 0.0 < d < 1.0 or c <= 0.0:
        return 1
    return max(1, min(MAX_ITER, math.ceil(math.log(TOL / c) / math.log(d))))


def _stop(
    stacks: tuple[np.ndarray, np.ndarray],
    lo: int,
    hi: int,
    gap: np.ndarray,
    scale: np.ndarray,
    delta: float,
) -> int:
    r"""The first step ``t + 1`` (``lo <= t < hi``) whose L1 change is below TOL; 0: none.

    ``x_{t+1} - x_t = d^{t+1} u_{t+1} + \sum_{j \le t} Δ_{t-j} d^j u_j``, ``Δ_k = r_k -
    r_{k-1} = d δ Δ_{k-1} \le 0``: its terms on the other side than ``u_{t+1}`` (``t - j``
    even) all have the sign of ``Δ``, so their L1 norm is the sum of their L1 norms, which
    are their sums (``u_j \ge 0``); those on the side of ``u_{t+1}`` (``t - j`` odd) are only
    ``d^{t+1} u_{t+1}`` when ``δ = 0``, else they are summed as a vector, for the steps whose
    other side alone is below TOL. ``stacks``: ``u_j`` in row ``j // 2`` of ``stacks[j % 2]``,
    up to ``u_hi`` at least; ``gap``: ``|Δ_k|``; ``scale``: ``d^j``.
    """
    m = hi + 1  # u_0 .. u_hi
    s = np.empty(m)
    s[0::2] = np.add.reduce(stacks[0][: (m + 1) // 2], axis=1)
    s[1::2] = np.add.reduce(stacks[1][: m // 2], axis=1)
    s *= scale[:m]
    if not delta:  # |Δ_0| s_t + s_{t+1}: Δ_k = 0 for k > 0
        below = np.flatnonzero(gap[0] * s[lo:hi] + s[lo + 1 : m] < TOL)
        return lo + int(below[0]) + 1 if len(below) else 0
    other = np.convolve(s, np.where(np.arange(len(gap)) % 2 == 0, gap, 0.0))
    for t in (lo + np.flatnonzero(other[lo:hi] < TOL)).tolist():
        back = [-gap[t - i] * scale[i] for i in range((t + 1) % 2, t, 2)]  # Δ_k d^i, k odd
        mixed = scale[t + 1] * stacks[(t + 1) % 2][(t + 1) // 2]
        if back:
            mixed += np.dot(back, stacks[(t + 1) % 2][: len(back)])
        if other[t] + np.add.reduce(np.abs(mixed)) < TOL:
            return t + 1
    return 0


@dataclass(frozen=True)
class Step:
    """One walk's pairs (hubs and what the walk leaves out dropped), and its shares.

    A memory sends ``to_ent[i]`` of its mass to pair ``i``'s entity (its IDF ``weight[i]``
    over the memory's ``strength``, the summed IDFs of its pairs' entities), an entity
    ``to_mem[i]`` of its mass to pair ``i``'s memory. ``dangling``: the memories with no pair
    (their mass restarts); ``has``: the entities the walk follows.
    """

    rows: np.ndarray
    ents: np.ndarray
    weight: np.ndarray
    to_ent: np.ndarray
    to_mem: np.ndarray
    strength: np.ndarray
    dangling: np.ndarray
    has: np.ndarray
    pairs: int

    @classmethod
    def of(
        cls, n: int, e: int, rows: np.ndarray, ents: np.ndarray, df: np.ndarray, idf: np.ndarray
    ) -> Step:
        """The walk over the pairs ``rows`` x ``ents`` of ``n`` memories and ``e`` entities."""
        has = np.zeros(e, bool)
        has[ents] = True
        return cls._of(rows, ents, idf[ents], 1.0 / df[ents], has, n)

    @classmethod
    def _of(
        cls,
        rows: np.ndarray,
        ents: np.ndarray,
        weight: np.ndarray,
        to_mem: np.ndarray,
        has: np.ndarray,
        n: int,
    ) -> Step:
        # an IDF is > 0 (an entity is in at most every memory): a memory with a pair has a
        # positive strength
        strength = np.bincount(rows, weights=weight, minlength=n)
        to_ent = weight / strength[rows]
        dangling = np.flatnonzero(strength == 0)
        return cls(rows, ents, weight, to_ent, to_mem, strength, dangling, has, len(rows))

    def without(self, q: np.ndarray) -> Step:
        """This walk leaving out the entities ``q``.

        Their pairs go; the other entities keep their shares, the memories that had one of
        ``q`` get new ones.
        """
        if not self.has[q].any():
            return self
        skip = np.zeros(len(self.has), bool)
        skip[q] = True
        keep = ~skip[self.ents]
        has = self.has.copy()
        has[q] = False
        return self._of(
            self.rows[keep], self.ents[keep], self.weight[keep], self.to_mem[keep], has,
            len(self.strength),
        )  # fmt: skip
