"""Every notebook in notebooks/ runs offline from top to bottom, with the test's own Python.

Each notebook runs in a fresh kernel, in ``notebooks/``, with the environment conftest.py
sets (the models in ../shared/models, ``NORAX_DATA_DIR``) and no OpenAI key, so the
notebooks take their offline paths. The notebooks assert their own key claims (the decision
memory is in the top 3, the keyword-only error code rises, ...): a failed assert fails here.

The outputs saved with a notebook must state what the code prints now: every number in a
code cell's saved ``text/plain`` and stdout outputs is compared with the freshly executed
cell's, in order, within a tolerance (``isclose``, ``REL_TOL`` / ``ABS_TOL``: a rounding
flip of the last printed digit passes, a changed figure does not). Timings (a number with a
time unit), paths and stderr (warnings) are left out, and so are numbers glued to letters
(random ids). A notebook whose saved figures went stale fails with the cells that differ.

To refresh the outputs committed with the notebooks, run
``NORAX_SAVE_NOTEBOOKS=1 python -m pytest tests/docs/test_notebooks.py``: each executed
notebook is written back with its outputs, without per-cell timings.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
CELL_TIMEOUT = 300  # seconds; the slowest cell (a live LoCoMo run) takes well under that
SAVE = os.environ.get("NORAX_SAVE_NOTEBOOKS") == "1"
REL_TOL = 0.005
ABS_TOL = 0.0015  # figures are printed to 3 decimals: one unit of the last digit, and a half
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
VOLATILE = re.compile(
    r"[-+]?\d+(?:\.\d+)?\s?(?:ms|µs|us|s|sec|seconds|min|minutes)(?![\w.])"  # timings
    r"|\S*/\S*"  # paths and URLs
    r"|\b[0-9a-f]{16,32}\b"  # memory ids: random hex, sometimes all digits (or digits, e, digits)
)

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
    saved = copy.deepcopy(nb)
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
        return
    stale = stale_figures(saved, nb)
    assert not stale, (
        f"{path.name}: saved outputs state figures the code no longer prints (refresh them with"
        " NORAX_SAVE_NOTEBOOKS=1):\n" + "\n".join(stale)
    )


def _figures(cell: Any) -> list[float]:
    """The numbers a code cell's outputs state (stdout and text/plain), timings and paths out."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            if out.get("name") == "stdout":
                parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", ""))
    text = VOLATILE.sub(" ", "\n".join("".join(p) if isinstance(p, list) else p for p in parts))
    return [float(m.group()) for m in NUMBER.finditer(text)]


def stale_figures(saved: Any, fresh: Any) -> list[str]:
    """Where the saved notebook's figures differ from the executed one's, cell by cell."""
    out = []
    code = [(i, c) for i, c in enumerate(fresh.cells) if c.cell_type == "code"]
    for i, cell in code:
        old, new = _figures(saved.cells[i]), _figures(cell)
        if len(old) != len(new):
            out.append(f"cell {i}: {len(old)} figures saved, {len(new)} printed now")
            continue
        wrong = [
            (a, b)
            for a, b in zip(old, new, strict=True)
            if not math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
        ]
        if wrong:
            shown = ", ".join(f"{a:g} -> {b:g}" for a, b in wrong[:5])
            out.append(f"cell {i}: {len(wrong)} figures differ ({shown})")
    return out


def test_a_stale_saved_output_fails(kernel_name: str) -> None:
    """A notebook whose saved output states an old figure is caught; timings and paths are not."""
    source = "print('recall@10', round(0.25 * 3, 3), 'in 1.7 s from', '/tmp/x1')"
    cell = nbformat.v4.new_code_cell(source)
    nb = nbformat.v4.new_notebook(cells=[cell])
    current = "recall@10 0.75 in 0.2 s from /home/y2\n"
    stale = "recall@10 0.725 in 0.2 s from /home/y2\n"
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stale)]
    saved = copy.deepcopy(nb)
    nbclient.NotebookClient(nb, kernel_name=kernel_name, timeout=120).execute()
    assert stale_figures(saved, nb) == ["cell 0: 1 figures differ (0.725 -> 0.75)"]
    saved.cells[0].outputs[0]["text"] = current  # other timing, other path: the same figures
    assert stale_figures(saved, nb) == []


def test_random_memory_ids_are_not_figures() -> None:
    """A memory id is random hex: one that reads as a number must not change the count."""
    cell = nbformat.v4.new_code_cell("")
    text = "rank 1 8e93451230984512 0.583\nrank 2 4469554109548470 0.460\n"
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    assert _figures(cell) == [1.0, 0.583, 2.0, 0.46]


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
