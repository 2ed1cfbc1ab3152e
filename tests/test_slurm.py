"""esnb on a real SLURM through dask-jobqueue: jobs submitted with sbatch, workers started by
slurmd, retired by ``--lifetime`` and replaced by ``adapt()`` while a run goes on.

Needs a running SLURM (``scripts/slurm/start``; ``.ci/run`` starts one). Without it these tests
skip and say why; with ``ESNB_REQUIRE_SLURM=1`` (set by ``.ci/run``) they fail instead.
"""

import logging
import os
import re
import shutil
import subprocess
import sys
import time
import warnings

import dask.config
import numpy as np
import pytest

# one SLURM node for the whole suite: these tests run one after another, in one xdist process
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.xdist_group("slurm")]


def slurm_unavailable() -> str | None:
    """Why SLURM cannot run these tests here, or None."""
    if shutil.which("sbatch") is None:
        return "no sbatch: apt-get install slurm-wlm munge, then scripts/slurm/start"
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
        nodes = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                               timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"SLURM does not answer ({exc}): scripts/slurm/start"
    if "is UP" not in ping.stdout:
        return f"slurmctld is not running ({ping.stdout.strip() or ping.stderr.strip()}): " \
               f"scripts/slurm/start"
    if not re.search(r"^(idle|mix|alloc)", nodes.stdout, re.M):
        return f"no usable SLURM node (sinfo: {nodes.stdout.strip()!r}): scripts/slurm/start"
    try:
        import dask_jobqueue  # noqa: F401
    except ImportError:
        return "dask-jobqueue is not installed: pip install 'esnb[jobqueue]'"
    return None


@pytest.fixture(scope="module")
def slurm():
    reason = slurm_unavailable()
    if reason:
        if os.environ.get("ESNB_REQUIRE_SLURM"):
            pytest.fail(f"ESNB_REQUIRE_SLURM is set but SLURM is unavailable: {reason}")
        warnings.warn(f"SLURM tests skipped: {reason}", stacklevel=1)  # shown by pytest -q
        pytest.skip(reason)


def _job_of_this_worker():
    """(SLURM job id, started by slurmd) of the worker process running this."""
    import os

    import psutil

    return (os.environ.get("SLURM_JOB_ID"),
            any(p.name() == "slurmstepd" for p in psutil.Process().parents()))


_job_of_this_worker.__module__ = "__main__"  # shipped by value: workers cannot import tests


def _squeue(name):
    out = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i"], capture_output=True,
                         text=True, timeout=30).stdout
    return out.split()


def test_es_trains_through_slurm_while_jobs_retire_and_are_replaced(slurm, tmp_path):
    from esnb.cluster import make_client
    from esnb.runners.es import ES

    job_name = f"esnb-test-{os.getpid()}"
    with dask.config.set({"esnb.cluster.lifetime": "20s", "esnb.cluster.lifetime-stagger": "5s",
                          "distributed.deploy.lost-worker-timeout": "1s"}):
        c = make_client(2, cluster_type="slurm", dashboard_address=":0", set_as_default=False,
                        silence_logs=logging.ERROR, actor_worker=False,
                        interface="lo", walltime="00:10:00", job_name=job_name,
                        log_directory=str(tmp_path / "logs"),
                        local_directory=str(tmp_path / "work"))
    cfg = dict(env="CartPole-v1", population=40, seed=0, noise_size=1_000_000, eval_interval=2)
    try:
        script = c.cluster.job_script()
        assert "#SBATCH" in script and "--lifetime 20s --lifetime-stagger 5s" in script
        c.wait_for_workers(2, timeout=120)
        first = c.run(_job_of_this_worker)
        assert all(job and by_slurmd for job, by_slurmd in first.values()), first
        assert set(_squeue(job_name)) >= {job for job, _ in first.values()}

        r = ES(**cfg, client=c)
        r.start()
        jobs, t0, replaced_at = set(), time.monotonic(), None
        while True:  # until a replacement job has worked a few generations
            jobs |= {v[0] for v in c.run(_job_of_this_worker, on_error="ignore").values()}
            if replaced_at is None and len(jobs) >= 3:
                replaced_at = r.iteration
            if replaced_at is not None and r.iteration >= max(14, replaced_at + 3):
                break
            assert r.running, f"the run ended: {r.state} {r.error}"
            assert time.monotonic() - t0 < 240, \
                f"no replacement job after {r.iteration} generations; jobs {sorted(jobs)}"
            time.sleep(0.5)
        r.stop()
        r.wait(120)
    finally:
        c.close()
    deadline = time.monotonic() + 30
    while _squeue(job_name) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _squeue(job_name) == [], "closing the client leaves no job behind"

    h = r.history
    assert h.return_mean.iloc[:3].mean() < 60 and h.eval_return.max() >= 200  # it learns
    # (seed 0 evaluates 27.6 at generation 1 and 219.8 at 13, on any number of workers)
    inline = ES(**cfg, client=False)
    inline.step(r.iteration)
    assert np.array_equal(r.theta, inline.theta)  # retired and replaced workers change nothing


