#!/usr/bin/env python3
"""Notebooks as committed carry no outputs and no execution counts (`make lint`).

What is checked is what git stores: the staged copy of every tracked ``*.ipynb`` (outside a
git checkout, the files themselves). JupyterLab autosaves outputs into the working copy; that
is fine, and the git filter that ``make lab`` sets up (nbstripout) strips them when staged.
Exit 1 names each notebook that would be committed with outputs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def stored_notebooks(root: Path) -> dict[str, str]:
    """``{path: text}`` of every notebook as git stores it (staged), else as on disk."""
    try:
        names = subprocess.run(["git", "ls-files", "-z", "--", "*.ipynb"], cwd=root, check=True,
                               capture_output=True, text=True).stdout.split("\0")
    except (OSError, subprocess.CalledProcessError):
        return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.ipynb"))
                if ".ipynb_checkpoints" not in p.parts}
    return {name: subprocess.run(["git", "show", f":{name}"], cwd=root, check=True,
                                 capture_output=True, text=True).stdout
            for name in filter(None, names)}


def problems(text: str) -> list[str]:
    """What a stored notebook should not hold: cells with outputs or execution counts."""
    cells = [c for c in json.loads(text).get("cells", []) if c.get("cell_type") == "code"]
    out = []
    with_outputs = [i for i, c in enumerate(cells) if c.get("outputs")]
    counted = [i for i, c in enumerate(cells) if c.get("execution_count") is not None]
    if with_outputs:
        out.append(f"outputs in code cells {with_outputs}")
    if counted:
        out.append(f"execution counts in code cells {counted}")
    return out


def main(root: str = ".") -> int:
    bad = {name: p for name, text in stored_notebooks(Path(root)).items() if (p := problems(text))}
    for name, what in bad.items():
        print(f"{name}: stored with {'; '.join(what)}: strip them (`make notebook-filter` "
              f"strips them when staged; `python -m nbstripout --keep-id {name}`)",
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
