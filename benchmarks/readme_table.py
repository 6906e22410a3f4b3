"""The README's headline tables, printed from the results JSON (never edited by hand).

Norax's figures are the ``fused`` method of ``norax bench`` (``benchmarks/results/locomo.json``,
``beam_100k.json``, ``beam_500k.json``: the shipped ``default`` weights); the peers' come from
``benchmarks/peers.py`` (``benchmarks/results/peers.json``). ``tests/docs/test_readme_table.py``
checks that the README and ``docs/benchmarks.md`` hold exactly this output, so regenerating the
results means::

    python benchmarks/readme_table.py --write   # rewrites it in README.md and docs/benchmarks.md

The speed table (:func:`speed_table`) comes the same way from the store rows of one run of
``benchmarks/scale.py --stores ...`` (``benchmarks/results/scale.json``), between its own markers.

Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGES = (ROOT / "README.md", ROOT / "docs" / "benchmarks.md")
K = 10
COLUMNS = (  # (heading, norax bench file, peers.json dataset)
    ("LoCoMo dev", "locomo.json", "locomo"),
    ("BEAM 100K", "beam_100k.json", "beam_100k"),
    ("BEAM 500K", "beam_500k.json", "beam_500k"),
)
PEERS = (  # (row label, peers.json system)
    ("LangChain `EnsembleRetriever` (BM25 + Chroma, 0.5 / 0.5)", "langchain_ensemble"),
    ("LlamaIndex `QueryFusionRetriever` (BM25 + vector index)", "llamaindex_fusion"),
    ("Chroma alone (the embedding)", "chroma"),
)
START = "<!-- readme-table: python benchmarks/readme_table.py --write; never edit by hand -->"
END = "<!-- /readme-table -->"
SPEED_START = "<!-- speed-table: python benchmarks/readme_table.py --write; never edit by hand -->"
SPEED_END = "<!-- /speed-table -->"
MODES = (  # (label, Norax row, plain Chroma row) of a store size in scale.json
    ("embedded", "embedded_norax", "embedded_chroma"),
    ("client, 1st process", "client_norax", "client_chroma"),
    ("client, 2nd process", "client_norax_snapshot", "client_chroma"),
)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"{path} is missing: run the command in its module docstring") from None


def table(results: Path = RESULTS) -> str:
    """The markdown table of recall@10, Norax's shipped ``default`` first, then the peers.

    One column per dataset of ``COLUMNS`` that ``peers.json`` holds (``peers.py --datasets
    beam_500k --merge`` adds BEAM 500K).
    """
    key = f"recall@{K}"
    peers = _read(results / "peers.json")["datasets"]
    columns = [c for c in COLUMNS if c[2] in peers]  # the datasets the peers were run on
    rows = [["Norax (`default` weights)"]]
    rows[0] += [f"**{_read(results / f)['methods']['fused'][key]:.3f}**" for _, f, _ in columns]
    for label, system in PEERS:
        rows.append([label] + [f"{peers[d]['systems'][system][key]:.3f}" for _, _, d in columns])
    head = [f"recall@{K}", *(c for c, _, _ in columns)]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * len(columns)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def speed_table(results: Path = RESULTS) -> str:
    """Open, cold first query and steady p50 of Norax against plain Chroma, per store size.

    From ``scale.json``'s ``stores`` (one run of ``benchmarks/scale.py --stores``): each mode
    of each size, Norax's figure, plain Chroma's on the same store in the same run, and their
    ratio. The cold query is the slowest of the first queries on 4 cold 1k namespaces.
    """
    stores = _read(results / "scale.json").get("stores") or {}
    head = [
        "memories (namespaces)",
        "mode",
        "open s: Norax vs Chroma",
        "RSS after open MB",
        "first query on a cold 1k namespace ms (max of 4)",
        "steady p50 ms",
    ]
    lines = ["| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * (len(head) - 2)]
    for n, row in sorted(stores.items(), key=lambda kv: int(kv[0])):
        spaces = row.get("build", {}).get("namespaces")
        size = f"{int(n):,}" + (f" ({spaces:,})" if spaces else "")
        for label, mine, peer in MODES:
            a, b = row.get(mine), row.get(peer)
            if not a or not b or "error" in a or "error" in b:
                continue
            cells = [size, label]
            for key, fmt in (
                ("open_s", "{:.2f}"),
                ("rss_open_mb", "{:,.0f}"),
                ("first_query_ms_max", "{:,.0f}"),
                ("steady_p50_ms", "{:.1f}"),
            ):
                ratio = a[key] / b[key] if b[key] else float("nan")
                cells.append(f"{fmt.format(a[key])} vs {fmt.format(b[key])} ({ratio:.2f} x)")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def in_readme(text: str, start: str = START, end: str = END) -> str:
    """The table between a page's markers."""
    m = re.search(re.escape(start) + r"\n(.*?)\n?" + re.escape(end), text, re.S)
    if m is None:
        raise ValueError(f"the page has no {start!r} ... {end!r} block")
    return m.group(1).strip()


def rewrite(text: str, new: str, start: str = START, end: str = END) -> str:
    """``text`` with the table between the markers replaced by ``new``."""
    in_readme(text, start, end)  # the markers must be there
    pattern = re.escape(start) + r".*?" + re.escape(end)
    return re.sub(pattern, lambda _: f"{start}\n{new}\n{end}", text, count=1, flags=re.S)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite the table in the pages")
    args = p.parse_args(argv)
    new, speed = table(), speed_table()
    if args.write:
        for page in PAGES:
            text = rewrite(page.read_text(encoding="utf-8"), new)
            text = rewrite(text, speed, SPEED_START, SPEED_END)
            page.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(new + "\n\n" + speed + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