def test_apex_learns_through_slurm_and_survives_its_actor_job_killed(slurm, tmp_path):
    """The replay lives on the long-lived actor-worker job; that job is SIGKILLed mid-run (as a
    node failure or a walltime would): esnb submits a new actor worker, Ape-X recreates the
    replay there from its last checkpoint, and the run goes on and learns."""
    from esnb.cluster import ACTOR_RESOURCE, actor_resources, make_client
    from esnb.runners.apex import ApeX

    job_name = f"esnb-apex-{os.getpid()}"
    # one worker job for the actor loops + the actor-worker job for the replay
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1s"}):
        c = make_client(1, cluster_type="slurm", dashboard_address=":0", set_as_default=False,
                        silence_logs=logging.CRITICAL, interface="lo", walltime="00:10:00",
                        job_name=job_name, log_directory=str(tmp_path / "logs"),
                        local_directory=str(tmp_path / "work"))

    def actor_worker():
        workers = c.scheduler_info(n_workers=-1)["workers"]
        return next((a for a, w in workers.items() if ACTOR_RESOURCE in w["resources"]), None)

    try:
        c.wait_for_workers(2, timeout=120)
        jobs = c.run(_job_of_this_worker)
        assert all(job and by_slurmd for job, by_slurmd in jobs.values()), jobs
        assert len({job for job, _ in jobs.values()}) == 2
        assert actor_resources(c) == {ACTOR_RESOURCE: 1}
        first_actor = actor_worker()
        actor_job = jobs[first_actor][0]

        ck = tmp_path / "replay.npz"
        r = ApeX("CartPole-v1", num_actors=4, seed=0, client=c,
                 replay_resources=actor_resources(c), min_size=500, eval_interval=500,
                 eval_episodes=5, target_return=150, replay_checkpoint=str(ck),
                 replay_checkpoint_interval=1.0)
        try:
            r.start(learner_steps=20_000)  # ends sooner: when an evaluation reaches 150
            killed_at = None
            while r.running:
                if r.backend.replay is not None and killed_at is None:
                    assert r.backend.replay.address == first_actor  # pinned by the resource
                    if r.learner_steps > 300 and ck.exists():
                        subprocess.run(["scancel", "--signal=KILL", "--full", actor_job],
                                       check=True, timeout=30)
                        killed_at = r.learner_steps
                time.sleep(0.2)
            r.wait(60)
            new_actor = actor_worker()
            replay_at = r.backend.replay.address
        finally:
            totals = r.close()
        assert killed_at is not None, "solved before the actor job could be killed"
        assert new_actor not in (None, first_actor) and replay_at == new_actor
        assert c.run(_job_of_this_worker, workers=[new_actor])[new_actor][0] != actor_job
    finally:
        c.close()
    # reaching target_return stops the run ("stopped"); the budget would end it ("finished")
    assert r.error is None and r.solved_at is not None, r.history.tail()
    h = r.history
    assert h.eval_return.max() >= 150 and h.return_mean.dropna().iloc[:3].max() < 60
    last = h.iloc[-1]
    assert last.replay_recreations == 1 and last.replay_generation == 1
    assert last.replay_lost >= 0 and last.replay_duplicates == 0
    assert r.learner_steps > killed_at + 100  # learning went on after the loss
    assert sum(t["failures"] for t in totals) <= 1  # at most the loop on the killed job


