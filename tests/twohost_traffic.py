"""Bytes that travel between hosts per iteration, for each algorithm, measured on the two-host
fixture (:mod:`twohost`). Run by hand: ``python tests/twohost_traffic.py [case ...]``.

What is counted: every Dask message the second host's worker sends or receives, as it goes on
the wire (:mod:`twohost_bytes`: the length header, the frames' headers and the frames; TCP/IP
headers not counted), over every connection but the one to its own nanny (which is on the
same host). Every other process (the driver, the scheduler, the first host's worker) is on
the first host, so this is all the traffic between the hosts, by peer. The nanny's own few
messages to the scheduler are not counted.

Per iteration: each case runs once; the second host's counters are read when the run's
checkpoint (written after every iteration) first shows iteration ``k1`` and again when it
first shows ``k2``, and their difference divided by the iterations between the two readings
is the figure (the start of the run, once per run, falls before ``k1``). Heartbeats and other
messages that come with time, not iterations, are measured on the idle cluster and given per
second; the figure is also shown with them taken out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from twohost import HOST2, two_hosts  # noqa: E402

from esnb.record import load_checkpoint  # noqa: E402

SMALL_NETS = ["--actor-hidden", "16", "16", "--critic-hidden", "16", "16"]
QUIET = ["--final-eval", "0", "--no-progress", "--checkpoint-every", "0"]
#: per case: the algorithm, its run's flags, the budget flag and amount, and (k1, k2): the
#: iterations between which the bytes are counted
CASES = {
    "es": ("es", ["--env", "CartPole-v1", "--population", "10", "--noise-size", "1000000"],
           "--generations", 30, (5, 25)),
    "es-halfcheetah": ("es", ["--env", "HalfCheetah-v5", "--population", "20",
                              "--max-episode-steps", "200"], "--generations", 14, (3, 12)),
    "impala": ("impala", ["--env", "CartPole-v1", "--batch-size", "4", "--unroll-length", "10",
                          "--envs-per-actor", "2", "--hidden", "16",
                          "--updates-per-iteration", "2", "--eval-interval", "0"],
               "--learner-steps", 80, (5, 35)),
    "eorl": ("eorl", ["--env", "bitflip", "--size", "5", "--subgoal", "1",
                      "--variant", "EORL-ACTV"], "--episodes", 40, (5, 35)),
    "cemrl": ("cemrl", ["--env", "InvertedPendulum-v5", *SMALL_NETS, "--pop-size", "4",
                        "--rl-start-step", "40", "--batch-size", "16",
                        "--max-episode-steps", "40", "--eval-episodes", "1"],
              "--generations", 8, (2, 7)),
    "cemrl-parallel": ("cemrl", ["--env", "InvertedPendulum-v5", "--parallel", *SMALL_NETS,
                                 "--pop-size", "4", "--rl-start-step", "40", "--batch-size",
                                 "16", "--max-episode-steps", "40", "--eval-episodes", "1"],
                       "--generations", 8, (2, 7)),
    "apex": ("apex", ["--env", "CartPole-v1", "--num-actors", "2", "--min-size", "200",
                      "--learner-chunk", "4", "--batch-size", "16", "--capacity", "2000",
                      "--hidden", "16", "--eval-interval", "0"], "--learner-steps", 4000,
             (3, 10)),
    "apex-dpg": ("apex-dpg", ["--env", "InvertedPendulum-v5", "--num-actors", "2",
                              "--min-size", "200", "--learner-chunk", "4", "--batch-size", "16",
                              "--capacity", "2000", *SMALL_NETS, "--max-episode-steps", "100",
                              "--eval-interval", "0"], "--learner-steps", 4000, (3, 10)),
    "aesrl": ("aesrl", ["--env", "InvertedPendulum-v5", *SMALL_NETS, "--rl-start-step", "100",
                        "--critic-chunk", "50", "--batch-size", "16", "--max-episode-steps",
                        "40", "--eval-episodes", "1"], "--updates", 60, (10, 50)),
}


def totals(hosts, roles: dict[int, str], nanny: int) -> dict[str, list[int]]:
    """The second host's worker's bytes ``[sent, received]`` by peer role (its nanny left
    out): the driver, the scheduler, the first host's worker, or another process."""
    out: dict[str, list[int]] = {}
    for row in hosts.traffic(HOST2)["connections"]:
        if row["peer_pid"] == nanny:
            continue
        pid = row["peer_pid"]
        role = roles.get(pid) or ("driver" if pid is not None else "closed early")
        sent_received = out.setdefault(role, [0, 0])
        sent_received[0] += row["sent"]
        sent_received[1] += row["received"]
    return out


