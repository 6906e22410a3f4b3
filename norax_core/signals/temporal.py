"""Temporal decay: recent memories weigh more, at a rate set per memory kind."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import filterfalse, repeat
from typing import Any

import numpy as np

from norax_core.signals.base import Query
from norax_core.signals.context import (
    neighbour_map,
    session_arrays,
    session_numbers,
    session_positions,
)
from norax_core.snapshot_format import Strings, pack_strs

SECONDS_PER_DAY = 86_400.0


def decay(age_days: np.ndarray, tau_days: np.ndarray) -> np.ndarray:
    """Exponential recency score.

    Parameters
    ----------
    age_days : numpy.ndarray
        Age of each memory in days; negative ages (future timestamps) are clamped to 0.
    tau_days : numpy.ndarray
        Decay constant per memory, in days: the age at which the score falls to ``1/e``.

    Returns:
    -------
    numpy.ndarray
        ``exp(-max(age, 0) / tau)``, in (0, 1].

    References:
    ----------
    Park et al., "Generative Agents: Interactive Simulacra of Human Behavior", UIST 2023
    (exponential recency decay over memory age).
    """
    return np.exp(-np.maximum(age_days, 0.0) / tau_days)


class _Namespace:
    """Append-only slots of (id, created_at, kind code, write sequence) with tombstones."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.slot: dict[str, int] = {}
        self.ts = np.empty(0, dtype=np.float64)
        self.kind = np.empty(0, dtype=np.int32)
        self.seq = np.empty(0, dtype=np.int64)
        self.alive = np.empty(0, dtype=bool)
        self.n = 0
        self.timeline: tuple[list[str], list[float], dict[str, int], list[int]] | None = None

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The slots as flat arrays, for :meth:`from_arrays` (the cached order is left out)."""
        n = self.n
        ids_s, ids_o = pack_strs(self.ids[:n])
        return {
            "ids_s": ids_s,
            "ids_o": ids_o,
            "ts": self.ts[:n],
            "kind": self.kind[:n],
            "seq": self.seq[:n],
            "alive": self.alive[:n],
        }

    @classmethod
    def from_arrays(
        cls, arrays: Mapping[str, np.ndarray], strs: Strings | None = None
    ) -> _Namespace:
        """The slots of :meth:`to_arrays` (copied: writes change them in place).

        ``strs``: the snapshot's string decoder (shared with its other indexes).

        Raises:
            ValueError: The arrays do not fit together.
        """
        strs = strs if strs is not None else Strings()
        ns = cls()
        ns.ids = strs(arrays["ids_s"], arrays["ids_o"])
        ns.n = n = len(ns.ids)
        if any(arrays[k].shape != (n,) for k in ("ts", "kind", "seq", "alive")):
            raise ValueError("the temporal arrays do not fit together")
        ns.ts = arrays["ts"].astype(np.float64)
        ns.kind = arrays["kind"].astype(np.int32)
        ns.seq = arrays["seq"].astype(np.int64)
        ns.alive = arrays["alive"].astype(bool)
        if ns.alive.all():  # the usual snapshot: every slot live, the map the decoder's
            ns.ids, ns.slot = strs.positions(arrays["ids_s"], arrays["ids_o"])
        else:
            names = ns.ids
            ns.slot = {names[i]: i for i in np.flatnonzero(ns.alive).tolist()}
        return ns

    def _grow(self) -> None:
        cap = max(16, 2 * len(self.ts))
        for name in ("ts", "kind", "seq", "alive"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def add(self, mid: str, ts: float, kind: int, seq: int) -> None:
        self._extend_timeline(mid, ts, seq)
        self._drop_view()
        if mid in self.slot:
            i = self.slot[mid]
        else:
            if self.n == len(self.ts):
                self._grow()
            i = self.n
            self.n += 1
            self.ids.append(mid)
            self.slot[mid] = i
        self.ts[i], self.kind[i], self.seq[i], self.alive[i] = ts, kind, seq, True

    def _extend_timeline(self, mid: str, ts: float, seq: int) -> None:
        """Keep the cached time order when a new memory comes last.

        Appending to a conversation is the usual write; any other write drops the order, to
        be sorted again when next asked (an O(n log n) sort of the namespace).
        """
        line = self.timeline
        if line is None:
            return
        ordered, times, pos, seqs = line
        if mid in self.slot or (ordered and (ts, seq, mid) <= (times[-1], seqs[-1], ordered[-1])):
            self.timeline = None
            return
        pos[mid] = len(ordered)
        ordered.append(mid)
        times.append(ts)
        seqs.append(seq)

    def remove(self, mid: str) -> bool:
        i = self.slot.pop(mid, None)
        if i is None:
            return False
        self.timeline = None
        self._drop_view()
        self.alive[i] = False
        if len(self.slot) * 2 < self.n and self.n > 64:
            self._compact()
        return True

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[: self.n])
        self.ids = [self.ids[i] for i in keep]
        self.ts, self.kind = self.ts[keep].copy(), self.kind[keep].copy()
        self.seq = self.seq[keep].copy()
        self.alive = np.ones(len(keep), dtype=bool)
        self.n = len(keep)
        self.slot = {mid: i for i, mid in enumerate(self.ids)}

    def _drop_view(self) -> None:
        # set at a search's first read (view), not here: a snapshot's layout() lists the
        # attributes of a new _Namespace, and a search's view is no part of a snapshot
        self.__dict__.pop("_view", None)
        self.__dict__.pop("derived", None)

    def view(self) -> _View:
        """The time order as arrays: what a search reads instead of :meth:`ordered`'s lists.

        ``(order, rank, times)``: the live slots in conversation order, each slot's place in
        that order (-1 for a dead slot) and the times in that order. Taken from the kept
        :meth:`ordered` when there is one (the same order, without a sort), else sorted here;
        kept, with :attr:`derived`, until the next write. Read only.
        """
        got: _View | None = self.__dict__.get("_view")
        if got is None:
            line = self.timeline
            if line is None:
                order = self._order()
            else:
                order = np.fromiter(map(self.slot.__getitem__, line[0]), np.int64, len(line[0]))
            rank = np.full(self.n, -1, np.int64)
            rank[order] = np.arange(len(order))
            got = self.__dict__["_view"] = (order, rank, self.ts[order])
            self.derived: dict[object, Any] = {}  # what searches derive from it (kept as long)
        return got

    def ordered(self) -> tuple[list[str], list[float], dict[str, int], list[int]]:
        """The live ids in conversation order (see :meth:`TemporalSignal.timeline`)."""
        if self.timeline is None:
            order = self._order()
            ordered = list(map(self.ids.__getitem__, order.tolist()))
            self.timeline = (
                ordered,
                self.ts[order].tolist(),
                dict(zip(ordered, range(len(ordered)), strict=True)),
                self.seq[order].tolist(),
            )
        return self.timeline

    def _order(self) -> np.ndarray:
        """The live slots sorted by ``(ts, seq, id)``.

        One ``lexsort`` of times and sequence numbers; the slots of a run that shares both
        are then put in id order (as the tuple sort would), and NaN times, which a tuple
        sort leaves where comparisons happen to put them, are sorted as tuples.
        """
        live = np.flatnonzero(self.alive[: self.n])
        ts, seq = self.ts[live], self.seq[live]
        if np.isnan(ts).any():
            t, q, names = self.ts.tolist(), self.seq.tolist(), self.ids
            return np.array(sorted(live.tolist(), key=lambda i: (t[i], q[i], names[i])), np.int64)
        at = np.lexsort((seq, ts))
        order = live[at]
        ts, seq = ts[at], seq[at]
        tied = np.flatnonzero((ts[1:] == ts[:-1]) & (seq[1:] == seq[:-1]))
        if len(tied):
            names = self.ids
            # runs of equal (ts, seq): each starts where a tie follows a non-tie
            starts = tied[np.r_[True, tied[1:] != tied[:-1] + 1]]
            ends = tied[np.r_[tied[1:] != tied[:-1] + 1, True]] + 2
            for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
                order[a:b] = sorted(order[a:b].tolist(), key=names.__getitem__)
        return order


_View = tuple[np.ndarray, np.ndarray, np.ndarray]


class TemporalSignal:
    """Scores ``exp(-age_days / tau_kind)`` from an in-memory catalog of creation times.

    The catalog is derived data the engine fills (``add``/``remove``); ``tau_for`` maps a
    kind to its decay constant in days and is applied at query time, so
    :meth:`with_decay` can score the same catalog with other (for example learned) rates.
    Not thread-safe on its own: the engine serialises writes.

    Memories sharing a creation time are ordered by their write sequence number (``seq``:
    the order they were written in, see :func:`norax_core.batch.sequence_numbers`), then by
    id, so a conversation added in one call with one time keeps the order it was given in.
    """

    name = "temporal"

    def __init__(self, tau_for: Callable[[str], float]) -> None:
        self._tau_for = tau_for
        self._ns: dict[str, _Namespace] = {}
        self._kinds: dict[str, int] = {}
        self._taus: np.ndarray | None = None  # decay constant per kind code (_scores)
        self.last_seq = 0
        """The highest write sequence number recorded (the engine numbers writes after it)."""
        self.writes = 0
        """Number of adds and removes so far: a write that read the catalog can tell, by
        comparing it, whether another write came in between."""

    def with_decay(self, tau_for: Callable[[str], float]) -> TemporalSignal:
        """A view of the same catalog that scores with other decay constants."""
        view = TemporalSignal(tau_for)
        view._ns, view._kinds = self._ns, self._kinds
        return view

    def add(
        self, namespace: str, memory_id: str, created_at: float, kind: str, seq: int = 0
    ) -> None:
        """Record (or replace) a memory's creation time (epoch seconds), kind and ``seq``.

        ``seq`` is its write sequence number (``0``: unknown, as for memories written before
        Norax kept one).
        """
        code = self._kinds.setdefault(kind, len(self._kinds))
        self._ns.setdefault(namespace, _Namespace()).add(memory_id, created_at, code, seq)
        self.last_seq = max(self.last_seq, seq)
        self.writes += 1

    def remove(self, namespace: str, memory_id: str) -> bool:
        """Forget a memory; returns whether it was known."""
        ns = self._ns.get(namespace)
        self.writes += 1
        return ns.remove(memory_id) if ns else False

    def drop(self, namespace: str) -> None:
        """Forget a whole namespace (its owner reloads it when it is next used)."""
        self._ns.pop(namespace, None)

    def export(self, namespace: str) -> tuple[object, list[str]] | None:
        """The namespace's catalog and the kind of each code, for :meth:`restore`."""
        ns = self._ns.get(namespace)
        if ns is None:
            return None
        kinds = sorted(self._kinds, key=self._kinds.__getitem__)
        return ns, kinds

    def restore(self, namespace: str, state: object) -> None:
        """Hold a namespace exported by :meth:`export`, its kind codes mapped to this catalog's."""
        ns, kinds = state if isinstance(state, tuple) else (None, [])
        if not isinstance(ns, _Namespace):
            raise TypeError("not an exported temporal namespace")
        codes = np.array([self._kinds.setdefault(k, len(self._kinds)) for k in kinds] or [0])
        ns.kind = codes[ns.kind].astype(np.int32)
        self._ns[namespace] = ns
        if ns.n:
            self.last_seq = max(self.last_seq, int(ns.seq[: ns.n].max()))

    def count(self, namespace: str) -> int:
        """Number of memories in ``namespace``."""
        ns = self._ns.get(namespace)
        return len(ns.slot) if ns else 0

    def namespaces(self) -> list[str]:
        """Namespaces that hold at least one memory."""
        return [name for name, ns in self._ns.items() if ns.slot]

    def ids(self, namespace: str) -> set[str]:
        """Ids known in ``namespace``."""
        ns = self._ns.get(namespace)
        return set(ns.slot) if ns else set()

    def created(self, namespace: str, ids: Sequence[str]) -> list[float]:
        """Creation time (epoch seconds) of each of ``ids``; NaN for ids not in ``namespace``."""
        ns = self._ns.get(namespace)
        if ns is None or not ns.slot:
            return [float("nan")] * len(ids)
        slot = ns.slot
        at = np.fromiter(map(slot.get, ids, repeat(-1)), np.int64, len(ids))
        return np.where(at >= 0, ns.ts[at], np.nan).tolist()  # type: ignore[no-any-return]

    def kinds(self, namespace: str, ids: Sequence[str]) -> list[str]:
        """Memory kind of each of ``ids``; ``""`` for ids not in ``namespace``."""
        ns = self._ns.get(namespace)
        if ns is None or not ns.slot:
            return [""] * len(ids)
        names = [""] * (len(self._kinds) + 1)  # the last: ids not in the namespace
        for kind, code in self._kinds.items():
            names[code] = kind
        slot = ns.slot
        at = np.fromiter(map(slot.get, ids, repeat(-1)), np.int64, len(ids))
        codes = np.where(at >= 0, ns.kind[at], len(self._kinds)).tolist()
        return [names[c] for c in codes]

    def seqs(self, namespace: str, ids: Sequence[str]) -> list[int]:
        """Write sequence number of each of ``ids`` (all in ``namespace``)."""
        ns = self._ns[namespace]
        return [int(ns.seq[ns.slot[m]]) for m in ids]

    def neighbours(
        self,
        namespace: str,
        ids: Iterable[str],
        window: int,
        gap: float,
        allowed: Collection[str] | None = None,
    ) -> dict[str, tuple[str, ...]]:
        """Each of ``ids``' neighbours in time, within ``window`` and session ``gap``.

        See :func:`~norax_core.signals.context.neighbour_map`. The namespace's time order is
        computed once and kept until its next write. With ``allowed`` (a search's filter)
        the neighbours are taken among those memories only, as if the others did not exist:
        an excluded memory neither takes a neighbour slot nor bridges a session gap.
        """
        if namespace not in self._ns or window <= 0:
            return {}
        if allowed is not None:
            ordered, times, pos = self.filtered_timeline(namespace, allowed)
            return neighbour_map(ordered, times, window, gap, wanted=ids, pos=pos)
        # An id's neighbours depend on the time order alone: kept with it (view_neighbours)
        ns = self._ns[namespace]
        ns.view()  # (its derived reads come with it)
        known = ns.derived.setdefault(("near", window, gap), {})
        asked = list(ids)
        todo = list(filterfalse(known.__contains__, asked))
        if todo:
            known.update(view_neighbours(ns, todo, window, gap))
        hits = list(filter(known.__contains__, asked))
        return dict(zip(hits, map(known.__getitem__, hits), strict=True))

    def sessions(
        self,
        namespace: str,
        ids: Sequence[str],
        gap: float,
        allowed: Collection[str] | None = None,
    ) -> list[int]:
        """Each of ``ids``' session in the namespace's timeline split at pauses over ``gap``.

        See :func:`~norax_core.signals.context.session_numbers`; with ``allowed`` (a search's
        filter) the timeline holds those memories only, as for :meth:`neighbours`. An id not
        in it gets a session of its own (a negative number).
        """
        if allowed is None and namespace in self._ns:
            return view_sessions(self._ns[namespace], ids, gap)
        _, times, pos = self.filtered_timeline(namespace, allowed)
        number = session_numbers(times, gap)
        return [number[pos[m]] if m in pos else -1 - i for i, m in enumerate(ids)]

    def session_positions(
        self,
        namespace: str,
        ids: Sequence[str],
        gap: float,
        allowed: Collection[str] | None = None,
    ) -> list[int]:
        """Each of ``ids``' position in its session (0: it opens it), as :meth:`sessions` splits.

        With ``allowed`` the timeline holds those memories only; an id not in it gets -1.
        """
        if allowed is None and namespace in self._ns:
            return view_positions(self._ns[namespace], ids, gap)
        _, times, pos = self.filtered_timeline(namespace, allowed)
        at = session_positions(times, gap)
        return [at[i] if i >= 0 else -1 for i in map(pos.get, ids, repeat(-1))]

    def filtered_timeline(
        self, namespace: str, allowed: Collection[str] | None
    ) -> tuple[list[str], list[float], dict[str, int]]:
        """:meth:`timeline` holding only the ``allowed`` memories (all of them: ``None``)."""
        ordered, times, pos = self.timeline(namespace)
        if allowed is not None:
            keep = sorted(pos[m] for m in allowed if m in pos)
            ordered, times = [ordered[i] for i in keep], [times[i] for i in keep]
            pos = {m: j for j, m in enumerate(ordered)}
        return ordered, times, pos

    def timeline(self, namespace: str) -> tuple[list[str], list[float], dict[str, int]]:
        """The namespace's ids in conversation order, their times and positions.

        Conversation order is time order; memories sharing a time follow the order they
        were written in (their ``seq``), then their ids. Computed once and kept until the
        namespace's next write; do not mutate.
        """
        ns = self._ns.get(namespace)
        if ns is None:
            return [], [], {}
        ordered, times, pos, _ = ns.ordered()
        return ordered, times, pos

    def sequence(self, namespace: str) -> tuple[list[str], list[float], list[int]]:
        """The namespace's ids in conversation order, their times and write sequence numbers.

        What :func:`~norax_core.signals.context.batch_preceding` and
        :func:`~norax_core.signals.context.following` place a write in; do not mutate.
        """
        ns = self._ns.get(namespace)
        if ns is None:
            return [], [], []
        ordered, times, _, seqs = ns.ordered()
        return ordered, times, seqs

    def _scores(self, ns: _Namespace, now: float, idx: np.ndarray) -> np.ndarray:
        taus = self._taus  # kinds are only added (codes never change): kept per kind count
        if taus is None or len(taus) != max(len(self._kinds), 1):
            taus = np.empty(max(len(self._kinds), 1), dtype=np.float64)
            for kind, code in self._kinds.items():
                taus[code] = self._tau_for(kind)
            self._taus = taus
        return decay((now - ns.ts[idx]) / SECONDS_PER_DAY, taus[ns.kind[idx]])

    def top(self, query: Query, n: int) -> dict[str, float]:
        """The ``n`` memories with the highest recency score (the most recent, per kind)."""
        ns = self._ns.get(query.namespace)
        if ns is None or n <= 0:
            return {}
        if query.allowed is None:
            idx = np.flatnonzero(ns.alive[: ns.n])
        else:
            idx = np.array(
                sorted(ns.slot[m] for m in query.allowed if m in ns.slot), dtype=np.int64
            )
        if idx.size == 0:
            return {}
        s = self._scores(ns, query.now, idx)
        if idx.size > n:
            part = np.argpartition(-s, n - 1)[:n]
            idx, s = idx[part], s[part]
        return {ns.ids[i]: float(v) for i, v in zip(idx.tolist(), s.tolist(), strict=True)}

    def score(self, query: Query, ids: Sequence[str]) -> dict[str, float]:
        """Recency score of each id (0.0 for ids not in the namespace or filter)."""
        ns = self._ns.get(query.namespace)
        if ns is None:
            return dict.fromkeys(ids, 0.0)
        get, allowed = ns.slot.get, query.allowed
        if allowed is None:
            at = np.fromiter(map(get, ids, repeat(-1)), dtype=np.int64, count=len(ids))
        else:
            at = np.array([get(m, -1) if m in allowed else -1 for m in ids], dtype=np.int64)
        known = at >= 0
        values = np.zeros(at.size, dtype=np.float64)
        if known.any():  # one pass over the ids; the scores only of those it knows
            values[known] = self._scores(ns, query.now, at[known])
        return dict(zip(ids, values.tolist(), strict=True))