# -- the driver as a batch job: preempted with SIGTERM, resumed by a second job ---------------
# The job script execs the CLI, so the python process *is* the batch step. `scancel
# --signal=TERM` needs --batch (or --full) to reach it (like `#SBATCH --signal=B:TERM@60`
# before a time limit): without either the signal goes to job steps only, and there are none;
# with a shell in between (no exec), --batch reaches only the shell, which runs a trap only once
# its child has ended. A plain `scancel` (as a preemption or a time limit) sends SIGTERM to
# every process of the job and SIGKILL KillWait seconds later (60 s in scripts/slurm/start,
# SLURM's default 30 s; with 5 a loaded machine once took longer to write the checkpoint and
# the job died by SIGKILL): the checkpoint must be written by then.
JOB = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --output={folder}/job-%j.out
#SBATCH --chdir={cwd}
#SBATCH --cpus-per-task=2
RUN={run}
if [ -e "$RUN/checkpoint.npz" ]; then  # resumed on a LocalCluster: any executor, same theta
    exec {python} -m esnb.cli train es --resume "$RUN" --workers 2 --no-progress \\
        --final-eval 0 --checkpoint-every 0
fi
exec {python} -m esnb.cli {args} --generations {generations} --out "$RUN"
"""


def _job(job_id: str) -> dict[str, str]:
    """``scontrol show job``'s fields (kept MinJobAge = 300 s after the job ended)."""
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                         timeout=30).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


def _wait_job_end(job_id: str, timeout: float = 300) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while (job := _job(job_id)).get("JobState") in ("PENDING", "CONFIGURING", "RUNNING",
                                                    "COMPLETING", None):
        assert time.monotonic() < deadline, f"job {job_id} did not end: {job}"
        time.sleep(0.2)
    return job


@pytest.mark.parametrize("preempt, state", [(["--signal=TERM", "--batch"], "FAILED"),
                                            ([], "CANCELLED")], ids=["sigterm", "cancel"])
def test_a_preempted_batch_job_is_resumed_by_the_next_one_bitwise(slurm, tmp_path, preempt,
                                                                  state):
    """The CLI's driver runs as a SLURM batch job and is preempted mid-run (SIGTERM alone, or
    a cancel: SIGTERM then SIGKILL after KillWait): it writes its checkpoint, prints its one
    line and exits 143; a second job with the same script resumes the run folder to the run's
    total budget, and theta is bitwise that of an uninterrupted run."""
    from test_survive import RUN, saved_iteration

    from esnb.record import load_checkpoint
    from esnb.runners.es import ES

    generations = 20
    run = tmp_path / "run"
    script = tmp_path / "train.sbatch"
    script.write_text(JOB.format(name=f"esnb-preempt-{os.getpid()}", folder=tmp_path,
                                 cwd=os.getcwd(), run=run, python=sys.executable,
                                 args=" ".join(RUN), generations=generations))

    def submit() -> str:
        return subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip().split(";")[0]

    first = submit()
    deadline = time.monotonic() + 300
    while saved_iteration(run / "checkpoint.npz") < 3:  # progress, seen in its checkpoint
        assert _job(first).get("JobState") in ("PENDING", "CONFIGURING", "RUNNING"), \
            (_job(first), (tmp_path / f"job-{first}.out").read_text())
        assert time.monotonic() < deadline, "the job made no progress"
        time.sleep(0.05)
    subprocess.run(["scancel", *preempt, first], check=True, timeout=30)
    job = _wait_job_end(first)
    log = (tmp_path / f"job-{first}.out").read_text()
    # 143 = 128 + SIGTERM: the CLI's own exit, within KillWait when the job was cancelled
    assert job["JobState"] == state and job["ExitCode"] == "143:0", (job, log)
    assert "Traceback" not in log, log
    stopped = saved_iteration(run / "checkpoint.npz")
    assert 3 <= stopped < generations
    (line,) = [ln for ln in log.splitlines() if "resume with:" in ln]
    assert line.startswith(f"esnb: SIGTERM: OpenAI-ES run stopped at generation {stopped}, ")
    assert line.endswith(f"checkpoint written; resume with: esnb train es --resume {run}")

    second = submit()
    job = _wait_job_end(second)
    log = (tmp_path / f"job-{second}.out").read_text()
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", (job, log)
    assert "Traceback" not in log, log
    meta, arrays = load_checkpoint(run / "checkpoint.npz")
    assert meta["iteration"] == generations
    assert [row["generation"] for row in meta["history"]] == list(range(1, generations + 1))

    whole = ES("Hopper-v5", max_episode_steps=100, population=16, noise_size=1_000_000, seed=4,
               client=False)
    whole.step(generations)
    assert np.array_equal(arrays["theta"], whole.theta)


