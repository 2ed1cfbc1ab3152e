"""Ctrl-C as a terminal sends it: to the whole process group (issue 28).

A terminal delivers Ctrl-C to every process of its foreground group: the CLI's driver *and*
the worker processes of the LocalCluster it started (srun/salloc, scancel and a notebook's
interrupt button signal a whole group too). These tests start each algorithm's CLI in a new
session, wait until it has written a checkpoint, and send SIGINT or SIGTERM to the group, as a
person does; a notebook kernel gets its interrupt button pressed through jupyter_client. Waits
are on what the processes wrote; timeouts only turn a hang into a failure.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import time

import pandas as pd
import psutil
import pytest
from test_survive import esnb, saved_iteration, wait_for_generation, worker_processes

from esnb.bench.soak.interrupts import RUNS, start

pytestmark = pytest.mark.slow  # every test here starts a cluster or a CLI run

SIGNALS = {"es": signal.SIGINT, "aesrl": signal.SIGTERM, "cemrl": signal.SIGINT,
           "apex": signal.SIGTERM, "impala": signal.SIGTERM,
           "eorl": signal.SIGINT}


def group_of(proc: subprocess.Popen) -> list[psutil.Process]:
    """Every live process of ``proc``'s group (the driver, its workers, helpers)."""
    found = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == proc.pid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return found


def drained(proc: subprocess.Popen, timeout: float = 60) -> list[psutil.Process]:
    """The processes left in ``proc``'s group once they had ``timeout`` to exit (the driver's
    resource tracker and workers exit when the pipes to the driver close)."""
    deadline = time.monotonic() + timeout
    while group_of(proc) and time.monotonic() < deadline:
        time.sleep(0.1)
    return group_of(proc)


def workers_of(proc: subprocess.Popen) -> list[psutil.Process]:
    return worker_processes(proc.pid)


def stop_group(proc: subprocess.Popen, sig: int, timeout: float = 180) -> str:
    os.killpg(proc.pid, sig)
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"{signal.Signals(sig).name} to the group: the run hung, "
                             f"stderr:\n{proc.communicate()[1]}") from None


#: apex-dpg left out: ApeXDPG is ApeX with another learner (esnb/runners/apex/runner.py), the
#: same runner, CLI, quiesce and close; apex covers them (with SIGTERM, the others SIGINT)
SIGNALLED = [algo for algo in RUNS if algo != "apex-dpg"]


@pytest.mark.parametrize("algo", SIGNALLED)
def test_a_signal_to_the_process_group_stops_the_run_cleanly(tmp_path, algo):
    _, (flag, column) = RUNS[algo]
    sig = SIGNALS[algo]
    out = tmp_path / "run"
    proc = start(algo, out)  # as a terminal starts it: the leader of its process group
    try:
        wait_for_generation(proc, out / "checkpoint.npz", 1)
        workers = workers_of(proc)
        assert len(workers) == 2, workers
        err = stop_group(proc, sig)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert " died (" not in err, err  # no worker died of the signal meant for the driver
    lines = [ln for ln in err.splitlines() if "resume with:" in ln]
    assert len(lines) == 1 and f"--resume {out}" in lines[0], err
    assert lines[0].startswith(f"esnb: {signal.Signals(sig).name}: ")
    assert drained(proc) == []  # the driver closed its cluster: nothing is left behind
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    stopped = saved_iteration(out / "checkpoint.npz")
    history = pd.read_csv(out / "history.csv")
    assert stopped >= 1 and len(history) == stopped
    if algo != "es":
        return  # each algorithm's resume is tested in test_survive(_async); the command is one
    # the printed command resumes it (here inline, a little further)
    done = int(history[column].iloc[-1])
    p = esnb("train", algo, "--resume", str(out), f"--{flag}", str(done + 1), "--workers", "0",
             "--no-progress", "--final-eval", "0")
    assert p.returncode == 0, p.stderr
    assert saved_iteration(out / "checkpoint.npz") > stopped


