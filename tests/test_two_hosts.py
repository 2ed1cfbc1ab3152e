"""esnb on two hosts that share no filesystem (issue 34): a scheduler, a worker on this host and
one on a simulated second host (:mod:`twohost`: its own hostname, /tmp, /dev/shm, HOME and
cache; the driver's run folder out of its sight), driven as a user drives a cluster:
``esnb train <algo> --address tcp://...``.

Each algorithm trains a few iterations, writes its checkpoint and resumes from it; ES
(checkpointed and resumed) gives bitwise the θ of an inline run; a host whose esnb builds
another noise table is refused in one line. Budgets are iterations, never seconds: the machine
is shared.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from twohost import HOST2

from esnb.record import load_checkpoint

# one scheduler and two hosts for the module: its tests run one after another in one process
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("two-hosts")]

QUIET = ["--final-eval", "0", "--no-progress"]
SMALL_NETS = ["--actor-hidden", "16", "16", "--critic-hidden", "16", "16"]
#: per case: the algorithm, its smallest run (the suite's smallest settings of each), the
#: budget flag in iterations and (first run's, resumed run's) totals of that budget. EORL and
#: serial CEM-RL run in the driver's process (their runners take no executor); P-CEM-RL
#: (--parallel) is CEM-RL on the workers
RUNS = {
    "es": ("es", ["--env", "CartPole-v1", "--population", "10", "--noise-size", "1000000"],
           "--generations", (2, 4)),
    "impala": ("impala", ["--env", "CartPole-v1", "--batch-size", "4", "--unroll-length", "10",
                          "--envs-per-actor", "2", "--hidden", "16",
                          "--updates-per-iteration", "2", "--eval-interval", "0"],
               "--learner-steps", (4, 8)),
    "eorl": ("eorl", ["--env", "bitflip", "--size", "5", "--subgoal", "1",
                      "--variant", "EORL-ACTV"], "--episodes", (5, 10)),
    "cemrl": ("cemrl", ["--env", "InvertedPendulum-v5", *SMALL_NETS, "--pop-size", "4",
                        "--rl-start-step", "40", "--batch-size", "16",
                        "--max-episode-steps", "40", "--eval-episodes", "1"],
              "--generations", (2, 3)),
    "cemrl-parallel": ("cemrl", ["--env", "InvertedPendulum-v5", "--parallel", *SMALL_NETS,
                                 "--pop-size", "4", "--rl-start-step", "40", "--batch-size",
                                 "16", "--max-episode-steps", "40", "--eval-episodes", "1"],
                       "--generations", (2, 3)),
    "apex": ("apex", ["--env", "CartPole-v1", "--num-actors", "2", "--min-size", "200",
                      "--learner-chunk", "4", "--batch-size", "16", "--capacity", "2000",
                      "--hidden", "16", "--eval-interval", "0"], "--learner-steps", (8, 16)),
    "apex-dpg": ("apex-dpg", ["--env", "InvertedPendulum-v5", "--num-actors", "2",
                              "--min-size", "200", "--learner-chunk", "4", "--batch-size", "16",
                              "--capacity", "2000", *SMALL_NETS, "--max-episode-steps", "100",
                              "--eval-interval", "0"], "--learner-steps", (8, 16)),
    "aesrl": ("aesrl", ["--env", "InvertedPendulum-v5", *SMALL_NETS, "--rl-start-step", "100",
                        "--critic-chunk", "50", "--batch-size", "16", "--max-episode-steps",
                        "40", "--eval-episodes", "1"], "--updates", (6, 12)),
}
#: the cases whose runners run on the workers (the others' runs are the driver's process)
ON_WORKERS = {"es", "impala", "cemrl-parallel", "apex", "apex-dpg", "aesrl"}


def esnb(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``esnb`` as a user runs it, in this host's /tmp (no file of the test's checkout)."""
    return subprocess.run([sys.executable, "-m", "esnb.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd="/tmp")


def _facts(paths: list[str]) -> dict:
    """What a process sees of its host: hostname, which of ``paths`` exist, its /dev/shm,
    /tmp's and /dev/shm's filesystems, its home and noise cache."""
    import socket

    from esnb.noise_cache import cache_dir

    return {"hostname": socket.gethostname(),
            "exists": [os.path.exists(p) for p in paths],
            "shm": sorted(f for f in os.listdir("/dev/shm") if not f.startswith("sem.mp-")),
            "devices": [os.stat("/tmp").st_dev, os.stat("/dev/shm").st_dev],
            "home": os.path.expanduser("~"), "cache": cache_dir()}


_facts.__module__ = "__main__"  # shipped by value: a worker does not import the tests


def test_the_second_host_shares_no_files_with_this_one(two_hosts):
    """Another hostname; a file the driver wrote in its run folder and one in this host's
    /dev/shm are not there; /tmp and /dev/shm are other filesystems; its /dev/shm holds no
    esnb file (only the nanny's multiprocessing semaphores); another home and noise cache."""
    hosts = two_hosts
    folder = hosts.run_folder("facts")
    folder.mkdir(parents=True)
    written = folder / "written-by-the-driver.txt"
    written.write_text("the driver's")
    shm = Path("/dev/shm") / f"esnb-two-hosts-test-{os.getpid()}"
    shm.write_text("this host's")
    try:
        facts = hosts.client.run(_facts, [str(written), str(shm)])
    finally:
        shm.unlink()
    here = _facts([str(written), str(shm)])
    one, two = facts[hosts.worker(hosts.host1)], facts[hosts.worker(HOST2)]
    assert one["hostname"] == here["hostname"] == hosts.host1 != two["hostname"] == HOST2
    assert one["exists"] == [True, True] and two["exists"] == [False, False]
    assert one["devices"] == here["devices"]
    assert two["devices"][0] != here["devices"][0] and two["devices"][1] != here["devices"][1]
    assert two["shm"] == []
    assert two["home"] != here["home"] and two["cache"] != one["cache"]
    assert not os.path.exists(two["home"])  # it lives on the second host's /tmp


def test_the_second_hosts_worker_killed_is_started_again_by_its_nanny(two_hosts):
    """The fixture's SIGKILL: the worker process dies, its nanny (on the same host) starts
    another on the same address."""
    hosts = two_hosts
    address, pid = hosts.worker(HOST2), hosts.worker_pid(HOST2)
    assert pid != hosts.nanny_pid(HOST2)
    new = hosts.kill_worker(HOST2)
    assert new != pid and hosts.worker(HOST2) == address
    assert hosts.client.run(_facts, [], workers=[address])[address]["hostname"] == HOST2


def _executed(dask_worker) -> int:
    """How many tasks this worker has run (given ``dask_worker`` by ``client.run``)."""
    return dask_worker.state.executed_count


_executed.__module__ = "__main__"


def _tasks_on_host2(hosts) -> int:
    address = hosts.worker(HOST2)
    return hosts.client.run(_executed, workers=[address])[address]


def _train(hosts, case: str, total: int, *extra: str):
    algorithm, args, flag, _ = RUNS[case]
    out = hosts.run_folder(case)
    p = esnb("train", algorithm, *args, flag, str(total), "--address", hosts.address,
             "--out", str(out), *QUIET, *extra)
    assert p.returncode == 0, p.stderr[-6000:]
    return out, p


@pytest.mark.parametrize("case", [
    c for c in RUNS])
def test_every_algorithm_trains_checkpoints_and_resumes_on_two_hosts(two_hosts, case):
    """``esnb train <algo> --address``: a checkpoint after the first budget, then ``--resume``
    to a larger total: the history goes on from the checkpoint without a gap or a repeat; the
    second host took part (its worker ran tasks of the runs)."""
    hosts = two_hosts
    first, then = RUNS[case][3]
    before = _tasks_on_host2(hosts)
    out, _ = _train(hosts, case, first)
    meta = load_checkpoint(out / "checkpoint.npz")[0]
    held = int(meta["iteration"])
    assert held >= 1
    # a run stops at the first whole iteration that reaches its budget and may pass it (an
    # Ape-X iteration is a chunk of learner steps): the resumed total goes past what it held
    from esnb.runners.registry import algorithms

    counts_iterations = algorithms()[RUNS[case][0]].load_runner().iteration_column
    column = "learner_steps" if RUNS[case][2] == "--learner-steps" else counts_iterations
    reached = int(pd.DataFrame(meta["history"])[column].iloc[-1])
    _, p = _train(hosts, case, max(then, reached + then - first), "--resume", str(out))
    after = load_checkpoint(out / "checkpoint.npz")[0]
    h = pd.read_csv(out / "history.csv")
    assert int(after["iteration"]) == len(h) > held, p.stderr[-3000:]
    assert h["wall_time"].iloc[:held].tolist() == pytest.approx(
        pd.DataFrame(meta["history"])["wall_time"].tolist())
    if case in ON_WORKERS:
        assert _tasks_on_host2(hosts) > before
    if case == "es":
        _es_gives_bitwise_the_inline_theta(hosts, out, len(h))


def _es_gives_bitwise_the_inline_theta(hosts, both: Path, generations: int) -> None:
    """The ES run on both hosts (checkpointed and resumed) and the same seed and budget inline
    in one go: the same θ, to the bit (each host builds its own noise table, from the same
    integer stream). Checked on the case's run: a run of its own cost the suite a two-host
    ES run more."""
    assert pd.read_csv(both / "history.csv").workers.tolist() == [2] * generations
    inline = hosts.run_folder("es-inline")
    p = esnb("train", "es", *RUNS["es"][1], "--generations", str(generations), *QUIET,
             "--workers", "0", "--out", str(inline))
    assert p.returncode == 0, p.stderr[-3000:]
    a, b = (load_checkpoint(f / "checkpoint.npz")[1]["theta"] for f in (inline, both))
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


#: another esnb on a third host: esnb's files copied there with one constant of the noise
#: stream changed (SplitMix64's first multiplier), so its tables hold other values
OTHER_ESNB = ("mkdir -p site && cp -r {src} site/esnb && rm -rf site/esnb/__pycache__ && "
              "sed -i 's/0xBF58476D1CE4E5B9/0xBF58476D1CE4E5BB/' site/esnb/normals.py && "
              "grep -q 0xBF58476D1CE4E5BB site/esnb/normals.py")


def _table(size: int, seed: int) -> dict:
    """Where esnb comes from on this process's host, and the digest of its table."""
    import esnb
    from esnb.noise import NoiseConfig, NoiseTable

    return {"esnb": esnb.__file__, "digest": NoiseTable(NoiseConfig(size, seed)).digest}


_table.__module__ = "__main__"


@contextlib.contextmanager
def _host_with_other_esnb(hosts, name: str = "esnb-host3"):
    """A third host whose esnb builds other noise tables (:data:`OTHER_ESNB`), stopped at the
    end; yields its worker's address."""
    from esnb import __file__ as package

    hosts.start_host(name, setup=OTHER_ESNB.format(src=Path(package).parent),
                     env={"PYTHONPATH": "/tmp/home/site"})
    try:
        address = hosts.wait_for(name)[name]
        assert hosts.client.run(_table, 1000, 0, workers=[address])[address]["esnb"] == \
            "/tmp/home/site/esnb/__init__.py"
        yield address
    finally:
        hosts.stop(name)


def _refused(hosts, worker: str, size: int, seed: int, name: str) -> None:
    """An ES run of the table (size, seed) is refused in one line naming both digests."""
    ours = _table(size, seed)["digest"]
    theirs = hosts.client.run(_table, size, seed, workers=[worker])[worker]["digest"]
    assert ours != theirs
    p = esnb("train", "es", "--env", "CartPole-v1", "--population", "10", "--noise-size",
             str(size), "--noise-seed", str(seed), "--generations", "2",
             "--address", hosts.address, "--out", str(hosts.run_folder(name)), *QUIET)
    assert p.returncode == 2, p.stderr[-6000:]
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-6000:]
    for part in ("esnb: error: ", ours[:16], theirs[:16], "esnb-host3", f"worker {worker}"):
        assert part in lines[0], (part, lines[0])


def _noise_plugins(dask_scheduler) -> list[str]:
    return [name for name in dask_scheduler.worker_plugins if name.startswith("esnb-noise-")]


_noise_plugins.__module__ = "__main__"


def test_a_host_whose_esnb_builds_another_noise_table_is_refused_in_one_line(two_hosts):
    """A third host runs another esnb, whose noise stream differs: an ES run on the scheduler
    stops before its first generation with one line naming both digests, no traceback. (As
    on a scheduler no ES run used yet: the tables earlier tests registered are let go first,
    else the host would build them as it joins and leave at once, see the next test.)"""
    for name in two_hosts.client.run_on_scheduler(_noise_plugins):
        two_hosts.client.unregister_worker_plugin(name)
    with _host_with_other_esnb(two_hosts) as worker:
        # a table no earlier run registered on this scheduler: checked as the run starts
        _refused(two_hosts, worker, 1_000_003, 9, "refused")


def test_a_host_that_joins_with_another_noise_table_leaves_saying_why(two_hosts):
    """A host whose esnb builds another table joins after a run registered that table (a
    shared scheduler, a cluster that grows): it leaves the cluster at once with its nanny,
    its log saying why in one line naming both digests, and the next run of the table trains
    on the other hosts."""
    size, seed = 1_000_007, 9
    args = ("train", "es", "--env", "CartPole-v1", "--population", "10", "--noise-size",
            str(size), "--noise-seed", str(seed), "--generations", "1",
            "--address", two_hosts.address, *QUIET)
    p = esnb(*args, "--out", str(two_hosts.run_folder("before")))
    assert p.returncode == 0, p.stderr[-3000:]
    name = "esnb-host3"
    from esnb import __file__ as package

    two_hosts.start_host(name, setup=OTHER_ESNB.format(src=Path(package).parent),
                         env={"PYTHONPATH": "/tmp/home/site"})
    try:
        deadline = time.monotonic() + 180
        while "leaves the cluster" not in two_hosts.log(name):
            assert time.monotonic() < deadline, two_hosts.log(name)
            time.sleep(0.5)
        said = [ln for ln in two_hosts.log(name).splitlines() if "leaves the cluster" in ln]
        # the first table it builds refuses it (any the scheduler registered: this one's or an
        # earlier run's), naming both digests and that host
        assert len(said) == 1 and "differs between hosts" in said[0] and name in said[0], said
        assert len(set(re.findall(r"\b([0-9a-f]{16})…", said[0]))) == 2, said[0]
        while name in two_hosts.client.run(socket_name).values():
            assert time.monotonic() < deadline
            time.sleep(0.5)
        p = esnb(*args, "--out", str(two_hosts.run_folder("after")))
        assert p.returncode == 0, p.stderr[-3000:]
    finally:
        two_hosts.stop(name)


def socket_name() -> str:
    import socket

    return socket.gethostname()


socket_name.__module__ = "__main__"  # shipped by value: a worker does not import the tests


def _replay_host(hosts) -> str:
    """The hostname of the worker holding the run's replay server (``esnb-replay`` actor)."""
    def held(dask_scheduler):
        return [ts.who_has and next(iter(ts.who_has)).address
                for key, ts in dask_scheduler.tasks.items()
                if str(key).startswith("esnb-replay") and ts.state == "memory"]

    addresses = [a for a in hosts.client.run_on_scheduler(held) if a]
    by_address = {a: h for h, a in hosts.workers().items()}
    return by_address.get(addresses[-1]) if addresses else ""


def test_a_replay_on_the_second_host_killed_mid_run_is_recovered_and_its_loss_counted(
        two_hosts):
    """Ape-X through ``esnb train --address``, its replay on the second host (the first worker
    by address): that host's worker is SIGKILLed mid-run, its nanny starts another; the run
    recreates the replay from the driver's newest replay file (on this host), counts what the
    loss took from the lost server's count file read on its own host, and trains to its
    budget."""
    hosts = two_hosts
    out = hosts.run_folder("apex-killed-replay")
    command = [sys.executable, "-m", "esnb.cli", "train", "apex", *RUNS["apex"][1],
               "--learner-steps", "600", "--replay-checkpoint-interval", "1",
               "--checkpoint-every", "0", "--address", hosts.address, "--out", str(out),
               *QUIET]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd="/tmp")
    try:
        deadline = time.monotonic() + 600
        while True:  # a few iterations in, and a recovery checkpoint on the driver's side
            assert proc.poll() is None, proc.stderr.read()[-4000:]
            assert time.monotonic() < deadline
            with contextlib.suppress(Exception):
                if int(load_checkpoint(out / "checkpoint.npz")[0]["iteration"]) >= 3 and \
                        (out / "checkpoint.replay-recovery.npz").exists():
                    break
            time.sleep(0.5)
        assert _replay_host(hosts) == HOST2
        assert not any(out.glob("*.count-*"))  # the server's count file is its host's
        hosts.kill_worker(HOST2)
        _, err = proc.communicate(timeout=900)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-4000:]
    h = pd.read_csv(out / "history.csv")
    assert h["learner_steps"].iloc[-1] >= 600
    assert h["replay_recreations"].iloc[-1] == 1
    said = [ln for ln in err.splitlines() if "replay lost; recreated on" in ln]
    # from the driver's newest replay file: its recovery checkpoint or its last checkpoint's
    assert len(said) == 1 and f"from {out}/checkpoint.replay-" in said[0], err[-4000:]
    # what the loss took: the lost server's count file, read on its host (at once if a worker
    # of that host is alive, else once its nanny's new worker joined: a second line), minus
    # the file the new server started from
    lost, before, restored = (int(x) for x in re.search(
        r"(\d+) transitions lost \((\d+) inserted before, (\d+) in", said[0]).groups())
    late = [ln for ln in err.splitlines() if "read on its host once a worker came back" in ln]
    assert len(late) <= 1
    if late:
        inserted, more = (int(x) for x in re.search(
            r": (\d+) inserted, (\d+) more transitions lost", late[0]).groups())
        assert inserted >= before and more == inserted - before
        lost += more
    else:
        assert "no live worker on" not in err
    assert int(h["replay_lost"].iloc[-1]) == lost
