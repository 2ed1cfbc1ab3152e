"""What a run folder says of a served run: ``attach.json`` while its run serves, the runs
that can be attached, the line that says a run has ended.

Read by the kernel's side (:mod:`esnb.remote.attach`) and by a run being planned
(:func:`esnb.session.plan.check_free`: two runs never write one folder); nothing here opens a
connection.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from esnb.remote.serve import ATTACH_FILE

if TYPE_CHECKING:
    import pandas as pd

RUNS = Path("runs")

def alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a zombie, ended but not yet reaped by its
    parent, does not)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def serving_info(folder: Path) -> dict[str, Any] | None:
    """The ``attach.json`` of a run folder whose run is alive, else None."""
    try:
        info = json.loads((Path(folder) / ATTACH_FILE).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and alive(info.get("pid", -1)) else None


def runs(folder="runs") -> pd.DataFrame:
    """The runs under ``folder`` that can be attached: one row each (name, algorithm, pid,
    address, started, folder), oldest first."""
    import pandas as pd

    rows = []
    root = Path(folder)
    for sub in sorted(root.iterdir()) if root.is_dir() else ():
        info = serving_info(sub)
        if info is not None:
            rows.append({"name": info["name"], "algorithm": info["algorithm"],
                         "pid": info["pid"], "address": info["address"],
                         "started": pd.Timestamp.fromtimestamp(info["started"]),  # local
                         "folder": str(sub)})
    cols = ["name", "algorithm", "pid", "address", "started", "folder"]
    return pd.DataFrame(rows, columns=cols).sort_values("started", ignore_index=True)


def _resolve(name_or_folder, folder) -> Path:
    """The run folder ``name_or_folder`` names; an unknown one is one line listing the runs
    there are to attach."""
    path = Path(name_or_folder)
    if path.is_dir():
        return path
    candidate = Path(folder) / str(name_or_folder)
    if candidate.is_dir():
        return candidate
    names = runs(folder)["name"].tolist()
    there = ", ".join(names) if names else "none"
    raise ValueError(f"no run {str(name_or_folder)!r} in {folder}/; runs to attach there: "
                     f"{there}")


class RunEnded(ValueError):
    """The run no longer serves: its process has ended, or is writing its run folder."""


def _ended(path: Path) -> RunEnded:
    ckpt = path / "checkpoint.npz"
    where = f"its checkpoint: {ckpt}" if ckpt.exists() else "it left no checkpoint"
    return RunEnded(f"run {path.name!r} has ended ({where}); nothing to attach to")


def last_line(log: Path) -> str:
    """The last line of a run's log that says something (an error line), else where it is."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return f"no log at {log}"
    return f"{lines[-1]} (log: {log})" if lines else f"its log {log} is empty"
