"""esnb.ES end to end: learning, lifecycle, live controls, faulty environments."""

import logging
import time

import gymnasium as gym
import numpy as np
import pytest

from esnb.runners.es import ES

SMALL = dict(noise_size=1_000_000, eval_interval=0)


class NaNRewardOnSomeSeeds(gym.Wrapper):
    """CartPole whose reward turns NaN at step 3 of episodes reset with a seed divisible by 3."""

    def reset(self, *, seed=None, options=None):
        self._bad = seed is not None and seed % 3 == 0
        self._t = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        self._t += 1
        if self._bad and self._t == 3:
            r = float("nan")
        return obs, r, term, trunc, info


class AlwaysNaN(NaNRewardOnSomeSeeds):
    def reset(self, *, seed=None, options=None):
        out = super().reset(seed=seed, options=options)
        self._bad = True
        return out


class Broken(gym.Wrapper):
    """Crashes after its first steps: the constructor's probe step (esnb.envs.make.first_step)
    passes, the run's episodes fail."""

    steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps > 2:
            raise RuntimeError("the simulator crashed")
        return self.env.step(action)


for name, cls in [("NaNSome", NaNRewardOnSomeSeeds), ("NaNAll", AlwaysNaN),
                  ("Broken", Broken)]:
    gym.register(f"esnbtest/{name}-v0", entry_point=lambda c=cls, **kw: c(gym.make("CartPole-v1")),
                 max_episode_steps=500)


@pytest.mark.slow
def test_learns_cartpole_inline():
    # solved (greedy 500 on all 20 evaluation episodes) from generation 30 on; 32 keeps a
    # margin without the costliest generations (each then 40 episodes of 500 steps)
    r = ES("CartPole-v1", population=40, sigma=0.1, lr=0.05, seed=0, **SMALL)
    r.step(32)
    h = r.history
    assert list(h.generation) == list(range(1, 33))
    assert h.env_steps.is_monotonic_increasing
    assert r.evaluate(20).mean() >= 475  # "solved"
    assert h.return_mean.iloc[-5:].mean() > 3 * h.return_mean.iloc[0]


def test_history_columns_and_terminations():
    r = ES("CartPole-v1", population=10, eval_interval=2, eval_episodes=3, noise_size=1_000_000)
    r.step(3)
    h = r.history
    for col in ("generation", "env_steps", "wall_time", "return_mean", "return_max",
                "eval_return", "steps_per_s", "grad_norm", "sigma", "lr", "busy",
                "n_excluded", "n_terminated", "n_truncated"):
        assert col in h, col
    assert h.eval_return.notna().tolist() == [True, False, True]
    assert (h.n_terminated + h.n_truncated == 10).all()  # every rollout ended one way
    assert h.wall_time.is_monotonic_increasing


def test_lifecycle_pause_resume_step_stop():
    r = ES("CartPole-v1", population=10, **SMALL)
    assert r.state == "idle"
    r.start()
    deadline = time.time() + 30
    while r.iteration < 2 and time.time() < deadline:
        time.sleep(0.01)
    r.pause()
    while r.state != "paused" and time.time() < deadline:
        time.sleep(0.01)
    held = r.iteration
    time.sleep(0.3)
    assert r.iteration == held and r.state == "paused"
    with pytest.raises(RuntimeError, match="already running"):
        r.start()
    r.step(2)  # the background thread runs exactly two more, then holds again
    assert r.iteration == held + 2
    time.sleep(0.2)
    assert r.iteration == held + 2
    r.resume()
    while r.iteration < held + 5 and time.time() < deadline:
        time.sleep(0.01)
    assert r.iteration >= held + 5
    with pytest.raises(RuntimeError, match="pause"):
        r.step(1)
    r.stop()
    r.wait(10)
    assert r.state == "stopped"
    n = r.iteration
    r.step(1)  # synchronous on the caller's thread once the run has ended
    assert r.iteration == n + 1
    with pytest.raises(ValueError, match="n must be >= 1"):
        r.step(0)


