"""The keyword signal: an incremental BM25 index, partitioned by namespace.

Every namespace is its own corpus (its own N, average length and document frequencies), so
nothing written to one namespace can move a score in another: namespaces are a security
boundary. Scores are Okapi BM25 over a namespace's live documents with Lucene's idf
(:func:`lucene_idf`, as Lucene and ``bm25s`` use), which stays positive for every term: the
Robertson idf of ``rank_bm25`` is 0 for a term found in half of the documents, so in a
two-memory namespace the only memory holding a keyword scored 0.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from norax_core.errors import DuplicateIdError, InvalidInputError
from norax_core.signals.base import Query
from norax_core.snapshot_format import SEP, Strings, joined, pack_strs
from norax_core.tokenize import Tokenizer

__all__ = ["BM25Index", "BM25Scores", "BM25Signal", "lucene_idf", "okapi_scores"]

_COMPACT_RATIO = 0.3
_THAWED = frozenset({"doc_terms", "post_slots", "post_tfs"})
_PACKED_LOOKUPS = 64
"""Term lookups a restored partition answers from its packed terms (a namespace's first
searches) before it builds its vocabulary: the steady searches read a dict."""
_EMPTY = array("i")


def _flatten(parts: Sequence[array[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, values)``: int arrays joined end to end (CSR)."""
    ptr = np.zeros(len(parts) + 1, dtype=np.int64)
    if parts:
        np.cumsum([len(p) for p in parts], out=ptr[1:])
    values = np.frombuffer(b"".join(p.tobytes() for p in parts), dtype=np.intc)
    return ptr, values


"""Rebuild a namespace once this share of its slots holds deleted documents."""


def lucene_idf(n_docs: int, doc_freq: npt.ArrayLike) -> np.ndarray:
    """Return Lucene's BM25 idf, ``log(1 + (N - n + 0.5) / (n + 0.5))``: positive for every term.

    Okapi's Robertson-Sparck Jones idf ``log((N - n + 0.5) / (n + 0.5))`` is 0 for a term
    found in half of the documents and negative above, so a small store (two memories, one
    holding the keyword) could not find an exact keyword; the ``1 +`` keeps the order of
    terms by rarity and every shared term worth something.

    References:
        Kamphuis, de Vries, Boytsov and Lin, "Which BM25 Do You Mean? A Large-Scale
        Reproducibility Study of Scoring Variants", ECIR 2020 (Lucene's variant); Lucene's
        ``BM25Similarity.idf``; bm25s ``scoring._calculate_idf_lucene``.
    """
    df = np.asarray(doc_freq, dtype=np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def okapi_scores(
    tf: np.ndarray, doc_len: np.ndarray, avgdl: float, idf: float | np.ndarray, k1: float, b: float
) -> np.ndarray:
    r"""BM25 Okapi contribution of one query term to each document that contains it.

    .. math::

        \mathrm{idf}(t) \cdot \frac{tf \cdot (k_1 + 1)}
        {tf + k_1 \left(1 - b + b \cdot \frac{|d|}{\mathrm{avgdl}}\right)}

    A document's score is the sum over the query's tokens, a repeated token counting once
    per occurrence. The idf is :func:`lucene_idf`.

    Parameters
    ----------
    tf : numpy.ndarray
        Frequency of the term in each document (at least 1).
    doc_len : numpy.ndarray
        Length :math:`|d|` of each document, in tokens, aligned with ``tf``.
    avgdl : float
        Mean document length of the corpus (positive).
    idf : float or numpy.ndarray
        The term's idf (or each posting's term's, aligned with ``tf``).
    k1 : float
        Term frequency saturation (rank_bm25 default 1.5).
    b : float
        Length normalisation in [0, 1] (rank_bm25 default 0.75).

    Returns
    -------
    numpy.ndarray
        The term's score in each document, aligned with ``tf``.

    Examples
    --------
    >>> okapi_scores(np.array([1.0, 2.0]), np.array([4.0, 4.0]), 4.0, 1.0, 1.5, 0.75)
    array([1.        , 1.42857143])

    References
    ----------
    .. [1] S. Robertson and H. Zaragoza, "The Probabilistic Relevance Framework: BM25 and
       Beyond", Foundations and Trends in Information Retrieval 3(4), 2009.
    .. [2] C. Kamphuis, A. de Vries, L. Boytsov and J. Lin, "Which BM25 Do You Mean? A
       Large-Scale Reproducibility Study of Scoring Variants", ECIR 2020.
    """  # noqa: D416 - NumPy sections on purpose: this is the formula docstring (STYLE.md)
    return idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl)))


