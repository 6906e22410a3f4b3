"""Scoring a candidate set that another retriever found: the reranking path of the adapters.

A store scores its own memories (:meth:`NoraxMemory.search`). A reranker gets a handful of
texts from somewhere else (a vector index, a web search, another store) and must score them
with the same four signals. :func:`score_candidate_set` does that over the candidates alone;
:func:`store_signal_scores` reads the scores a store gives to candidates it holds. Both are
framework-free, so every adapter (LlamaIndex's postprocessor today) stays a thin converter.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from norax_core import validation as check
from norax_core.config import NoraxConfig
from norax_core.engine import NoraxMemory, WeightsLike, resolve_weights
from norax_core.errors import InvalidInputError, NoraxError
from norax_core.models import SIGNALS
from norax_core.signals.base import Query
from norax_core.signals.bm25 import lucene_idf, okapi_scores
from norax_core.signals.dense import cosine_to_unit
from norax_core.signals.graph import EntityGraph, GraphSignal
from norax_core.signals.temporal import SECONDS_PER_DAY, decay
from norax_core.tokenize import Tokenizer

if TYPE_CHECKING:
    from norax_core.embedders import Embedder
    from norax_core.entities import EntityExtractor

__all__ = [
    "ascore_candidate_set",
    "lucene_idf",
    "score_candidate_set",
    "store_signal_scores",
    "to_timestamp",
]

SignalScores = dict[str, dict[str, float]]
"""``{signal: {id: score in [0, 1]}}`` for the four signals of :data:`~norax_core.SIGNALS`."""

_NAMESPACE = "candidates"  # the one namespace of the throw-away indexes


def to_timestamp(value: Any, what: str = "time") -> float | None:
    """Epoch seconds from a datetime, date, ISO 8601 string or number; ``None`` stays ``None``.

    Naive datetimes, dates and ISO strings without an offset are read as UTC.

    Raises:
        InvalidInputError: ``value`` is none of these, or not a valid time.
    """
    if value is None:
        return None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time(), tzinfo=timezone.utc)
    return check.timestamp(value, what)


@dataclass(frozen=True)
class _Batch:
    """A validated candidate set."""

    query: str
    ids: list[str]
    texts: list[str]
    times: list[float | None]
    kinds: list[str]
    now: float
    config: NoraxConfig

    @property
    def scorable(self) -> list[int]:
        """Positions of candidates with text (blank ones score 0 on text signals)."""
        return [i for i, t in enumerate(self.texts) if t.strip()]

    @property
    def to_embed(self) -> list[str]:
        """What the embedder gets: the query, then the scorable texts."""
        return [self.query, *(self.texts[i] for i in self.scorable)]


def _batch(
    query: str,
    texts: Sequence[str],
    ids: Sequence[str],
    times: Sequence[Any] | None,
    kinds: str | Sequence[str],
    config: NoraxConfig | None,
    now: Any,
) -> _Batch:
    text = check.query(query)
    if isinstance(texts, str) or isinstance(ids, str):
        raise InvalidInputError("texts and ids must be sequences, not single strings")
    text_list, id_list = list(texts), list(ids)
    if len(text_list) != len(id_list):
        raise InvalidInputError(f"{len(text_list)} texts but {len(id_list)} ids")
    for i, t in enumerate(text_list):
        if not isinstance(t, str):
            raise InvalidInputError(f"text #{i} is a {type(t).__name__}, not a string")
    check.ids(id_list, len(id_list))  # non-empty, unique strings
    n = len(id_list)
    raw_times = [None] * n if times is None else list(times)
    if len(raw_times) != n:
        raise InvalidInputError(f"{len(raw_times)} times but {n} ids")
    stamps = [
        to_timestamp(t, f"time of {mid!r}") for mid, t in zip(id_list, raw_times, strict=True)
    ]
    raw_kinds = [kinds] * n if isinstance(kinds, str) else list(kinds)
    if len(raw_kinds) != n:
        raise InvalidInputError(f"{len(raw_kinds)} kinds but {n} ids")
    kind_list = [check.name(k, "kind") for k in raw_kinds]
    clock = to_timestamp(now, "now")
    return _Batch(
        query=text,
        ids=id_list,
        texts=text_list,
        times=stamps,
        kinds=kind_list,
        now=clock if clock is not None else datetime.now(timezone.utc).timestamp(),
        config=config or NoraxConfig(),
    )


def _bm25(batch: _Batch) -> dict[str, float]:
    # Candidates were chosen for matching the query, so its terms are often in half of them
    # or more: Lucene's idf (the store's too) keeps every shared term positive.
    cfg = batch.config
    tokenizer = Tokenizer(stem=cfg.stem, stopwords=cfg.stopwords)
    docs = [Counter(tokenizer(t)) for t in batch.texts]
    lengths = np.array([sum(d.values()) for d in docs], dtype=np.float64)
    raw = np.zeros(len(docs))
    avgdl = float(lengths.mean()) if len(docs) else 0.0
    if avgdl > 0:
        for term, count in Counter(tokenizer(batch.query)).items():
            tf = np.array([d[term] for d in docs], dtype=np.float64)
            has = tf > 0
            if has.any():
                idf = float(lucene_idf(len(docs), np.count_nonzero(has)))
                raw[has] += count * okapi_scores(
                    tf[has], lengths[has], avgdl, idf, cfg.bm25_k1, cfg.bm25_b
                )
    best = float(raw.max()) if raw.size else 0.0
    scores = raw / best if best > 0 else np.zeros_like(raw)
    return {mid: float(v) for mid, v in zip(batch.ids, scores.tolist(), strict=True)}


def _dense(batch: _Batch, vectors: np.ndarray | None) -> dict[str, float]:
    """Cosine of each candidate with the query; ``vectors`` is the query then the scorable."""
    out = dict.fromkeys(batch.ids, 0.0)
    if vectors is None:
        return out
    sims = cosine_to_unit(vectors[1:].astype(np.float64) @ vectors[0].astype(np.float64))
    for pos, sim in zip(batch.scorable, sims.tolist(), strict=True):
        out[batch.ids[pos]] = float(sim)
    return out


def _temporal(batch: _Batch) -> dict[str, float]:
    out = dict.fromkeys(batch.ids, 0.0)
    dated = [i for i, t in enumerate(batch.times) if t is not None]
    if not dated:
        return out
    age = np.array([(batch.now - batch.times[i]) / SECONDS_PER_DAY for i in dated])  # type: ignore[operator]
    tau = np.array([batch.config.tau_days(batch.kinds[i]) for i in dated])
    for i, score in zip(dated, decay(age, tau).tolist(), strict=True):
        out[batch.ids[i]] = float(score)
    return out


def _graph(batch: _Batch, extractor: EntityExtractor | None) -> dict[str, float]:
    if extractor is None:
        return dict.fromkeys(batch.ids, 0.0)
    entities = extractor.extract(batch.texts)
    graph = EntityGraph()
    graph.add_many(_NAMESPACE, zip(batch.ids, entities, strict=True))
    query = Query(
        text=batch.query,
        namespace=_NAMESPACE,
        now=batch.now,
        entities=tuple(extractor.extract_query(batch.query)),
    )
    return GraphSignal(graph).score(query, batch.ids)


def _check_vectors(vectors: np.ndarray, batch: _Batch, embedder: Embedder) -> np.ndarray:
    if vectors.ndim != 2 or vectors.shape[0] != len(batch.scorable) + 1:
        raise NoraxError(f"embedder {embedder.name!r} returned {vectors.shape} for the batch")
    return vectors


def _score(
    batch: _Batch,
    embedder: Embedder | None,
    vectors: np.ndarray | None,
    extractor: EntityExtractor | None,
) -> SignalScores:
    """Every signal's scores, given ``embedder``'s ``vectors`` of ``batch.to_embed``.

    Everything the sync and async scorers share but obtaining the vectors (I/O).
    """
    if embedder is not None and vectors is not None:
        vectors = _check_vectors(vectors, batch, embedder)
    return {
        "bm25": _bm25(batch),
        "dense": _dense(batch, vectors),
        "temporal": _temporal(batch),
        "graph": _graph(batch, extractor),
    }


def score_candidate_set(
    query: str,
    texts: Sequence[str],
    ids: Sequence[str],
    times: Sequence[Any] | None = None,
    kinds: str | Sequence[str] = "episodic",
    *,
    embedder: Embedder | None,
    extractor: EntityExtractor | None,
    config: NoraxConfig | None = None,
    now: Any = None,
) -> SignalScores:
    """Score candidates found elsewhere with the four signals, using only the candidates.

    Scoring a candidate set differs from scoring inside a store (:meth:`NoraxMemory.search`):

    * BM25 statistics (document count, average length, document frequencies) come from the
      candidates only, and scores are divided by the best candidate's: the best keyword match
      of the set scores 1.0 however weak it is. The idf is Lucene's (:func:`lucene_idf`), as
      in the store.
    * The entity graph spans only the candidates: entity IDF, co-occurrence edges and
      Louvain communities come from the candidates' entities, built afresh for each call,
      with none of the history a store accumulates from earlier memories.
    * Normalisation is over the candidate set (BM25 by its best candidate, entity IDF by
      its size), so scores are comparable within one call, not across calls or with a
      store's scores.
    * Temporal scores are absolute (``exp(-age / tau_kind)``, not relative to the set), as in
      a store; a candidate without a time scores 0.
    * Dense scores are the clipped cosine with the query, as in a store, but computed with
      ``embedder`` here and now rather than read from stored vectors.

    Parameters
    ----------
    query : str
        The query text.
    texts : Sequence[str]
        The candidates' texts; a blank text scores 0 on the bm25, dense and graph signals.
    ids : Sequence[str]
        Unique candidate ids, aligned with ``texts``; the keys of the result.
    times : Sequence, optional
        Each candidate's time (datetime, date, ISO 8601 string, epoch seconds or ``None``).
    kinds : str or Sequence[str]
        Memory kind of each candidate (or one for all); picks the decay constant.
    embedder : Embedder or None
        Embeds the query and the texts; ``None`` makes every dense score 0.
    extractor : EntityExtractor or None
        Finds entities; ``None`` makes every graph score 0.
    config : NoraxConfig, optional
        BM25 parameters, tokenizer settings and decay constants (default ``NoraxConfig()``).
    now : datetime, str or float, optional
        The clock for recency; default the current time.

    Returns
    -------
    dict
        ``{signal: {id: score}}`` for the four signals, every id in every signal, scores in
        [0, 1].

    Raises
    ------
    InvalidInputError
        Blank query, mismatched lengths, duplicate or blank ids, or an unreadable time.
    NoraxError
        The embedder returned malformed vectors.

    Examples
    --------
    >>> scores = score_candidate_set(
    ...     "error E4711", ["E4711 means the token expired", "All good"], ["a", "b"],
    ...     embedder=None, extractor=None)
    >>> scores["bm25"]["a"] > scores["bm25"]["b"]
    True

    References
    ----------
    .. [1] S. Robertson and H. Zaragoza, "The Probabilistic Relevance Framework: BM25 and
       Beyond", Foundations and Trends in Information Retrieval 3(4), 2009.
    """  # noqa: D416 - NumPy sections on purpose: an algorithm docstring (STYLE.md)
    batch = _batch(query, texts, ids, times, kinds, config, now)
    vectors = None if embedder is None else embedder.embed(batch.to_embed)
    return _score(batch, embedder, vectors, extractor)


async def ascore_candidate_set(
    query: str,
    texts: Sequence[str],
    ids: Sequence[str],
    times: Sequence[Any] | None = None,
    kinds: str | Sequence[str] = "episodic",
    *,
    embedder: Embedder | None,
    extractor: EntityExtractor | None,
    config: NoraxConfig | None = None,
    now: Any = None,
) -> SignalScores:
    """Async :func:`score_candidate_set`: ``embedder.aembed``, the rest in a worker thread."""
    batch = _batch(query, texts, ids, times, kinds, config, now)
    vectors = None if embedder is None else await embedder.aembed(batch.to_embed)
    return await asyncio.to_thread(_score, batch, embedder, vectors, extractor)


def store_signal_scores(
    memory: NoraxMemory,
    query: str,
    ids: Sequence[str],
    *,
    namespace: str | None = None,
    texts: Sequence[str] | None = None,
    now: Any = None,
    weights: WeightsLike = None,
) -> SignalScores:
    """The four signal scores that ``memory`` gives to those of ``ids`` that are its memories.

    Each is scored exactly as :meth:`NoraxMemory.search` scores it in ``namespace`` (store-wide
    BM25 statistics, stored embeddings, the full entity graph). An id is one of its memories
    only if it is stored in ``namespace`` and, when ``texts`` are given, with that very text:
    a candidate that merely reuses an id (another tenant's memory, or another text under a
    known id) is left out of the result, like an unknown id, and must be scored as a
    foreign candidate (:func:`score_candidate_set`), never with the stored memory's scores.

    Args:
        memory: The store.
        query: The query text.
        ids: Candidate ids; unknown ones are ignored.
        namespace: The only namespace whose memories count; ``None`` is ``"default"``, as
            in :meth:`NoraxMemory.search`.
        texts: The candidates' texts, aligned with ``ids``; ``None`` trusts the ids.
        now: The clock for recency (default now).
        weights: Only their learned ``params`` (e.g. decay constants) matter here; default
            the store's weights.

    Returns:
        ``{signal: {id: score}}`` over the ids that are memories of ``namespace``.

    Raises:
        InvalidInputError: ``texts`` and ``ids`` differ in length, or a bad namespace.
    """
    ns = check.namespace(namespace)
    id_list = list(ids)
    if texts is not None and len(texts) != len(id_list):
        raise InvalidInputError(f"{len(texts)} texts but {len(id_list)} ids")
    base = memory.weights if weights is None else resolve_weights(weights)
    text_of: dict[str, str] = {}
    for mid, text in zip(id_list, texts or (), strict=False):
        text_of.setdefault(mid, text)  # a repeated id: its first text, as the adapters keep
    members = [
        mem.id
        for mem in memory.get(list(dict.fromkeys(id_list)), namespace=ns)
        if texts is None or text_of[mem.id] == mem.text
    ]
    out: SignalScores = {s: {} for s in SIGNALS}
    if members:
        pool = memory.candidates(query, namespace=ns, now=now, weights=base, ids=members)
        for mid in pool.ids:
            for s in SIGNALS:
                out[s][mid] = pool.signals[s].get(mid, 0.0)
    return out
