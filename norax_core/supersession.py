"""Supersession links: which newer memory restates an attribute of an older one.

"The deadline moved to Friday" supersedes "the deadline is Monday": both speak of the same
things (shared entities and words) and the newer one says that something changed: outright
(a change cue: *moved*, *switched*, *instead*, *rescheduled*, *no longer*, ...) or with a
value cue (*new*, *recently*, *increased*, *updated*, ...) and a quantity the two give
different values ("coverage recently improved to 78 %" after "coverage is 65 %",
:func:`value_changed`). :func:`link_score` and the rule decide that for one pair, from what
the derived indexes already hold of each memory (tokens in text order, entities, creation
time, write sequence number), without an LLM and without the embeddings;
:class:`SupersessionIndex` keeps, per namespace, each memory's links to the older memories it
supersedes, updated by every write and delete, so that ranking
(:mod:`norax_core.stages.supersede`) can lift the newer memory above the older one.

The links are a pure function of a namespace's rows: a memory ``j`` with an update cue
supersedes the (at most ``max_links``) older memories ``i`` of its namespace that share an
entity and at least ``min_shared`` other words with it (and, if ``j``'s only cues are value
cues, a quantity with another value; and ``i`` is not the memory written just before ``j``,
which ``j`` most likely answers), best :func:`link_score` first, with a score of at least
``min_score``. Writing or deleting a memory re-derives the links of exactly the memories
whose answer can change, so the index always equals a rebuild from its rows (``norax check``
compares them; a store written under an earlier rule rebuilds its sidecar, links included,
at open: sidecar schema 4). The rule itself is in :mod:`norax_core.link_rule`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from norax_core.latest import NOW_WORDS, SHIFT_WORDS
from norax_core.link_rule import (
    CHANGE_CUE_WORDS,
    CUE_WORDS,
    NUMBER_WORDS,
    VALUE_CUE_WORDS,
    LinkRule,
    Quantities,
    link_score,
    quantities,
    value_changed,
)
from norax_core.sidecar import IndexRow, Sidecar
from norax_core.snapshot_format import SEP, Strings, pack_strs, unpack_strs
from norax_core.tokenize import Tokenizer

__all__ = [
    "CHANGE_CUE_WORDS",
    "CUE_WORDS",
    "NUMBER_WORDS",
    "VALUE_CUE_WORDS",
    "LinkRule",
    "SupersessionIndex",
    "derive_links",
    "link_score",
    "quantities",
    "value_changed",
]

Links = dict[str, tuple[str, ...]]
"""``{newer id: the older ids it supersedes}``; an empty tuple means none (any more)."""
Stored = dict[str, tuple[str, tuple[str, ...]]]
"""Links in the sidecar's form: ``{newer id: (namespace, older ids)}``."""


Order = tuple[float, int, str]
"""``(created_at, seq, id)``: what "older" means."""
Key = tuple[float, float, int, str]
"""``(-score, -created_at, -seq, id)`` of a superseded memory: the smallest are linked."""


@dataclass(frozen=True)
class _Row:
    order: Order
    tokens: frozenset[str]
    entities: frozenset[str]
    cue: bool  # some update cue
    outright: bool  # a cue that says the change without a value
    words: tuple[str, ...]  # its tokens in text order (its quantities are read on demand)