class _Partition:
    """One namespace's corpus: postings with tombstones, lengths, document frequencies."""

    def __init__(self) -> None:
        self.slot_of: dict[str, int] = {}
        self.id_at: list[str | None] = []
        self.doc_terms: list[array[int] | None] = []  # per slot: term id, tf, term id, tf...
        self.doc_len = np.zeros(16, dtype=np.float64)
        self.alive = np.zeros(16, dtype=np.bool_)
        self.total_len = 0
        self.vocab: dict[str, int] = {}
        self.terms: list[str] = []
        # An array, not numpy: per-term increments on the write path are 10x cheaper.
        self.df: array[int] = array("q")
        self.post_slots: list[array[int]] = []
        self.post_tfs: list[array[int]] = []
        self._post_np: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self.slot_of)

    def __getattr__(self, name: str) -> Any:
        # A partition restored from arrays (from_arrays) builds its per-document and
        # per-term lists at the first write that needs them; searches read the arrays.
        if name in _THAWED and "_csr" in self.__dict__:
            self._thaw()
            return self.__dict__[name]
        if name in ("terms", "vocab") and "_terms_text" in self.__dict__:
            # the vocabulary at its first use but a search's (:meth:`term_id`)
            padded, count, _ = self.__dict__.pop("_terms_text")
            self.terms = padded[1:-1].split(SEP) if count else []
            self.vocab = dict(zip(self.terms, range(len(self.terms)), strict=True))
            return self.__dict__[name]
        raise AttributeError(name)

    def term_id(self, term: str) -> int | None:
        """``vocab.get(term)``; a restored partition's first ones read from its packed terms.

        Those are one string, each term between NULs: the term's last such occurrence (the
        one a dict built from them keeps) is its id, the NULs before it counted, in C (a few
        microseconds each: after :data:`_PACKED_LOOKUPS` the vocabulary is built).
        """
        lazy = self.__dict__.get("_terms_text")
        if lazy is None:
            return self.vocab.get(term)
        padded, count, left = lazy
        if left <= 0:
            return self.vocab.get(term)  # built now (__getattr__)
        self.__dict__["_terms_text"] = (padded, count, left - 1)
        if not count or SEP in term:
            return None
        at = padded.rfind(f"{SEP}{term}{SEP}")
        return padded.count(SEP, 0, at) if at >= 0 else None

    def to_arrays(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The partition as flat arrays (slots as they are), for :meth:`from_arrays`."""
        n = len(self.id_at)
        csr = self.__dict__.get("_csr")
        if csr is not None:
            post_ptr, post_slot, post_tf, doc_ptr, doc_pack = csr
        else:
            post_ptr, post_slot = _flatten(self.post_slots)
            post_tf = _flatten(self.post_tfs)[1]
            doc_ptr, doc_pack = _flatten([d if d is not None else _EMPTY for d in self.doc_terms])
        ids_s, ids_o = pack_strs([m if m is not None else "" for m in self.id_at])
        terms_s, terms_o = pack_strs(self.terms)
        arrays = {
            "ids_s": ids_s,
            "ids_o": ids_o,
            "terms_s": terms_s,
            "terms_o": terms_o,
            "alive": self.alive[:n],
            "doc_len": self.doc_len[:n],
            "df": np.frombuffer(self.df, dtype=np.int64) if len(self.df) else np.zeros(0, np.int64),
            "post_ptr": post_ptr,
            "post_slot": post_slot,
            "post_tf": post_tf,
            "doc_ptr": doc_ptr,
            "doc_pack": doc_pack,
        }
        return {"total_len": int(self.total_len)}, arrays

    @classmethod
    def from_arrays(
        cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], strs: Strings | None = None
    ) -> _Partition:
        """A partition from :meth:`to_arrays` (the arrays may be read-only views).

        Its postings stay arrays until a write, its vocabulary one string until a use other
        than a search's (:meth:`term_id`). ``strs``: the snapshot's string decoder (shared
        with its other indexes).

        Raises:
            ValueError: The arrays do not fit together.
        """
        strs = strs if strs is not None else Strings()
        part = cls.__new__(cls)
        id_at: list[str | None] = strs(arrays["ids_s"], arrays["ids_o"])  # type: ignore[assignment]
        alive = arrays["alive"].astype(np.bool_)
        n = len(id_at)
        terms_s, terms_o = arrays["terms_s"], arrays["terms_o"]
        terms: list[str] | None = None
        packed = joined(terms_s, terms_o)
        if packed is not None:  # joined by NULs: split at the first use
            text, n_terms = packed
            part.__dict__["_terms_text"] = (f"{SEP}{text}{SEP}", n_terms, _PACKED_LOOKUPS)
        else:
            terms = strs(terms_s, terms_o)
            n_terms = len(terms)
        post_ptr, doc_ptr = arrays["post_ptr"], arrays["doc_ptr"]
        sizes = (alive.size, arrays["doc_len"].size, arrays["df"].size, post_ptr.size, doc_ptr.size)
        if sizes != (n, n, n_terms, n_terms + 1, n + 1):
            raise ValueError("the BM25 arrays do not fit together")
        for i in np.flatnonzero(~alive).tolist():
            id_at[i] = None
        cap = max(16, n)
        part.doc_len = np.zeros(cap, dtype=np.float64)
        part.doc_len[:n] = arrays["doc_len"]
        part.alive = np.zeros(cap, dtype=np.bool_)
        part.alive[:n] = alive
        part.id_at = id_at
        if len(part.alive) and bool(alive.all()):  # the decoder's map of the ids
            part.id_at, part.slot_of = strs.positions(arrays["ids_s"], arrays["ids_o"])  # type: ignore[assignment]
        else:
            part.slot_of = {m: i for i, m in enumerate(id_at) if m is not None}
        part.total_len = int(meta["total_len"])
        if terms is not None:
            part.terms = terms
            part.vocab = dict(zip(terms, range(len(terms)), strict=True))
        part.df = array("q", arrays["df"].astype(np.int64).tobytes())
        part._post_np = {}
        part.__dict__["_csr"] = (  # only read: views of the blob where the types fit
            post_ptr.astype(np.int64, copy=False),
            arrays["post_slot"].astype(np.intc, copy=False),
            arrays["post_tf"].astype(np.intc, copy=False),
            doc_ptr.astype(np.int64, copy=False),
            arrays["doc_pack"].astype(np.intc, copy=False),
        )
        return part

    def _thaw(self) -> None:
        post_ptr, post_slot, post_tf, doc_ptr, doc_pack = self.__dict__.pop("_csr")
        cuts = post_ptr.tolist()
        self.post_slots = [
            array("i", post_slot[a:b].tobytes()) for a, b in zip(cuts, cuts[1:], strict=False)
        ]
        self.post_tfs = [
            array("i", post_tf[a:b].tobytes()) for a, b in zip(cuts, cuts[1:], strict=False)
        ]
        cuts = doc_ptr.tolist()
        self.doc_terms = [
            array("i", doc_pack[a:b].tobytes()) if m is not None else None
            for m, a, b in zip(self.id_at, cuts, cuts[1:], strict=False)
        ]

    @property
    def dead(self) -> int:
        return len(self.id_at) - len(self.slot_of)

    @property
    def needs_compaction(self) -> bool:
        return self.dead > _COMPACT_RATIO * len(self.id_at)

    def add(self, doc_id: str, tokens: Sequence[str]) -> None:
        self._insert(doc_id, Counter(tokens).items(), len(tokens))

    def _insert(self, doc_id: str, counts: Iterable[tuple[str, int]], length: int) -> None:
        if doc_id in self.slot_of:
            self.remove(doc_id)
        slot = len(self.id_at)
        if slot == self.doc_len.size:
            self.doc_len = np.concatenate([self.doc_len, np.zeros(slot)])
            self.alive = np.concatenate([self.alive, np.zeros(slot, dtype=np.bool_)])
        vocab, df, post_slots, post_tfs = self.vocab, self.df, self.post_slots, self.post_tfs
        cache = self._post_np
        packed: list[int] = []
        for term, tf in counts:
            tid = vocab.get(term)
            if tid is None:
                tid = self._new_term(term)
            df[tid] += 1
            post_slots[tid].append(slot)
            post_tfs[tid].append(tf)
            if cache:
                cache.pop(tid, None)
            packed += (tid, tf)
        self.slot_of[doc_id] = slot
        self.id_at.append(doc_id)
        self.doc_terms.append(array("i", packed))
        self.doc_len[slot] = length
        self.alive[slot] = True
        self.total_len += length

    def remove(self, doc_id: str) -> bool:
        # The postings keep the slot; `alive` masks it until the next compaction.
        slot = self.slot_of.pop(doc_id, None)
        if slot is None:
            return False
        packed = self.doc_terms[slot]
        if packed is not None:
            df = self.df
            for tid in packed[0::2]:
                df[tid] -= 1
        self.doc_terms[slot] = None
        self.id_at[slot] = None
        self.alive[slot] = False
        self.total_len -= int(self.doc_len[slot])
        return True

    def compacted(self) -> _Partition:
        """Return a copy without tombstones: slots renumbered, unused terms dropped."""
        fresh = _Partition()
        terms = self.terms
        for slot, (doc_id, packed) in enumerate(zip(self.id_at, self.doc_terms, strict=True)):
            if doc_id is not None and packed is not None:
                counts = [
                    (terms[tid], tf) for tid, tf in zip(packed[0::2], packed[1::2], strict=True)
                ]
                fresh._insert(doc_id, counts, int(self.doc_len[slot]))
        return fresh

    def _new_term(self, term: str) -> int:
        tid = len(self.terms)
        self.vocab[term] = tid
        self.terms.append(term)
        self.post_slots.append(array("i"))
        self.post_tfs.append(array("i"))
        self.df.append(0)
        return tid

    def postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        cached = self._post_np.get(tid)
        csr = self.__dict__.get("_csr")
        if cached is None and csr is not None:
            a, b = int(csr[0][tid]), int(csr[0][tid + 1])
            cached = (csr[1][a:b].astype(np.intp), csr[2][a:b].astype(np.float64))
            self._post_np[tid] = cached
        elif cached is None:
            slots = np.frombuffer(self.post_slots[tid], dtype=np.intc).astype(np.intp)
            tfs = np.frombuffer(self.post_tfs[tid], dtype=np.intc).astype(np.float64)
            cached = self._post_np[tid] = (slots, tfs)
        return cached

    def raw_scores(self, query_tokens: Sequence[str], k1: float, b: float) -> np.ndarray | None:
        """Score every slot (dead slots score 0.0); None when no query term is indexed."""
        n_docs = len(self.slot_of)
        if n_docs == 0 or self.total_len == 0:
            return None
        avgdl = self.total_len / n_docs
        term_id, df = self.term_id, self.df
        terms = [  # rank_bm25: a term absent from the corpus adds 0
            (tid, count)
            for term, count in Counter(query_tokens).items()
            if (tid := term_id(term)) is not None and df[tid] != 0
        ]
        if not terms:
            return None
        # Every term's postings at once: one okapi_scores over them, each term's idf and
        # count repeated along its postings; bincount adds a slot's terms in query order,
        # from 0.0, as a loop of ``scores[slots] += ...`` would (the same sums).
        posts = [self.postings(tid) for tid, _ in terms]
        sizes = [len(slots) for slots, _ in posts]
        slots = np.concatenate([s for s, _ in posts])
        tfs = np.concatenate([t for _, t in posts])
        idf = np.repeat(lucene_idf(n_docs, [df[tid] for tid, _ in terms]), sizes)
        part = okapi_scores(tfs, self.doc_len[slots], avgdl, idf, k1, b)
        if any(c != 1 for _, c in terms):  # a repeated token counts once per occurrence
            part *= np.repeat(np.array([c for _, c in terms], dtype=np.float64), sizes)
        scores = np.bincount(slots, weights=part, minlength=len(self.id_at))
        if self.dead:
            scores *= self.alive[: scores.size]
        return scores


class BM25Scores:
    """Raw BM25 scores of one query over one namespace, restricted to allowed documents.

    Built by :meth:`BM25Index.search`; valid until the index's next write.

    Attributes:
        best: The highest positive raw score among allowed documents, 0.0 if none is positive.
    """

    def __init__(
        self,
        raw: np.ndarray | None = None,
        partition: _Partition | None = None,
        allowed: Collection[str] | None = None,
    ) -> None:
        self._raw = raw
        self._part = partition
        self._allowed = allowed
        self._slots: np.ndarray | None = None  # allowed live slots; None means all
        self.best = 0.0
        if raw is None or partition is None:
            return
        if allowed is not None:
            slots = [s for s in map(partition.slot_of.get, allowed) if s is not None]
            self._slots = np.asarray(slots, dtype=np.intp)
        pool = raw if self._slots is None else raw[self._slots]
        self.best = max(float(pool.max()), 0.0) if pool.size else 0.0

    def top(self, n: int) -> list[tuple[str, float]]:
        """Return up to ``n`` allowed documents with a positive score, best first.

        Ties are broken by id so that equal scores always come out in the same order.
        """
        raw, part = self._raw, self._part
        if n <= 0 or raw is None or part is None or self.best <= 0:
            return []
        if self._slots is None:
            candidates = np.flatnonzero(raw > 0)  # dead slots hold 0.0
        else:
            candidates = self._slots[raw[self._slots] > 0]
        if candidates.size > n:
            values = raw[candidates]
            # Keep every tie of the n-th value so the id tie-break sees all of them.
            threshold = np.partition(values, values.size - n)[values.size - n]
            candidates = candidates[values >= threshold]
        id_at = part.id_at
        # (-score, id) pairs: best first, ties by id; the scores read in one array operation
        ranked = sorted(
            zip(
                [-v for v in raw[candidates].tolist()],
                [str(id_at[s]) for s in candidates.tolist()],
                strict=True,
            )
        )
        return [(doc_id, -neg) for neg, doc_id in ranked[:n]]

    def get(self, ids: Iterable[str]) -> dict[str, float]:
        """Return the raw score of each id; 0.0 for ids not live and allowed here."""
        raw, part, allowed = self._raw, self._part, self._allowed
        if raw is None or part is None:
            return dict.fromkeys(ids, 0.0)
        wanted = list(ids)
        get = part.slot_of.get
        slots = [get(m, -1) for m in wanted]
        if allowed is not None:
            slots = [s if m in allowed else -1 for m, s in zip(wanted, slots, strict=True)]
        values = raw[np.array(slots, dtype=np.intp)].tolist() if slots else []
        return {m: v if s >= 0 else 0.0 for m, s, v in zip(wanted, slots, values, strict=True)}

    def scaled(self, ids: Sequence[str]) -> dict[str, float]:
        """:meth:`get`'s scores divided by :attr:`best` and clipped to [0, 1], in one pass."""
        raw, part, allowed, best = self._raw, self._part, self._allowed, self.best
        if raw is None or part is None or best <= 0 or not ids:
            return dict.fromkeys(ids, 0.0)
        get = part.slot_of.get
        if allowed is None:
            slots = np.fromiter(map(get, ids, repeat(-1)), dtype=np.intp, count=len(ids))
        else:
            slots = np.array([get(m, -1) if m in allowed else -1 for m in ids], dtype=np.intp)
        values = np.where(slots >= 0, raw[slots], 0.0) / best
        np.minimum(np.maximum(values, 0.0, out=values), 1.0, out=values)
        return dict(zip(ids, values.tolist(), strict=True))


class BM25Index:
    """An in-memory BM25 Okapi index, updated one document at a time, one corpus per namespace.

    Scores equal ``rank_bm25.BM25Okapi(docs, k1, b).get_scores(query)`` over the live
    documents of the queried namespace (up to float rounding) with its idf replaced by
    :func:`lucene_idf`, except that where rank_bm25 would produce NaN (``b == 1`` with empty
    documents, ``k1 == 0``) a document without the term scores 0.

    Adding or removing a document costs time proportional to that document; deleted
    documents are tombstoned and a namespace is compacted once they exceed 30 % of its slots.
    Memory is postings plus per-document term lists: no dense document-term matrix.

    Ids are unique across the whole index, as in the Chroma collection it mirrors.

    Not thread-safe: the caller serialises every call. Reads are not pure either (they fill
    lazy numpy caches), so a read must never overlap a write.

    Args:
        k1: Term frequency saturation.
        b: Length normalisation, in [0, 1].
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        if not (isinstance(k1, (int, float)) and math.isfinite(k1) and k1 >= 0):
            raise ValueError(f"k1 must be a finite number >= 0, got {k1!r}")
        if not (isinstance(b, (int, float)) and 0 <= b <= 1):
            raise ValueError(f"b must be in [0, 1], got {b!r}")
        self.k1 = float(k1)
        self.b = float(b)
        self._parts: dict[str, _Partition] = {}
        self._home: dict[str, str] = {}  # doc id -> namespace
        self._version = 0

    @property
    def version(self) -> int:
        """A counter bumped by every write, for callers that cache scores."""
        return self._version

    def __len__(self) -> int:
        return len(self._home)

    def count(self, namespace: str) -> int:
        """Return the number of documents in ``namespace``."""
        part = self._parts.get(namespace)
        return len(part) if part is not None else 0

    def ids(self, namespace: str) -> set[str]:
        """Return the ids of the documents in ``namespace`` (a copy)."""
        part = self._parts.get(namespace)
        return set(part.slot_of) if part is not None else set()

    def namespaces(self) -> set[str]:
        """Return the namespaces that hold at least one document."""
        return set(self._parts)

    def add(self, namespace: str, doc_id: str, tokens: Sequence[str]) -> None:
        """Index a document, replacing the one with the same id in ``namespace``.

        Raises:
            InvalidInputError: An argument has the wrong type.
            DuplicateIdError: ``doc_id`` belongs to another namespace.
        """
        self.add_many(namespace, [(doc_id, tokens)])

    def add_many(self, namespace: str, items: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Index several documents of one namespace; the batch is checked before any write.

        Raises:
            InvalidInputError: An argument has the wrong type.
            DuplicateIdError: An id belongs to another namespace.
        """
        _check_str("namespace", namespace)
        batch = list(items)
        for doc_id, tokens in batch:
            _check_str("doc_id", doc_id)
            if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
                raise InvalidInputError(f"tokens of {doc_id!r} must be a sequence of str")
            home = self._home.get(doc_id)
            if home is not None and home != namespace:
                raise DuplicateIdError(f"id {doc_id!r} already exists in another namespace")
        if not batch:
            return
        part = self._parts.setdefault(namespace, _Partition())
        for doc_id, tokens in batch:
            part.add(doc_id, tokens)
            self._home[doc_id] = namespace
        self._settle(namespace, part)

    def remove(self, namespace: str, doc_id: str) -> bool:
        """Remove a document; return whether ``namespace`` held it."""
        part = self._parts.get(namespace)
        if part is None or not part.remove(doc_id):
            return False
        del self._home[doc_id]
        self._settle(namespace, part)
        return True

    def export(self, namespace: str) -> object | None:
        """The namespace's corpus as it is, for :meth:`restore` (``None`` if empty)."""
        return self._parts.get(namespace)

    def restore(self, namespace: str, state: object) -> None:
        """Hold a namespace exported by :meth:`export` (of an equal index), replacing it.

        Raises:
            DuplicateIdError: One of its ids belongs to another namespace.
        """
        if not isinstance(state, _Partition):
            raise TypeError("not an exported BM25 namespace")
        held = self._home
        if not held.keys().isdisjoint(state.slot_of):  # in C: the usual answer, at once
            for doc_id in state.slot_of:
                home = held.get(doc_id)
                if home is not None and home != namespace:
                    raise DuplicateIdError(f"id {doc_id!r} already exists in another namespace")
        self.drop(namespace)
        self._parts[namespace] = state
        self._home.update(dict.fromkeys(state.slot_of, namespace))
        self._version += 1

    def drop(self, namespace: str) -> None:
        """Forget a whole namespace (its owner reloads it when it is next used)."""
        part = self._parts.pop(namespace, None)
        if part is not None:
            for doc_id in part.slot_of:
                del self._home[doc_id]
            self._version += 1

    def _settle(self, namespace: str, part: _Partition) -> None:
        # After a write: drop an empty namespace, compact one that is mostly tombstones.
        self._version += 1
        if not len(part):
            del self._parts[namespace]
        elif part.needs_compaction:
            self._parts[namespace] = part.compacted()

    def remove_ids(self, ids: Iterable[str]) -> int:
        """Remove documents by id from whichever namespace holds them; return how many."""
        removed = 0
        for doc_id in ids:
            namespace = self._home.get(doc_id)
            if namespace is not None:
                removed += self.remove(namespace, doc_id)
        return removed

    def search(
        self,
        namespace: str,
        query_tokens: Sequence[str],
        allowed: Collection[str] | None = None,
        *,
        k1: float | None = None,
        b: float | None = None,
    ) -> BM25Scores:
        """Score every document of ``namespace``, keeping those in ``allowed`` (all if None).

        ``k1`` and ``b`` override the index's own for this search: the index keeps term
        frequencies and lengths, so both are free to change at query time.
        """
        part = self._parts.get(namespace)
        if part is None:
            return BM25Scores()
        k1 = self.k1 if k1 is None else k1
        b = self.b if b is None else b
        raw = part.raw_scores(query_tokens, k1, b)
        return BM25Scores(raw, part, allowed)

    def scores(
        self, namespace: str, query_tokens: Sequence[str], ids: Iterable[str]
    ) -> dict[str, float]:
        """Return the raw score of each id in ``namespace`` (0.0 for ids it does not hold)."""
        return self.search(namespace, query_tokens).get(ids)

    def top(
        self,
        namespace: str,
        query_tokens: Sequence[str],
        n: int,
        allowed: frozenset[str] | None = None,
    ) -> list[tuple[str, float]]:
        """Return up to ``n`` ``(id, raw score)`` pairs with a positive score, best first.

        ``allowed`` is applied before the cut, so a filtered-out document never takes a slot.
        Equal scores are ordered by id.
        """
        return self.search(namespace, query_tokens, allowed).top(n)


class BM25Signal:
    """The ``bm25`` signal: BM25 scores divided by the query's best allowed score.

    Scores are in [0, 1]; the best allowed match of the namespace scores 1.0, and everything
    scores 0.0 when no allowed document shares a term with the query. The last query's
    scores are kept, so ``top`` then ``score`` for the same query scores once.

    Args:
        index: The index to read.
        tokenizer: The tokenizer that built ``index``; used for ``query.text`` when
            ``query.tokens`` is empty.
    """

    name = "bm25"

    def __init__(
        self,
        index: BM25Index,
        tokenizer: Tokenizer,
        *,
        k1: float | None = None,
        b: float | None = None,
    ) -> None:
        self.index = index
        self.tokenizer = tokenizer
        self.k1 = index.k1 if k1 is None else float(k1)
        self.b = index.b if b is None else float(b)
        self._last: tuple[tuple[object, ...], BM25Scores] | None = None
        self._views: dict[tuple[float, float], BM25Signal] = {}

    def with_params(self, k1: float, b: float) -> BM25Signal:
        """This signal scoring with other ``k1`` and ``b`` (itself if they are the same).

        Learned weights carry ``bm25_k1`` / ``bm25_b`` this way: no re-indexing needed. The
        view is kept, so its last query's scores serve every later call of the same search
        (a search asks for its signals again each time its candidate table grows).
        """
        if (k1, b) == (self.k1, self.b):
            return self
        view = self._views.get((k1, b))
        if view is None:
            if len(self._views) >= 16:
                self._views.clear()
            view = self._views[k1, b] = BM25Signal(self.index, self.tokenizer, k1=k1, b=b)
        return view

    def _search(self, query: Query) -> BM25Scores:
        tokens = query.tokens or tuple(self.tokenizer(query.text))
        key = (query.namespace, tokens, query.allowed, self.index.version, self.k1, self.b)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        result = self.index.search(query.namespace, tokens, query.allowed, k1=self.k1, b=self.b)
        self._last = (key, result)
        return result

    def top(self, query: Query, n: int) -> dict[str, float]:
        """Return up to ``n`` best allowed memories of the namespace, scored in (0, 1]."""
        result = self._search(query)
        if result.best <= 0:
            return {}
        return {doc_id: raw / result.best for doc_id, raw in result.top(n)}

    def score(self, query: Query, ids: Sequence[str]) -> dict[str, float]:
        """Return a score in [0, 1] for each id; ids outside ``query.allowed`` are left out."""
        if query.allowed is not None:
            ids = [doc_id for doc_id in ids if doc_id in query.allowed]
        return self._search(query).scaled(ids)


def _check_str(what: str, value: object) -> None:
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a str, got {type(value).__name__}")
