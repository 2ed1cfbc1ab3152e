"""ES scales out (issue 17): only scalars travel, every worker keeps a replica that stays bitwise
equal to the driver's state (or, on the driver's host, maps the driver's theta from shared
memory), and a generation's tasks use every worker.

The replica tests turn host sharing off (``ESNB_SHM_DIR=""``): a LocalCluster's workers share
the driver's host, and would otherwise keep no replica.

Speed is measured by ``esnb bench es-scale-out``, not here: these tests count bytes, syncs and
worker processes, and compare parameters bit for bit.
"""

from __future__ import annotations

import gc
import logging

import numpy as np
import pytest

from esnb.record import load_checkpoint, save_checkpoint
from esnb.runners.es import ES
from esnb.runners.es.replica import Sync, Update, checksum, drop_replicas, replica_for
from esnb.runners.es.tasks import pack_pairs, unpack_pairs

# short CartPole episodes: a generation is mostly orchestration
RUN = dict(env="CartPole-v1", max_episode_steps=20, noise_size=1_000_000, seed=5)


def _sent_per_generation(es: ES, generations: int) -> np.ndarray:
    """Bytes the driver sent in each of ``generations`` generations after the warm-up."""
    es.step(2)  # every worker synced once
    es.executor.sent_bytes = 0
    es.step(generations)
    return es.history.sent_bytes.to_numpy()[-generations:]


@pytest.fixture
def replicas(monkeypatch):
    """Every worker keeps a replica (no theta shared on the driver's host)."""
    monkeypatch.setenv("ESNB_SHM_DIR", "")


def test_bytes_per_generation_do_not_grow_with_the_policy(client, replicas):
    """A 70k-parameter policy costs the driver the same bytes per generation as a 100-parameter
    one (after each worker's one sync); theta stays bitwise that of an inline run."""
    kw = {"small": dict(RUN, hidden=(8,)), "large": dict(RUN, hidden=(256, 256))}
    small = ES(**kw["small"], population=16, eval_interval=0, client=client)
    large = ES(**kw["large"], population=16, eval_interval=0, client=client)
    try:
        a, b = _sent_per_generation(small, 4), _sent_per_generation(large, 4)
        assert large.theta.size > 500 * small.theta.size
        # equal up to the few bytes pickling a differently sized key or name may take
        assert abs(np.median(b) - np.median(a)) <= 64, (a, b)
        assert np.median(b) < 4 * 1024  # theta alone would be 280 kB
        assert small.generations.syncs == large.generations.syncs == 2  # once per worker
        for name, es in (("small", small), ("large", large)):
            inline = ES(**kw[name], population=16, eval_interval=0, client=False)
            inline.step(es.iteration)
            assert np.array_equal(inline.theta, es.theta)
    finally:
        small.close()
        large.close()


def test_bytes_grow_by_at_most_16_per_episode(client, replicas):
    """Four times the population on the same workers (and tasks) adds <= 16 bytes per extra
    episode (14 sent): offsets with flags and seeds (int32 each per pair, the task's), offsets
    again (int32 per pair, the update's) and the shaped returns (float64 per episode).
    Observation sums are a constant, left out here: how many a generation collects is random."""
    runs = {}
    for population in (16, 64):
        # one task per worker either way (the default)
        es = ES(**RUN, population=population, eval_interval=0, obs_norm=False, client=client)
        try:
            runs[population] = (_sent_per_generation(es, 4), es.history.tasks.iloc[-4:])
        finally:
            es.close()
    (sent16, tasks16), (sent64, tasks64) = runs[16], runs[64]
    assert (tasks16.to_numpy() == tasks64.to_numpy()).all(), (tasks16, tasks64)
    per_episode = (np.median(sent64) - np.median(sent16)) / (64 - 16)
    assert 0 < per_episode <= 16, per_episode


