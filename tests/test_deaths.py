"""A worker's death is one line on the driver (``esnb.cluster.deaths``), not dask's echoes.

Real CLI runs on a 2-worker LocalCluster whose worker processes are SIGKILLed mid-run (their
nannies restart them): the driver's stderr has one ``worker ... died`` line per kill, no
traceback and no line from dask's loggers. Ape-X loses both workers in turn, so one of them held
the replay (its actor calls in flight are what dask used to print tracebacks for). The filter
itself keeps real errors visible.
"""

from __future__ import annotations

import logging
import signal

import psutil
import pytest
from test_survive import saved_iteration, start, wait_for_generation
from test_survive import worker_processes as workers_under

from esnb.cluster.deaths import ECHO_FILTER, death_line

pytestmark = pytest.mark.slow  # every test here starts a cluster or a CLI run

RUNS = {
    "es": ["train", "es", "--env", "HalfCheetah-v5", "--max-episode-steps", "200",
           "--population", "16", "--noise-size", "1000000", "--generations", "100000"],
    # the suite's small Ape-X (tests/test_two_hosts.py): a replay refilled after its worker's
    # death starts learning again after 200 transitions, not the default's 50,000
    "apex": ["train", "apex", "--env", "CartPole-v1", "--learner-steps", "10000000",
             "--eval-interval", "0", "--min-size", "200", "--learner-chunk", "4",
             "--batch-size", "16", "--capacity", "2000", "--hidden", "16"],
}


def worker_processes(proc) -> list[psutil.Process]:
    """The LocalCluster's worker processes of a CLI run (its nannies live in the driver)."""
    return workers_under(proc.pid)


@pytest.mark.parametrize("algo, kills", [("es", 1), ("apex", 2)])
def test_each_worker_death_is_one_line_on_the_driver(tmp_path, algo, kills):
    out = tmp_path / "run"
    ck = out / "checkpoint.npz"
    proc = start(*RUNS[algo], "--workers", "2", "--out", str(out), "--no-progress",
                 "--final-eval", "0", "--checkpoint-every", "0")
    try:
        wait_for_generation(proc, ck, 2)
        victims = worker_processes(proc)
        assert len(victims) == 2, victims
        for victim in victims[:kills]:
            victim.kill()
            victim.wait(30)
            # the run goes on after the loss (on the other worker, then the restarted one)
            wait_for_generation(proc, ck, saved_iteration(ck) + 2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    died = [ln for ln in err.splitlines() if " died (" in ln]
    assert len(died) == kills, err
    assert all(ln.startswith("WARNING esnb.cluster: worker tcp://127.0.0.1:") for ln in died)
    assert "Traceback" not in err, err
    assert not [ln for ln in err.splitlines() if "distributed." in ln or "tornado" in ln], err


def _raised_from(exc, cause):
    exc.__cause__ = cause
    return exc


def _record(name, msg, level=logging.ERROR, exc=None):
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord(name, level, __file__, 1, msg, None, exc_info)


def test_the_filter_drops_echoes_and_keeps_real_errors():
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    echoes = [
        _record("distributed.scheduler", "Removing worker 'tcp://127.0.0.1:1' caused the cluster "
                "to lose already computed task(s), which will be recomputed elsewhere: {'a'}",
                logging.WARNING),
        _record("distributed.scheduler", "broadcast to tcp://127.0.0.1:1 failed: "
                "CommClosedError: in <TCP (closed)>: Stream is closed"),
        _record("distributed.nanny", "Restarting worker (status=Status.running)", logging.WARNING),
        _record("distributed.scheduler", "Couldn't gather keys: {'a': 'processing', "
                "('b', 1): 'released'}"),
        _record("distributed.scheduler", "Couldn't gather keys: {'a': 'memory'}"),
        _record("tornado.application", "Exception in callback", exc=FutureCancelledError("k", "")),
        _record("distributed.worker", "Failed to communicate with scheduler during heartbeat.",
                exc=CommClosedError("in <TCP>: Stream is closed")),
        _record("distributed.core", "Exception while handling op proxy", exc=_raised_from(
            OSError("Timed out trying to connect to tcp://127.0.0.1:1 after 30 s"),
            CommClosedError("ConnectionRefusedError: [Errno 111] Connection refused"))),
        # a run stopped while an actor call was on its way; a worker busy in a task as its
        # cluster closes
        _record("tornado.application", "Exception in callback",
                exc=RuntimeError("ConnectionPool is closed")),
        _record("distributed.nanny", "Worker process still alive after 4.0 seconds, killing",
                logging.WARNING),
        _record("asyncio", "Task exception was never retrieved\nfuture: <Task finished "
                "name='Task-3459' coro=<Client._gather.<locals>.wait() done, defined at "
                "client.py:2367> exception=AllExit()>"),
    ]
    real = [
        _record("distributed.scheduler", "Task 'x' marked as failed because 4 workers died "
                "while trying to run it"),
        _record("distributed.scheduler", "Couldn't gather keys: {'a': 'processing', "
                "'b': 'forgotten'}"),
        _record("distributed.scheduler", "Removing worker 'tcp://127.0.0.1:1' caused the cluster "
                "to lose scattered data, which can't be recovered: {'a'}"),
        _record("distributed.worker", "Compute Failed", exc=ValueError("a task's own error")),
        _record("distributed.worker", "Compute Failed", exc=RuntimeError("the task's own")),
        _record("distributed.worker", "Failed to spill", exc=OSError(28, "No space left")),
        _record("distributed.nanny", "Worker tcp://127.0.0.1:1 (pid=1) exceeded 95% memory "
                "budget. Restarting...", logging.WARNING),
    ]
    assert [ECHO_FILTER.filter(r) for r in echoes] == [False] * len(echoes)
    assert [ECHO_FILTER.filter(r) for r in real] == [True] * len(real)
    debug = logging.getLogger("esnb.cluster")
    level = debug.level
    debug.setLevel(logging.DEBUG)  # the way to see every echo again
    try:
        assert all(ECHO_FILTER.filter(r) for r in echoes)
    finally:
        debug.setLevel(level)


def test_retired_workers_are_no_deaths():
    msg = {"action": "remove-worker", "worker": "tcp://127.0.0.1:1", "expected": False,
           "stimulus_id": "handle-worker-cleanup-1795606206.48", "processing-tasks": {"a", "b"},
           "lost-computed-tasks": {"c"}, "lost-scattered-tasks": set()}
    assert death_line(msg) == ("worker tcp://127.0.0.1:1 died (connection lost); redone on "
                               "other workers: 2 running tasks, 1 result")
    assert death_line({**msg, "expected": True}) is None  # scale(), adapt(), --lifetime
    assert death_line({"action": "add-worker", "worker": "tcp://127.0.0.1:1"}) is None