#: small runs of both Atari learners: the budget is learner steps (a few hundred frames)
ATARI_RUNS = {
    "apex": ["--learner-steps", "8", "--num-actors", "2", "--capacity", "2000", "--min-size",
             "200", "--batch-size", "16", "--learner-chunk", "4", "--flush-size", "50",
             "--eval-interval", "0", "--reward-clipping", "abs_one"],
    "impala": ["--learner-steps", "3", "--batch-size", "2", "--unroll-length", "20",
               "--envs-per-actor", "2", "--actors", "1", "--updates-per-iteration", "1",
               "--eval-interval", "0"],
}


@pytest.mark.parametrize("algorithm", sorted(ATARI_RUNS))
def test_atari_trains_on_slurm_workers(slurm, tmp_path, algorithm):
    """``esnb train apex|impala --env ALE/Pong-v5`` with its workers in SLURM jobs (dask's
    configuration picks the cluster, as a user's ~/.config/dask/esnb.yaml would): the run
    reaches its budget, its actors step Pong on the workers, and the Ape-X replay holds about
    one frame per transition."""
    import pandas as pd

    out, logs = tmp_path / "run", tmp_path / "logs"
    kwargs = {"interface": "lo", "walltime": "00:10:00", "log_directory": str(logs),
              "local_directory": str(tmp_path / "work"),
              "job_name": f"esnb-atari-{algorithm}-{os.getpid()}"}
    env = {**os.environ, "DASK_ESNB__CLUSTER__TYPE": "slurm",
           "DASK_ESNB__CLUSTER__KWARGS": repr(kwargs)}
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "train", algorithm, "--env",
                        "ALE/Pong-v5", "--workers", "1", "--max-episode-steps", "100",
                        "--final-eval", "0", "--no-progress", "--out", str(out),
                        *ATARI_RUNS[algorithm]],
                       capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    h = pd.read_csv(out / "history.csv")
    budget = int(ATARI_RUNS[algorithm][1])
    assert h.learner_steps.iloc[-1] >= budget and h.env_steps.iloc[-1] > 0
    if algorithm == "apex":
        assert h.replay_bytes_per_transition.iloc[-1] < 1.2 * 84 * 84 + 100
    # the workers were SLURM jobs: slurmd wrote their logs where the jobs were told to
    worker_logs = [f for f in logs.glob("*.err") if "Start worker" in f.read_text()]
    assert worker_logs, sorted(p.name for p in logs.iterdir()) if logs.exists() else "no logs"


