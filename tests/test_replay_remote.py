"""The replay as a service: batched calls and checkpoints inline and as a Dask actor on real
worker processes, and recovery after the worker holding it is killed."""

from __future__ import annotations

import logging
import os
import signal
import time

import numpy as np
import pytest

from esnb.replay.server import ReplayLost
from esnb.runners.executor import InlineExecutor
from esnb.runners.executor.on_dask import DaskExecutor
from esnb.runners.replay_service import ReplayService

#: one test process runs this file: its module-scoped run/cluster is made once, not per process
pytestmark = pytest.mark.xdist_group("replay-remote")

SPEC = {"obs": ((4,), "float32"), "action": "int64"}
CONFIG = dict(capacity=5000, prioritized=True, spec=SPEC, min_size=10)


@pytest.fixture(scope="module")
def _killable():
    """One private 2-worker LocalCluster for the tests that kill the replay's worker: each
    kill's nanny starts another worker, so the next test finds two again (``killable``)."""
    from esnb.cluster import make_client

    c = make_client(2, dashboard_address=":0", set_as_default=False,
                    silence_logs=logging.ERROR)
    yield c
    c.close()


@pytest.fixture
def killable(_killable):
    """The module's cluster of killable workers, both of its workers registered."""
    _killable.wait_for_workers(2, timeout=120)
    deadline = time.monotonic() + 120
    while len(_killable.scheduler_info()["workers"]) != 2:  # a killed one not yet removed
        assert time.monotonic() < deadline, _killable.scheduler_info()["workers"]
        time.sleep(0.1)
    return _killable


def batch(n, start=0):
    i = np.arange(start, start + n)
    return {"obs": np.repeat(i[:, None], 4, axis=1).astype(np.float32), "action": i}


@pytest.mark.parametrize("where", ["inline", "dask"])
def test_batched_calls_through_the_actor(client, tmp_path, where):
    executor = DaskExecutor(client) if where == "dask" else InlineExecutor()
    replay = ReplayService(executor, CONFIG, seed=1, checkpoint_path=str(tmp_path / "r.npz"))
    try:
        assert replay.address in executor.workers()
        assert replay.call("sample", 8, 4) is None  # under min_size: nothing, no error
        out = replay.call("add", batch(200), np.linspace(0.1, 2, 200), (3, np.arange(200)),
                          {"loop": 0, "env_steps": 200, "episodes": [(3, 12.0, 40)]})
        assert out == {"stored": 200, "size": 200, "inserted": 200, "generation": 0,
                       "throttle": False}
        again = replay.call("add", batch(200), None, (3, np.arange(200)))
        assert again["stored"] == 0  # a redelivered batch is dropped by the actor's marks
        data = replay.call("sample", 32, 4)
        assert data["batch"]["obs"].shape == (4, 32, 4) and data["ids"].shape == (4, 32)
        np.testing.assert_array_equal(data["batch"]["action"], data["ids"])
        up = replay.call("update_priorities", data["ids"], np.full((4, 32), 5.0))
        assert up["updated"] == 128
        # a learner's cycle in one call: priorities in, the next batches out
        nxt = replay.call("exchange", data["ids"], np.full((4, 32), 7.0), 16, 2)
        assert nxt["ids"].shape == (2, 16) and replay.call("stats")["updated"] == 256
        assert replay.call("stats")["max_priority"] == 7.0
        drained = replay.call("drain")
        assert drained["stats"]["size"] == 200 and drained["stats"]["duplicates"] == 200
        assert drained["infos"][0]["episodes"] == [[3, 12.0, 40]] or \
            drained["infos"][0]["episodes"] == [(3, 12.0, 40)]
        assert replay.call("drain")["infos"] == []
        assert replay.call("high_water", [3, 4]) == [199, -1]
        report = replay.maybe_checkpoint(force=True)
        assert report["size"] == 200 and os.path.exists(tmp_path / "r.npz")
        with pytest.raises(ValueError, match="priorities must be > 0"):
            replay.call("add", batch(2), [1.0, -1.0])
        assert replay.call("stats")["size"] == 200  # the bad call changed nothing
    finally:
        replay.close()