def test_budgets_and_observers():
    r = ES("CartPole-v1", population=10, **SMALL)
    seen = []
    r.add_observer(lambda row: seen.append(row["generation"]))
    r.add_observer(lambda row: 1 / 0)  # a broken observer never ends the run
    r.start(generations=4).wait(30)
    assert r.state == "finished" and seen == [1, 2, 3, 4]
    r.start(env_steps=1).wait(30)  # budgets count from now: one more generation
    assert r.iteration == 5
    with pytest.raises(ValueError, match="unknown budget 'hours'"):
        r.start(hours=1)


def test_control_change_takes_effect_next_generation_and_is_logged():
    r = ES("CartPole-v1", population=10, sigma=0.02, **SMALL)
    r.step(2)
    r.controls.set(sigma=0.05, lr=0.02)
    r.step(1)
    h, ch = r.history, r.changes
    assert h.sigma.tolist() == [0.02, 0.02, 0.05] and h.lr.iloc[-1] == 0.02
    assert set(ch.name) == {"sigma", "lr"} and (ch.generation == 3).all()
    assert ch.loc[ch.name == "sigma", "old"].item() == 0.02
    with pytest.raises(ValueError, match="sigma must be"):
        r.controls.set(sigma=-1.0)
    r.step(1)
    assert r.history.sigma.iloc[-1] == 0.05


def test_nan_rewards_are_excluded_counted_and_logged(caplog):
    r = ES("esnbtest/NaNSome-v0", population=30, **SMALL)
    before = r.theta
    with caplog.at_level(logging.WARNING, logger="esnb.es"):
        r.step(2)
    h = r.history
    assert (h.n_excluded > 0).all() and (h.n_excluded < 15).all()
    assert np.isfinite(h.return_mean).all()  # nothing non-finite was averaged in
    assert np.all(np.isfinite(r.theta)) and not np.array_equal(r.theta, before)
    assert "non-finite" in caplog.text


def test_all_rollouts_nan_leaves_theta_unchanged(caplog):
    r = ES("esnbtest/NaNAll-v0", population=6, **SMALL)
    before = r.theta
    with caplog.at_level(logging.WARNING, logger="esnb.es"):
        r.step(1)
    assert np.array_equal(r.theta, before)
    assert r.history.n_excluded.iloc[0] == 3
    assert "no valid pair" in caplog.text


def test_failure_is_reported_and_reraised():
    r = ES("esnbtest/Broken-v0", population=4, **SMALL)
    before = r.theta
    r.start()
    with pytest.raises(RuntimeError, match="simulator crashed"):
        r.wait(30)
    assert r.state == "failed" and isinstance(r.error, RuntimeError)
    assert np.array_equal(r.theta, before) and r.iteration == 0


@pytest.mark.parametrize("kw, message", [
    (dict(sigma=0), "sigma must be"),
    (dict(sigma=-0.1), "sigma must be"),
    (dict(lr=0), "lr must be"),
    (dict(population=1), "population must be"),
    (dict(population=7), "population must be even"),
    (dict(env="HalfCheetah-v9"), "unknown environment id 'HalfCheetah-v9'.*HalfCheetah-v5"),
    (dict(noise_size=1000), "noise table only 1000 entries"),
    (dict(tasks_per_worker=0), "tasks_per_worker"),
])
def test_bad_constructor_arguments(kw, message):
    with pytest.raises(ValueError, match=message):
        ES(**{"env": "CartPole-v1", **SMALL, **kw})


def test_action_noise_is_for_box_actions_only():
    """OpenAI's ac_noise_std perturbs continuous actions; a Discrete env runs as without it
    (it crashed before)."""
    from esnb import ES

    a = ES("CartPole-v1", population=4, seed=2, noise_size=200_000, action_noise=0.01,
           eval_interval=0, client=False)
    b = ES("CartPole-v1", population=4, seed=2, noise_size=200_000, eval_interval=0,
           client=False)
    a.step(2)
    b.step(2)
    assert np.array_equal(a.theta, b.theta)
