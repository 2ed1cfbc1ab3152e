"""esnb.CEMRL: serial CEM-RL in this process and P-CEM-RL on a real LocalCluster."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from esnb.record import load_checkpoint
from esnb.runners.aesrl import CEMRL, train_cemrl

ENV = "InvertedPendulum-v5"
SMALL = dict(actor_hidden=(16, 16), critic_hidden=(32, 32), pop_size=6, rl_start_step=60,
             max_episode_steps=60, eval_episodes=2, batch_size=32)


# small networks on a shared 2-core machine: one torch thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def check_generations(h, n_rl, rl_start):
    """CEM-RL's bookkeeping: RL individuals only after the warm-up; per generation the
    critic makes as many updates as the previous generation's env steps, and each RL
    individual's actor as many steps."""
    prev = h.shift(1)
    warm = prev.env_steps.fillna(0) < rl_start
    assert (h.n_rl[warm] == 0).all() and (h.n_rl[~warm] == n_rl).all()
    rl = h[h.n_rl > 0]
    assert len(rl) >= 2
    prev_rl = prev.loc[rl.index]
    assert (rl.critic_updates - prev_rl.critic_updates == prev_rl.gen_steps).all()
    assert (rl.actor_steps - prev_rl.actor_steps == n_rl * prev_rl.gen_steps).all()
    assert (h.env_steps == h.gen_steps.cumsum()).all()
    assert h.eval_steps.iloc[-1] > 0 and h.eval_return.notna().all()


def test_serial_cemrl_is_deterministic_and_keeps_cem_rl_bookkeeping(tmp_path):
    a = CEMRL(ENV, seed=3, **SMALL)
    mu0 = a.mu.copy()
    a.step(5)
    h = a.history
    check_generations(h, 3, 60)
    assert not np.array_equal(a.mu, mu0)
    assert (h.eps.diff().dropna() < 0).all()  # eps decays toward 1e-5
    b = CEMRL(ENV, seed=3, **SMALL)
    b.step(5)
    assert np.array_equal(a.mu, b.mu) and np.array_equal(a.cem.var, b.cem.var)
    # a checkpoint brings back the distribution, the critic and the counters
    a.save(tmp_path / "c.npz")
    c = CEMRL.load(tmp_path / "c.npz")
    assert np.array_equal(c.mu, a.mu) and np.array_equal(c.cem.var, a.cem.var)
    assert c.counters == a.counters and c.prev_steps == a.prev_steps
    assert np.array_equal(c.critic_state["critic"], a.critic_state["critic"])
    c.step(1)
    assert c.history.generation.iloc[-1] == 6
    assert c.counters["critic_updates"] == a.counters["critic_updates"] + a.prev_steps


class NaNSome(gym.Wrapper):
    """InvertedPendulum whose reward turns NaN at step 2 of episodes with a seed divisible
    by 3."""

    def reset(self, *, seed=None, options=None):
        self._bad, self._t = seed is not None and seed % 3 == 0, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        self._t += 1
        return obs, float("nan") if self._bad and self._t == 2 else r, term, trunc, info


gym.register("esnbtest/NaNPendulum-v0", entry_point=lambda **kw: NaNSome(
    gym.make("InvertedPendulum-v5")), max_episode_steps=60)


def test_non_finite_returns_are_left_out_and_counted():
    r = CEMRL("esnbtest/NaNPendulum-v0", seed=0, **{**SMALL, "rl_start_step": 10**9})
    r.step(4)
    assert r.counters["nonfinite"] > 0
    assert np.all(np.isfinite(r.cem.mu)) and np.all(np.isfinite(r.history.return_mean))


@pytest.mark.parametrize("kwargs, match", [
    ({"n_rl": 7}, "n_rl must be <= pop_size"),
    ({"variance_form": "nope"}, "variance_form must be one of"),
    ({"pop_size": 1}, "pop_size must be an integer in"),
    ({"pop_size": 5, "antithetic": True}, "antithetic sampling needs an even pop_size"),
    ({"mean_rule": "fixed_linear"}, "unknown setting 'mean_rule' .*for CEM-RL"),
])
def test_bad_configuration_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CEMRL(ENV, **{**SMALL, **kwargs})


def test_parallel_cemrl_on_a_cluster(client):
    r = CEMRL(ENV, seed=1, client=client, parallel=True, **SMALL)
    try:
        r.step(4)
        h = r.history
        check_generations(h, 3, 60)
        assert (h.critic_time[h.n_rl > 0] > 0).all()
        assert r.critic.address != "inline" and r.replay.call("stats")["size"] > 0
    finally:
        r.close()
    # serial CEM-RL as one task on a worker ("1 worker" of the paper's Table 1)
    out = client.submit(train_cemrl, {"env": ENV, "seed": 1, **SMALL,
                                    "budget": {"generations": 2}}, pure=False).result()
    assert out["progress"]["generations"] == 2 and len(out["history"]) == 2


def test_parallel_cemrl_in_this_process_keeps_its_order_and_books():
    """P-CEM-RL is an order of work, not a cluster: inline it runs the same generation (the
    whole critic first, then every actor) and is reproducible."""
    runs = []
    for _ in range(2):
        r = CEMRL(ENV, seed=1, client=False, parallel=True, **SMALL)
        r.step(4)
        r.close()
        runs.append(r)
    h = runs[0].history
    check_generations(h, 3, 60)
    assert runs[0].critic is None  # released by close()
    assert np.array_equal(runs[0].mu, runs[1].mu)
    cols = ["env_steps", "critic_updates", "actor_steps", "return_mean", "eval_return"]
    assert h[cols].equals(runs[1].history[cols])


def test_cli_trains_cemrl(tmp_path):
    from esnb.cli import main

    out = tmp_path / "run"
    code = main(["train", "cemrl", "--env", ENV, "--workers", "0", "--generations", "2",
                 "--actor-hidden", "16", "16", "--critic-hidden", "16", "16", "--pop-size", "4",
                 "--rl-start-step", "20", "--max-episode-steps", "40", "--eval-episodes", "2",
                 "--final-eval", "2", "--no-progress", "--out", str(out)])
    assert code == 0
    record = load_checkpoint(out / "checkpoint.npz")[0]["replay"]
    for name in ("history.csv", "summary.json", "checkpoint.npz", "plot.html", record["file"]):
        assert (out / name).exists(), name
