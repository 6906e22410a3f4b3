"""The entity graph: per-namespace co-occurrence graphs, postings and communities.

:class:`EntityGraph` holds one co-occurrence graph per namespace: entities are nodes (with the
number of memories that mention them), two entities of the same memory are joined by an edge
whose weight counts such memories, and an inverted index maps each entity to its memories.
Namespaces share nothing (ids, counts, IDF, edges, communities, caches), so writes to one can
never change a score in another.

Community policy. Louvain (:func:`louvain_communities`: igraph's C implementation, fixed
seed) partitions each namespace's graph. Between
runs, an entity seen for the first time joins the community it has the most edge weight to
(a new one if none) when the namespace is next read; removed entities just leave. Every add,
replace or remove of a memory is one change; once a namespace's changes since its last run
exceed ``refresh_fraction`` (10 %) of its memories, its next read reruns Louvain for that
namespace only. It runs on the ``louvain_max_edges`` heaviest edges only (networkx's
pure-Python Louvain, the fallback, takes seconds for 10^5 edges); entities left out are then
placed like new ones.

Off the query path. A namespace with at least ``background_min_edges`` edges is recomputed in
the graph's worker thread: the read that finds it stale copies the outer adjacency (a C-level
list copy, about a millisecond at 10^5 memories) and goes on with the communities it has; the
worker builds the Louvain graph and partition and hands back a community per entity id; the
next read adopts it (a swap of one array) and places the entities that appeared or went since
the copy like new ones. A query thus never waits for Louvain, nor for the lock: the worker
takes none that a query holds. Staleness is bounded: the communities a query uses come from a
run started when the namespace last passed ``refresh_fraction`` of changes, at most one run
(seconds) old, plus the placement of every entity seen since. Smaller namespaces (milliseconds)
are recomputed inline, so their scores never depend on thread timing. A store's graph
(``reads_adopt=False``) adopts a finished run only when a search of the namespace begins
(:meth:`EntityGraph.begin`), never in the middle of one: a search reads one set of
communities, so a namespace's first search (the one that submits the run) reads the
communities it had, in every process, whenever the worker finishes (it used to adopt the run
at whichever of its reads came after the run ended: the same store gave different first
searches). A namespace dropped (evicted) while its run is in flight takes the run's
communities at its next read if its graph is unchanged, and is otherwise still stale and runs
again. :meth:`EntityGraph.refresh`
and :meth:`EntityGraph.communities` are synchronous; :meth:`EntityGraph.close` stops the worker.
A rebuilt graph thus runs Louvain once, after its first query, unless
:meth:`EntityGraph.load_state_dict` supplied communities saved for the identical graph (same
fingerprint).

Query entities. A query's entities only count if they are nodes of the namespace's graph, so
:meth:`EntityGraph.match_query` finds them without a model: it matches the query's word
n-grams, normalised like stored entities, against the graph's vocabulary (see
:func:`match_query`).

The graph is derived data, rebuilt from ``(namespace, id, entities)`` triples with
:meth:`EntityGraph.add_many`.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import re
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, combinations, count
from typing import Any

import networkx as nx
import numpy as np

from norax_core.entities import find_code_identifiers, normalize_entity, word_key

_normalized = lru_cache(maxsize=1 << 16)(normalize_entity)
"""normalize_entity for query n-grams: the same words recur across queries (a pure function)."""

__all__ = [
    "CommunityFn",
    "EntityGraph",
    "NamespaceGraph",
    "louvain_communities",
    "singular_forms",
    "match_query",
]

logger = logging.getLogger(__name__)


def _import_igraph() -> Any:
    """The igraph module (``None`` if missing), imported without its matplotlib drawing backend.

    igraph's import loads ``matplotlib.pyplot`` when matplotlib is installed: ~0.4 s of CPU
    against ~0.03 s without. Imported lazily by a namespace's first community run, that
    cost fell on a query (issue 22: the worker thread took it from the next cold
    namespace's first query). So igraph is imported with this module, and with matplotlib
    hidden unless something imported it already: Norax never draws with igraph (igraph's
    own matplotlib plotting is then unavailable in the process; import igraph before Norax
    to keep it).
    """
    hide = "matplotlib" not in sys.modules
    if hide:
        sys.modules["matplotlib"] = None  # type: ignore[assignment]  # import fails: skipped
    try:
        import igraph
    except ImportError:  # pragma: no cover - igraph is a core dependency
        return None
    finally:
        if hide:
            del sys.modules["matplotlib"]
    return igraph


igraph = _import_igraph()

CommunityFn = Callable[[nx.Graph, int], Iterable[Iterable[str]]]
"""Partitions a weighted graph (nodes are entity names) given a seed: ``(graph, seed) ->
groups of names``."""

_IGRAPH_LOCK = threading.Lock()  # igraph's random generator is global


def louvain_communities(graph: nx.Graph, seed: int) -> list[set[str]]:
    """Louvain communities of ``graph`` (edge attribute ``weight``), deterministic for a seed.

    Runs igraph's C implementation (``community_multilevel``) when igraph is installed, else
    networkx's pure-Python one. On the same graphs igraph is several times faster (3.6 x and
    9 x on the two graphs of ``benchmarks/results/communities.json``) with the same modularity;
    the partitions of the two differ in detail (each is deterministic for a seed and a graph).
    """
    if igraph is None:  # pragma: no cover - igraph is a core dependency
        return list(nx.community.louvain_communities(graph, weight="weight", seed=seed))
    import random

    nodes = list(graph.nodes)
    index = {name: i for i, name in enumerate(nodes)}
    edges = list(graph.edges(data="weight", default=1.0))
    g = igraph.Graph(n=len(nodes), edges=[(index[u], index[v]) for u, v, _ in edges])
    g.es["weight"] = [float(w) for _, _, w in edges]
    with _IGRAPH_LOCK:
        igraph.set_random_number_generator(random.Random(seed))
        try:
            membership = g.community_multilevel(weights="weight").membership
        finally:
            igraph.set_random_number_generator(random)
    groups: dict[int, set[str]] = {}
    for name, c in zip(nodes, membership, strict=True):
        groups.setdefault(c, set()).add(name)
    return list(groups.values())


STATE_VERSION = 1
LOUVAIN_SEED = 42
MAX_EDGE_ENTITIES = 64
"""Only the first this many entities of a memory get co-occurrence edges (bounds one huge
text at 2,016 edges); all of them are still indexed."""
_CLOCK = count(1)  # versions unique across spaces: a recreated namespace misses the cache


def next_version() -> int:
    """A version no namespace graph has had (a restored one starts with a fresh one)."""
    return next(_CLOCK)


BACKGROUND_MIN_EDGES = 2_000
"""Namespaces with at least this many edges recompute communities in the worker thread."""


MAX_QUERY_WORDS = 6
"""Query n-grams longer than this many words are not matched (nor longer than the namespace's
longest entity)."""
_WORD_RE = re.compile(r"\S+")
_EDGE = " \t\n\"'`()[]{}<>,;:!?.*~|\\/-\u2013\u2014\u2026"
_PARTS_RE = re.compile(r"[-/]")


_IRREGULAR = {
    "children": "child",
    "men": "man",
    "women": "woman",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
    "people": "person",
}
_NOT_PLURAL = ("ss", "us", "is", "news", "series", "species")
# A lowercase query word right after one of these is read as a verb ("to implement", "can you
# list", "did I start"), as spaCy would tag it: not an entity of the query.
_VERB_CONTEXT = frozenset(
    [
        "to",
        "i",
        "you",
        "we",
        "they",
        "he",
        "she",
        "it",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "might",
        "must",
        "do",
        "does",
        "did",
        "don't",
        "didn't",
        "not",
        "please",
        "let's",
        "me",
        "us",
    ]
)


def singular_forms(word: str) -> list[str]:
    """Candidate singulars of an English plural, most likely first (``[]`` if none).

    Stored common nouns are lemmatised by spaCy ("wallets" -> ``wallet``); a query is not,
    so the matcher tries these for the last word of an n-gram.

    Examples:
        >>> singular_forms("batteries"), singular_forms("glasses"), singular_forms("hoodies")
        (['battery', 'batterie'], ['glasse', 'glass'], ['hoody', 'hoodie'])
        >>> singular_forms("children"), singular_forms("boss"), singular_forms("cat")
        (['child'], [], [])
    """
    if word in _IRREGULAR:
        return [_IRREGULAR[word]]
    if len(word) < 4 or not word.endswith("s") or word.endswith(_NOT_PLURAL):
        return []
    out = [word[:-3] + "y"] if word.endswith("ies") and len(word) > 4 else []
    out.append(word[:-1])
    if word.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        out.append(word[:-2])
    return out


LOOKUP_MEMO = 65_536
"""Query n-gram look-ups kept per namespace graph version (see :func:`match_query`)."""


def _new_memo(_: object) -> dict[str, tuple[str, ...]]:
    return {}


def match_query(text: str, space: NamespaceGraph) -> list[str]:
    """The entities of ``space`` that a query names, in query order, without a model.

    The query's code identifiers (the same regexes as at write time) are looked up first;
    then its whitespace-separated word n-grams, longest first (at most the namespace's longest
    entity, and :data:`MAX_QUERY_WORDS`), each normalised with
    :func:`~norax_core.entities.normalize_entity` and looked up with its last word made
    singular where the graph has that form (:meth:`NamespaceGraph.lookup`), as spaCy
    lemmatises stored nouns. A matched n-gram's words are not matched again ("New York" does
    not also give ``york``), except a word the graph links to the whole name: written entities
    of a person's full name also yield its parts ("colby smith", ``colby``, ``smith``), and so
    does the match. A hyphenated or slashed word that matches nothing as a whole is tried part
    by part ("wallet-related" -> ``wallet``).

    Two rules stand in for the part-of-speech tags spaCy uses at write time, for single
    lowercase words only (names and identifiers always count): a word right after "to", a
    pronoun or an auxiliary is a verb ("how to *implement*", "can you *list*"), a word in
    "-ed" is a participle ("the *updated* deadline"), and a word right before another matched
    word is a modifier of that noun ("*new* columns", "*security* features"), like the compound
    modifiers write-time extraction skips. For the same reason a lowercase compound that is a
    node ("weather app") counts by its head (``app``) when the graph has it.

    Every result is a node of the graph, so the graph signal scores exactly as if a model had
    found them; what a model would have found that is not in the graph never counts anyway.
    Cost: a few dictionary look-ups per n-gram (tens of microseconds for a question).

    Examples:
        >>> g = EntityGraph()
        >>> g.add_many("ns", [("a", ["colby smith", "colby", "wallet"]), ("b", ["new york"])])
        >>> g.match_query("ns", "Did Colby Smith fly to New York with the wallets?")
        ['colby smith', 'colby', 'new york', 'wallet']
    """
    found: list[tuple[int, str]] = []
    words = [(m.start(), m.end(), m.group()) for m in _WORD_RE.finditer(text)]
    used = bytearray(len(words))
    for start, end, entity in find_code_identifiers(text):
        for name in space.lookup(entity):
            found.append((start, name))
        for i, (ws, we, _) in enumerate(words):
            if ws < end and start < we:
                used[i] = 2
    single: dict[int, list[str]] = {}  # lowercase one-word matches, by word index
    texts = [w for _, _, w in words]
    # The same n-grams recur across queries ("what did", "the"): their look-ups are kept
    # until the namespace changes (at most LOOKUP_MEMO of them).
    known: dict[str, tuple[str, ...]] = space.memo("query-lookup", _new_memo)

    def lookup(candidate: str) -> tuple[str, ...]:
        got = known.get(candidate)
        if got is None:
            if len(known) >= LOOKUP_MEMO:
                known.clear()
            got = known[candidate] = space.lookup(candidate)
        return got

    # An n-gram of several words can only name an entity of n words whose first word it
    # starts with (normalising keeps the words of what it does not drop, and a dropped word
    # leaves fewer than n): the others are not even normalised.
    heads, lengths = space.heads(), space.lengths
    firsts = [word_key(w) in heads for w in texts]
    for n in range(min(space.max_words(), MAX_QUERY_WORDS, len(words)), 0, -1):
        if n > 1 and n not in lengths:
            continue
        for i in range(len(words) - n + 1):
            if n > 1 and not firsts[i] or any(used[i : i + n]):
                continue
            candidate = _normalized(" ".join(texts[i : i + n]))
            if candidate.count(" ") + 1 < n:
                continue  # "the wallet": tried again without its determiner, as one word
            names = lookup(candidate) if candidate else ()
            if not names:
                continue
            used[i : i + n] = b"\x01" * n
            if n == 1 and words[i][2].islower():
                single[i] = list(names)
                continue
            # A lowercase compound ("weather app") counts by its head noun, as write-time
            # extraction reads compounds; a capitalised name counts whole, with the parts the
            # graph links to it ("Colby Smith": ``colby smith``, ``colby``, ``smith``).
            lower = n > 1 and all(w.islower() for _, _, w in words[i : i + n])
            for name in names:
                if lower:
                    head = space.lookup(name.rpartition(" ")[2])
                    found.extend((words[i][0], h) for h in head)
                    continue
                found.append((words[i][0], name))
                if n > 1:
                    found.extend(
                        (words[i][0], part)
                        for part in name.split(" ")
                        if part != name and space.linked(name, part)
                    )
    for i, found_names in single.items():
        raw = words[i][2]
        before = words[i - 1][2].lower().strip(_EDGE) if i else ""
        modifier = i + 1 < len(words) and used[i + 1] == 1 and raw[-1:].isalnum()
        participle = len(raw) > 4 and raw.endswith("ed") and not raw.endswith("eed")
        if before in _VERB_CONTEXT or modifier or participle:
            continue
        found.extend((words[i][0], name) for name in found_names)
    for i, (start, _, word) in enumerate(words):
        if not used[i] and _PARTS_RE.search(word):
            for part in _PARTS_RE.split(word):
                candidate = _normalized(part)
                found.extend((start, name) for name in space.lookup(candidate) if candidate)
    return list(dict.fromkeys(e for _, e in sorted(found, key=lambda f: f[0])))


def _head(name: str) -> str:
    return name.partition(" ")[0].strip(_EDGE)


def _memory_hash(memory_id: str, entities: Sequence[str]) -> int:
    data = "\x1f".join([memory_id, *entities]).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


@dataclass(frozen=True)
class Incidence:
    """A namespace's ``(memory row, entity id)`` pairs as CSR arrays, by row and by entity.

    Attributes:
        rows, ents: Every pair, rows ascending, each row's entities in the order it lists them.
        row_ptr: Row ``r``'s entities are ``ents[row_ptr[r] : row_ptr[r + 1]]``.
        ent_ptr, ent_rows: Entity ``e``'s rows are ``ent_rows[ent_ptr[e] : ent_ptr[e + 1]]``,
            ascending.
    """

    rows: np.ndarray
    ents: np.ndarray
    row_ptr: np.ndarray
    ent_ptr: np.ndarray
    ent_rows: np.ndarray

    @classmethod
    def of(cls, space: NamespaceGraph) -> Incidence:
        """The incidence of ``space.ents``.

        Read from the CSR arrays the graph was restored from
        (:mod:`norax_core.signals.graph_arrays`) while no write has changed it.
        """
        kept = space.__dict__.get("_ents_csr")
        if kept is not None:
            row_ptr, ents = kept
            rows = np.repeat(np.arange(len(row_ptr) - 1, dtype=np.int64), np.diff(row_ptr))
            return cls.from_pairs(space, rows, ents, row_ptr)
        lists = space.ents
        lengths = np.fromiter(map(len, lists), np.int64, len(lists))
        rows = np.repeat(np.arange(len(lists), dtype=np.int64), lengths)
        ents = np.fromiter(chain.from_iterable(lists), np.int64, int(lengths.sum()))
        row_ptr = np.zeros(len(lists) + 1, np.int64)
        np.cumsum(lengths, out=row_ptr[1:])
        return cls.from_pairs(space, rows, ents, row_ptr)

    @classmethod
    def from_pairs(
        cls, space: NamespaceGraph, rows: np.ndarray, ents: np.ndarray, row_ptr: np.ndarray
    ) -> Incidence:
        """The incidence of the pairs ``(rows, ents)`` (rows ascending), with ``row_ptr``."""
        ent_ptr = np.zeros(len(space.names) + 1, np.int64)
        np.cumsum(np.bincount(ents, minlength=len(space.names)), out=ent_ptr[1:])
        # the same stable order; 16-bit keys sort by radix (several times faster)
        keys = ents.astype(np.uint16) if len(space.names) <= 1 << 16 else ents
        ent_rows = rows[np.argsort(keys, kind="stable")]
        return cls(rows, ents, row_ptr, ent_ptr, ent_rows)

    @staticmethod
    def gather(
        ptr: np.ndarray, flat: np.ndarray, keys: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``flat``'s spans of ``keys`` in ``ptr`` (in the order of ``keys``), and their lengths."""
        starts = ptr[keys]
        lengths = ptr[keys + 1] - starts
        ends = lengths.cumsum()
        total = int(ends[-1]) if len(ends) else 0
        return flat[(starts - ends + lengths).repeat(lengths) + np.arange(total)], lengths


