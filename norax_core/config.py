"""Typed engine configuration: decay rates per kind, BM25 parameters, candidate pooling."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from types import MappingProxyType
from typing import Any

from norax_core.errors import InvalidInputError

DEFAULT_DECAY_DAYS: Mapping[str, float] = MappingProxyType(
    {"procedural": 365.0, "semantic": 180.0, "episodic": 30.0, "scratchpad": 1.0}
)
"""Temporal decay constant tau (days) per built-in kind: ``exp(-age_days / tau)``."""


def _positive(name: str, value: float) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and value > 0):
        raise InvalidInputError(f"{name} must be a finite number > 0, got {value!r}")


def _non_negative(name: str, value: float) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and value >= 0):
        raise InvalidInputError(f"{name} must be a finite number >= 0, got {value!r}")


def _count(name: str, value: int, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidInputError(f"{name} must be an int >= {low}, got {value!r}")


class QueryEntities(str, Enum):
    """How a search finds its query's entities for the graph signal."""

    MATCH = "match"
    """Match the query's words against the namespace's entity graph (no model; the default)."""
    EXTRACT = "extract"
    """Run the entity extractor (spaCy) on the query, as on stored texts."""


@dataclass(frozen=True)
class NoraxConfig:
    """How the engine scores and pools candidates.

    Attributes:
        decay_days: tau in days per memory kind for the temporal signal.
        default_decay_days: tau for custom kinds not listed in ``decay_days``.
        bm25_k1: BM25 term-frequency saturation (applied at query time, so weights files
            may carry a learned value).
        bm25_b: BM25 length normalisation (query time too).
        stem: Snowball-stem BM25 tokens.
        stopwords: Stop-word list name for BM25 (``"english"``) or ``None``.
        pool_min: Each signal proposes at least this many candidates.
        pool_factor: ... and at least ``pool_factor * k``.
        recency_candidates: Beside other signals, the temporal signal proposes this many
            most recent memories (0: none; it still scores every candidate). When it is the
            only signal with a weight, it proposes a full pool.
        context_window: Context propagation (:mod:`norax_core.signals.context`): a memory
            gains a share of the best fused score among this many memories on each side of
            it in time (same namespace and session). 0 turns it off.
        context_weight: That share (lambda); 0 turns context propagation off.
        context_gap_seconds: Memories further apart in time than this are in different
            sessions and never each other's context.
        embed_context: Context in the embedding (:func:`norax_core.signals.context.
            embedding_text`): a memory is embedded with up to this many memories just
            before it (same namespace and session, as stored when it is added). 0 embeds
            its own text only. An add-time parameter: it cannot change at query time; a
            store's default weights may set it.
        latest_wins_weight: Latest wins (:mod:`norax_core.latest`, the attribute rule
            :func:`~norax_core.latest.state_wins`): among the best ``latest_wins_depth``
            candidates, a newer memory with an update cue that states the same attribute of
            the same subject as an older, better-scored one passes it by ``weight - 1`` times
            its own score. At most 1 (the default 0) turns it off.
        latest_wins_depth: How many of the best candidates latest wins compares and reorders
            (it never changes which memories are the best ``latest_wins_depth``).
        latest_wins_shared: Query words both memories must hold to state the same attribute
            of the same subject (all of them when the query has fewer), neither being an
            assistant's reply.
        latest_wins_cues: The attribute rule's cues: ``"update"`` (any update cue) or
            ``"change"`` (only the outright ones: moved, switched, rescheduled, ...).
        latest_wins_subject: In the attribute rule, whether a newer memory with an outright
            change cue (or a change verb of :data:`norax_core.latest.SHIFT_WORDS`) that shares
            only the subject with the older one (a query word both hold, the older holding
            two of them or the two sharing another word) passes it too:
            "Kenji moved to Sapporo" after "Kenji lives in Osaka", "After the reorg Aiko
            reports to Rosa" after "Aiko reports to Farah".
        bridge_weight: Bridges (:mod:`norax_core.stages.bridges`): every candidate gains this
            much times its normalised walk mass in a personalised PageRank over the
            namespace's memories and entities, seeded by the best ``bridge_seeds`` first-pass
            memories and the query's entities, and the best ``bridge_candidates`` memories the
            walk reaches join the candidates. 0 turns it off.
        bridge_seeds: First-pass memories (best after context propagation) that seed the walk.
        bridge_candidates: Memories with the most walk mass that join the candidates.
        bridge_seed_gain: Whether the seeds also gain what the walk brings them beyond their
            own restart mass (a seed linked to the other seeds or to the query by rare
            entities rises); without it a seed's walk mass is 0.
        bridge_skip_query: Whether the walk leaves out the query's own entities (it then
            links the first pass's memories only through their other entities).
        period_boost: Period boost (:mod:`norax_core.stages.period`): when the query names a
            period ("in June", "last week"), a candidate created inside it scores
            ``1 + period_boost`` times its own score (a boost, never a filter). 0 turns it off.
        opener_boost: Turns (:mod:`norax_core.stages.turns`): a memory that opens its session
            scores ``1 + opener_boost`` times its score, fading as
            ``exp(-position / opener_span)`` with its position in the session (a session's
            first turns state its topic). 0 turns it off.
        opener_span: Positions over which the opener boost fades (``e``-fold).
        speaker_boost: Turns: when the query asks what the user said ("in what order did I
            bring up ..."; :attr:`QueryPlan.own_words <norax_core.query.QueryPlan.own_words>`),
            a memory whose ``role`` metadata is ``"user"`` scores ``1 + speaker_boost`` times
            its score. 0 turns it off.
        supersede_weight: Supersession (:mod:`norax_core.stages.supersede`): a memory linked
            at write time as superseding a candidate (:mod:`norax_core.supersession`) joins
            the candidates and closes this share of the gap to the older one (above 1:
            passes it). 0 turns it off.
        supersede_depth: How many of the best candidates lift the memories that supersede
            them.
        supersede_pull: Whether a superseding memory that is not among those best
            candidates is lifted too (joining the candidates); without, supersession only
            reorders the best ``supersede_depth``, so recall at that depth is unchanged.
        exchange_weight: Exchange (:mod:`norax_core.stages.exchange`): when a memory is
            among the best ``exchange_depth`` candidates, its exchange partner (the reply to
            a user message, or the user message a reply answers: neighbours in the same
            session, the earlier one with ``role`` metadata ``"user"``) rises to this share
            of its score, right after it, if it is a candidate. In [0, 1]; 0 turns it off.
        exchange_depth: How many of the best candidates bring their partner.
        lane_slots: The lane (:mod:`norax_core.stages.lane`): up to this many of the
            namespace's standing instructions and preferences (inferred kinds,
            :mod:`norax_core.kinds`) that match the query get reserved places in the top k
            (where: ``lane_place``). 0 turns it off.
        lane_similarity: The least cosine between the query and a standing memory for it
            to match (unrelated rules stay out).
        lane_margin: A standing memory below ``lane_similarity`` also matches when its
            cosine with the query exceeds the next best standing memory's (the one just
            past the lane's slots) by this much and reaches ``lane_floor``: a rule that
            clearly applies better than the namespace's others. In [0, 2]; 0 turns this
            relative rule off.
        lane_floor: The least cosine of a standing memory the relative rule accepts.
        session_spread: Turns: for a query asking for an order ("in what order did I bring
            up ..."; :attr:`QueryPlan.ordering <norax_core.query.QueryPlan.ordering>`), the
            ``j``-th best candidate of a session keeps ``(1 - session_spread) ** j`` of its
            score, so the results spread over the sessions. In [0, 1); 0 turns it off.
        lane_place: Where the lane's memories go: 0, the last places of the top k (one
            already in it stays); ``p >= 1``, the places from ``p`` on, the best match at
            ``p``, even for one already lower in the top k.
        dense_exact_limit: A namespace of at most this many memories is ranked by the dense
            signal exactly, over its own vectors held in process (one float32 matrix, loaded
            from Chroma on first use); a larger one through Chroma's HNSW index, which is
            approximate and shared by every namespace (so other tenants can change what it
            finds). 250,000 MiniLM vectors take 366 MB.
        dense_cache_mb: Memory for those matrices (MB); the least recently used namespaces'
            are dropped beyond it and reloaded from Chroma when next searched.
        index_cache_mb: Memory for the loaded namespaces' derived indexes (BM25, recency,
            entity graph; MB, estimated per memory by :func:`norax_core.indexes.row_bytes`).
            A namespace loads on first use (from the sidecar, or from Chroma for a client of
            a server); the least recently used ones are dropped beyond this and reloaded
            when next used. The namespace in use is kept even if it alone exceeds it. The
            default holds about 140,000 short chat memories (7.3 KB each).
        query_entities: How a search finds the query's entities (:class:`QueryEntities`):
            ``"match"`` looks the query's words up in the namespace's entity graph (only graph
            nodes can score, so this loses nothing a model would find there, and costs
            microseconds instead of a spaCy run); ``"extract"`` runs the extractor on it.
    """

    decay_days: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_DECAY_DAYS))
    default_decay_days: float = 30.0
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    stem: bool = True
    stopwords: str | None = "english"
    pool_min: int = 50
    pool_factor: int = 3
    recency_candidates: int = 5
    context_window: int = 0
    context_weight: float = 0.0
    context_gap_seconds: float = 3600.0
    embed_context: int = 0
    latest_wins_weight: float = 0.0
    latest_wins_depth: int = 10
    latest_wins_shared: int = 3
    latest_wins_cues: str = "update"
    latest_wins_subject: bool = False
    bridge_weight: float = 0.0
    bridge_seeds: int = 5
    bridge_candidates: int = 10
    bridge_seed_gain: bool = False
    bridge_skip_query: bool = False
    period_boost: float = 0.0
    opener_boost: float = 0.0
    opener_span: float = 10.0
    speaker_boost: float = 0.0
    supersede_weight: float = 0.0
    supersede_depth: int = 10
    supersede_pull: bool = True
    exchange_weight: float = 0.0
    exchange_depth: int = 5
    lane_slots: int = 0
    lane_similarity: float = 0.35
    lane_margin: float = 0.0
    lane_floor: float = 0.1
    session_spread: float = 0.0
    lane_place: int = 0
    dense_exact_limit: int = 250_000
    dense_cache_mb: float = 1024.0
    index_cache_mb: float = 1024.0
    query_entities: QueryEntities | str = QueryEntities.MATCH

    def __post_init__(self) -> None:
        if not isinstance(self.decay_days, Mapping):
            raise InvalidInputError(
                f"decay_days must be a mapping of kind -> days, got {self.decay_days!r}"
            )
        for kind, tau in self.decay_days.items():
            _positive(f"decay_days[{kind!r}]", tau)
        _positive("default_decay_days", self.default_decay_days)
        _positive("bm25_k1", self.bm25_k1)
        b = self.bm25_b
        if isinstance(b, bool) or not (isinstance(b, (int, float)) and 0.0 <= b <= 1.0):
            raise InvalidInputError(f"bm25_b must be a number in [0, 1], got {b!r}")
        _count("pool_min", self.pool_min, 1)
        _count("pool_factor", self.pool_factor, 1)
        _count("recency_candidates", self.recency_candidates, 0)
        if isinstance(self.context_window, bool) or not isinstance(self.context_window, int):
            raise InvalidInputError(f"context_window must be an int, got {self.context_window!r}")
        if self.context_window < 0:
            raise InvalidInputError(f"context_window must be >= 0, got {self.context_window}")
        w = self.context_weight
        if isinstance(w, bool) or not (isinstance(w, (int, float)) and math.isfinite(w) and w >= 0):
            raise InvalidInputError(f"context_weight must be a finite number >= 0, got {w!r}")
        _positive("context_gap_seconds", self.context_gap_seconds)
        e = self.embed_context
        if isinstance(e, bool) or not isinstance(e, int) or e < 0:
            raise InvalidInputError(f"embed_context must be an int >= 0, got {e!r}")
        lw = self.latest_wins_weight
        if isinstance(lw, bool) or not (
            isinstance(lw, (int, float)) and math.isfinite(lw) and lw >= 0
        ):
            raise InvalidInputError(f"latest_wins_weight must be a finite number >= 0, got {lw!r}")
        depth = self.latest_wins_depth
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 2:
            raise InvalidInputError(f"latest_wins_depth must be an int >= 2, got {depth!r}")
        _count("latest_wins_shared", self.latest_wins_shared, 1)
        if not isinstance(self.latest_wins_subject, bool):
            raise InvalidInputError(
                f"latest_wins_subject must be True or False, got {self.latest_wins_subject!r}"
            )
        if self.latest_wins_cues not in ("update", "change"):
            raise InvalidInputError(
                f"latest_wins_cues must be 'update' or 'change', got {self.latest_wins_cues!r}"
            )
        bw = self.bridge_weight
        if isinstance(bw, bool) or not (
            isinstance(bw, (int, float)) and math.isfinite(bw) and bw >= 0
        ):
            raise InvalidInputError(f"bridge_weight must be a finite number >= 0, got {bw!r}")
        _count("bridge_seeds", self.bridge_seeds, 1)
        _count("bridge_candidates", self.bridge_candidates, 0)
        for flag in ("bridge_seed_gain", "bridge_skip_query"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidInputError(
                    f"{flag} must be true or false, got {getattr(self, flag)!r}"
                )
        for name in (
            "period_boost",
            "opener_boost",
            "speaker_boost",
        ):
            _non_negative(name, getattr(self, name))
        os_ = self.opener_span
        if isinstance(os_, bool) or not (
            isinstance(os_, (int, float)) and math.isfinite(os_) and os_ > 0
        ):
            raise InvalidInputError(f"opener_span must be a finite number > 0, got {os_!r}")
        _non_negative("supersede_weight", self.supersede_weight)
        _count("supersede_depth", self.supersede_depth, 1)
        if not isinstance(self.supersede_pull, bool):
            raise InvalidInputError(
                f"supersede_pull must be True or False, got {self.supersede_pull!r}"
            )
        xw = self.exchange_weight
        if isinstance(xw, bool) or not (isinstance(xw, (int, float)) and 0 <= xw <= 1):
            raise InvalidInputError(f"exchange_weight must be a number in [0, 1], got {xw!r}")
        _count("exchange_depth", self.exchange_depth, 1)
        _count("lane_slots", self.lane_slots, 0)
        ls = self.lane_similarity
        if isinstance(ls, bool) or not (isinstance(ls, (int, float)) and -1 <= ls <= 1):
            raise InvalidInputError(f"lane_similarity must be a number in [-1, 1], got {ls!r}")
        lm = self.lane_margin
        if isinstance(lm, bool) or not (isinstance(lm, (int, float)) and 0 <= lm <= 2):
            raise InvalidInputError(f"lane_margin must be a number in [0, 2], got {lm!r}")
        lf = self.lane_floor
        if isinstance(lf, bool) or not (isinstance(lf, (int, float)) and -1 <= lf <= 1):
            raise InvalidInputError(f"lane_floor must be a number in [-1, 1], got {lf!r}")
        sp = self.session_spread
        if isinstance(sp, bool) or not (isinstance(sp, (int, float)) and 0 <= sp < 1):
            raise InvalidInputError(f"session_spread must be a number in [0, 1), got {sp!r}")
        _count("lane_place", self.lane_place, 0)
        limit = self.dense_exact_limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInputError(f"dense_exact_limit must be an int >= 0, got {limit!r}")
        _positive("dense_cache_mb", self.dense_cache_mb)
        ic = self.index_cache_mb
        ok = isinstance(ic, (int, float)) and not isinstance(ic, bool)
        if not (ok and math.isfinite(ic) and ic >= 0):
            raise InvalidInputError(f"index_cache_mb must be a finite number >= 0, got {ic!r}")
        if not isinstance(self.stem, bool):
            raise InvalidInputError(f"stem must be True or False, got {self.stem!r}")
        sw = self.stopwords
        if sw is not None and not isinstance(sw, str):
            raise InvalidInputError(f"stopwords must be a list name or None, got {sw!r}")
        try:
            object.__setattr__(self, "query_entities", QueryEntities(self.query_entities))
        except ValueError:
            valid = ", ".join(m.value for m in QueryEntities)
            raise InvalidInputError(
                f"query_entities must be one of {valid}, got {self.query_entities!r}"
            ) from None
        object.__setattr__(self, "decay_days", MappingProxyType(dict(self.decay_days)))

    @property
    def context_on(self) -> bool:
        """Whether searches propagate context between neighbouring memories."""
        return self.context_window > 0 and self.context_weight > 0

    @property
    def latest_on(self) -> bool:
        """Whether searches apply the latest-wins rule."""
        return self.latest_wins_weight > 1

    @property
    def bridges_on(self) -> bool:
        """Whether searches take the bridge step over the entity graph."""
        return self.bridge_weight > 0

    def tau_days(self, kind: str) -> float:
        """Decay constant (days) for ``kind``."""
        return float(self.decay_days.get(kind, self.default_decay_days))

    def pool_size(self, k: int) -> int:
        """How many candidates each signal proposes for a top-``k`` search."""
        return max(self.pool_min, self.pool_factor * k)

    def with_params(self, params: Mapping[str, Any]) -> NoraxConfig:
        """Return a copy with learned parameters (from a weights file) applied."""
        known = {f for f in self.__dataclass_fields__}
        unknown = set(params) - known
        if unknown:
            raise InvalidInputError(
                f"unknown config parameters {sorted(unknown)}; valid: {sorted(known)}"
            )
        merged = dict(params)
        if "decay_days" in merged:
            merged["decay_days"] = {**self.decay_days, **merged["decay_days"]}
        return replace(self, **merged)
