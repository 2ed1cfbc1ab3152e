"""Faults with real processes killed by SIGKILL mid-run.

- ES workers killed while they run a generation's tasks (one for good, one that its nanny
  restarts): every generation completes on what is left and theta is bitwise the fault-free
  one;
- the driver killed (its whole process group: driver, scheduler, nannies, workers):
  ``ES.load(checkpoint)`` continues bitwise as if it had never stopped.
"""

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest

from esnb.cluster import make_client
from esnb.runners.es import ES

# every test here starts a cluster or a CLI run; one test process runs the file (its
# module-scoped cluster made once, not once per test process)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("faults")]

# fixed-length episodes, one pair per task (~50 ms): a generation keeps both workers busy
CFG = dict(env="HalfCheetah-v5", population=16, sigma=0.05, lr=0.03, seed=7,
           max_episode_steps=500, obs_stat_prob=0.5, eval_interval=2, eval_episodes=2,
           noise_size=1_000_000, tasks_per_worker=100)
GENS = 6


@pytest.fixture(scope="module")
def fault_free():
    r = ES(**CFG, client=False)
    r.step(GENS)
    return r


def _busy(client, labels):
    """{address: holds a generation payload} of workers running rollouts of ``labels``."""
    def processing(dask_scheduler):
        return {a: ([ts.key for ts in ws.processing],
                    any(ts.key.startswith("esnb-put-") for ts in ws.has_what))
                for a, ws in dask_scheduler.workers.items()}

    return {addr: payload for addr, (keys, payload) in client.run_on_scheduler(processing).items()
            if any(label in k for k in keys for label in labels)}


def _kill_when_busy(client, runner, victim, pid, generations, prefer_payload=False):
    """SIGKILL ``pid`` once worker ``victim`` runs rollouts of one of ``generations`` (if
    asked, preferably while it also holds the payload the others need); returns the
    generation (0-based) the run was in."""
    labels = [f"{runner.name}-g{g}-" for g in generations]
    t0 = time.monotonic()
    while True:
        busy = _busy(client, labels)
        if victim in busy and (busy[victim] or not prefer_payload
                               or runner.iteration >= generations[-1]):
            os.kill(pid, signal.SIGKILL)
            return runner.iteration
        assert runner.running and time.monotonic() - t0 < 120, "never saw the victim busy"
        time.sleep(0.002)


def test_workers_killed_mid_generation(fault_free):
    """One worker without a nanny (as a batch job starts one) is killed for good, later the
    other's process (its nanny restarts it): each generation completes on what is left."""
    c = make_client(1, dashboard_address=":0", set_as_default=False,
                    silence_logs=logging.CRITICAL)
    extra = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", c.scheduler.address,
         "--no-nanny", "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c.wait_for_workers(2, timeout=120)
        r = ES(**CFG, client=c)
        r.step(1)  # warm: both workers have imported everything
        pids = c.run(os.getpid)
        lone = next(a for a, p in pids.items() if p == extra.pid)
        kept = next(a for a in pids if a != lone)
        r.start(generations=GENS - 1)
        g = _kill_when_busy(c, r, lone, extra.pid, [1, 2], prefer_payload=True)
        _kill_when_busy(c, r, kept, pids[kept], list(range(g + 1, GENS - 1)))
        r.wait(300)
        assert extra.wait(10) == -signal.SIGKILL
        assert r.state == "finished" and r.iteration == GENS
        h = r.history
        assert h.n_excluded.sum() == 0 and h.workers.iloc[-1] == 1
        (now,) = c.run(os.getpid).values()
        assert now != pids[kept]  # the nanny's new worker process finished the run
    finally:
        c.close()
        if extra.poll() is None:
            extra.kill()
    assert np.array_equal(r.theta, fault_free.theta)
    assert np.array_equal(r.obs_stats.sum, fault_free.obs_stats.sum)
    assert np.array_equal(h.return_mean, fault_free.history.return_mean)
    assert np.array_equal(h.eval_return, fault_free.history.eval_return, equal_nan=True)


DRIVER = textwrap.dedent("""
    import json, logging, sys
    from esnb.cluster import make_client
    from esnb.runners.es import ES

    def main():
        cfg, path = json.loads(sys.argv[1]), sys.argv[2]
        client = make_client(2, dashboard_address=":0", silence_logs=logging.CRITICAL)
        runner = ES(**cfg, client=client)

        def checkpoint(row):  # every generation, atomically (temporary file, then rename)
            runner.save(path)
            print("saved", row["generation"], flush=True)

        runner.add_observer(checkpoint)
        runner.start()  # runs until killed
        runner.wait()

    if __name__ == "__main__":
        main()
""")


def test_driver_killed_resumes_bitwise(fault_free, tmp_path, client):
    import json

    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    ck = tmp_path / "run.npz"
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(CFG), str(ck)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)  # its own process group: driver + cluster
    try:
        for line in proc.stdout:
            if line.startswith("saved") and int(line.split()[1]) >= 3:
                break
        else:
            pytest.fail(f"the driver ended before its third checkpoint (rc {proc.wait()})")
        group = [proc.pid] + [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert len(group) >= 3  # the driver (scheduler, nannies) and 2 worker processes
        os.killpg(proc.pid, signal.SIGKILL)  # mid-generation: it is always running one
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL

    def alive():
        return [p for p in group if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]

    deadline = time.monotonic() + 30  # the kernel reaps them; a loaded machine takes longer
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive()

    resumed = ES.load(ck, client=client)
    done = resumed.iteration
    assert done >= 3
    # the fault-free run goes past the checkpoint, unless the kill came late (a fast machine)
    reference = fault_free
    if done >= GENS:
        reference = ES(**CFG, client=False)
        reference.step(done + 1)
    resumed.step(reference.iteration - done)
    assert np.array_equal(resumed.theta, reference.theta)
    assert np.array_equal(resumed.obs_stats.sum, reference.obs_stats.sum)
    h = resumed.history
    assert np.array_equal(h.return_mean, reference.history.return_mean)
    assert np.array_equal(h.eval_return, reference.history.eval_return, equal_nan=True)
    assert np.array_equal(h.env_steps, reference.history.env_steps)