@pytest.mark.slow
def test_eight_workers_each_run_tasks_and_are_synced_once(replicas):
    """With 8 worker processes every generation's tasks run on 8 distinct processes, each
    worker is sent the whole state once in the run, and theta is bitwise the inline one."""
    from esnb.cluster import make_client

    c = make_client(8, dashboard_address=":0", set_as_default=False,
                    silence_logs=logging.ERROR)
    try:
        c.wait_for_workers(8, timeout=300)
        es = ES(**RUN, population=32, eval_interval=2, eval_episodes=4, client=c)
        es.step(6)
        h = es.history
        assert (h.workers == 8).all() and (h.task_workers == 8).all(), h.task_workers
        assert es.generations.syncs == 8
        inline = ES(**RUN, population=32, eval_interval=2, eval_episodes=4, client=False)
        inline.step(6)
        assert np.array_equal(es.theta, inline.theta)
        assert np.array_equal(h.eval_return, inline.history.eval_return, equal_nan=True)
        es.close()
        left = c.run(lambda: __import__("esnb.runners.es.replica").runners.es.replica._REPLICAS)
        assert all(es.generations.token not in r for r in left.values())  # dropped on close
    finally:
        c.close()


def test_pairs_pack_into_four_bytes_per_episode():
    rng = np.random.default_rng(0)
    indices = np.r_[rng.integers(0, 10**6, 4), 2**29 - 1]
    seeds = rng.integers(0, 2**31 - 1, 5)
    collect = rng.random((5, 2)) < 0.5
    packed = pack_pairs(indices, seeds, collect)
    assert packed.dtype == np.int32 and packed.nbytes == 5 * 2 * 4
    i, s, c = unpack_pairs(packed)
    assert np.array_equal(i, indices) and np.array_equal(s, seeds) and np.array_equal(c, collect)
    with pytest.raises(ValueError, match="2\\*\\*29"):
        pack_pairs(np.array([2**29]), seeds[:1], collect[:1])


def test_a_replica_that_would_not_match_is_dropped_and_answers_stale():
    """A replica whose state after an update differs from the driver's checksum is never used:
    it answers stale (the driver then sends the whole state) and is forgotten."""
    es = ES(**RUN, population=8, eval_interval=0, client=False)
    es.step(2)
    noise = es.rollout_config.noise
    state = es.es.adam.state_dict()
    good = checksum(es.theta, *es._normalisation())
    sync = Sync(2, es.theta.copy(), state, es.obs_stats.state_dict(), good)
    token = "test-replica"
    try:
        current = Update(2, None, (), None, 0.02, good)
        assert replica_for(noise, token, current, sync, True) is not None
        # the next generation's update claims a state the replica cannot reach
        wrong = Update(3, es._step, (), es._step_obs, 0.02, good ^ 1)
        assert replica_for(noise, token, wrong, None, True) is None
        assert replica_for(noise, token, Update(3, None, (), None, 0.02, good), None, True) is None
    finally:
        drop_replicas(token)


def test_a_checkpoint_with_the_retired_iw_distributed_loads(tmp_path):
    """iw_distributed (IW dot products on the workers) is gone: every worker replays the IW
    updates on its replica. Old checkpoints still load; a new run refuses the name."""
    es = ES(**RUN, population=8, eval_interval=0, iw_k=2, client=False)
    es.step(2)
    path = tmp_path / "old.npz"
    es.save(path)
    meta, arrays = load_checkpoint(path)
    meta["config"]["iw_distributed"] = "auto"
    save_checkpoint(path, "ES", meta, arrays)
    again = ES.load(path, client=False)
    again.step(1)
    es.step(1)
    assert np.array_equal(again.theta, es.theta)
    with pytest.raises(ValueError, match="iw_distributed"):
        ES(**RUN, iw_distributed=True, client=False)


def test_the_update_does_not_depend_on_the_blas_thread_count():
    """OpenBLAS splits a large product over threads and its rounding with it: the ES gradient
    of a 1M-parameter policy is computed on one thread, so a many-core driver and one-thread
    workers get the same bits."""
    from threadpoolctl import threadpool_limits

    from esnb.es.gradient import weighted_noise_sum
    from esnb.noise import NoiseConfig, get_noise_table

    table = get_noise_table(NoiseConfig(size=2_000_000, seed=1))
    rng = np.random.default_rng(0)
    indices = rng.integers(0, 2_000_000 - 1_000_000, 16)
    weights = rng.standard_normal(16)
    sums = []
    for threads in (1, 2, 4):
        with threadpool_limits(threads, user_api="blas"):
            sums.append(weighted_noise_sum(table, indices, weights, 1_000_000))
    assert all(np.array_equal(sums[0], s) for s in sums[1:])


