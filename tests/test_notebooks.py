"""Every notebook under notebooks/ and tutorials/ runs top to bottom in a real Jupyter kernel.

Each runs in its small mode (``ESNB_SMOKE=1``, read by its ``parameters`` cell) with nbclient
and ipykernel; a notebook's own ``assert`` cells are its checks. What runs is a stripped copy:
outputs JupyterLab autosaved into the working copy change nothing here. That notebooks are
*committed* without outputs is checked on what git stores (``scripts/check_notebooks.py``, also
``make lint``; the git filter of ``make notebook-filter`` strips them when staged).
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here runs a notebook in a kernel

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for d in ("notebooks", "tutorials") for p in (ROOT / d).rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)
CELL_TIMEOUT = 300


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(ROOT)) for p in NOTEBOOKS])
def test_notebook_runs_in_smoke_mode(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # a stripped copy: what the working copy holds does not matter
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    assert any("parameters" in c.metadata.get("tags", ()) for c in nb.cells), (
        f"{path.name} needs a cell tagged 'parameters' that reads ESNB_SMOKE")

    # the kernel inherits this process's environment
    monkeypatch.setenv("ESNB_SMOKE", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails


def test_notebooks_are_committed_without_outputs():
    """What git stores (the staged copies) has no outputs and no execution counts."""
    check = runpy.run_path(str(ROOT / "scripts" / "check_notebooks.py"))
    stored = check["stored_notebooks"](ROOT)
    assert "tutorials/04_live_control.ipynb" in stored
    bad = {name: p for name, text in stored.items() if (p := check["problems"](text))}
    assert not bad, f"stored with outputs (clear them before committing): {bad}"