def kill_worker_of(replay, client) -> None:
    """SIGKILL the worker process holding ``replay`` and wait until the loss is known."""
    pid = client.run(os.getpid, workers=[replay.address])[replay.address]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not replay.lost and time.monotonic() < deadline:
        time.sleep(0.1)
    assert replay.lost


@pytest.mark.slow
def test_replay_is_recreated_from_its_checkpoint_when_its_worker_dies(killable, tmp_path):
    client = killable
    path = str(tmp_path / "replay.npz")
    replay = ReplayService(DaskExecutor(client), CONFIG, seed=2, checkpoint_path=path,
                           timeout=30)
    first = replay.address
    replay.call("add", batch(1000), np.ones(1000), (0, np.arange(1000)))
    assert replay.maybe_checkpoint(force=True)["size"] == 1000
    replay.call("add", batch(500, 1000), np.ones(500), (0, np.arange(1000, 1500)))
    assert replay.call("stats")["size"] == 1500

    kill_worker_of(replay, client)
    with pytest.raises(ReplayLost):
        replay.call("stats")

    report = replay.recover()
    assert report == {"generation": 1, "restored": 1000, "lost": 500, "inserted_before": 1500,
                      "inserted_restored": 1000}
    assert replay.recreations == 1 and replay.lost_items == 500
    assert replay.address in client.scheduler_info()["workers"] and replay.address != first
    # the restored marks drop what the checkpoint holds and take what was lost
    assert replay.call("add", batch(1000), None, (0, np.arange(1000)))["stored"] == 0
    assert replay.call("add", batch(500, 1000), None,
                       (0, np.arange(1000, 1500)))["stored"] == 500
    data = replay.call("sample", 64, 2)
    assert data["ids"].shape == (2, 64)
    replay.close()


def _push(handle, start: int, n: int) -> dict:
    """A task that adds ``n`` items to the replay and returns the replay's reply."""
    from esnb.runners.executor import attach

    keys = (0, np.arange(start, start + n))
    return attach(handle).add(batch(n, start), np.ones(n), keys).result(timeout=30)


@pytest.mark.slow
def test_the_transitions_a_loss_takes_are_counted_from_inserted_not_sizes(killable,
                                                                           tmp_path):
    """A full ring buffer keeps its size: only the inserted counters say what a loss took
    (the issue measured ``lost = 0`` while inserted went back from 193,200 to 185,600). The
    count also takes the replies of tasks that wrote to the replay (``observe``), and a reply
    of the lost server that arrives after the recovery."""
    client = killable
    executor = DaskExecutor(client)
    config = dict(CONFIG, capacity=1000)
    replay = ReplayService(executor, config, seed=3, timeout=30, private=True)
    folder = os.path.dirname(replay.checkpoint_path)
    assert os.stat(folder).st_mode & 0o777 == 0o700  # a private directory of its own
    for start in (0, 600):
        replay.call("add", batch(600, start), np.ones(600), (0, np.arange(start, start + 600)))
    assert replay.maybe_checkpoint(force=True)["inserted"] == 1200
    # a task writes to the replay itself; its reply is what the driver sees
    reply = executor.submit(_push, replay.info(), 1200, 300).result()
    assert (reply["size"], reply["inserted"], reply["generation"]) == (1000, 1500, 0)
    replay.observe(reply)
    assert replay.inserted == 1500 and replay.last_size == 1000

    kill_worker_of(replay, client)
    report = replay.recover()
    assert report == {"generation": 1, "restored": 1000, "lost": 300, "inserted_before": 1500,
                      "inserted_restored": 1200}  # the sizes: 1000 before, 1000 after
    assert replay.call("stats")["inserted"] == 1200 and replay.lost_items == 300
    # a late reply of the lost server (a task that wrote just before it died) adds its part
    replay.observe({"size": 1000, "inserted": 1540, "generation": 0})
    assert replay.lost_items == 340 and replay.recoveries[0]["lost"] == 340
    replay.observe({"size": 1000, "inserted": 1530, "generation": 0})  # older: no change
    assert replay.lost_items == 340
    # replies of the new server count for it
    replay.call("add", batch(10, 1500), None, (0, np.arange(1500, 1510)))
    assert replay.inserted == 1210 and replay.lost_items == 340
    replay.close()
    assert not os.path.exists(folder)  # the private directory goes with the replay


