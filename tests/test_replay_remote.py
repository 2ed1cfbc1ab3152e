"""The replay as a service: batched calls and checkpoints inline and as a Dask actor on real
worker processes, and recovery after the worker holding it is killed."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from esnb.replay.server import ReplayLost
from esnb.runners.executor import InlineExecutor
from esnb.runners.executor.on_dask import DaskExecutor
from esnb.runners.replay_service import ReplayService

SPEC = {"obs": ((4,), "float32"), "action": "int64"}
CONFIG = dict(capacity=5000, prioritized=True, spec=SPEC, min_size=10)


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
        assert out == {"stored": 200, "size": 200, "throttle": False}
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


@pytest.mark.slow
def test_replay_is_recreated_from_its_checkpoint_when_its_worker_dies(fresh_client, tmp_path):
    client = fresh_client
    path = str(tmp_path / "replay.npz")
    replay = ReplayService(DaskExecutor(client), CONFIG, seed=2, checkpoint_path=path,
                           timeout=30)
    first = replay.address
    replay.call("add", batch(1000), np.ones(1000), (0, np.arange(1000)))
    assert replay.maybe_checkpoint(force=True)["size"] == 1000
    replay.call("add", batch(500, 1000), np.ones(500), (0, np.arange(1000, 1500)))
    assert replay.call("stats")["size"] == 1500

    pid = client.run(os.getpid, workers=[first])[first]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not replay.lost and time.monotonic() < deadline:
        time.sleep(0.1)
    assert replay.lost
    with pytest.raises(ReplayLost):
        replay.call("stats")

    report = replay.recover()
    assert report == {"generation": 1, "restored": 1000, "lost": 500}
    assert replay.recreations == 1 and replay.lost_items == 500
    assert replay.address in client.scheduler_info()["workers"]
    # the restored marks drop what the checkpoint holds and take what was lost
    assert replay.call("add", batch(1000), None, (0, np.arange(1000)))["stored"] == 0
    assert replay.call("add", batch(500, 1000), None,
                       (0, np.arange(1000, 1500)))["stored"] == 500
    data = replay.call("sample", 64, 2)
    assert data["ids"].shape == (2, 64)
    replay.close()
