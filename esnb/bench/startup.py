"""What a fresh process pays before its learner's first step: torch.optim against esnb's
optimizers.

``torch.optim.Optimizer`` imports torch's compiler (``torch._dynamo``) the first time an
optimizer is made or steps; esnb's own optimizers (:mod:`esnb.rl.optim`, torch's updates bit
for bit) do not. Every ``esnb train`` of a torch algorithm, every Dask worker that trains a
network (AES-RL's critics, EORL's population) and every notebook kernel starts that way, so
the difference is paid once per process.

Each measurement is a fresh interpreter that imports torch, builds a small network and an Adam
optimizer, and takes one step -- with ``torch.optim.Adam`` (``torch``), with
:class:`esnb.rl.optim.Adam` (``esnb``), or only imports torch (``import torch``: the floor).
Its CPU seconds (user + system, from the child's resource usage: less sensitive to a shared
machine's load than wall time) and wall seconds are recorded; rounds alternate the order and
medians are reported with the ratio torch / esnb.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

from esnb.bench.common.flags import add_json
from esnb.bench.common.report import Session
from esnb.settings import integer

#: the measured programs
PROGRAMS = {
    "torch": "import torch\n"
             "m = torch.nn.Linear(4, 2)\n"
             "o = torch.optim.Adam(m.parameters())\n"
             "m(torch.ones(1, 4)).sum().backward()\n"
             "o.step()\n",
    "esnb": "import torch\n"
            "from esnb.rl.optim import Adam\n"
            "m = torch.nn.Linear(4, 2)\n"
            "o = Adam(m.parameters())\n"
            "m(torch.ones(1, 4)).sum().backward()\n"
            "o.step()\n",
    "import torch": "import torch\n",
}


def add_arguments(p) -> None:
    p.add_argument("--repeats", type=integer(1), default=5,
                   help="rounds, each running every program (alternating the order)")
    add_json(p)


def one(program: str) -> dict:
    """CPU and wall seconds of ``program`` in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", program], check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": cpu, "wall_s": wall}


def measure(repeats: int = 5, progress=print) -> dict:
    rounds: dict = {name: [] for name in PROGRAMS}
    for r in range(repeats):
        order = list(PROGRAMS) if r % 2 == 0 else list(PROGRAMS)[::-1]
        for name in order:
            out = one(PROGRAMS[name])
            rounds[name].append(out)
            progress(f"round {r + 1}/{repeats}, {name}: {out['cpu_s']:.2f} CPU s, "
                     f"{out['wall_s']:.2f} s")
    med = {name: {k: statistics.median(run[k] for run in runs) for k in ("cpu_s", "wall_s")}
           for name, runs in rounds.items()}
    ratio = {k: med["torch"][k] / med["esnb"][k] for k in ("cpu_s", "wall_s")}
    return {"repeats": repeats, "median": med, "ratio": ratio, "rounds": rounds}


def run(args) -> int:
    session = Session()
    r = measure(args.repeats)
    med = r["median"]
    print()
    print(f"A fresh process to its first optimizer step, median of {r['repeats']} interleaved "
          f"rounds")
    print(f"  {'':<34}{'CPU s':>8}{'wall s':>8}")
    labels = {"torch": "torch.optim.Adam", "esnb": "esnb.rl.optim.Adam",
              "import torch": "import torch only (the floor)"}
    for name, label in labels.items():
        print(f"  {label:<34}{med[name]['cpu_s']:>8.2f}{med[name]['wall_s']:>8.2f}")
    print(f"  torch.optim / esnb: {r['ratio']['cpu_s']:.2f}x the CPU, "
          f"{r['ratio']['wall_s']:.2f}x the wall time; torch.optim's compiler import: "
          f"{med['torch']['cpu_s'] - med['esnb']['cpu_s']:.2f} CPU s a process")
    return session.done(args, r, rerun="esnb bench startup")