def test_inserts_no_reply_showed_are_counted_from_the_servers_count_file(killable,
                                                                           tmp_path):
    """A writer whose reply the driver never saw (an actor loop, a task that died with the
    replay's worker): the lost server's count file, on its own host's scratch, still says how
    many it took, read by a worker of that host, so the loss is counted exactly (issue 28;
    before, the largest count in the driver's replies). Issue 34: the file is the server's
    host's, not in the driver's run folder; the run removes it when it closes the replay."""
    import socket
    import tempfile

    from esnb.replay.server import read_count

    client = killable
    executor = DaskExecutor(client)
    replay = ReplayService(executor, CONFIG, seed=4, timeout=30,
                           checkpoint_path=str(tmp_path / "replay.npz"))
    replay.call("add", batch(600), np.ones(600), (0, np.arange(600)))
    assert replay.maybe_checkpoint(force=True)["inserted"] == 600
    executor.submit(_push, replay.info(), 600, 300).result()  # its reply is not observed
    assert replay.inserted == 600
    st = replay.call("stats")
    assert st["host"] == socket.gethostname()
    assert os.path.dirname(st["count_file"]) == tempfile.gettempdir()  # the host's scratch
    assert read_count(st["count_file"]) == (0, 900)  # what the server wrote
    assert sorted(os.listdir(tmp_path)) == ["replay.npz"]  # nothing of the server's here

    kill_worker_of(replay, client)
    report = replay.recover()
    assert report["lost"] == 300 and report["inserted_before"] == 900
    assert replay.lost_items == 300
    new = replay.call("stats")["count_file"]
    assert read_count(new) == (1, 600)  # the new server's
    replay.close()
    assert not os.path.exists(st["count_file"]) and not os.path.exists(new)


def test_recovery_checkpoints_are_fetched_while_the_run_goes_on(client, tmp_path):
    """A due recovery checkpoint is fetched on a thread of its own: ``maybe_checkpoint``
    returns at once, the replay takes calls meanwhile, and a later call collects the file the
    driver wrote (the server's state at the moment it was asked)."""
    from esnb.replay.server import checkpoint_mark

    path = tmp_path / "recovery.npz"
    replay = ReplayService(DaskExecutor(client), CONFIG, seed=5, checkpoint_path=str(path),
                           checkpoint_interval=1e-6)
    try:
        replay.call("add", batch(300), np.ones(300), (0, np.arange(300)))
        assert replay.maybe_checkpoint() is None  # started, not waited for
        replay.call("add", batch(50, 300), np.ones(50), (0, np.arange(300, 350)))
        replay._pending_checkpoint.result(timeout=60)
        done = replay.maybe_checkpoint()
        assert done["inserted"] in (300, 350) and done["path"] == str(path)
        assert checkpoint_mark(path)["inserted"] == done["inserted"]
        assert replay.latest["inserted"] == done["inserted"] and replay.checkpoints == 1
    finally:
        replay.close()


def test_closing_removes_the_recovery_file_and_partial_writes_a_killed_writer_left(tmp_path):
    """A run killed while its replay's recovery checkpoint was being written leaves the
    writer's temporary file beside it; once the resumed run closes, neither stays (files of
    other names do)."""
    from esnb.runners.replay_recovery import remove_owned

    path = tmp_path / "checkpoint.replay-recovery.npz"
    partial = tmp_path / "checkpoint.replay-recovery.npz6n5__e68.tmp"
    other = tmp_path / "checkpoint.npz"
    for f in (path, partial, other):
        f.write_bytes(b"x")
    remove_owned(None, str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.npz"]
    remove_owned(None, str(path))  # nothing left to remove: no error