def minus(a: dict, b: dict) -> dict:
    return {k: [a.get(k, [0, 0])[i] - b.get(k, [0, 0])[i] for i in (0, 1)]
            for k in set(a) | set(b)}


def progress(checkpoint: Path) -> tuple[int, int, int]:
    """(iteration, env steps, learner steps) a run's checkpoint holds (zeros while there is
    none; learner steps 0 where the run counts none)."""
    from esnb.record import CheckpointError

    try:
        meta = load_checkpoint(checkpoint)[0]
    except (FileNotFoundError, CheckpointError, KeyError, ValueError, OSError):
        return 0, 0, 0
    row = (meta.get("history") or [{}])[-1]
    return (int(meta["iteration"]), int(row.get("env_steps", 0) or 0),
            int(row.get("learner_steps", 0) or 0))


def run_case(hosts, name: str, roles: dict, nanny: int) -> dict:
    """One run of ``name``: the bytes by peer between its iterations k1 and k2 (the
    iterations and seconds between the two readings), and over the whole run."""
    algorithm, args, flag, amount, marks = CASES[name]
    out = hosts.run_folder(name)
    start = totals(hosts, roles, nanny)
    proc = subprocess.Popen([sys.executable, "-m", "esnb.cli", "train", algorithm, *args, flag,
                             str(amount), "--address", hosts.address, "--out", str(out),
                             *QUIET], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd="/tmp")
    roles = {**roles, proc.pid: "driver"}
    readings = []
    for mark in marks:
        while (seen := progress(out / "checkpoint.npz"))[0] < mark:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} ended before iteration {mark}: "
                                   f"{proc.communicate()[1][-3000:]}")
            time.sleep(0.02)
        readings.append((seen, time.monotonic(), totals(hosts, roles, nanny)))
    _, err = proc.communicate(timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: {err[-3000:]}")
    ((i1, s1, l1), t1, b1), ((i2, s2, l2), t2, b2) = readings
    return {"iterations": i2 - i1, "env_steps": s2 - s1, "learner_steps": l2 - l1,
            "seconds": t2 - t1,
            "bytes": minus(b2, b1), "run": minus(totals(hosts, roles, nanny), start),
            "run_iterations": progress(out / "checkpoint.npz")[0]}


def main(names: list[str], replay_on_host2: bool = False) -> None:
    """Measure ``names`` (cases of :data:`CASES`) and print the figures. The first worker by
    address (where a replay goes) is this host's, where the run folder is, unless
    ``replay_on_host2``."""
    import socket

    with two_hosts(first=HOST2 if replay_on_host2 else socket.gethostname()) as hosts:
        roles = {hosts.scheduler_pid: "scheduler", hosts.worker_pid(hosts.host1): "host1 worker",
                 os.getpid(): "this script"}
        nanny = hosts.nanny_pid(HOST2)
        # what comes with time: the idle cluster for 20 s
        before = totals(hosts, roles, nanny)
        time.sleep(20)
        idle = minus(totals(hosts, roles, nanny), before)
        idle_rate = sum(sum(v) for v in idle.values()) / 20
        print(f"idle: {idle_rate:.0f} B/s between the hosts ({idle})")
        for name in names:
            r = run_case(hosts, name, roles, nanny)
            n = r["iterations"]
            total = sum(sum(v) for v in r["bytes"].values()) / n
            timed = idle_rate * r["seconds"] / n
            whole = sum(sum(v) for v in r["run"].values())
            steps = r["env_steps"]
            per_step = f", {total * n / steps:,.1f} B per env step" if steps > 0 else ""
            if r["learner_steps"] > 0:
                per_step += f", {total * n / r['learner_steps']:,.0f} B per learner step"
            print(f"{name}: {n} iterations ({steps} env steps) in {r['seconds']:.1f} s: "
                  f"{total:,.0f} B per iteration ({total - timed:,.0f} B without the idle "
                  f"rate){per_step}, {total * n / r['seconds']:,.0f} B/s; the whole run "
                  f"({r['run_iterations']} iterations): {whole:,.0f} B")
            for role, (sent, received) in sorted(r["bytes"].items()):
                print(f"    {role:>13}: host2 sent {sent / n:>10,.0f} B, received "
                      f"{received / n:>10,.0f} B per iteration")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", metavar="CASE",
                        help=f"what to measure: {', '.join(CASES)} (default: all)")
    parser.add_argument("--replay-on-host2", action="store_true",
                        help="the first worker by address is the second host's")
    options = parser.parse_args()
    unknown = set(options.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    main(options.cases or list(CASES), options.replay_on_host2)
