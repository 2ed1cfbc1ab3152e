"""The fair limit's recording (esnb.bench.es.own_physics): ES's own episodes, replayed through
mj_step, end where they ended, and are exactly the timed generations' episodes."""

import pytest

from esnb import ES
from esnb.bench.es.own_physics import record, replay_rate
from esnb.envs import rollout
from esnb.runners.es import tasks

RUN = dict(max_episode_steps=40, noise_size=200_000)


def test_recorded_episodes_are_the_runs_and_replay_bit_for_bit(tmp_path):
    # the same run first: its environments are now this thread's cached ones, built with the
    # real mj_step; the recording must still see every step (it makes its own)
    es = ES("Hopper-v5", population=6, eval_interval=0, seed=0, **RUN)
    try:
        es.step(3)
        timed = es.history.env_steps.iloc[-1] - es.history.env_steps.iloc[0]
    finally:
        es.close()
    runner, cached = tasks.lockstep_runner, dict(rollout._local.envs)
    path = str(tmp_path / "episodes.npz")
    info = record("Hopper-v5", 6, 1, 2, path, **RUN)
    # put back: later runs keep the batch and this thread's environments
    assert tasks.lockstep_runner is runner and rollout._local.envs == cached
    # 2 generations of 6 episodes; as many steps as the run counted in those generations
    assert info["episodes"] == 12 and info["steps"] == timed
    replay = replay_rate("Hopper-v5", path)
    assert replay["same"] is True and replay["steps"] == timed and replay["steps_per_s"] > 0
    # random controls from the same states, as many steps, timed in between
    assert replay["random_steps_per_s"] > 0
    assert replay["cost_vs_random"] == pytest.approx(
        replay["random_steps_per_s"] / replay["steps_per_s"], rel=1e-12)
    assert set(replay["contacts_per_step"]) == {"own", "random"}
    # each episode's cost per step over their mean: spread around 1
    cost = replay["episode_cost"]
    assert 0 < cost["min"] <= 1 <= cost["max"] and cost["cv"] >= 0