#: a kernel that attaches to a served run (``python -c``, a fresh process): it waits two
#: generations, sets sigma, waits for a row that used it, reads where the workers run, stops
#: the run and prints what it saw as one JSON line
ATTACHER = """
import json, os, sys, time

import psutil

import esnb

def worker():
    # the worker's parent is `dask worker`, the command of its SLURM job
    return os.environ.get("SLURM_JOB_ID"), psutil.Process().parent().cmdline()

def until(what, check):
    deadline = time.monotonic() + 180  # a safety net only
    while not check():
        assert time.monotonic() < deadline, f"not {what}"
        time.sleep(0.3)

run = esnb.attach(sys.argv[1], origin="fresh kernel")
until("2 generations", lambda: run.iteration >= 2)
version = run.controls.set(sigma=0.05)
until("a row using it", lambda: any(r["controls_version"] >= version for r in run.records))
workers = list(run.client.run(worker).values())
changes = run.changes[["name", "new", "origin"]].values.tolist()
run.stop()
run.wait(timeout=180)
print(json.dumps({"version": version, "changes": changes, "workers": workers,
                  "state": run.state, "rows": len(run.history)}))
"""


def test_a_launched_slurm_run_is_attached_from_a_fresh_process(slurm, tmp_path, monkeypatch):
    """``esnb.launch(..., cluster="slurm")``: the run's own SLURMCluster (its scheduler in the
    run's process, its workers SLURM jobs) is served as a LocalCluster's is, TLS with the run's
    own certificate between the scheduler and the workers; a fresh Python process attaches,
    changes sigma, sees a generation use it and stops the run; the run folder ends complete,
    the change recorded with the attached kernel's origin, and no job is left behind."""
    import json

    import pandas as pd

    import esnb
    from esnb.remote.folders import serving_info

    monkeypatch.chdir(tmp_path)
    job_name = f"esnb-served-{os.getpid()}"
    # this kernel's dask config reaches the launched run (jobs on loopback, logs kept here)
    jobs = {"interface": "lo", "walltime": "00:10:00", "job_name": job_name,
            "log_directory": str(tmp_path / "logs"), "local_directory": str(tmp_path / "work")}
    with dask.config.set({"esnb.cluster.kwargs": jobs, "esnb.cluster.actor-worker": False}):
        # a budget far beyond what the test runs: the attached kernel stops it
        run = esnb.launch("es", env="CartPole-v1", workers=1, population=8,
                          noise_size=200_000, max_episode_steps=100, eval_interval=0,
                          final_eval=1, generations=100_000, name="served", cluster="slurm",
                          timeout=300)
    folder = tmp_path / "runs" / "served"
    try:
        assert run.address.startswith("tls://127.0.0.1:")
        assert serving_info(folder)["address"] == run.address
        p = subprocess.run([sys.executable, "-c", ATTACHER, str(folder)], capture_output=True,
                           text=True, timeout=600, cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        seen = json.loads(p.stdout.strip().splitlines()[-1])
        run.wait(timeout=300)
    finally:
        if run.process.poll() is None:  # a failed test's run: this test started it
            os.killpg(run.process.pid, 9)
            run.process.wait()
    assert run.process.returncode == 0 and seen["state"] == "ended"
    # the attached kernel reached workers in SLURM jobs, started with the run's own TLS files
    ((job, command),) = seen["workers"]
    assert job is not None and "tls://127.0.0.1:" in " ".join(command)
    for flag, file in (("--tls-ca-file", "cert.pem"), ("--tls-cert", "cert.pem"),
                       ("--tls-key", "key.pem")):
        assert command[command.index(flag) + 1] == str(folder / "attach" / file)
    assert seen["changes"] == [["sigma", 0.05, "fresh kernel"]]

    # the run folder is complete; its credentials and attach.json are gone
    for name in ("checkpoint.npz", "summary.json", "history.csv", "changes.csv"):
        assert (folder / name).exists(), name
    assert not (folder / "attach.json").exists() and not (folder / "attach").exists()
    changes = pd.read_csv(folder / "changes.csv")
    assert changes[["name", "new", "origin"]].values.tolist() == [
        ["sigma", 0.05, "fresh kernel"]]
    history = pd.read_csv(folder / "history.csv")
    assert len(history) == seen["rows"] and len(history) >= 3
    used = history.set_index("generation").controls_version
    assert used[int(changes.generation.iloc[0])] == seen["version"]
    assert json.loads((folder / "summary.json").read_text())["controls"]["sigma"] == 0.05
    deadline = time.monotonic() + 60
    while _squeue(job_name) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _squeue(job_name) == [], "the run's end leaves no job behind"
