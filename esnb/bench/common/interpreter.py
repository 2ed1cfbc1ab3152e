"""A benchmark's program in a fresh interpreter: a cold start is cold, no cluster's memory
lingers, and another interpreter (a peer's ``--*-python``) or another esnb tree
(``--compare DIR``) runs the same program. The program prints one ``ESNB-BENCH {json}`` line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def child(mode: str, workers: int, generations: int, population: int, env: str,
          tree: str | None = None, *, source: str, extra_env: dict | None = None,
          python: str = sys.executable) -> dict:
    """Run ``source`` (a benchmark's program, e.g. :data:`esnb.bench.es.memory.CHILD`, that
    takes these arguments on its command line) in a fresh interpreter, ``python`` (on the
    esnb in ``tree`` if given, with ``extra_env`` set); its ``ESNB-BENCH {json}`` line."""
    environ = {**os.environ, **(extra_env or {})}
    if tree is not None:
        environ["PYTHONPATH"] = os.pathsep.join(
            [tree] + ([environ["PYTHONPATH"]] if environ.get("PYTHONPATH") else []))
    # the child runs from its tree, so "import esnb" finds that tree's package first
    environ["ESNB_BENCH_LAUNCHED"] = repr(time.time())
    proc = subprocess.run(
        [python, "-c", source, mode, str(workers), str(generations), str(population),
         env], capture_output=True, text=True, env=environ, cwd=tree or os.getcwd(),
        timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("ESNB-BENCH "):
            return json.loads(line[len("ESNB-BENCH "):])
    raise RuntimeError(f"the measured run failed:\n{proc.stderr[-3000:]}")


def stop(proc: subprocess.Popen, grace: float = 30.0) -> None:
    """Stop a child the way a terminal's Ctrl-C does, so that it cleans up (a Ray node it
    started is shut down with it): a moment for the SIGINT its process group may already
    have had, then one of its own, then a kill if it is still there after ``grace`` s."""
    for sig in (None, signal.SIGINT, signal.SIGKILL):
        if sig is not None:
            proc.send_signal(sig)
        try:
            proc.wait(timeout=grace if sig is not signal.SIGKILL else None)
            return
        except subprocess.TimeoutExpired:
            continue


def streamed(source: str, args: list, python: str, on_progress) -> dict:
    """Run ``source`` in a fresh ``python`` with ``args``, handing each ``ESNB-PROGRESS {json}``
    line to ``on_progress`` as it comes (a run of hours says where it is); its ``ESNB-BENCH
    {json}`` line. No time limit: the run ends at its score or its step budget, or when the
    parent is interrupted (the child is stopped, see :func:`stop`; KeyboardInterrupt goes on
    up)."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([python, "-c", source, *map(str, args)],
                                stdout=subprocess.PIPE, stderr=err, text=True,
                                env={**os.environ, "ESNB_BENCH_LAUNCHED": repr(time.time())})
        out = None
        try:
            for line in proc.stdout:
                if line.startswith("ESNB-PROGRESS "):
                    on_progress(json.loads(line[len("ESNB-PROGRESS "):]))
                elif line.startswith("ESNB-BENCH "):
                    out = json.loads(line[len("ESNB-BENCH "):])
        finally:
            if proc.poll() is None:  # the parent stopped early (Ctrl-C, an error): so does it
                stop(proc)
        if out is None:
            err.seek(0)
            raise RuntimeError(f"the run failed:\n{err.read()[-3000:]}")
    return out