def view_neighbours(
    ns: _Namespace, ids: Sequence[str], window: int, gap: float
) -> dict[str, tuple[str, ...]]:
    """:func:`~norax_core.signals.context.neighbour_map` of the live ``ids``, from the view.

    The same neighbours: up to ``window`` each side, nearest first, before then after, none
    across a step in time that is not ``<= gap`` (so NaN times part, as there). Read from
    :meth:`_Namespace.view` as int arrays, with the part of the timeline each place is in (kept
    per ``gap``): a part is a run of places no such step separates.
    """
    order, rank = _view_lists(ns)
    part: Sequence[int] | None = ns.derived.get(("parts", gap))
    if part is None:
        times = ns.view()[2]
        at = np.zeros(len(order), np.int64)
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, a step that parts them
            np.cumsum(~(np.diff(times) <= gap), out=at[1:])
        part = ns.derived[("parts", gap)] = _ints(at)
    slot, names, n = ns.slot, ns.ids, len(order)
    out: dict[str, tuple[str, ...]] = {}
    for m in ids:
        k = slot.get(m)
        if k is None:
            continue
        i = rank[k]
        p = part[i]
        found: list[str] = []
        j = i
        while j > 0 and i - j < window and part[j - 1] == p:
            j -= 1
            found.append(names[order[j]])
        j = i
        while j < n - 1 and j - i < window and part[j + 1] == p:
            j += 1
            found.append(names[order[j]])
        out[m] = tuple(found)
    return out


