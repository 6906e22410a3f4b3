"""Steady searches, recorded exactly: the check that a hot-path change leaves results unchanged.

``run`` copies a kept scale store (``benchmarks/scale.py --keep DIR``; the kept folder itself is
never opened), opens the copy embedded with the precomputed query embeddings of ``DIR`` and
runs ``--searches`` searches (``k=10``, ``now`` = the scale benchmark's year end) over the four
1k-memory namespaces and the four largest others, after one warm-up search per namespace and
the community runs they submitted (so each steady search reads them, however slow the worker).
Every result's ``to_dict()`` (ids, order, scores, signals, matched entities, plan, explanation)
is pickled to ``--out`` with the main-thread CPU per search (``time.process_time``).
``compare A B`` says whether two recordings are identical and where they first differ. With
``--tolerance T`` it accepts float values (scores, signals, explanation parts) that differ by at
most ``T``, for changes that reorder floating-point sums; ids, order, texts, entities and plans
must still be equal, so a ranking that moves fails it. With ``--first`` the warm-up searches are
recorded too, one random query per namespace (``random.Random(5)``) instead of the first query:
the first search of each namespace, which builds its lazy per-namespace views, is compared as
well (``compare`` checks it when both recordings hold it); the steady searches are the same
either way. With ``--url`` the searches are a client's
(``NoraxMemory(client=HttpClient)``) of ``chroma run --path COPY`` serving a copy the caller
made of ``DIR/store-N`` (never the kept folder): its results, texts and metadata included, must
equal the embedded store's::

    PYTHONPATH=/tmp/base python benchmarks/steady_identity.py run --work /work/stores/k1 \\
        --n 10000 --out /tmp/base-10k.pkl
    PYTHONPATH=$PWD python benchmarks/steady_identity.py run --work /work/stores/k1 \\
        --n 10000 --out /tmp/new-10k.pkl [--profile /tmp/new.prof]
    python benchmarks/steady_identity.py compare /tmp/base-10k.pkl /tmp/new-10k.pkl \\
        [--tolerance 1e-9]
"""

from __future__ import annotations

import argparse
import cProfile
import pickle
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_store import (  # noqa: E402
    COLD_COUNT,
    YEAR_END,
    K,
    _inputs,
    client_for,
    lookup_embedder,
    namespace_sizes,
    ns_name,
)


def _namespaces(n: int) -> list[str]:
    sizes = namespace_sizes(n)
    others = sorted(range(COLD_COUNT, len(sizes)), key=lambda i: -int(sizes[i]))[:COLD_COUNT]
    return [ns_name(i) for i in range(COLD_COUNT)] + [ns_name(i) for i in others]


def run(
    work: Path,
    n: int,
    searches: int,
    out: Path,
    profile: Path | None,
    url: str | None = None,
    first: bool = False,
) -> None:
    from norax_core import NoraxMemory
    from norax_core.entities import load_extractor

    _, _, queries, qemb = _inputs(work)
    emb = lookup_embedder(dict(zip(queries, qemb, strict=True)))
    extractor = load_extractor()
    names = _namespaces(n)
    rng = random.Random(7)
    asks = [(rng.choice(queries), names[i % len(names)]) for i in range(searches)]
    pick = random.Random(5)
    warm = [(pick.choice(queries) if first else queries[0], ns) for ns in names]
    firsts: list[list[dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="steady-identity-") as tmp:
        if url:
            mem = NoraxMemory(client=client_for(url), embedder=emb, extractor=extractor)
        else:
            folder = Path(tmp) / "store"
            shutil.copytree(work / f"store-{n}", folder)
            mem = NoraxMemory(folder, embedder=emb, extractor=extractor)
        try:
            for q, ns in warm:  # loads every namespace: the recording is of steady searches
                got = mem.search(q, k=K, namespace=ns, now=YEAR_END)
                if first:
                    firsts.append([r.to_dict() for r in got])
            with mem.store.lock:  # the community runs the warm-ups submitted: adopted next
                mem.store.indexes.graph.settle()
            prof = cProfile.Profile() if profile else None
            results: list[list[dict[str, Any]]] = []
            cpu: list[float] = []
            for q, ns in asks:
                if prof is not None:
                    prof.enable()
                t0 = time.process_time()
                got = mem.search(q, k=K, namespace=ns, now=YEAR_END)
                cpu.append(time.process_time() - t0)
                if prof is not None:
                    prof.disable()
                results.append([r.to_dict() for r in got])
            if prof is not None and profile is not None:
                prof.dump_stats(str(profile))
        finally:
            mem.close()
    record: dict[str, Any] = {"asks": asks, "results": results, "cpu": cpu}
    if first:
        record["first"] = {"asks": warm, "results": firsts}
    out.write_bytes(pickle.dumps(record))
    ms = sorted(c * 1000.0 for c in cpu)
    print(
        f"{len(asks)} searches over {len(names)} namespaces: CPU per search "
        f"mean {statistics.fmean(ms):.2f} ms, p50 {ms[len(ms) // 2]:.2f} ms"
    )


def _same(x: Any, y: Any, tolerance: float) -> bool:
    """``x == y``, except that floats may differ by ``tolerance`` (bools and ints must be equal)."""
    if isinstance(x, float) and isinstance(y, float):
        return abs(x - y) <= tolerance
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k], tolerance) for k in x)
    if isinstance(x, list | tuple) and isinstance(y, list | tuple):
        return len(x) == len(y) and all(_same(i, j, tolerance) for i, j in zip(x, y, strict=True))
    return bool(type(x) is type(y) and x == y)


