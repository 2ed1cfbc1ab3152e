"""How long each algorithm's CLI takes to stop after Ctrl-C or SIGTERM to its process group.

Each run is ``esnb train <algo> --workers 2`` started in a session of its own (as a terminal
starts it), signalled once it has written checkpoints, the way a terminal sends Ctrl-C (or a
batch system SIGTERM): to the whole process group. Reported per algorithm: the exit code, the
seconds from the signal to the exit (the current iteration finishing, the checkpoint and the
run folder written, the cluster closed), the run's mean seconds per iteration, and whether
the exit came within one iteration plus 10 s (the bound esnb promises).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from esnb.bench.common.flags import add_json
from esnb.bench.common.report import Session
from esnb.settings import integer

SMALL_NETS = ["--actor-hidden", "16", "16", "--critic-hidden", "16", "16"]
#: per algorithm: a small run that goes on until stopped, and (flag, history column) of a budget
#: in whole iterations (what a resume of it takes). Each run names a cheap env and small sizes
#: of its own, whatever the config's defaults; every other setting is the config's
RUNS = {
    "es": (["--env", "CartPole-v1", "--population", "10", "--noise-size", "1000000",
            "--generations", "100000"], ("generations", "generation")),
    "aesrl": (["--env", "Pendulum-v1", *SMALL_NETS, "--rl-start-step", "100",
               "--critic-chunk", "50", "--batch-size", "16", "--max-episode-steps", "50",
               "--steps", "1e9"], ("updates", "update")),
    "cemrl": (["--env", "Pendulum-v1", "--parallel", *SMALL_NETS, "--pop-size", "4",
               "--rl-start-step", "20", "--max-episode-steps", "40", "--generations",
               "100000"], ("generations", "generation")),
    "apex": (["--env", "CartPole-v1", "--min-size", "200", "--eval-interval", "0",
              "--learner-steps", "1e9"], ("learner-steps", "learner_steps")),
    "apex-dpg": (["--env", "Pendulum-v1", "--min-size", "200", "--eval-interval", "0",
                  "--learner-steps", "1e9"], ("learner-steps", "learner_steps")),
    "impala": (["--env", "CartPole-v1", "--eval-interval", "0", "--learner-steps", "1e9"],
               ("learner-steps", "learner_steps")),
    "eorl": (["--env", "bitflip", "--size", "5", "--subgoal", "1", "--episodes", "1000000"],
             ("episodes", "episode")),
}


def add_arguments(p) -> None:
    p.add_argument("--algorithms", nargs="+", default=list(RUNS), choices=list(RUNS),
                   help="CLIs to interrupt (default: all)")
    p.add_argument("--signal", choices=("INT", "TERM"), default="INT",
                   help="the signal sent to the group (default: INT, a terminal's Ctrl-C)")
    p.add_argument("--iterations", type=integer(1), default=5,
                   help="iterations the run checkpoints before the signal (default: 5)")
    add_json(p)


def start(algorithm: str, folder: Path, *extra: str) -> subprocess.Popen:
    """The CLI as a terminal starts it: the leader of its own process group."""
    args, _ = RUNS[algorithm]
    return subprocess.Popen(
        [sys.executable, "-m", "esnb.cli", "train", algorithm, *args, "--workers", "2",
         "--out", str(folder), "--no-progress", "--final-eval", "0", "--checkpoint-every", "0",
         *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def checkpointed(folder: Path) -> list[dict]:
    """The history rows of a run's checkpoint (empty while there is none)."""
    from esnb.record import CheckpointError, load_checkpoint

    try:
        return list(load_checkpoint(folder / "checkpoint.npz")[0]["history"])
    except (FileNotFoundError, CheckpointError):
        return []


def measure_one(algorithm: str, sig: int, iterations: int, folder: Path,
                timeout: float = 600) -> dict:
    proc = start(algorithm, folder)
    try:
        deadline = time.monotonic() + timeout
        while len(checkpointed(folder)) < iterations:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{algorithm} made no {iterations} iterations: "
                                   f"{proc.communicate()[1][-2000:]}")
            time.sleep(0.05)
        t0 = time.perf_counter()
        os.killpg(proc.pid, sig)
        err = proc.communicate(timeout=timeout)[1]
        seconds = time.perf_counter() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    rows = checkpointed(folder)
    per_iteration = rows[-1]["wall_time"] / len(rows) if rows else float("nan")
    return {"algorithm": algorithm, "exit_code": proc.returncode, "seconds": seconds,
            "iteration_seconds": per_iteration, "iterations": len(rows),
            "within_bound": seconds <= per_iteration + 10.0,
            "traceback": "Traceback" in err, "resume_line": "resume with:" in err}


def run(args) -> int:
    session = Session()
    sig = getattr(signal, "SIG" + args.signal)
    rows = []
    with tempfile.TemporaryDirectory(prefix="esnb-interrupts-") as tmp:
        for algorithm in args.algorithms:
            rows.append(measure_one(algorithm, sig, args.iterations, Path(tmp) / algorithm))
    print(f"SIG{args.signal} to the process group of `esnb train <algo> --workers 2`, after "
          f"{args.iterations} checkpointed iterations:")
    print(f"  {'algorithm':<10} {'exit':>4} {'seconds':>8} {'s/iteration':>12}  bound "
          f"(iteration + 10 s)")
    bad = 0
    for r in rows:
        ok = (r["within_bound"] and r["exit_code"] == 128 + sig and not r["traceback"]
              and r["resume_line"])
        bad += not ok
        print(f"  {r['algorithm']:<10} {r['exit_code']:>4} {r['seconds']:>8.1f} "
              f"{r['iteration_seconds']:>12.2f}  {'ok' if ok else 'MISSED'}")
    session.done(args, rows)
    return 1 if bad else 0