def test_a_1m_parameter_replica_keeps_in_step(client, replicas):
    """Workers' replicas of a 1M-parameter policy follow the driver generation after generation
    without being sent the state again."""
    es = ES(**dict(RUN, noise_size=2_000_000), hidden=(1024, 1024), population=32,
            eval_interval=0, client=client)
    try:
        es.step(4)
        assert es.theta.size > 1_000_000
        assert es.generations.syncs == 2  # each worker once, at its first generation
    finally:
        es.close()


def test_workers_on_the_drivers_host_map_its_theta(client, tmp_path, monkeypatch):
    """On the driver's host the tasks read theta from the driver's file in shared memory: no
    replica, no sync, one file at a time, removed on close; theta bitwise the inline run's
    and the bytes sent still independent of the policy's size."""
    monkeypatch.setenv("ESNB_SHM_DIR", str(tmp_path))
    kw = dict(RUN, hidden=(256, 256), population=16, eval_interval=2, eval_episodes=2)
    es = ES(**kw, client=client)
    try:
        sent = _sent_per_generation(es, 3)
        h = es.history
        assert es.generations.syncs == 0
        assert es.generations.published == 1  # then every task carried the update's head
        assert (h.host_theta_tasks == h.tasks + (h.eval_return.notna() * 2)).all()
        assert len(list(tmp_path.glob("esnb-theta-*"))) == 1
        assert np.median(sent) < 4 * 1024  # theta is 280 kB
        inline = ES(**kw, client=False)
        inline.step(es.iteration)
        assert np.array_equal(es.theta, inline.theta)
        assert np.array_equal(h.eval_return, inline.history.eval_return, equal_nan=True)
        assert len(list(tmp_path.glob("esnb-theta-*"))) == 2  # the inline run's too
        del inline  # a runner never closed removes its file when collected
        gc.collect()
        assert len(list(tmp_path.glob("esnb-theta-*"))) == 1
    finally:
        es.close()
    assert not list(tmp_path.glob("esnb-theta-*"))


def test_a_worker_that_cannot_map_the_drivers_theta_is_sent_the_state(client, tmp_path,
                                                                        monkeypatch):
    """A worker that mapped the driver's theta gets only the update's head with its tasks; when
    the file it finds does not hold the generation's state, it answers stale, is sent the whole
    state once, and gets whole updates until it maps again. Theta stays the inline run's."""
    monkeypatch.setenv("ESNB_SHM_DIR", str(tmp_path))
    kw = dict(RUN, population=16, eval_interval=0)
    es = ES(**kw, client=client)
    gens = es.generations
    try:
        es.step(2)
        assert (gens.published, gens.syncs) == (1, 0)
        publish = gens.host_theta.publish

        def spoiled(*args):  # the file holds another theta: its checksum cannot match
            path = publish(*args)
            values = np.fromfile(path, dtype="<f4")  # raw float32 (host_theta)
            values[0] += 1
            values.tofile(path)
            return path

        gens.host_theta.publish = spoiled
        es.step(1)
        assert (gens.published, gens.syncs) == (1, 2)  # heads sent; each worker synced once
        assert es.history.host_theta_tasks.iloc[-1] == 0
        gens.host_theta.publish = publish
        es.step(1)  # whole updates to the workers that could not map; now they map again
        assert (gens.published, gens.syncs) == (2, 2)
        es.step(1)
        assert (gens.published, gens.syncs) == (2, 2)
        assert (es.history.host_theta_tasks.iloc[-2:] == es.history.tasks.iloc[-2:]).all()
        inline = ES(**kw, client=False)
        inline.step(es.iteration)
        assert np.array_equal(es.theta, inline.theta)
    finally:
        es.close()