def test_a_second_ctrl_c_to_the_group_exits_at_once(tmp_path):
    out = tmp_path / "run"
    proc = start("es", out)
    try:
        wait_for_generation(proc, out / "checkpoint.npz", 1)
        os.killpg(proc.pid, signal.SIGINT)
        err = stop_group(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert drained(proc) == []  # its workers go with it (dask's workers watch the driver)


def _ignored(pid: int) -> set[int]:
    with open(f"/proc/{pid}/status") as f:
        mask = int(next(ln for ln in f if ln.startswith("SigIgn:")).split()[1], 16)
    return {sig for sig in (signal.SIGINT, signal.SIGTERM) if mask >> (sig - 1) & 1}


def test_local_workers_ignore_group_signals_also_after_a_restart():
    """Workers started with the cluster ignore SIGINT and SIGTERM from their first instruction
    (born with SIG_IGN), and so does one that its nanny restarts after it was killed."""
    from esnb import make_client

    client = make_client(2, dashboard_address=":0")
    try:
        pids = sorted(client.run(os.getpid).values())
        assert all(_ignored(pid) == {signal.SIGINT, signal.SIGTERM} for pid in pids)
        assert _ignored(os.getpid()) == set()  # the driver handles them
        os.kill(pids[0], signal.SIGKILL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            now = sorted(client.run(os.getpid, on_error="ignore").values())
            if len(now) == 2 and pids[0] not in now:
                break
            time.sleep(0.2)
        restarted = next(pid for pid in now if pid not in pids)
        assert _ignored(restarted) == {signal.SIGINT, signal.SIGTERM}
        for pid in now:
            os.kill(pid, signal.SIGINT)
            os.kill(pid, signal.SIGTERM)
        assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3
        assert sorted(client.run(os.getpid).values()) == now  # nobody died
    finally:
        client.close()


# -- a notebook's interrupt button ---------------------------------------------------------
START = """
import os, esnb
client = esnb.make_client(2, dashboard_address=":0")
runner = esnb.ES("CartPole-v1", population=10, noise_size=1_000_000, eval_interval=0)
runner.start(generations=100000)
print("PIDS", sorted(client.run(os.getpid).values()))
"""
WAIT = """
print("WAITING", flush=True)
runner.wait()
"""
AFTER = """
import time
seen = runner.iteration
while runner.iteration < seen + 3:  # the run goes on
    time.sleep(0.05)
print("AFTER", runner.state, sorted(client.run(os.getpid).values()))
runner.stop(); runner.wait(); client.close()
print("STOPPED", runner.state)
"""


def _messages(kc, msg_id: str, timeout: float = 180):
    """The iopub messages of one execution, until the kernel is idle again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        yield msg["msg_type"], msg["content"]
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return
    raise AssertionError(f"cell {msg_id} did not finish in {timeout} s")


def _execute(kc, code: str) -> tuple[str, list[dict]]:
    """Run ``code``; its stdout text and error messages, once the kernel is idle again."""
    text, errors = [], []
    for kind, content in _messages(kc, kc.execute(code)):
        if kind == "stream":
            text.append(content["text"])
        elif kind == "error":
            errors.append(content)
    return "".join(text), errors


def test_the_kernel_interrupt_button_stops_wait_and_the_run_goes_on(kernel):
    km, kc = kernel
    out, errors = _execute(kc, START)
    assert not errors, errors
    pids = json.loads(out.split("PIDS", 1)[1].strip())
    interrupted = None
    for kind, content in _messages(kc, kc.execute(WAIT)):
        if kind == "stream" and "WAITING" in content["text"]:
            km.interrupt_kernel()  # SIGINT to the kernel's process group, as the button does
        elif kind == "error":
            interrupted = content["ename"]
    assert interrupted == "KeyboardInterrupt"
    out, errors = _execute(kc, AFTER)
    assert not errors, errors
    after = out.split("AFTER", 1)[1].splitlines()[0].split(" ", 2)
    assert after[1] == "running"
    assert json.loads(after[2]) == pids  # the workers did not die of the interrupt
    assert "STOPPED stopped" in out
