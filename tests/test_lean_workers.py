"""Lean ES workers (issue 15): a worker that ran ES generations has imported numpy, gymnasium,
mujoco and distributed, and no torch, pandas, bokeh or runner module; torch still gets one
thread on a worker the moment something imports it there."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from esnb.cluster import make_client
from esnb.runners.es import ES

#: what an ES worker must never import (the worker-side tasks module is allowed: the house puts
#: an algorithm's worker tasks in its folder)
HEAVY = ("torch", "pandas", "bokeh", "scipy", "esnb.runners.base", "esnb.runners.es.runner",
         "esnb.runners.es.dispatch", "esnb.runners.executor", "esnb.controls", "esnb.ui")


@pytest.fixture(scope="module")
def cluster():
    """Its own cluster: the session's is shared with tests that import torch on workers."""
    c = make_client(2, dashboard_address=":0", set_as_default=False,
                    silence_logs=logging.ERROR)
    yield c
    c.close()


def test_es_workers_import_no_torch_pandas_bokeh_or_runner_module(cluster):
    es = ES("HalfCheetah-v5", max_episode_steps=30, population=8, eval_interval=1,
            noise_size=1_000_000, seed=2, client=cluster)
    try:
        es.step(2)
        assert np.isfinite(es.history.return_mean).all()
    finally:
        es.close()
    modules = cluster.run(lambda: sorted(sys.modules))
    assert len(modules) == 2
    for worker, names in modules.items():
        names = set(names)
        assert {"numpy", "gymnasium", "mujoco", "distributed",
                "esnb.runners.es.tasks"} <= names, worker  # it did run the rollouts
        assert not names & set(HEAVY), (worker, sorted(names & set(HEAVY)))


def test_torch_gets_one_thread_when_a_worker_imports_it(cluster):
    def threads_before_and_after():
        import os

        before = "torch" in sys.modules
        # without the environment variables torch would take every core: the hook sets it
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.pop(var, None)
        import torch

        return before, torch.get_num_threads()

    ran = cluster.run(threads_before_and_after)
    # torch was not there (the plugin never imports it) and came up with one thread
    assert set(ran.values()) == {(False, 1)}
