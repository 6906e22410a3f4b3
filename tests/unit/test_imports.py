"""The public surfaces and the one-way dependencies between the packages."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import norax_core
import norax_langchain
import norax_langgraph
import norax_llamaindex

REPO = Path(__file__).resolve().parents[2]

CORE_ALL = [
    "SIGNALS",
    "CallableEmbedder",
    "DimensionMismatchError",
    "DuplicateIdError",
    "Embedder",
    "Explanation",
    "FusionMethod",
    "IndexInconsistentError",
    "Intent",
    "InvalidInputError",
    "Kind",
    "Memory",
    "MemoryNotFoundError",
    "ModelNotFoundError",
    "NamedPeriod",
    "NoraxConfig",
    "NoraxError",
    "NoraxMemory",
    "OnnxMiniLMEmbedder",
    "OpenAIEmbedder",
    "QueryInfo",
    "QueryPlan",
    "SearchResult",
    "StoreLockedError",
    "Weights",
    "WeightsError",
    "default_embedder",
    "get_preset",
    "load_weights",
    "plan_query",
    "preset_names",
    "resolve_embedder",
    "resolve_weights",
    "save_weights",
]
LANGCHAIN_ALL = ["LangChainEmbedder", "NoraxRetriever", "add_documents", "add_messages"]
LANGGRAPH_ALL = ["NoraxSearchItem", "NoraxStore"]
LLAMAINDEX_ALL = [
    "LlamaIndexEmbedder",
    "NoraxMemoryBlock",
    "NoraxPostprocessor",
    "NoraxRetriever",
    "aadd_chat_messages",
    "add_chat_messages",
    "add_nodes",
]


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        (norax_core, CORE_ALL),
        (norax_langchain, LANGCHAIN_ALL),
        (norax_langgraph, LANGGRAPH_ALL),
        (norax_llamaindex, LLAMAINDEX_ALL),
    ],
)
def test_all(module: object, expected: list[str]) -> None:
    assert sorted(module.__all__) == sorted(expected)  # type: ignore[attr-defined]
    for name in expected:
        assert getattr(module, name) is not None


# Run in a fresh interpreter: this process has already imported everything.
PROBE = textwrap.dedent(
    """
    import importlib, pkgutil, sys
    package, forbidden = sys.argv[1], tuple(sys.argv[2].split(","))
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        try:
            importlib.import_module(info.name)
        except ImportError as exc:  # an optional extra of a tool module, not a framework
            if (exc.name or "").split(".")[0] in forbidden:
                raise
    bad = sorted({m.split(".")[0] for m in sys.modules} & set(forbidden))
    print(",".join(bad))
    """
)

FRAMEWORKS = ("langchain", "langchain_core", "langchain_community", "llama_index")


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        (
            "norax_core",
            (*FRAMEWORKS, "langgraph", "norax_langchain", "norax_langgraph", "norax_llamaindex"),
        ),
        ("norax_langchain", ("llama_index", "langgraph", "norax_llamaindex", "norax_langgraph")),
        ("norax_langgraph", ("llama_index", "norax_llamaindex", "norax_langchain")),
        ("norax_llamaindex", ("langchain", "langchain_core", "langgraph", "norax_langchain")),
    ],
)
def test_dependencies_flow_one_way(package: str, forbidden: tuple[str, ...]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, package, ",".join(forbidden)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{package} imports {out.stdout.strip()}"


POSIX_ONLY = ("fcntl", "termios", "pwd", "grp", "resource")
"""Standard-library modules that do not exist on Windows."""

WINDOWS_PROBE = textwrap.dedent(
    """
    import importlib, pkgutil, sys, warnings
    for name in sys.argv[1].split(","):
        sys.modules[name] = None  # as on Windows: importing it raises ImportError
    warnings.simplefilter("ignore")  # filelock warns it falls back to a soft lock here
    failed = []
    for package in ("norax_core", "norax_langchain", "norax_llamaindex"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            try:
                importlib.import_module(info.name)
            except ImportError as exc:
                failed.append(f"{info.name}: {exc}")
    print("\\n".join(failed))
    """
)


def test_every_module_imports_without_posix_only_modules() -> None:
    """``import norax_core`` must work on Windows: no module needs ``fcntl`` and the like
    (the store lock is filelock's, which uses ``msvcrt`` there)."""
    out = subprocess.run(
        [sys.executable, "-c", WINDOWS_PROBE, ",".join(POSIX_ONLY)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", out.stdout
