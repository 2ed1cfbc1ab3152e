"""A lost life as DeepMind's agents treat it (issue 38): it ends the learning segment (IMPALA's
unroll, Ape-X's n-step returns: no bootstrap across it) while the game goes on; episode
returns and evaluations are whole games. Checked on ALE Breakout (5 lives): the actors' own
steps are replayed action by action on a fresh copy of the game, whose ``lives`` say where
each life was lost."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from esnb.envs import make_env
from esnb.runners.apex import ApeX
from esnb.runners.apex.actor import ActorGroup
from esnb.runners.impala import Impala
from esnb.runners.impala.tasks import drop_actors, impala_unrolls

ENV = "ALE/Breakout-v5"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def replay_lives(seed: int, actions, **env_kwargs
                 ) -> tuple[list[int], list[bool], list[np.ndarray]]:
    """Step a fresh game reset with ``seed`` through ``actions``: lives after each step,
    whether the game ended there, and the observations (frames made with ``env_kwargs``, the
    run's)."""
    env = make_env(ENV, **env_kwargs)
    obs, info = env.reset(seed=int(seed))
    lives, ended, frames = [], [], []
    for a in actions:
        obs, _, term, trunc, info = env.step(int(a))
        lives.append(int(info["lives"]))
        ended.append(bool(term or trunc))
        frames.append(np.asarray(obs))
        if term or trunc:
            break
    env.close()
    return lives, ended, frames


def test_impala_ends_a_segment_at_a_lost_life_and_plays_the_game_on():
    r = Impala(ENV, client=False, seed=4, envs_per_actor=1, eval_interval=0)
    try:
        assert r.config.life_loss is True  # DeepMind's way is the default
        cfg = dataclasses.replace(r.actor_config, run="life-loss")
        u = impala_unrolls(cfg, r.learner.actor_payload(), slot=0, task=0, segments=1,
                           unroll_length=700)
    finally:
        drop_actors("life-loss")
        r.close()
    first_reset = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        [cfg.seed, 0, 0]))).integers(2**31 - 1)
    actions = u["actions"][:, 0]
    lives, ended, frames = replay_lives(first_reset, actions, **r.config.env_kwargs)
    n = len(lives)
    lost = [t for t in range(n) if lives[t] < (lives[t - 1] if t else 5)]
    assert len(lost) >= 2, "random play should lose lives within 700 steps"
    terminated = u["terminated"][:n, 0]
    # a segment ends exactly where a life was lost (or the game ended), nowhere else
    assert sorted(np.flatnonzero(terminated)) == sorted(set(lost) | {t for t in range(n)
                                                                     if ended[t]})
    # ... and the game goes on: the observation after a lost life is the game's next frame,
    # not a new game's first
    for t in lost:
        if not ended[t]:
            np.testing.assert_array_equal(u["obs"][t + 1, 0], frames[t].ravel())
    # whole games: an episode's length counts every life
    if any(ended):
        assert u["episode_lengths"][0] == n


def test_impala_without_life_loss_bootstraps_across_a_lost_life():
    r = Impala(ENV, client=False, seed=4, envs_per_actor=1, eval_interval=0, life_loss=False)
    try:
        cfg = dataclasses.replace(r.actor_config, run="no-life-loss")
        u = impala_unrolls(cfg, r.learner.actor_payload(), slot=0, task=0, segments=1,
                           unroll_length=300)
    finally:
        drop_actors("no-life-loss")
        r.close()
    assert u["terminated"].sum() == len(u["episode_returns"])  # game ends only


def test_apex_ends_n_step_returns_at_a_lost_life_and_plays_the_game_on():
    r = ApeX(ENV, client=False, seed=5, num_actors=1, eval_interval=0, min_size=50,
             capacity=4096)
    try:
        assert r.config.life_loss is True
        cfg = dataclasses.replace(r.actor_cfg, n_step=1)  # one transition per step
    finally:
        r.close()
    group = ActorGroup(cfg, [0], seed=11, exploration=1.0)  # no parameters: random actions
    try:
        group.step(700)
        batch, _, _ = group.take()
        episodes = group.drain_episodes()
    finally:
        group.close()
    first_reset = int(np.random.SeedSequence([11, 0]).generate_state(1)[0])
    lives, ended, frames = replay_lives(first_reset, batch["action"])
    n = len(lives)
    lost = {t for t in range(n) if lives[t] < (lives[t - 1] if t else 5)}
    assert len(lost) >= 2, "random play should lose lives within 700 steps"
    zero = set(np.flatnonzero(batch["discount"][:n] == 0.0))
    assert zero == lost | {t for t in range(n) if ended[t]}
    for t in lost - {t for t in range(n) if ended[t]}:
        np.testing.assert_array_equal(batch["next_obs"][t], frames[t])  # the game went on
        np.testing.assert_array_equal(batch["obs"][t + 1], frames[t])
    if episodes:  # whole games: the first game's length counts every life
        assert episodes[0][2] == n


def test_the_paper_preset_on_atari_takes_the_papers_atari_tables():
    impala = Impala.make_config("ALE/Pong-v5", "paper")
    assert (impala.lr, impala.entropy_cost, impala.rmsprop_eps, impala.unroll_length,
            impala.life_loss, impala.optimizer) == (0.0006, 0.01, 0.01, 20, True, "rmsprop_tf")
    dmlab = Impala.make_config("CartPole-v1", "paper")  # elsewhere: the released DMLab values
    assert (dmlab.lr, dmlab.entropy_cost, dmlab.rmsprop_eps, dmlab.unroll_length) == \
        (0.00048, 0.00025, 0.1, 100)
    apex = ApeX.make_config("ALE/Pong-v5", "paper")
    assert (apex.actor_param_period, apex.actor_max_episode_steps) == (100, 12_500)
    assert ApeX.make_config("CartPole-v1", "paper").actor_param_period == 400
    # what is given wins over the table
    assert Impala.make_config("ALE/Pong-v5", "paper", lr=0.001).lr == 0.001
