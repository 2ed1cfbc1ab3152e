"""One ``esnb train`` command run on a given tree of esnb, in a fresh interpreter.

The interpreter is ``python -c CHILD TREE ARGS...``, where :data:`CHILD` checks which esnb it
imported, then runs ``esnb.cli`` as ``python -m esnb.cli ARGS...`` does. ``PYTHONPATH`` starts
with the tree's root and the working directory is a fresh folder of the run's own, so the
interpreter, its Dask workers (started from its ``sys.path`` and environment) and every
subprocess import that tree. Three checks say so, each refusing in one line:

- before anything is measured, :func:`check_tree`: the folder holds an esnb tree, and a fresh
  interpreter with that ``PYTHONPATH`` imports esnb from it;
- in every measured interpreter, :data:`CHILD`: the esnb it imported is the tree's, or it exits
  before running anything;
- on every Dask worker of every run, :data:`PROBE` (a worker preload given through dask's
  config, ``DASK_DISTRIBUTED__WORKER__PRELOAD``): the esnb it imported.

:data:`CHILD` also stamps each history row with the wall clock when the runner made it (its
``Runner._run_iteration`` wrapped once the CLI imports ``esnb.runners.base``; nothing is imported
earlier than the CLI imports it): a run's rates and start-up are read on that clock, which counts
everything the run path does between iterations too (the history's ``wall_time`` counts only the
iterations' own time).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: files a tree must hold: the package, the CLI run as ``python -m esnb.cli``, the runner whose
#: iterations :data:`CHILD` stamps
REQUIRED = ("esnb/__init__.py", "esnb/cli/__main__.py", "esnb/runners/base.py")

#: a hang guard only (a run's budget is in generations or learner steps, never in seconds)
HANG = 3600

#: the measured interpreter: ``-c CHILD TREE ARGS...``; prints ``ESNB-BENCH {json}`` at exit
CHILD = r'''
import atexit, importlib.util, json, os, runpy, sys, time
tree = sys.argv[1]
import esnb
found = os.path.dirname(os.path.dirname(os.path.realpath(esnb.__file__)))
if found != tree:
    print("ESNB-BENCH " + json.dumps({"esnb": found}), flush=True)
    sys.exit(3)
stamps = []


class Stamp:
    """Wraps Runner._run_iteration when the CLI imports esnb.runners.base (not sooner)."""

    def find_spec(self, name, path=None, target=None):
        if name != "esnb.runners.base":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            inner = module.Runner._run_iteration

            def stamped(runner):
                row = inner(runner)
                stamps.append((runner.iteration, time.time()))
                return row

            module.Runner._run_iteration = stamped

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, Stamp())
atexit.register(lambda: print("ESNB-BENCH " + json.dumps({"esnb": found, "stamps": stamps}),
                              flush=True))
sys.argv = ["esnb", *sys.argv[2:]]
runpy.run_module("esnb.cli", run_name="__main__", alter_sys=True)
'''

#: a Dask worker's preload: appends ``pid esnb-root`` to ``$ESNB_RUN_PATH_WORKERS``
PROBE = r'''
import os
import esnb
with open(os.environ["ESNB_RUN_PATH_WORKERS"], "a") as f:
    f.write(f"{os.getpid()} {os.path.dirname(os.path.dirname(os.path.realpath(esnb.__file__)))}\n")
'''


def this_tree() -> Path:
    """The root of the tree this interpreter imported esnb from."""
    import esnb

    return Path(esnb.__file__).resolve().parent.parent


def environment(tree: Path, **extra: str) -> dict[str, str]:
    """This process's environment with ``PYTHONPATH`` starting at ``tree``, and ``extra``."""
    paths = [str(tree)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **extra}


