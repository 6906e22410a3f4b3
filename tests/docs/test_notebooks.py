"""Every notebook in notebooks/ runs offline from top to bottom, with the test's own Python.

Each notebook runs in a fresh kernel, in ``notebooks/``, with the environment conftest.py
sets (the models in ../shared/models, ``NORAX_DATA_DIR``) and no OpenAI key, so the
notebooks take their offline paths. The notebooks assert their own key claims (the decision
memory is in the top 3, the keyword-only error code rises, ...): a failed assert fails here.

To refresh the outputs committed with the notebooks, run
``NORAX_SAVE_NOTEBOOKS=1 python -m pytest tests/docs/test_notebooks.py``: each executed
notebook is written back with its outputs, without per-cell timings.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
CELL_TIMEOUT = 300  # seconds; the slowest cell (a live LoCoMo run) takes well under that
SAVE = os.environ.get("NORAX_SAVE_NOTEBOOKS") == "1"

pytestmark = pytest.mark.integration


def _notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A ``python3`` kernelspec that starts this interpreter, found before any other.

    Notebooks name the standard ``python3`` kernel. ``JUPYTER_PATH`` comes first in
    Jupyter's search path, so a kernelspec left elsewhere (a user-wide one pointing at another
    virtualenv) cannot make the notebooks run with a different Python than the tests.
    """
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3 (ipykernel)", "language": "python"})
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(root))
    mp.delenv("OPENAI_API_KEY", raising=False)  # the offline path, whatever the shell has
    mp.setenv("ANONYMIZED_TELEMETRY", "False")
    found = KernelSpecManager().get_kernel_spec("python3")
    assert found.argv[0] == sys.executable, found.argv
    probe = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import sys; print(sys.executable)")]
    )
    nbclient.NotebookClient(probe, kernel_name="python3", timeout=120).execute()
    assert probe.cells[0].outputs[0]["text"].strip() == sys.executable  # the kernel is us
    yield "python3"
    mp.undo()


def test_there_are_notebooks() -> None:
    names = [p.name for p in _notebooks()]
    assert names == [
        "01_quickstart.ipynb",
        "02_langchain.ipynb",
        "03_llamaindex.ipynb",
        "04_benchmarks.ipynb",
        "05_agent_memory.ipynb",
        "06_query_aware.ipynb",
    ]


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_notebook_runs(path: Path, kernel_name: str) -> None:
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    client = nbclient.NotebookClient(
        nb,
        kernel_name=kernel_name,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
        record_timing=False,
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    if SAVE:
        _save(nb, path)


def _save(nb: nbformat.NotebookNode, path: Path) -> None:
    """Write the executed notebook back: outputs kept, volatile metadata dropped."""
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