class NamespaceGraph:
    """One namespace: memories, entities (interned as ints), postings, edges, communities.

    The live structure :class:`~norax_core.signals.graph.GraphSignal` reads (through
    :meth:`EntityGraph.space`); only :class:`EntityGraph` writes it.
    """

    def __init__(self) -> None:
        self.slot: dict[str, int] = {}  # memory id -> row
        self.ids: list[str | None] = []  # row -> memory id (None: free)
        self.ents: list[tuple[int, ...]] = []  # row -> entity ids
        self.row_tie = np.zeros(64, np.int64)  # row -> crc32 of the id: content-based tie-break
        self.free_rows: list[int] = []
        self.eid: dict[str, int] = {}  # entity -> id
        self.lengths: dict[int, int] = {}  # words per entity -> how many entities
        self.names: list[str] = []  # id -> entity ("" when free)
        self.free_eids: list[int] = []
        self.counts: list[int] = []  # id -> memories mentioning it
        self._df = np.zeros(64, np.int64)  # numpy copy of counts, synced lazily at reads
        self._stale: set[int] = set()
        self.tie = np.zeros(64, np.int64)  # id -> crc32 of the name: content-based tie-break
        self.comm = np.full(64, -1, np.int64)  # id -> community (-1: not placed yet)
        self.post: dict[int, set[int]] = {}  # entity id -> rows
        self.adj: dict[int, dict[int, int]] = {}  # entity id -> neighbour -> co-occurrences
        self.post_arr: dict[int, np.ndarray] = {}  # caches, dropped when the entity changes
        self.adj_arr: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.mask_arr: dict[int, np.ndarray] = {}
        self.unplaced: set[int] = set()
        self.next_comm = 0
        self.changes = 0  # memory writes since the last Louvain run
        self.edges = 0  # co-occurrence edges
        self.generation = 0  # Louvain runs adopted (a background result of an older one is void)
        self.touched: set[int] | None = None  # entity ids (re)used or freed since a snapshot
        self.fingerprint = 0  # XOR of the memories' hashes: equal graphs, equal prints
        self.version = next(_CLOCK)
        self._memo: dict[str, tuple[int, Any]] = {}  # key -> (version, value): see memo()

    def __getattr__(self, name: str) -> Any:
        # A graph restored from arrays (norax_core.signals.graph_arrays) builds its postings
        # and edges as sets and dicts at their first use other than a search's, and its rows'
        # entity tuples at their first use (a search reads the rows' arrays: row_ents).
        if name in ("post", "adj") and "_gcsr" in self.__dict__:
            self._thaw()
            return self.__dict__[name]
        if name == "ents" and "_ents_csr" in self.__dict__:
            ptr, flat = self.__dict__["_ents_csr"]
            cuts, ents = ptr.tolist(), flat.tolist()
            self.__dict__["ents"] = [tuple(ents[x:y]) for x, y in zip(cuts, cuts[1:], strict=False)]
            return self.__dict__["ents"]
        raise AttributeError(name)

    def row_ents(self, row: int) -> Sequence[int]:
        """Row ``row``'s entity ids (:attr:`ents`, read from the restored arrays while kept)."""
        kept = self.__dict__.get("_ents_csr")
        if kept is None or "ents" in self.__dict__:
            return self.ents[row]
        ptr, flat = kept
        return flat[ptr[row] : ptr[row + 1]].tolist()  # type: ignore[no-any-return]

    def _own_rows(self) -> None:
        """Before a write: the rows' tuples built, the restored arrays (now stale) dropped."""
        if "_ents_csr" in self.__dict__:
            _ = self.ents
            del self.__dict__["_ents_csr"]

    def _thaw(self) -> None:
        post_at, post_ptr, post_rows, adj_at, adj_ptr, adj_nbr, adj_w = self.__dict__.pop("_gcsr")
        rows, nbrs, weights = post_rows.tolist(), adj_nbr.tolist(), adj_w.tolist()
        post_ptr, adj_ptr = post_ptr.tolist(), adj_ptr.tolist()
        # a None map: the i-th key is entity i (graph_arrays.from_arrays)
        n_post, n_adj = len(post_ptr) - 1, len(adj_ptr) - 1
        post_of = post_at.items() if post_at is not None else ((e, e) for e in range(n_post))
        adj_of = adj_at.items() if adj_at is not None else ((e, e) for e in range(n_adj))
        self.post = {e: set(rows[post_ptr[i] : post_ptr[i + 1]]) for e, i in post_of}
        spans = {e: slice(adj_ptr[i], adj_ptr[i + 1]) for e, i in adj_of}
        self.adj = {e: dict(zip(nbrs[at], weights[at], strict=True)) for e, at in spans.items()}

    # -- writes ---------------------------------------------------------------------------

    def _intern(self, name: str) -> int:
        e = self.eid.get(name)
        if e is not None:
            return e
        if self.free_eids:
            e = self.free_eids.pop()
            self.names[e] = name
        else:
            e = len(self.names)
            self.names.append(name)
            self.counts.append(0)
            if e == len(self._df):
                self._df = np.concatenate([self._df, np.zeros(e, np.int64)])
                self.tie = np.concatenate([self.tie, np.zeros(e, np.int64)])
                self.comm = np.concatenate([self.comm, np.full(e, -1, np.int64)])
        self.eid[name] = e
        if self.touched is not None:
            self.touched.add(e)
        words = name.count(" ") + 1
        self.lengths[words] = self.lengths.get(words, 0) + 1
        heads = self.__dict__.get("_heads")
        if heads is not None and words > 1:
            key = _head(name)
            heads[key] = heads.get(key, 0) + 1
        self.tie[e] = zlib.crc32(name.encode("utf-8", "surrogatepass"))
        self.post[e] = set()
        self.adj[e] = {}
        self.unplaced.add(e)
        return e

    def add(self, memory_id: str, entities: Sequence[str]) -> None:
        """Index a memory's entities (empty names dropped, repeats once), replacing it."""
        if memory_id in self.slot:
            self.remove(memory_id)
        self._own_rows()
        names = tuple(dict.fromkeys(e for e in entities if e))
        ents = tuple(self._intern(e) for e in names)
        row = self.free_rows.pop() if self.free_rows else len(self.ids)
        if row == len(self.ids):
            self.ids.append(memory_id)
            self.ents.append(ents)
            if row == len(self.row_tie):
                self.row_tie = np.concatenate([self.row_tie, np.zeros(row, np.int64)])
        else:
            self.ids[row], self.ents[row] = memory_id, ents
        self.row_tie[row] = zlib.crc32(memory_id.encode("utf-8", "surrogatepass"))
        self.slot[memory_id] = row
        counts, stale = self.counts, self._stale
        for e in ents:
            self.post[e].add(row)
            counts[e] += 1
            stale.add(e)
            self.post_arr.pop(e, None)
            self.mask_arr.pop(e, None)
        self._link(ents, +1)
        self.fingerprint ^= _memory_hash(memory_id, names)
        self._changed()

    def remove(self, memory_id: str) -> bool:
        """Forget a memory, and entities no memory mentions any more; whether it was there."""
        row = self.slot.pop(memory_id, None)
        if row is None:
            return False
        self._own_rows()
        ents = self.ents[row]
        self.fingerprint ^= _memory_hash(memory_id, [self.names[e] for e in ents])
        self.ids[row], self.ents[row] = None, ()
        self.free_rows.append(row)
        self._link(ents, -1)
        for e in ents:
            self.post[e].discard(row)
            self.counts[e] -= 1
            self._stale.add(e)
            self.post_arr.pop(e, None)
            self.mask_arr.pop(e, None)
            if not self.post[e]:
                if self.touched is not None:
                    self.touched.add(e)
                self._forget_name(e)
                del self.post[e], self.adj[e], self.eid[self.names[e]]
                self.adj_arr.pop(e, None)
                self.unplaced.discard(e)
                self.names[e] = ""
                self.comm[e] = -1
                self.free_eids.append(e)
        self._changed()
        return True

    def _forget_name(self, e: int) -> None:
        words = self.names[e].count(" ") + 1
        self.lengths[words] -= 1
        if not self.lengths[words]:
            del self.lengths[words]
        heads = self.__dict__.get("_heads")
        if heads is not None and words > 1:
            key = _head(self.names[e])
            heads[key] -= 1
            if not heads[key]:
                del heads[key]

    def heads(self) -> dict[str, int]:
        """First words of the entities of several words -> how many.

        Stripped as by :func:`~norax_core.entities.word_key`; counted at the first call, then
        kept up to date by the writes.
        """
        heads = self.__dict__.get("_heads")
        if heads is None:
            heads = self.__dict__["_heads"] = {}
            for name in self.eid:
                if " " in name:
                    key = _head(name)
                    heads[key] = heads.get(key, 0) + 1
        return heads

    def _link(self, ents: tuple[int, ...], delta: int) -> None:
        adj = self.adj
        linked = ents[:MAX_EDGE_ENTITIES]
        for a, b in combinations(linked, 2):
            w = adj[a].get(b, 0) + delta
            if w:
                if w == delta:
                    self.edges += 1
                adj[a][b] = adj[b][a] = w
            else:
                del adj[a][b], adj[b][a]
                self.edges -= 1
        if len(linked) > 1:
            for e in linked:
                self.adj_arr.pop(e, None)

    def _changed(self) -> None:
        self.changes += 1
        self.version = next(_CLOCK)

    # -- reads ----------------------------------------------------------------------------

    @property
    def df(self) -> np.ndarray:
        """Memories per entity id, as an array (0 for free ids)."""
        if self._stale:
            idx = np.fromiter(self._stale, np.int64, len(self._stale))
            self._df[idx] = [self.counts[e] for e in idx.tolist()]
            self._stale.clear()
        return self._df

    def rows_of(self, e: int) -> np.ndarray:
        """Rows of the memories mentioning entity ``e`` (cached until ``e`` changes)."""
        arr = self.post_arr.get(e)
        lazy = self.__dict__.get("_gcsr")
        if arr is None and lazy is not None:
            i, ptr = e if lazy[0] is None else lazy[0][e], lazy[1]
            rows = set(lazy[2][ptr[i] : ptr[i + 1]].tolist())  # in the order the set would
            arr = self.post_arr[e] = np.fromiter(rows, np.int64, len(rows))
        elif arr is None:
            arr = np.fromiter(self.post[e], np.int64, len(self.post[e]))
            self.post_arr[e] = arr
        return arr

    def mask_of(self, e: int) -> np.ndarray:
        """Row membership of entity ``e`` as a boolean array (for hubs: cheap to probe)."""
        mask = self.mask_arr.get(e)
        if mask is None or len(mask) != len(self.ids):
            mask = np.zeros(len(self.ids), bool)
            mask[self.rows_of(e)] = True
            self.mask_arr[e] = mask
        return mask

    def neighbours(self, e: int) -> tuple[np.ndarray, np.ndarray]:
        """Entity ``e``'s neighbours and co-occurrence weights, as two aligned arrays."""
        arrs = self.adj_arr.get(e)
        lazy = self.__dict__.get("_gcsr")
        if arrs is None and lazy is not None:
            i, ptr = e if lazy[3] is None else lazy[3][e], lazy[4]
            a, b = ptr[i], ptr[i + 1]
            arrs = (lazy[5][a:b].astype(np.int64), lazy[6][a:b].astype(np.float64))
            self.adj_arr[e] = arrs
        elif arrs is None:
            nbrs = self.adj[e]
            arrs = (
                np.fromiter(nbrs.keys(), np.int64, len(nbrs)),
                np.fromiter(nbrs.values(), np.float64, len(nbrs)),
            )
            self.adj_arr[e] = arrs
        return arrs

    def neighbours_of(self, es: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The :meth:`neighbours` of ``es`` (not empty), concatenated, and how many each has.

        Returns ``(counts, neighbours, weights)``; a restored graph's are one gather from its
        arrays (no array per entity).
        """
        lazy = self.__dict__.get("_gcsr")
        if lazy is None:
            nbs, ws = zip(*map(self.neighbours, es), strict=True)
            lengths = np.fromiter(map(len, nbs), np.int64, len(nbs))
            return lengths, np.concatenate(nbs), np.concatenate(ws)
        at_of, ptr = lazy[3], lazy[4]
        at = np.fromiter(es if at_of is None else map(at_of.__getitem__, es), np.int64, len(es))
        lo = ptr[at]
        lengths = ptr[at + 1] - lo
        # span i is lo[i] .. lo[i] + lengths[i] - 1: one arange shifted span by span
        shift = np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
        idx = np.arange(len(shift)) + shift
        return lengths, lazy[5][idx].astype(np.int64), lazy[6][idx].astype(np.float64)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every ``(row, entity id)`` of the namespace as two aligned arrays, rows ascending.

        The memory-entity incidence the bridge stage walks (:mod:`norax_core.stages.bridges`);
        each row's entities in :attr:`ents` order. Kept until the namespace changes (read
        only).
        """
        return self.incidence().rows, self.incidence().ents

    def incidence(self) -> Incidence:
        """The memory-entity incidence as CSR arrays both ways (kept until a change)."""
        return self.memo("incidence", Incidence.of)  # type: ignore[no-any-return]

    def memo(self, key: str, build: Callable[[NamespaceGraph], Any]) -> Any:
        """``build(self)``, kept until the namespace next changes (derived views of readers)."""
        hit = self._memo.get(key)
        if hit is not None and hit[0] == self.version:
            return hit[1]
        value = build(self)
        self._memo[key] = (self.version, value)
        return value

    def lookup(self, candidate: str) -> tuple[str, ...]:
        """The node ``candidate`` names, ``()`` if none.

        That is its last word's singular if the graph has that form (spaCy lemmatises stored
        nouns), else ``candidate`` itself.
        """
        head, _, last = candidate.rpartition(" ")
        for form in singular_forms(last):
            name = f"{head} {form}" if head else form
            if name in self.eid:
                return (name,)
            if not head and not normalize_entity(form):
                return ()  # the plural of a stop word ("ways")
        return (candidate,) if candidate in self.eid else ()

    def linked(self, a: str, b: str) -> bool:
        """Whether entities ``a`` and ``b`` share a memory (co-occurrence edge)."""
        ea, eb = self.eid.get(a), self.eid.get(b)
        if ea is None or eb is None:
            return False
        if "_gcsr" in self.__dict__:  # restored: read the arrays, as a search does (no thaw)
            return bool((self.neighbours(ea)[0] == eb).any())
        return eb in self.adj[ea]

    def max_words(self) -> int:
        """Words in the namespace's longest entity (0 when it has none)."""
        return max(self.lengths, default=0)

    def communities(self) -> dict[str, int]:
        """Entity -> community id, as placed so far."""
        return {self.names[e]: int(self.comm[e]) for e in self.post}

    # -- communities ----------------------------------------------------------------------

    def place(self) -> None:
        """Put unplaced entities, in name order, in their strongest neighbour's community."""
        if not self.unplaced:
            return
        order = sorted(self.unplaced, key=self.names.__getitem__)
        self.next_comm = _place(order, self.adj, self.comm, self.next_comm)
        self.unplaced.clear()
        self.version = next(_CLOCK)

    def set_communities(self, groups: Iterable[Iterable[str]]) -> None:
        """Adopt ``groups`` (largest first get the lowest ids); place the entities left out."""
        ordered = sorted((sorted(g) for g in groups), key=lambda g: (-len(g), g[:1]))
        self.comm[:] = -1
        self.unplaced = set(self.post)
        for cid, group in enumerate(ordered):
            for name in group:
                e = self.eid.get(name)
                if e is not None:
                    self.comm[e] = cid
                    self.unplaced.discard(e)
        self.next_comm = len(ordered)
        self.generation += 1
        self.place()
        self.version = next(_CLOCK)

    def louvain(self, seed: int, max_edges: int, fn: CommunityFn | None = None) -> None:
        """Rerun Louvain on the ``max_edges`` heaviest edges and adopt its communities."""
        snap = self.snapshot()
        self.adopt(snap, snap.compute(seed, max_edges, fn))

    def snapshot(self) -> _Snapshot:
        """What a community run reads, taken under the caller's lock in O(entities) C copies.

        The neighbour dicts themselves are read later, by the run (see :class:`_Snapshot`);
        entity ids (re)used or freed from now on are tracked in :attr:`touched`.
        """
        self.touched = set()
        return _Snapshot(
            list(self.adj.items()),
            list(self.names),
            self.tie.copy(),
            self.changes,
            self.generation,
            self.touched,
        )

    def adopt(self, snap: _Snapshot, found: tuple[np.ndarray, int]) -> None:
        """Take a run's communities; entities (re)used or freed since its snapshot are placed anew.

        Ignored if another run was adopted since the snapshot.
        """
        if snap.generation != self.generation:
            return
        comm, next_comm = found
        new = np.full(len(self.comm), -1, np.int64)
        n = min(len(comm), len(new))
        new[:n] = comm[:n]
        touched = snap.touched
        if touched:
            new[np.fromiter(touched, np.int64, len(touched))] = -1
        self.comm = new
        self.next_comm = next_comm
        self.unplaced = {e for e in touched if self.names[e]} if touched else set()
        self.changes = max(self.changes - snap.changes, 0)
        self.generation += 1
        if self.touched is touched:
            self.touched = None
        self.place()
        self.version = next(_CLOCK)


def _place(
    order: Iterable[int], adj: Mapping[int, Mapping[int, int]], comm: np.ndarray, next_comm: int
) -> int:
    """Put each entity of ``order`` in the community it has most edge weight to, else a new one.

    Writes ``comm`` in place; returns the next free community id. Works on a list copy:
    reading numpy scalars one neighbour at a time cost a cold namespace's first query
    ~50 ms per 1,000 memories.
    """
    ids = comm.tolist()
    n = len(ids)
    for e in order:
        pull: dict[int, int] = {}
        for nb, w in adj[e].items():
            c = ids[nb] if nb < n else -1
            if c >= 0:
                pull[c] = pull.get(c, 0) + w
        if len(pull) == 1:
            ids[e] = next(iter(pull))
        elif pull:
            ids[e] = min(pull, key=lambda c: (-pull[c], c))
        else:
            ids[e] = next_comm
            next_comm += 1
    comm[:] = ids
    return next_comm


@dataclass
class _Snapshot:
    """A namespace's graph as a community run reads it.

    ``adj`` holds the live neighbour dicts of the entities at snapshot time: a run in the
    worker reads each with one C-level copy (atomic under the GIL), so a write in between
    shows in some dicts and not others. That only blurs the partition a little; every entity
    whose id was (re)used or freed meanwhile is in ``touched`` and placed anew on adoption.
    """

    adj: list[tuple[int, dict[int, int]]]
    names: list[str]
    tie: np.ndarray
    changes: int
    generation: int
    touched: set[int]

    def compute(self, seed: int, max_edges: int, fn: CommunityFn | None) -> tuple[np.ndarray, int]:
        """A community per entity id (-1: free) and the next free community id."""
        names, tie = self.names, self.tie
        rows = [(u, _items(nbrs)) for u, nbrs in self.adj]
        n = len(names)
        pairs = [(u, v, w) for u, items in rows for v, w in items if u < v < n and names[v]]
        a = np.fromiter((p[0] for p in pairs), np.int64, len(pairs))
        b = np.fromiter((p[1] for p in pairs), np.int64, len(pairs))
        wt = np.fromiter((p[2] for p in pairs), np.float64, len(pairs))
        if len(wt) > max_edges:  # the heaviest edges; ties broken by content, not history
            lo, hi = np.minimum(tie[a], tie[b]), np.maximum(tie[a], tie[b])
            kept = np.lexsort((hi, lo, -wt))[:max_edges]
            a, b, wt = a[kept], b[kept], wt[kept]
        edges = sorted(
            (min(names[x], names[y]), max(names[x], names[y]), c)
            for x, y, c in zip(a.tolist(), b.tolist(), wt.tolist(), strict=True)
        )
        g = nx.Graph()
        g.add_nodes_from(sorted({name for edge in edges for name in edge[:2]}))
        g.add_weighted_edges_from(edges)
        groups = (fn or louvain_communities)(g, seed)
        ordered = sorted((sorted(grp) for grp in groups), key=lambda grp: (-len(grp), grp[:1]))
        eid = {name: e for e, name in enumerate(names) if name}
        comm = np.full(len(names), -1, np.int64)
        for cid, group in enumerate(ordered):
            for name in group:
                e = eid.get(name)
                if e is not None:
                    comm[e] = cid
        live = {u: dict(items) for u, items in rows}
        left = sorted((u for u in live if comm[u] < 0), key=names.__getitem__)
        return comm, _place(left, live, comm, len(ordered))


def _state_of(space: NamespaceGraph) -> dict[str, Any]:
    """A namespace's communities with the fingerprint of their graph and its changes since."""
    space.place()
    groups: dict[int, list[str]] = {}
    for e in space.eid.values():  # the entities with postings (left as arrays if restored)
        groups.setdefault(int(space.comm[e]), []).append(space.names[e])
    return {
        "fingerprint": f"{space.fingerprint:016x}",
        "changes": space.changes,
        "communities": [sorted(g) for _, g in sorted(groups.items())],
    }


def _take(space: NamespaceGraph, saved: Mapping[str, Any] | None) -> None:
    """Adopt saved communities (:func:`_state_of`) if they belong to this very graph."""
    if saved is None or saved.get("fingerprint") != f"{space.fingerprint:016x}":
        return
    try:
        space.set_communities(saved["communities"])
        space.changes = int(saved.get("changes", 0))
    except (TypeError, ValueError):
        space.changes = len(space.slot) + 1  # unreadable: recompute


def _items(d: dict[int, int]) -> list[tuple[int, int]]:
    """A copy of a live dict's items; retried if a writer resized it mid-copy (rare)."""
    while True:
        try:
            return list(d.items())
        except RuntimeError:  # pragma: no cover - needs a thread switch inside the C copy
            continue


class EntityGraph:
    """Per-namespace entity co-occurrence graphs with an inverted index and communities.

    Args:
        refresh_fraction: Rerun Louvain for a namespace once its memory writes since the last
            run exceed this fraction of its memories (see the module docstring).
        louvain_max_edges: Louvain runs on at most this many of the heaviest edges.
        seed: Louvain's random seed.
        background_min_edges: Namespaces with at least this many edges recompute their
            communities in a worker thread, off the query path (see the module docstring).
        community_fn: The partition to run, ``(graph, seed) -> groups of entity names``;
            default :func:`louvain_communities`.
        reads_adopt: Whether any read adopts a finished background run. ``False`` (a store's
            graph): only :meth:`begin`, which a search calls when it starts, and the
            synchronous calls (:meth:`settle`, :meth:`communities`, :meth:`graph`,
            :meth:`neighbourhood`) adopt one; the reads and saves in between keep the
            communities the namespace had, so a search reads one set of communities, the same
            whenever the worker finishes (see the module docstring).

    Reads and writes must be serialised by the caller (the engine's lock), as before; the
    worker thread takes no lock a reader holds and writes nothing a reader sees: its result is
    adopted by the next read of that namespace (with ``reads_adopt``; else the next
    :meth:`begin`).
    """

    def __init__(
        self,
        *,
        refresh_fraction: float = 0.1,
        louvain_max_edges: int = 10_000,
        seed: int = LOUVAIN_SEED,
        background_min_edges: int = BACKGROUND_MIN_EDGES,
        community_fn: CommunityFn | None = None,
        reads_adopt: bool = True,
    ) -> None:
        if refresh_fraction < 0:
            raise ValueError(f"refresh_fraction must be >= 0, got {refresh_fraction}")
        if louvain_max_edges < 1:
            raise ValueError(f"louvain_max_edges must be >= 1, got {louvain_max_edges}")
        if background_min_edges < 0:
            raise ValueError(f"background_min_edges must be >= 0, got {background_min_edges}")
        self.refresh_fraction = refresh_fraction
        self.louvain_max_edges = louvain_max_edges
        self.seed = seed
        self.background_min_edges = background_min_edges
        self.community_fn = community_fn
        self.reads_adopt = reads_adopt
        self._spaces: dict[str, NamespaceGraph] = {}
        self._pending: dict[str, dict[str, Any]] = {}
        self._running: dict[str, NamespaceGraph] = {}  # namespace -> the space being recomputed
        self._done: dict[str, tuple[_Snapshot, tuple[np.ndarray, int] | None]] = {}
        self._landed: dict[str, dict[str, Any]] = {}  # runs of dropped namespaces: see _adopt
        self._handoff = threading.Condition()  # guards _done only; held for a dict operation
        self._jobs: queue.SimpleQueue[tuple[str, _Snapshot] | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._closed = False

    # -- writes ---------------------------------------------------------------------------

    def add(self, namespace: str, memory_id: str, entities: Sequence[str]) -> None:
        """Index one memory's entities, replacing the memory if its id exists.

        Raises:
            TypeError: If ``entities`` is a string or holds a non-string.
        """
        if isinstance(entities, str) or not all(isinstance(e, str) for e in entities):
            raise TypeError("entities must be a sequence of strings")
        space = self._spaces.get(namespace)
        if space is None:
            space = self._spaces[namespace] = NamespaceGraph()
        space.add(memory_id, entities)

    def add_many(self, namespace: str, items: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Index ``(memory_id, entities)`` pairs: the fast path to rebuild a namespace."""
        for memory_id, entities in items:
            self.add(namespace, memory_id, entities)

    def remove(self, namespace: str, memory_id: str) -> bool:
        """Forget one memory; returns whether it was there."""
        space = self._spaces.get(namespace)
        if space is None or not space.remove(memory_id):
            return False
        if not space.slot:
            del self._spaces[namespace]
        return True

    # -- reads ----------------------------------------------------------------------------

    def count(self, namespace: str) -> int:
        """Number of memories indexed in ``namespace``."""
        space = self._spaces.get(namespace)
        return len(space.slot) if space else 0

    def ids(self, namespace: str) -> list[str]:
        """Memory ids of ``namespace``, in no particular order."""
        space = self._spaces.get(namespace)
        return list(space.slot) if space else []

    def namespaces(self) -> list[str]:
        """Namespaces holding at least one memory, sorted."""
        return sorted(self._spaces)

    def entities_of(self, namespace: str, memory_id: str) -> tuple[str, ...]:
        """A memory's entities, in their stored order (empty if unknown)."""
        space = self._spaces.get(namespace)
        row = space.slot.get(memory_id) if space else None
        if space is None or row is None:
            return ()
        return tuple(space.names[e] for e in space.row_ents(row))

    def graph(self, namespace: str) -> nx.Graph:
        """A copy of the namespace's graph.

        Nodes carry ``count`` (memories mentioning the entity) and ``community``; edges carry
        ``weight`` (memories mentioning both ends).
        """
        self.begin(namespace)
        space = self.space(namespace)
        g = nx.Graph()
        if space is None:
            return g
        for e in sorted(space.post, key=space.names.__getitem__):
            g.add_node(space.names[e], count=space.counts[e], community=int(space.comm[e]))
        for a, nbrs in space.adj.items():
            g.add_weighted_edges_from(
                (space.names[a], space.names[b], w) for b, w in nbrs.items() if a < b
            )
        return g

    def neighbourhood(self, namespace: str, entities: Sequence[str], limit: int = 8) -> nx.Graph:
        """The part of the namespace's graph around ``entities`` (those it holds).

        Each entity with its ``limit`` strongest neighbours (most shared memories, ties by
        name) and every edge among all of them. Nodes carry ``count``, ``community`` and
        ``seed`` (one of ``entities``); edges carry ``weight``, as in :meth:`graph`.
        """
        self.begin(namespace)
        space = self.space(namespace)
        g = nx.Graph()
        if space is None:
            return g
        seeds = {space.eid[e] for e in entities if e in space.eid}
        keep = set(seeds)
        for e in seeds:
            strongest = sorted(space.adj[e].items(), key=lambda bw: (-bw[1], space.names[bw[0]]))
            keep.update(b for b, _ in strongest[:limit])
        for e in sorted(keep, key=space.names.__getitem__):
            g.add_node(
                space.names[e], count=space.counts[e], community=int(space.comm[e]), seed=e in seeds
            )
        for a in keep:
            g.add_weighted_edges_from(
                (space.names[a], space.names[b], w)
                for b, w in space.adj[a].items()
                if b in keep and a < b
            )
        return g

    def mentions(self, namespace: str, entity: str) -> list[str]:
        """Ids of the memories of ``namespace`` that mention ``entity``, sorted."""
        space = self._spaces.get(namespace)
        e = space.eid.get(entity) if space is not None else None
        if space is None or e is None:
            return []
        return sorted(mid for row in space.post[e] if (mid := space.ids[row]) is not None)

    def communities(self, namespace: str) -> dict[str, int]:
        """Entity -> community id for ``namespace`` (brought up to date first, synchronously)."""
        space = self.space(namespace, wait=True)
        return space.communities() if space else {}

    def match_query(self, namespace: str, text: str) -> list[str]:
        """The entities of ``namespace``'s graph that ``text`` names (see :func:`match_query`).

        Reads the vocabulary only: no community upkeep, no model.
        """
        space = self._spaces.get(namespace)
        return match_query(text, space) if space is not None else []

    def refresh(self, namespace: str) -> None:
        """Rerun Louvain for ``namespace`` now (synchronously), for example after a bulk load."""
        space = self._spaces.get(namespace)
        if space is not None:
            space.louvain(self.seed, self.louvain_max_edges, self.community_fn)

    def space(self, namespace: str, *, wait: bool = False) -> NamespaceGraph | None:
        """The namespace's live structure with its communities; ``None`` if empty.

        For readers such as :class:`~norax_core.signals.graph.GraphSignal`; do not modify it.
        A finished background run is adopted first (with ``reads_adopt`` or ``wait``; else
        only by :meth:`begin`). A stale namespace is recomputed in the worker (at least
        ``background_min_edges`` edges, unless ``wait``) and read meanwhile with the
        communities it has, or recomputed here.
        """
        space = self._spaces.get(namespace)
        if space is None:
            return None
        if self.reads_adopt or wait:
            self._land(namespace, space)
        else:
            _take(space, self._pending.pop(namespace, None))
        if space.changes > self.refresh_fraction * len(space.slot):
            if wait or self._closed or space.edges < self.background_min_edges:
                space.louvain(self.seed, self.louvain_max_edges, self.community_fn)
            elif namespace not in self._running:
                self._submit(namespace, space)
        space.place()
        return space

    def begin(self, namespace: str) -> None:
        """A search of ``namespace`` starts: adopt its finished background run, if any.

        With ``reads_adopt`` off, the search's reads then keep these communities to its end:
        a run that finishes meanwhile waits for the next :meth:`begin`. Call it under the
        caller's lock, as any read.
        """
        space = self._spaces.get(namespace)
        if space is not None:
            self._land(namespace, space)

    def _land(self, namespace: str, space: NamespaceGraph) -> None:
        """Adopt what is due into ``space``: a finished run, saved or landed communities."""
        self._reap()
        self._adopt(namespace, space)
        _take(space, self._pending.pop(namespace, None))
        landed = self._landed.pop(namespace, None)
        if landed is not None and space.changes > landed["changes"]:  # nothing fresher since
            _take(space, landed)

    def settle(self, timeout: float | None = None) -> bool:
        """Wait for the background runs in flight and adopt them; whether all finished.

        For benchmarks and tests that want every namespace's latest communities before
        querying; like any read, call it under the caller's lock.
        """
        with self._handoff:
            finished = self._handoff.wait_for(
                lambda: self._closed or set(self._done) >= set(self._running), timeout
            )
        for namespace in list(self._running):
            self._adopt(namespace, self._spaces.get(namespace))
        return finished

    def pending(self) -> list[str]:
        """Namespaces whose communities are being recomputed in the background right now."""
        with self._handoff:
            return sorted(set(self._running) - set(self._done))

    def close(self, timeout: float = 10.0) -> None:
        """Stop the worker thread (its current run is dropped) and recompute inline from now."""
        self._closed = True
        worker = self._worker
        if worker is not None:
            self._jobs.put(None)
            worker.join(timeout)
            if worker.is_alive():
                logger.warning("norax: a community run outlived close(); it will be dropped")
        self._running.clear()
        self._landed.clear()
        with self._handoff:
            self._done.clear()
            self._handoff.notify_all()

    # -- background community runs -------------------------------------------------------

    def _submit(self, namespace: str, space: NamespaceGraph) -> None:
        snap = space.snapshot()
        self._running[namespace] = space
        if self._worker is None:
            self._worker = threading.Thread(
                target=self._work, name="norax-communities", daemon=True
            )
            self._worker.start()
        self._jobs.put((namespace, snap))

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None and not self._closed:
            namespace, snap = job
            found: tuple[np.ndarray, int] | None
            try:
                found = snap.compute(self.seed, self.louvain_max_edges, self.community_fn)
            except Exception:  # noqa: BLE001 - the last communities stay; the next read retries
                logger.exception("norax: community recompute of %r failed", namespace)
                found = None
            if self._closed:
                return
            with self._handoff:
                self._done[namespace] = (snap, found)
                self._handoff.notify_all()

    def _adopt(self, namespace: str, space: NamespaceGraph | None) -> None:
        """Take a finished run of ``namespace`` into ``space`` (its live structure, if any).

        A namespace dropped (evicted) while its run was in flight is another object when it
        is reloaded: the run then lands in the structure it was taken from, whose communities
        wait in :attr:`_landed` (a few names, not the graph) for the namespace's next read.
        They are adopted there only if its graph is still the one the run saw (same
        fingerprint); otherwise the reloaded namespace is stale and simply runs again.
        """
        if namespace not in self._running:
            return
        with self._handoff:
            done = self._done.pop(namespace, None)
        if done is None:
            return
        snap, found = done
        owner = self._running.pop(namespace)
        if found is None:
            return
        owner.adopt(snap, found)
        if owner is not space:
            self._landed[namespace] = _state_of(owner)

    def _reap(self) -> None:
        """Land the finished runs of namespaces dropped meanwhile (see :meth:`_adopt`)."""
        for namespace, owner in list(self._running.items()):
            if self._spaces.get(namespace) is not owner:
                self._adopt(namespace, self._spaces.get(namespace))

    # -- persistence ----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The communities of every namespace, JSON-serialisable.

        Each namespace is saved with the fingerprint of the graph they belong to, so that
        :meth:`load_state_dict` reuses them only for that same graph.
        """
        out = {ns: self.namespace_state(ns) for ns in list(self._spaces)}
        return {"version": STATE_VERSION, "namespaces": {k: v for k, v in out.items() if v}}

    def namespace_state(self, namespace: str) -> dict[str, Any] | None:
        """One namespace's entry of :meth:`state_dict` (``None`` if it is empty)."""
        space = self._spaces.get(namespace)
        if space is None:
            return None
        if self.reads_adopt:
            self._adopt(namespace, space)
        return _state_of(space)

    def drop(self, namespace: str) -> dict[str, Any] | None:
        """Forget a whole namespace; returns its state (:meth:`namespace_state`) to save.

        A background run of it still in flight lands when it finishes and is adopted at the
        namespace's next read if its graph is unchanged (see :meth:`_adopt`).
        """
        state = self.namespace_state(namespace)
        self._spaces.pop(namespace, None)
        self._pending.pop(namespace, None)
        self._reap()
        return state

    def export(self, namespace: str) -> tuple[NamespaceGraph, dict[str, Any] | None] | None:
        """The namespace's graph and its saved communities not checked yet, for :meth:`restore`.

        A finished background run is adopted first (with ``reads_adopt``); ``None`` if the
        namespace is empty.
        """
        space = self._spaces.get(namespace)
        if space is None:
            return None
        if self.reads_adopt:
            self._adopt(namespace, space)
        return space, self._pending.get(namespace)

    def generation(self, namespace: str) -> int:
        """Community runs the namespace has adopted (-1 if it is empty).

        A snapshot taken at another generation holds other communities.
        """
        space = self._spaces.get(namespace)
        return -1 if space is None else space.generation

    def restore(self, namespace: str, state: object) -> None:
        """Hold a namespace exported by :meth:`export`, replacing it."""
        space, saved = state if isinstance(state, tuple) else (None, None)
        if not isinstance(space, NamespaceGraph):
            raise TypeError("not an exported graph namespace")
        self._spaces[namespace] = space
        self._pending.pop(namespace, None)
        if saved is not None:
            self._pending[namespace] = dict(saved)

    def load_namespace_state(self, namespace: str, saved: Mapping[str, Any]) -> None:
        """Adopt one namespace's saved state (:meth:`namespace_state`) if its graph matches.

        Checked at the namespace's next read, as :meth:`load_state_dict` is.
        """
        if isinstance(saved, Mapping) and isinstance(saved.get("communities"), list):
            self._pending[namespace] = dict(saved)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Adopt saved communities for the namespaces whose graph is unchanged.

        May be called before or after the graph is rebuilt: the fingerprint is checked at the
        namespace's next read, and a namespace whose graph differs is recomputed as usual.

        Raises:
            ValueError: If ``state`` is not a state of this version.
        """
        if not isinstance(state, Mapping) or state.get("version") != STATE_VERSION:
            raise ValueError(f"not an EntityGraph state of version {STATE_VERSION}")
        spaces = state.get("namespaces", {})
        if not isinstance(spaces, Mapping):
            raise ValueError("state['namespaces'] must be a mapping")
        for ns, saved in spaces.items():
            if isinstance(saved, Mapping) and isinstance(saved.get("communities"), list):
                self._pending[ns] = dict(saved)
