"""What the inspector shows, as pure functions over the engine's own objects.

Generic over keys: a result's signals and explanation stages are whatever
:meth:`~norax_core.SearchResult.to_dict` carries, a memory's fields whatever
:class:`~norax_core.Memory` has, so the page follows the engine as stages come and go.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import networkx as nx

from norax_core.models import Memory, SearchResult
from norax_core.weights import FusionMethod, Weights

SHOWN = 3
"""Decimals the page shows of a score; the sentences use the same."""
_EXACT = 1e-6  # weighted contributions count as the fused score only if they sum to it


def memory_json(memory: Memory) -> dict[str, Any]:
    """Every field of a memory, JSON-ready (times as ISO 8601, tuples as lists)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(memory):
        value = getattr(memory, f.name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def contributions(signals: Mapping[str, float], fused: float, weights: Weights) -> dict[str, float]:
    """Each signal's share of the fused score: ``weight * score / sum of weights``.

    Empty unless the weights fuse by weighted sum and the shares add up to ``fused`` (a
    stage that reweights per query, or RRF, fuses otherwise: then only the signals show).
    """
    if weights.method is not FusionMethod.WEIGHTED_SUM:
        return {}
    w = weights.as_dict()
    total = sum(w.values())
    shares = {s: w.get(s, 0.0) * v / total for s, v in signals.items()}
    return shares if abs(sum(shares.values()) - fused) <= _EXACT else {}


def _fmt(x: float, sign: bool = False) -> str:
    return f"{x:+.{SHOWN}f}" if sign else f"{x:.{SHOWN}f}"


def _parts(r: Mapping[str, Any]) -> dict[str, float]:
    """What adds up to a result's score: signal shares (or the fused score), then stages."""
    expl = dict(r.get("explanation") or {})
    base = r["contributions"] or {"fused": expl.get("fused", r["score"])}
    return {**base, **{k: v for k, v in expl.items() if k != "fused"}}


def _biggest(diff: Mapping[str, float], positive: bool) -> str:
    picked = sorted(
        (kv for kv in diff.items() if (kv[1] > 0) == positive and round(kv[1], SHOWN)),
        key=lambda kv: -abs(kv[1]),
    )
    return ", ".join(f"{k} {_fmt(v, sign=True)}" for k, v in picked[:2])


def _against(r: Mapping[str, Any], other: Mapping[str, Any], label: str) -> str:
    mine, theirs = _parts(r), _parts(other)
    diff = {k: mine.get(k, 0.0) - theirs.get(k, 0.0) for k in {**mine, **theirs}}
    gains, losses = _biggest(diff, True), _biggest(diff, False)
    said = [f"gains on {gains}" if gains else "", f"loses on {losses}" if losses else ""]
    return f"Against {label}: " + ("; ".join(s for s in said if s) or "no difference shown") + "."


def _sentences(i: int, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    r, n = rows[i], len(rows)
    place = f"#{i + 1} of {n} with {_fmt(r['score'])}"
    if i > 0:
        place += f", {_fmt(rows[i - 1]['score'] - r['score'])} behind #{i}"
    if i + 1 < n:
        place += f", {_fmt(r['score'] - rows[i + 1]['score'])} ahead of #{i + 2}"
    out = [place + "."]
    expl = dict(r.get("explanation") or {})
    shares = sorted(r["contributions"].items(), key=lambda kv: -kv[1])
    if shares:
        top = ", ".join(f"{s} {_fmt(v)}" for s, v in shares[:2] if round(v, SHOWN))
        out.append(f"Signals fuse to {_fmt(expl.get('fused', r['score']))}: most from {top}.")
    else:
        sig = sorted(r["signals"].items(), key=lambda kv: -kv[1])
        out.append("Strongest signals: " + ", ".join(f"{s} {_fmt(v)}" for s, v in sig[:2]) + ".")
    stages = sorted(
        ((k, v) for k, v in expl.items() if k != "fused" and round(v, SHOWN)),
        key=lambda kv: -abs(kv[1]),
    )
    out.append(
        "Stages: " + ", ".join(f"{k} {_fmt(v, sign=True)}" for k, v in stages) + "."
        if stages
        else "No ranking stage moved it."
    )
    if i > 0:
        out.append(_against(r, rows[i - 1], f"#{i}"))
    if i + 1 < n:
        out.append(_against(r, rows[i + 1], f"#{i + 2}"))
    if r.get("matched_entities"):
        out.append("Shares with the query: " + ", ".join(r["matched_entities"]) + ".")
    return out


def explain_results(results: Sequence[SearchResult], weights: Weights) -> list[dict[str, Any]]:
    """Each result's ``to_dict()`` with its ``rank``, signal ``contributions`` and ``why``.

    Args:
        results: A search's results, best first.
        weights: The weights the search was given (each result's query intent picks its
            per-intent override, as :meth:`~norax_core.NoraxMemory.search` does).
    """
    rows: list[dict[str, Any]] = []
    for rank, r in enumerate(results, start=1):
        row = r.to_dict()
        intent = r.query_plan.intent if r.query_plan is not None else None
        fused = r.explanation.fused if r.explanation is not None else r.score
        row["rank"] = rank
        row["contributions"] = contributions(r.signals, fused, weights.for_intent(intent))
        rows.append(row)
    for i, row in enumerate(rows):
        row["why"] = _sentences(i, rows)
    return rows


def graph_picture(
    memory: Memory, graph: nx.Graph, shared: Mapping[str, Sequence[str]], *, listed: int = 10
) -> dict[str, Any]:
    """A memory's entity-graph neighbourhood as positioned nodes and edges for the page.

    The memory is linked to its entities; their strongest neighbours and the co-occurrence
    edges among them are laid out around it (a seeded spring layout, so the same store draws
    the same picture). Coordinates are in [0, 1].

    Args:
        memory: The memory.
        graph: Its neighbourhood (:meth:`~norax_core.store.Store.neighbourhood`).
        shared: For each of its entities, the other memories that mention it.
        listed: At most this many memory ids listed per entity.
    """
    me = ("memory", memory.id)
    g = nx.Graph()
    g.add_node(me)
    for name, attrs in graph.nodes(data=True):
        g.add_node(("entity", name), **attrs)
        if attrs.get("seed"):
            g.add_edge(me, ("entity", name), weight=1)
    g.add_edges_from((("entity", a), ("entity", b), d) for a, b, d in graph.edges(data=True))
    pos = nx.spring_layout(g, seed=7) if len(g) > 1 else {me: (0.0, 0.0)}
    lo = [min(p[i] for p in pos.values()) for i in (0, 1)]  # each axis stretched to [0, 1]
    span = [max(p[i] for p in pos.values()) - lo[i] or 1.0 for i in (0, 1)]
    at = {n: ((x - lo[0]) / span[0], (y - lo[1]) / span[1]) for n, (x, y) in pos.items()}
    nodes = [
        {
            "key": f"{kind}:{name}",
            "type": kind,
            "label": name,
            "x": round(at[(kind, name)][0], 4),
            "y": round(at[(kind, name)][1], 4),
            **{k: v for k, v in attrs.items() if isinstance(v, (int, float, str, bool))},
        }
        for (kind, name), attrs in sorted(g.nodes(data=True))
    ]
    edges = [
        {"source": ":".join(a), "target": ":".join(b), "weight": d["weight"]}
        for a, b, d in g.edges(data=True)
    ]
    return {
        "id": memory.id,
        "nodes": nodes,
        "edges": edges,
        "shared": {e: {"ids": list(ids[:listed]), "total": len(ids)} for e, ids in shared.items()},
    }
