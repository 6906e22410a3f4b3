"""A client's first query on a cold namespace (issue 22): what it may skip, and what it must
still see.

A namespace that is not loaded is read whole from Chroma by its first query, so that query
needs no pull of the change log (a pull only updates loaded namespaces); a later query of a
loaded namespace must still pull, and see another process's writes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import chromadb
from _support import open_store

T0 = 1_700_000_000.0


def test_a_cold_namespace_query_skips_the_pull_and_a_warm_one_still_pulls(
    tmp_path: Path,
) -> None:
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    with open_store(client=client, collection="cold", sync_interval=0.05) as writer:
        writer.add(["Priya owns the Kestrel launch"], namespace="a", created_at=T0)
        writer.add(["Omar owns the Harbor audit"], namespace="b", created_at=T0)
    with open_store(client=client, collection="cold", sync_interval=0.05) as mem:
        sync = mem._store.sync
        assert sync is not None
        time.sleep(0.1)  # a pull is due
        before = sync.stats.pulls
        assert [r.id for r in mem.search("Kestrel", k=1, namespace="a", now=T0)]
        assert sync.stats.pulls == before  # "a" was cold: read whole from Chroma, no pull
        with open_store(client=client, collection="cold", sync_interval=0.05) as other:
            other.add(["Priya now owns the Kestrel budget too"], namespace="a", created_at=T0)
        time.sleep(0.1)
        got = mem.search("Kestrel budget", k=2, namespace="a", now=T0 + 1)
        assert sync.stats.pulls == before + 1  # "a" is loaded: its query pulls
        assert "budget" in got[0].text  # and sees the other process's write
        cold = mem.search("Harbor", k=1, namespace="b", now=T0)  # cold again: no pull
        assert sync.stats.pulls == before + 1
        assert cold[0].text == "Omar owns the Harbor audit"
        assert mem.check().ok


def test_igraph_is_imported_with_norax_not_by_a_first_community_run() -> None:
    """igraph's import loaded matplotlib.pyplot (~0.4 s of CPU); when a namespace's first
    community run imported it (in the worker thread), that time came out of the next cold
    namespace's first query. Norax imports it up front, without pyplot (~0.03 s), and leaves
    matplotlib importable."""
    code = (
        "import sys, norax_core\n"
        "print('igraph' in sys.modules, 'matplotlib.pyplot' in sys.modules)\n"
        "import matplotlib\n"
        "from norax_core.signals.entity_graph import louvain_communities\n"
        "import networkx as nx\n"
        "print(len(louvain_communities(nx.karate_club_graph(), 0)) > 1)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "True"]