def _drift(x: Any, y: Any) -> float:
    """The largest difference between two equal-shaped values' floats."""
    if isinstance(x, float) and isinstance(y, float):
        return abs(x - y)
    if isinstance(x, dict):
        return max((_drift(x[k], y[k]) for k in x), default=0.0)
    if isinstance(x, list | tuple):
        return max((_drift(i, j) for i, j in zip(x, y, strict=True)), default=0.0)
    return 0.0


def compare(a: Path, b: Path, tolerance: float = 0.0) -> int:
    left, right = pickle.loads(a.read_bytes()), pickle.loads(b.read_bytes())
    if "first" in left and "first" in right:  # the first searches of the namespaces
        print("first searches: ", end="")
        got = _compare(left["first"], right["first"], tolerance)
        if got:
            return got
        print("steady searches: ", end="")
    return _compare(left, right, tolerance)


def _compare(left: dict[str, Any], right: dict[str, Any], tolerance: float) -> int:
    if left["asks"] != right["asks"]:
        print("the two recordings ran different searches")
        return 2
    for i, (x, y) in enumerate(zip(left["results"], right["results"], strict=True)):
        if not _same(x, y, tolerance):
            q, ns = left["asks"][i]
            print(f"search {i} ({ns}: {q!r}) differs")
            for j, (rx, ry) in enumerate(zip(x, y, strict=False)):
                if not _same(rx, ry, tolerance):
                    keys = [key for key in rx if not _same(rx[key], ry.get(key), tolerance)]
                    print(f"  result {j}: {keys}")
                    for key in keys[:3]:
                        print(f"    {key}: {rx[key]!r}\n    {' ' * len(key)}  {ry[key]!r}")
                    break
            return 1
    count = sum(len(x) for x in left["results"])
    if left["results"] == right["results"]:
        print(f"identical: {len(left['asks'])} searches, {count} results")
    else:
        drift = _drift(left["results"], right["results"])
        print(
            f"same ids and order, floats within {tolerance:g} (largest difference {drift:.3g}): "
            f"{len(left['asks'])} searches, {count} results"
        )
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--work", type=Path, required=True)
    r.add_argument("--n", type=int, required=True)
    r.add_argument("--searches", type=int, default=2000)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--profile", type=Path)
    r.add_argument("--url", help="a chroma run serving a copy of the store: search as a client")
    r.add_argument("--first", action="store_true", help="record each namespace's first search too")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--tolerance", type=float, default=0.0, help="accepted float difference")
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.work, args.n, args.searches, args.out, args.profile, args.url, args.first)
    else:
        sys.exit(compare(args.a, args.b, args.tolerance))


if __name__ == "__main__":
    main()
