"""Every notebook under notebooks/ and tutorials/ runs top to bottom in a real Jupyter kernel.

Each runs in its small mode (``ESNB_SMOKE=1``, read by its ``parameters`` cell) with nbclient
and ipykernel; a notebook's own ``assert`` cells are its checks. Notebooks are stored without
outputs, which is checked too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"{path.name} is stored with outputs: clear them before committing")
    assert any("parameters" in c.metadata.get("tags", ()) for c in nb.cells), (
        f"{path.name} needs a cell tagged 'parameters' that reads ESNB_SMOKE")

    # the kernel inherits this process's environment
    monkeypatch.setenv("ESNB_SMOKE", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