class _Space:
    """One namespace's rows and links."""

    def __init__(self) -> None:
        self.rows: dict[str, _Row] = {}
        self.postings: dict[str, set[str]] = {}  # entity -> ids
        self.older: Links = {}  # newer -> older ids (only non-empty)
        self.newer: dict[str, set[str]] = {}  # older -> newer ids
        self.last: Order | None = None  # at least the newest row's order
        self.keys: dict[str, list[Key]] = {}  # newer -> its links' keys, best first
        self.values: dict[str, Quantities] = {}  # the quantities read so far (see _values)

    def __getattr__(self, name: str) -> Any:
        # A space restored from arrays (from_arrays) builds its rows and links at first use.
        if name in _SPACE_FIELDS and "_packed" in self.__dict__:
            self._thaw()
            return self.__dict__[name]
        raise AttributeError(name)

    def ids(self) -> list[str]:
        """The ids of its rows (without building them)."""
        packed = self.__dict__.get("_packed")
        return list(self.rows) if packed is None else packed[0]

    def tokens(self, ids: Iterable[str]) -> list[frozenset[str]]:
        """Each memory's tokens (empty for an unknown id), without building its rows.

        A search reads them for its candidates only: a space restored from arrays answers
        from them (each memory's set made once), and builds its rows at a write.
        """
        packed = self.__dict__.get("_packed")
        if packed is None:
            rows = self.rows
            return [r.tokens if (r := rows.get(m)) is not None else frozenset() for m in ids]
        cache = self.__dict__.get("_tokens")
        if cache is None:
            made: dict[str, frozenset[str]] = {}
            at = dict(zip(packed[0], range(len(packed[0])), strict=True))
            cache = self.__dict__["_tokens"] = (made, at, _row_strs(packed[2], "tokens"))
        made, at, row = cache
        out = []
        for m in ids:
            got = made.get(m)
            if got is None:
                i = at.get(m)
                if i is None:
                    got = frozenset()
                else:
                    got = made[m] = frozenset(row(i))
            out.append(got)
        return out

    def newer_of(self) -> dict[str, set[str]]:
        """``older -> newer ids``, without building its rows (see :meth:`tokens`)."""
        packed = self.__dict__.get("_packed")
        if packed is None:
            return self.newer
        got: dict[str, set[str]] | None = self.__dict__.get("_newer")
        if got is None:
            a = packed[2]
            got = {}
            self.__dict__["_newer"] = got
            linked = unpack_strs(a["linked_s"], a["linked_o"])
            for m, older in zip(linked, _unnest(a, "older"), strict=True):
                for o in older:
                    got.setdefault(o, set()).add(m)
        return got

    def to_arrays(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Rows, links and link keys as flat arrays, for :meth:`from_arrays`.

        The quantities read so far are a cache, left out.
        """
        packed = self.__dict__.get("_packed")
        if packed is not None:
            return packed[1], packed[2]
        ids = list(self.rows)
        rows = [self.rows[m] for m in ids]
        linked = list(self.older)
        keyed = list(self.keys)
        keys = [k for m in keyed for k in self.keys[m]]
        arrays = {
            **_strs("ids", ids),
            **_strs("order_s", [r.order[2] for r in rows]),
            "order_f": np.array([r.order[0] for r in rows], dtype=np.float64),
            "order_i": np.array([r.order[1] for r in rows], dtype=np.int64),
            "flags": np.array([[r.cue, r.outright] for r in rows], dtype=np.bool_).reshape(-1, 2),
            **_nested("tokens", [sorted(r.tokens) for r in rows]),
            **_nested("entities", [sorted(r.entities) for r in rows]),
            **_nested("words", [list(r.words) for r in rows]),
            **_strs("linked", linked),
            **_nested("older", [list(self.older[m]) for m in linked]),
            **_strs("keyed", keyed),
            "key_ptr": _ptr([len(self.keys[m]) for m in keyed]),
            "key_f": np.array([k[:2] for k in keys], dtype=np.float64).reshape(-1, 2),
            "key_i": np.array([k[2] for k in keys], dtype=np.int64),
            **_strs("key_s", [k[3] for k in keys]),
        }
        last = None if self.last is None else list(self.last)
        return {"last": last}, arrays

    @classmethod
    def from_arrays(
        cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], strs: Strings | None = None
    ) -> _Space:
        """A space of :meth:`to_arrays`, whose rows are built at first use.

        ``strs``: the snapshot's string decoder (shared with its other indexes).

        Raises:
            ValueError: The arrays do not fit together.
        """
        space = cls.__new__(cls)
        ids = (strs if strs is not None else unpack_strs)(arrays["ids_s"], arrays["ids_o"])
        if len(ids) != arrays["order_f"].size or arrays["tokens_ptr"].size != len(ids) + 1:
            raise ValueError("the supersession arrays do not fit together")
        space.__dict__["_packed"] = (ids, dict(meta), dict(arrays))
        return space

    def _thaw(self) -> None:
        ids, meta, a = self.__dict__.pop("_packed")
        self.__dict__.pop("_tokens", None)
        self.__dict__.pop("_newer", None)
        order_s = unpack_strs(a["order_s_s"], a["order_s_o"])
        tokens, entities, words = (_unnest(a, k) for k in ("tokens", "entities", "words"))
        flags = a["flags"].tolist()
        self.rows = {
            m: _Row((f, i, o), frozenset(t), frozenset(e), cue, outright, tuple(w))
            for m, f, i, o, t, e, w, (cue, outright) in zip(
                ids,
                a["order_f"].tolist(),
                a["order_i"].tolist(),
                order_s,
                tokens,
                entities,
                words,
                flags,
                strict=True,
            )
        }
        self.postings = {}
        for m, row in self.rows.items():
            for e in row.entities:
                self.postings.setdefault(e, set()).add(m)
        self.older, self.newer = {}, {}
        linked = unpack_strs(a["linked_s"], a["linked_o"])
        for m, older in zip(linked, _unnest(a, "older"), strict=True):
            self.set_links(m, tuple(older))
        last = meta.get("last")
        self.last = None if last is None else (float(last[0]), int(last[1]), str(last[2]))
        keyed = unpack_strs(a["keyed_s"], a["keyed_o"])
        key_s = unpack_strs(a["key_s_s"], a["key_s_o"])
        flat = [
            (f1, f2, i, s)
            for (f1, f2), i, s in zip(a["key_f"].tolist(), a["key_i"].tolist(), key_s, strict=True)
        ]
        cuts = a["key_ptr"].tolist()
        self.keys = {m: flat[x:y] for m, x, y in zip(keyed, cuts, cuts[1:], strict=False)}
        self.values = {}

    def sharing(self, row: _Row) -> set[str]:
        """Ids of the memories that share an entity with ``row``."""
        out: set[str] = set()
        for e in row.entities:
            out |= self.postings.get(e, set())
        return out

    def set_links(self, mid: str, older: tuple[str, ...]) -> None:
        for o in self.older.pop(mid, ()):
            got = self.newer.get(o)
            if got is not None:
                got.discard(mid)
                if not got:
                    del self.newer[o]
        if older:
            self.older[mid] = older
            for o in older:
                self.newer.setdefault(o, set()).add(mid)


_SPACE_FIELDS = frozenset({"rows", "postings", "older", "newer", "last", "keys", "values"})


def _ptr(sizes: Sequence[int]) -> np.ndarray:
    ptr = np.zeros(len(sizes) + 1, dtype=np.int64)
    if sizes:
        np.cumsum(sizes, out=ptr[1:])
    return ptr


def _strs(name: str, items: Sequence[str]) -> dict[str, np.ndarray]:
    data, offsets = pack_strs(items)
    return {f"{name}_s": data, f"{name}_o": offsets}


def _nested(name: str, groups: Sequence[Sequence[str]]) -> dict[str, np.ndarray]:
    """Lists of strings as one string table and per-list offsets into it."""
    return {
        **_strs(name, [x for g in groups for x in g]),
        f"{name}_ptr": _ptr([len(g) for g in groups]),
    }


def _flat(arrays: Mapping[str, np.ndarray], name: str) -> tuple[list[str], list[int]]:
    """The strings of the nested array ``name`` and each row's start in them (one more: the end)."""
    flat = unpack_strs(arrays[f"{name}_s"], arrays[f"{name}_o"])
    cuts = arrays[f"{name}_ptr"].tolist()
    if not cuts or cuts[-1] != len(flat):
        raise ValueError(f"the supersession {name} do not fit together")
    return flat, cuts


def _row_strs(arrays: Mapping[str, np.ndarray], name: str) -> Callable[[int], list[str]]:
    """Row ``i``'s strings of the nested array ``name``, each row decoded when asked.

    The strings of :func:`_flat`'s ``flat[cuts[i] : cuts[i + 1]]``. Joined by NUL (see
    :func:`~norax_core.snapshot_format.pack_strs`), a row's bytes run from the separator
    before its first string to the one after its last (UTF-8 puts a 0 byte in no other
    character): a search decodes its candidates' rows, not the namespace's. Otherwise every
    string is decoded at the first call.

    Raises:
        ValueError: The arrays do not fit together.
    """
    data, offsets = arrays[f"{name}_s"], arrays[f"{name}_o"]
    cuts = arrays[f"{name}_ptr"].tolist()
    if len(offsets) != 2 or int(offsets[0]) != -1:
        flat, cuts = _flat(arrays, name)
        return lambda i: flat[cuts[i] : cuts[i + 1]]
    count = int(offsets[1])
    # each string's end (its separator; the text's end for the last), kept as an array
    ends = np.flatnonzero(np.r_[data, 0] == 0) if count else np.zeros(1, np.int64)
    if len(ends) != max(count, 1):
        raise ValueError("string count does not fit its text")
    if not cuts or cuts[-1] != count:
        raise ValueError(f"the supersession {name} do not fit together")

    def row(i: int) -> list[str]:
        a, b = cuts[i], cuts[i + 1]
        if a == b:
            return []
        start = int(ends[a - 1]) + 1 if a else 0
        return data[start : int(ends[b - 1])].tobytes().decode("utf-8").split(SEP)

    return row


def _unnest(arrays: Mapping[str, np.ndarray], name: str) -> list[list[str]]:
    flat, cuts = _flat(arrays, name)
    return [flat[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


class SupersessionIndex:
    """Per namespace, which memories supersede which (see the module docstring).

    Args:
        tokenizer: The store's tokenizer (tokenises :data:`CUE_WORDS` as the rows were).
        rule: The link rule.
    """

    def __init__(self, tokenizer: Tokenizer, rule: LinkRule | None = None) -> None:
        self.rule = rule or LinkRule()
        self.outright = frozenset(tokenizer(self.rule.cues))
        self.cues = self.outright | frozenset(tokenizer(self.rule.value_cues))
        self.numbers = frozenset(tokenizer(NUMBER_WORDS))
        # what latest wins' attribute rule reads beside the cues (norax_core.latest)
        self.now_words = frozenset(tokenizer(NOW_WORDS))
        self.shifts = frozenset(tokenizer(SHIFT_WORDS))
        self._spaces: dict[str, _Space] = {}

    # -- reads --------------------------------------------------------------------------

    def namespaces(self) -> set[str]:
        """Namespaces holding at least one memory."""
        return {ns for ns, s in self._spaces.items() if s.rows}

    def ids(self, namespace: str) -> set[str]:
        """The memories of ``namespace`` the index holds."""
        space = self._spaces.get(namespace)
        return set(space.rows) if space else set()

    def links(self, namespace: str) -> Links:
        """``{newer: older ids}`` of every memory of ``namespace`` that supersedes some."""
        space = self._spaces.get(namespace)
        return dict(space.older) if space else {}

    def older(self, namespace: str, mid: str) -> tuple[str, ...]:
        """The memories ``mid`` supersedes (empty if none)."""
        space = self._spaces.get(namespace)
        return space.older.get(mid, ()) if space else ()

    def words(self, namespace: str, ids: Iterable[str]) -> list[frozenset[str]]:
        """Each memory's tokens, as the store indexed them (empty for an unknown id)."""
        space = self._spaces.get(namespace)
        if space is None:
            return [frozenset() for _ in ids]
        return space.tokens(ids)

    def newer(
        self, namespace: str, ids: Iterable[str], allowed: frozenset[str] | None = None
    ) -> dict[str, tuple[str, ...]]:
        """The memories that supersede each of ``ids`` (sorted), among ``allowed`` if given.

        Ids without any are left out.
        """
        space = self._spaces.get(namespace)
        if space is None:
            return {}
        out = {}
        newer = space.newer_of()
        for mid in ids:
            got = newer.get(mid)
            if got:
                keep = sorted(got if allowed is None else got & allowed)
                if keep:
                    out[mid] = tuple(keep)
        return out

    # -- the rule -----------------------------------------------------------------------

    def _row(self, r: IndexRow) -> _Row:
        tokens = frozenset(r.tokens)
        cue = not tokens.isdisjoint(self.cues)
        outright = cue and not tokens.isdisjoint(self.outright)
        return _Row(
            (r.created_at, r.seq, r.id), tokens, frozenset(r.entities), cue, outright, r.tokens
        )

    def _values(self, space: _Space, mid: str) -> Quantities:
        """A memory's :func:`quantities`, read when a link first needs them.

        Only a pair whose newer memory has value cues alone compares quantities: most rows
        never do, and reading them all cost most of a namespace's load.
        """
        got = space.values.get(mid)
        if got is None:
            got = space.values[mid] = quantities(space.rows[mid].words, self.cues, self.numbers)
        return got

    def _key(self, space: _Space, mid: str, other: str) -> Key | None:
        """How ``mid`` ranks ``other`` as a memory it supersedes (smaller first), or ``None``."""
        row, o = space.rows[mid], space.rows[other]
        if o.order >= row.order or not (row.entities & o.entities):
            return None
        if len((row.tokens & o.tokens) - self.cues) < self.rule.min_shared:
            return None
        if self.rule.skip_reply and row.order[1] - o.order[1] == 1:
            return None
        if not row.outright and not value_changed(
            self._values(space, mid), self._values(space, other)
        ):
            return None
        s = link_score(row.tokens, o.tokens, row.entities, o.entities)
        if s < self.rule.min_score:
            return None
        # best first; among equals the one closest in time, then by id
        return (-s, -o.order[0], -o.order[1], other)

    def _derive(self, space: _Space, mid: str) -> list[Key]:
        """The keys of the older memories ``mid`` supersedes, from the namespace as it is."""
        if not space.rows[mid].cue:
            return []
        near = space.sharing(space.rows[mid])
        found = [k for other in near if (k := self._key(space, mid, other)) is not None]
        return sorted(found)[: self.rule.max_links]

    def _keys(self, space: _Space, mid: str) -> list[Key]:
        """The keys of ``mid``'s current links (recomputed for links read from the sidecar)."""
        got = space.keys.get(mid)
        if got is None:
            got = sorted(k for o in space.older.get(mid, ()) if (k := self._key(space, mid, o)))
            space.keys[mid] = got
        return got

    def _set(self, space: _Space, mid: str, keys: list[Key], changed: Links) -> None:
        older = tuple(sorted(k[3] for k in keys))
        space.keys[mid] = keys
        if older != space.older.get(mid, ()):
            space.set_links(mid, older)
            changed[mid] = older

    # -- writes -------------------------------------------------------------------------

    def add(self, namespace: str, rows: Sequence[IndexRow]) -> Links:
        """Index ``rows`` of ``namespace`` (replacing same ids) and re-derive what changes.

        The new memories' own links are derived; a newer memory already held only compares
        its links with each new one (the others cannot change), so a batch costs about what
        its own memories' derivations do, in any time order.

        Returns:
            The new links of every memory whose links changed (empty tuple: none any more).
        """
        changed: Links = {}
        held = self.ids(namespace)
        replaced = [r.id for r in rows if r.id in held]
        if replaced:
            changed.update(self.remove(namespace, replaced))
        space = self._spaces.setdefault(namespace, _Space())
        newest = space.last
        added = []
        for r in rows:
            row = self._row(r)
            space.rows[r.id] = row
            added.append((r.id, row))
            for e in row.entities:
                space.postings.setdefault(e, set()).add(r.id)
            space.last = max(space.last or row.order, row.order)
        fresh = {mid for mid, _ in added}
        for mid, _ in added:
            self._set(space, mid, self._derive(space, mid), changed)
        limit = self.rule.max_links
        for mid, row in added:
            if newest is None or row.order >= newest:  # nothing held before is newer
                continue
            for m in sorted(space.sharing(row) - fresh):
                if not space.rows[m].cue or space.rows[m].order <= row.order:
                    continue
                key = self._key(space, m, mid)
                keys = self._keys(space, m)
                if key is not None and (len(keys) < limit or key < keys[-1]):
                    self._set(space, m, sorted([*keys, key])[:limit], changed)
        return changed

    def remove(self, namespace: str, ids: Iterable[str]) -> Links:
        """Forget ``ids`` of ``namespace``; memories that superseded them are re-derived.

        Deleting the newer memory un-supersedes the older one. Returns what changed, as
        :meth:`add` does (a removed memory's entry is an empty tuple).
        """
        space = self._spaces.get(namespace)
        changed: Links = {}
        if space is None:
            return changed
        redo: set[str] = set()
        for mid in ids:
            row = space.rows.pop(mid, None)
            if row is None:
                continue
            for e in row.entities:
                post = space.postings.get(e)
                if post is not None:
                    post.discard(mid)
                    if not post:
                        del space.postings[e]
            space.set_links(mid, ())
            space.keys.pop(mid, None)
            space.values.pop(mid, None)
            changed[mid] = ()
            redo |= space.newer.pop(mid, set())
        for m in sorted(redo):
            if m in space.rows:
                self._set(space, m, self._derive(space, m), changed)
        if not space.rows:
            del self._spaces[namespace]
        return changed

    # -- what the store persists --------------------------------------------------------

    def written(self, rows: Sequence[IndexRow], home: Mapping[str, str]) -> Stored:
        """Index a write's rows (of loaded namespaces): the links it changes, to store with them.

        ``home`` is each known id's namespace before the write (a row may move). Every
        row's own links are included, so a re-derived row rewrites them (repair relies on it).
        """
        out: Stored = {}
        groups: dict[str, list[IndexRow]] = {}
        for r in rows:
            old = home.get(r.id)
            if old is not None and old != r.namespace:  # moves out of its namespace
                out.update(_tagged(old, self.remove(old, [r.id])))
            groups.setdefault(r.namespace, []).append(r)
        for ns, group in groups.items():  # one batch per namespace: see add
            out.update(_tagged(ns, self.add(ns, group)))
        for r in rows:
            out[r.id] = (r.namespace, self.older(r.namespace, r.id))
        return out

    def removed(self, ids: Sequence[str], home: Mapping[str, str]) -> Stored:
        """Forget a delete's ids (of loaded namespaces): the links it changes, to store."""
        out: Stored = {}
        for mid in ids:
            ns = home.get(mid)
            if ns is not None:
                out.update(_tagged(ns, self.remove(ns, [mid])))
        return out

    def loaded(self, namespace: str, rows: Sequence[IndexRow], sidecar: Sidecar | None) -> None:
        """Hold a namespace being loaded, with its links as ``sidecar`` stored them.

        Links are re-derived (and stored) for the memories written while the namespace was
        not loaded (marked unlinked in the sidecar) and for those whose stored links point to
        a memory since deleted or moved. Without a sidecar that holds every memory (a
        client's is a cache), all are derived.
        """
        if sidecar is None:  # every link derived: one pass, as derive_links does
            self.drop(namespace)
            self.add(namespace, rows)
            return
        present = {r.id for r in rows}
        stored = {m: older for m, (_, older) in sidecar.links(namespace).items()}
        marked = set(sidecar.unlinked(namespace))
        broken = {m for m, older in stored.items() if any(o not in present for o in older)}
        redo = [r for r in rows if r.id in marked or r.id in broken]
        self.load(rows, stored)
        if not (redo or marked):
            return
        links = _tagged(namespace, self.add(namespace, redo))
        for r in redo:
            links[r.id] = (namespace, self.older(namespace, r.id))
        sidecar.relink(namespace, links)

    def drop(self, namespace: str) -> None:
        """Forget a whole namespace (for a store that unloads it)."""
        self._spaces.pop(namespace, None)

    def export(self, namespace: str) -> object | None:
        """The namespace's rows and links as they are, for :meth:`restore`."""
        return self._spaces.get(namespace)

    def restore(self, namespace: str, state: object) -> None:
        """Hold a namespace exported by :meth:`export` (under the same rule)."""
        if not isinstance(state, _Space):
            raise TypeError("not an exported supersession namespace")
        self._spaces[namespace] = state

    def load(self, rows: Iterable[IndexRow], links: Mapping[str, Sequence[str]]) -> None:
        """Hold ``rows`` with their persisted ``links`` (nothing re-derived: a store's open).

        Links of ids the rows do not hold, or pointing to such ids, are skipped (``norax
        check`` reports them as stale).
        """
        home: dict[str, str] = {}
        for r in rows:
            space = self._spaces.setdefault(r.namespace, _Space())
            row = self._row(r)
            space.rows[r.id] = row
            space.last = max(space.last or row.order, row.order)
            home[r.id] = r.namespace
            for e in row.entities:
                space.postings.setdefault(e, set()).add(r.id)
        for mid, older in links.items():
            ns = home.get(mid)
            if ns is not None:
                keep = tuple(o for o in older if home.get(o) == ns)
                if keep:
                    self._spaces[ns].set_links(mid, keep)


def _tagged(namespace: str, links: Mapping[str, tuple[str, ...]]) -> Stored:
    return {m: (namespace, older) for m, older in links.items()}


def derive_links(
    rows: Iterable[IndexRow], tokenizer: Tokenizer, rule: LinkRule | None = None
) -> dict[str, Links]:
    """Every namespace's links derived from scratch: what the index must equal."""
    index = SupersessionIndex(tokenizer, rule)
    by_ns: dict[str, list[IndexRow]] = {}
    for r in rows:
        by_ns.setdefault(r.namespace, []).append(r)
    for ns, group in by_ns.items():
        index.add(ns, group)
    return {ns: index.links(ns) for ns in by_ns}
