"""The README's headline table, printed from the results JSON (never edited by hand).

Norax's figures are the ``fused`` method of ``norax bench`` (``benchmarks/results/locomo.json``,
``beam_100k.json``, ``beam_500k.json``: the shipped ``default`` weights); the peers' come from
``benchmarks/peers.py`` (``benchmarks/results/peers.json``). ``tests/docs/test_readme_table.py``
checks that the README and ``docs/benchmarks.md`` hold exactly this output, so regenerating the
results means::

    python benchmarks/readme_table.py --write   # rewrites it in README.md and docs/benchmarks.md

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


def in_readme(text: str) -> str:
    """The table between a page's markers."""
    m = re.search(re.escape(START) + r"\n(.*?)\n?" + re.escape(END), text, re.S)
    if m is None:
        raise ValueError(f"the page has no {START!r} ... {END!r} block")
    return m.group(1).strip()


def rewrite(text: str, new: str) -> str:
    """``text`` with the table between the markers replaced by ``new``."""
    in_readme(text)  # the markers must be there
    pattern = re.escape(START) + r".*?" + re.escape(END)
    return re.sub(pattern, lambda _: f"{START}\n{new}\n{END}", text, count=1, flags=re.S)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite the table in the pages")
    args = p.parse_args(argv)
    new = table()
    if args.write:
        for page in PAGES:
            page.write_text(rewrite(page.read_text(encoding="utf-8"), new), encoding="utf-8")
    else:
        sys.stdout.write(new + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
