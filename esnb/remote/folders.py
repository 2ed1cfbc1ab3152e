"""What a run folder says of a served run: ``attach.json`` while its run serves, the runs
that can be attached, the line that says a run has ended.

Read by the kernel's side (:mod:`esnb.remote.attach`) and by :func:`esnb.launch`. Whether a
run is live is its folder's lock's to say (:mod:`esnb.session.folder`), not the file's: a
damaged or copied ``attach.json`` neither frees a live run's folder nor attaches through
another; a damaged one is one line (:class:`DamagedRun`), and a listing names it and goes on.
Nothing here opens a connection.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from esnb.remote.serve import ATTACH_FILE
from esnb.session.folder import lock_holder

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


#: what ``attach.json`` holds, by type
ATTACH_KEYS = {"name": str, "algorithm": str, "address": str, "pid": int,
               "started": (int, float), "ca": str, "cert": str, "key": str}


class DamagedRun(ValueError):
    """A live run whose ``attach.json`` cannot be read as one (what is wrong, in one line)."""


def serving_info(folder: Path) -> dict[str, Any] | None:
    """The ``attach.json`` of the live run in ``folder`` (its lock held by the process the
    file names); None when no run serves there (none is live, or it has not served yet).

    Raises
    ------
    DamagedRun
        A live run's file that is unreadable, not JSON, without a key, or naming another
        process than the one holding the folder (a copied file).
    """
    folder = Path(folder)
    pid = lock_holder(folder)
    if pid is None:
        return None
    path = folder / ATTACH_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None  # starting: it serves once the file is there
    except OSError as exc:
        raise DamagedRun(f"{path} cannot be read ({exc.strerror or exc}); its run is "
                         f"running (pid {pid})") from None
    try:
        info = json.loads(text)
    except ValueError:
        info = None
    wrong = _wrong(info)
    if wrong:
        raise DamagedRun(f"{path} is damaged ({wrong}): the run there is running (pid {pid}) "
                         f"but cannot be attached through it; it still writes {folder}")
    if pid > 0 and info["pid"] != pid:
        raise DamagedRun(f"{path} names pid {info['pid']}, but the run holding {folder} is "
                         f"pid {pid}: a copied attach.json does not attach")
    return info


def _wrong(info) -> str | None:
    """What keeps ``info`` from being an ``attach.json``, else None."""
    if not isinstance(info, dict):
        return "not a JSON object"
    missing = [k for k in ATTACH_KEYS if k not in info]
    if missing:
        return f"no {', '.join(missing)}"
    bad = [k for k, kind in ATTACH_KEYS.items()
           if not isinstance(info[k], kind) or isinstance(info[k], bool)]
    return f"{', '.join(bad)} of the wrong type" if bad else None


def runs(folder="runs") -> pd.DataFrame:
    """The runs under ``folder`` that can be attached: one row each (name, algorithm, pid,
    address, started, folder, progress: the last progress line of a launched run's log, or
    ""), oldest first. A folder whose live run's ``attach.json`` is
    damaged is named in one warning line each (:class:`DamagedRun`'s), and the others listed."""
    import pandas as pd

    rows = []
    root = Path(folder)
    for sub in sorted(root.iterdir()) if root.is_dir() else ():
        try:
            info = serving_info(sub) if sub.is_dir() else None
        except DamagedRun as exc:
            warnings.warn(str(exc), RuntimeWarning, stacklevel=2)
            continue
        if info is not None:
            rows.append({"name": info["name"], "algorithm": info["algorithm"],
                         "pid": info["pid"], "address": info["address"],
                         "started": pd.Timestamp.fromtimestamp(info["started"]),  # local
                         "folder": str(sub),
                         "progress": last_progress(sub / "run.log", sub.name)})
    cols = ["name", "algorithm", "pid", "address", "started", "folder", "progress"]
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


def last_progress(log: Path, name: str) -> str:
    """What the last progress line of a run's log says (``35% (3,500/10,000 generations),
    ret 120, 0:10:00 left``: :class:`esnb.session.progress.Progress`'s lines), or ""."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))  # the lines are at its end
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    head = f"esnb: {name}: "
    said = [ln[len(head):].strip() for ln in text.splitlines() if ln.startswith(head)]
    return said[-1] if said else ""


def last_line(log: Path) -> str:
    """The last line of a run's log that says something (an error line), else where it is."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return f"no log at {log}"
    return f"{lines[-1]} (log: {log})" if lines else f"its log {log} is empty"