def check_tree(folder: str | os.PathLike) -> Path:
    """The resolved root of the esnb tree in ``folder``.

    Raises
    ------
    ValueError
        One line: ``folder`` holds no esnb tree (one of :data:`REQUIRED` missing), or a fresh
        interpreter with ``PYTHONPATH`` at it imports esnb from elsewhere.
    """
    tree = Path(folder).expanduser().resolve()
    missing = [name for name in REQUIRED if not (tree / name).is_file()]
    if missing:
        raise ValueError(f"--against {folder}: not an esnb tree (no {missing[0]} in it)")
    code = "import esnb, os; print(os.path.realpath(esnb.__file__))"
    with tempfile.TemporaryDirectory() as empty:  # the working directory shadows PYTHONPATH
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=environment(tree), cwd=empty, timeout=300)
    found = proc.stdout.strip()
    if proc.returncode != 0 or Path(found).parent.parent != tree:
        why = f"imports esnb from {found}" if found else "cannot import esnb"
        raise ValueError(f"--against {folder}: an interpreter with PYTHONPATH={tree} {why}, "
                         f"not from {tree / 'esnb'}")
    return tree


def commit(tree: Path) -> str:
    """The tree's commit (short), with "+changes" when tracked files differ from it."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(tree), *args], capture_output=True,
                                  text=True, timeout=60).stdout.strip()
        except OSError:
            return ""

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return "not a git checkout"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def read_history(path: Path) -> list[dict[str, float | str]]:
    """A run's ``history.csv``: one dict per row, numbers as floats, empty cells as NaN."""
    def value(text: str) -> float | str:
        try:
            return float(text) if text != "" else float("nan")
        except ValueError:
            return text

    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = [{k: value(v) for k, v in row.items()} for row in reader]
        first = reader.fieldnames[0] if reader.fieldnames else None
    return [{"_iteration": row[first], **row} for row in rows] if first else []


def run_once(tree: Path, args: list[str], folder: Path, workers: int) -> dict:
    """``esnb train ARGS --out FOLDER/run`` on ``tree``, in a fresh interpreter (``workers``:
    the Dask workers that must report which esnb they imported).

    Returns
    -------
    dict
        ``seconds`` (the whole command, from launch to exit), ``launched`` (``time.time()``
        just before the launch), ``stamps`` (``[iteration, time.time()]`` per history row),
        ``history`` (:func:`read_history`), ``workers`` (the Dask workers that reported).

    Raises
    ------
    ValueError
        One line: the interpreter or one of its workers imported esnb from another tree, or
        no worker said which it imported.
    RuntimeError
        The command failed (its stderr's end).
    """
    folder.mkdir(parents=True)
    probe, reports = folder / "probe_workers.py", folder / "workers.txt"
    probe.write_text(PROBE)
    env = environment(tree, ESNB_RUN_PATH_WORKERS=str(reports),
                      DASK_DISTRIBUTED__WORKER__PRELOAD=json.dumps([str(probe)]))
    command = [sys.executable, "-c", CHILD, str(tree), *args, "--out", str(folder / "run")]
    launched = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder,
                          timeout=HANG)
    seconds = time.perf_counter() - t0
    outs = [json.loads(line[len("ESNB-BENCH "):]) for line in proc.stdout.splitlines()
            if line.startswith("ESNB-BENCH ")]
    out = outs[-1] if outs else {}
    if out.get("esnb") not in (None, str(tree)):
        raise ValueError(f"a fresh interpreter with PYTHONPATH={tree} imported esnb from "
                         f"{out['esnb']}: it is not the asked tree")
    if proc.returncode != 0 or "stamps" not in out:
        raise RuntimeError(f"`esnb {' '.join(args)}` on {tree} failed (exit "
                           f"{proc.returncode}):\n{proc.stderr[-3000:]}")
    reported = {}
    if reports.exists():
        reported = dict(line.split(" ", 1) for line in reports.read_text().splitlines())
    others = sorted({root for root in reported.values() if root != str(tree)})
    if others:
        raise ValueError(f"a Dask worker of a run on {tree} imported esnb from {others[0]}: "
                         f"it is not the asked tree")
    if workers and not reported:
        raise ValueError(f"no Dask worker of a run on {tree} said which esnb it imported (its "
                         f"cluster did not run the preload {probe})")
    return {"seconds": seconds, "launched": launched, "stamps": out["stamps"],
            "history": read_history(folder / "run" / "history.csv"), "workers": len(reported)}
