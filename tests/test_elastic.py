"""Elastic ES: workers join and leave a running run (``cluster.scale``); theta stays bitwise
the same as a run that kept its workers, because pairs are seeded on the driver and reduced in
pair order whatever worker ran them."""

import logging
import time

import numpy as np
import pytest

from esnb.cluster import make_client
from esnb.runners.es import ES

# HalfCheetah: fixed-length episodes, ~0.1 s per task, so workers come and go mid-generation
CFG = dict(env="HalfCheetah-v5", population=16, sigma=0.05, lr=0.03, seed=11,
           max_episode_steps=200, obs_stat_prob=0.5, eval_interval=3, eval_episodes=2,
           noise_size=1_000_000, tasks_per_worker=100)

def _wait_for(cond, runner, timeout=120.0):
    t0 = time.monotonic()
    while not cond():
        assert runner.running or cond(), f"the run ended early ({runner.state}: {runner.error})"
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.02)


@pytest.mark.slow
def test_es_keeps_going_while_workers_come_and_go():
    c = make_client(2, dashboard_address=":0", set_as_default=False, silence_logs=logging.ERROR)
    try:
        r = ES(**CFG, client=c)
        r.start()  # until stop(): the scaling below takes what time it takes
        counts = lambda: [row["workers"] for row in r.records]  # noqa: E731
        _wait_for(lambda: r.iteration >= 1, r)
        c.cluster.scale(3)  # joins while generations run
        _wait_for(lambda: 3 in counts(), r)
        c.cluster.scale(1)  # two leave: their tasks and the generation's payload move over
        _wait_for(lambda: counts()[-1] == 1, r)
        c.cluster.scale(2)
        _wait_for(lambda: counts()[-1] == 2, r)
        n = r.iteration + 2
        _wait_for(lambda: r.iteration >= n, r)
        r.stop()
        r.wait(120)
        seen = counts()
        assert seen[0] == 2 and seen.index(3) < seen.index(1) < len(seen) - 1, seen
        assert r.history.n_excluded.sum() == 0
    finally:
        c.close()
    fixed = ES(**CFG, client=False)
    fixed.step(r.iteration)
    assert np.array_equal(r.theta, fixed.theta)
    assert np.array_equal(r.obs_stats.sum, fixed.obs_stats.sum)
    assert np.array_equal(r.history.return_mean, fixed.history.return_mean)
    assert np.array_equal(r.history.eval_return, fixed.history.eval_return, equal_nan=True)