def view_positions(ns: _Namespace, ids: Sequence[str], gap: float) -> list[int]:
    """Each of ``ids``' position in its session, as ``session_split`` splits (-1: none).

    Read from :meth:`_Namespace.view` with each place's position (:func:`_view_split`).
    """
    _, rank = _view_lists(ns)
    place = _view_split(ns, gap)[1]
    return [-1 if k is None else place[rank[k]] for k in map(ns.slot.get, ids)]


def view_sessions(ns: _Namespace, ids: Sequence[str], gap: float) -> list[int]:
    """Each of ``ids``' session, as :func:`session_numbers` numbers them (``-1 - i``: none).

    Read from :meth:`_Namespace.view` with each place's session (:func:`_view_split`).
    """
    _, rank = _view_lists(ns)
    number = _view_split(ns, gap)[0]
    slot = ns.slot.get
    return [-1 - i if k is None else number[rank[k]] for i, k in enumerate(map(slot, ids))]


def _view_split(ns: _Namespace, gap: float) -> tuple[Sequence[int], Sequence[int]]:
    """Each place's session and position in it at ``gap`` (``session_split``; kept per gap)."""
    got: tuple[Sequence[int], Sequence[int]] | None = ns.derived.get(("split", gap))
    if got is None:
        numbers, positions = session_arrays(ns.view()[2], gap)
        got = ns.derived[("split", gap)] = (_ints(numbers), _ints(positions))
    return got


def _view_lists(ns: _Namespace) -> tuple[Sequence[int], Sequence[int]]:
    """The view's order and ranks as int arrays (kept with it): a search reads a few places.

    ``array('q')``: one copy of the buffer (no int object per place, as ``tolist`` makes),
    read item by item almost as fast as a list.
    """
    ns.view()
    got: tuple[Sequence[int], Sequence[int]] | None = ns.derived.get("lists")
    if got is None:
        order, rank, _ = ns.view()
        got = ns.derived["lists"] = (_ints(order), _ints(rank))
    return got


def _ints(a: np.ndarray) -> Sequence[int]:
    """``a``'s integers as an ``array('q')`` (numpy's ``q`` is the same C type)."""
    return array("q", np.ascontiguousarray(a, dtype="q").tobytes())
