"""A benchmark's program in a fresh interpreter: a cold start is cold, no cluster's memory
lingers, and another interpreter (a peer's ``--*-python``) or another esnb tree
(``--compare DIR``) runs the same program. The program prints one ``ESNB-BENCH {json}`` line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
