"""EORL's environments: registration, check_env, rewards of scripted trajectories, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import esnb.envs.registration  # noqa: F401
from esnb.envs.bitflip import BitFlipEnv
from esnb.envs.gridnav import SUBGOALS, GridNavEnv

UP, DOWN, LEFT, RIGHT = range(4)


def play(env, actions, seed=0):
    obs, _ = env.reset(seed=seed)
    out = {"obs": [obs], "rewards": [], "terminated": False, "truncated": False}
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        out["obs"].append(obs)
        out["rewards"].append(r)
        if term or trunc:
            out["terminated"], out["truncated"] = term, trunc
            break
    return out


@pytest.mark.parametrize("kwargs", [dict(n_bits=6), dict(n_bits=7, subgoal=True)])
def test_bitflip_registered_and_passes_check_env(kwargs):
    env = gym.make("esnb/BitFlip-v0", **kwargs)
    check_env(env.unwrapped)
    assert env.observation_space.n == kwargs["n_bits"]
    assert env.action_space.n == kwargs["n_bits"]


@pytest.mark.parametrize("subgoals", SUBGOALS)
@pytest.mark.parametrize("p", [0.0, 0.1])
def test_gridnav_registered_and_passes_check_env(subgoals, p):
    env = gym.make("esnb/GridNav-v0", size=8, subgoals=subgoals, stochasticity=p)
    check_env(env.unwrapped)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.tolist() == [1 / 8, 1 / 8, 0.0, 0.0]


def test_bitflip_goal_pays_10_without_a_step_penalty():
    env = BitFlipEnv(4)
    ep = play(env, [0, 1, 2, 3])
    assert ep["terminated"] and not ep["truncated"]
    assert ep["rewards"] == pytest.approx([-1 / 20] * 3 + [10.0])
    assert ep["obs"][-1].tolist() == [1, 1, 1, 1]


def test_bitflip_flipping_back_costs_and_timeout_sums_to_minus_one():
    env = BitFlipEnv(4)
    ep = play(env, [0] * 100)
    assert len(ep["rewards"]) == 20 == env.timeout
    assert ep["truncated"] and not ep["terminated"]
    assert sum(ep["rewards"]) == pytest.approx(-1.0, abs=1e-12)


def test_bitflip_subgoal_version_rewards():
    env = BitFlipEnv(4, subgoal=True)
    np.testing.assert_array_equal(env.subgoal_state, [0, 1, 0, 1])
    direct = play(env, [0, 1, 2, 3])  # 1000, 1100, 1110, 1111: never 0101
    assert direct["rewards"][-1] == 1.0 and direct["terminated"]
    via = play(env, [1, 3, 0, 2])  # 0100, 0101 (subgoal), 1101, 1111
    assert via["rewards"] == pytest.approx([-1 / 20] * 3 + [10.0])
    # the plain version pays 10 either way
    assert play(BitFlipEnv(4), [1, 3, 0, 2])["rewards"][-1] == 10.0


def test_bitflip_hindsight_rewards():
    env = BitFlipEnv(4, subgoal=True)
    ep = play(env, [1, 3, 0, 2])
    obs = np.array(ep["obs"])
    r, reached = env.hindsight_rewards(obs, np.array([0, 1, 0, 1]))
    assert reached and r.tolist() == pytest.approx([-1 / 20, 1.0])  # subgoal not passed before
    r, reached = env.hindsight_rewards(obs, np.array([1, 1, 1, 1]))
    assert reached and r.tolist() == pytest.approx([-1 / 20] * 3 + [10.0])
    r, reached = env.hindsight_rewards(obs, np.array([0, 0, 1, 0]))
    assert not reached and r.tolist() == pytest.approx([-1 / 20] * 4)


@pytest.mark.parametrize("subgoals,expected", [
    ("0", {"direct": 10.0, "i1": 10.0, "i2": 10.0, "both": 10.0}),
    ("1", {"direct": 1.0, "i1": 10.0, "i2": 1.0, "both": 10.0}),
    ("2+", {"direct": 1.0, "i1": 2.0, "i2": 2.0, "both": 10.0}),
    ("2-", {"direct": 1.0, "i1": -1.0, "i2": -1.0, "both": 10.0}),
])
def test_gridnav_terminal_rewards_by_version(subgoals, expected):
    m = 4
    env = GridNavEnv(m, subgoals)
    tau = 10 * (4 * (m - 1) if subgoals in ("2+", "2-") else 2 * (m - 1))
    assert env.timeout == tau and env.step_penalty == pytest.approx(-1 / tau)
    paths = {
        "direct": [UP, RIGHT, UP, RIGHT, UP, RIGHT],          # (1,2) (2,2) ... (4,4)
        "i1": [UP, UP, UP, RIGHT, RIGHT, RIGHT],              # via (1,4)
        "i2": [RIGHT, RIGHT, RIGHT, UP, UP, UP],              # via (4,1)
        "both": [UP] * 3 + [DOWN] * 3 + [RIGHT] * 3 + [UP] * 3,
    }
    flags = {"direct": [0, 0], "i1": [1, 0], "i2": [0, 1], "both": [1, 1]}
    for name, path in paths.items():
        ep = play(env, path)
        assert ep["terminated"] and len(ep["rewards"]) == len(path), name
        assert ep["rewards"][:-1] == pytest.approx([-1 / tau] * (len(path) - 1)), name
        assert ep["rewards"][-1] == expected[name], name
        assert ep["obs"][-1].tolist() == [1.0, 1.0, *flags[name]], name


def test_gridnav_walls_and_timeout():
    env = GridNavEnv(5, "2-")
    ep = play(env, [LEFT, DOWN] * 1000)
    np.testing.assert_array_equal(np.array(ep["obs"]),  # never moved
                                  np.tile(np.float32([0.2, 0.2, 0, 0]), (len(ep["obs"]), 1)))
    assert len(ep["rewards"]) == env.timeout == 160
    assert ep["truncated"] and not ep["terminated"]
    assert sum(ep["rewards"]) == pytest.approx(-1.0, abs=1e-12)


def test_gridnav_stochasticity_replaces_actions_with_a_seeded_draw():
    det = play(GridNavEnv(30, "0", 0.0), [UP] * 20)
    assert [o[1] for o in det["obs"]] == pytest.approx([(k + 1) / 30 for k in range(21)])
    noisy = GridNavEnv(30, "0", 1.0)
    a, b = play(noisy, [UP] * 20, seed=3), play(noisy, [UP] * 20, seed=3)
    np.testing.assert_array_equal(np.array(a["obs"]), np.array(b["obs"]))
    moves = np.diff(np.array(a["obs"])[:, :2], axis=0)
    assert not np.all(moves[:, 1] > 0)  # with p = 1 not every UP went up
    # p = 0.1: about 10% of actions replaced, a quarter of those by UP itself
    env = GridNavEnv(1000, "0", 0.1)
    env.reset(seed=1)
    ups = 0
    for _ in range(900):  # stays below the top wall
        y = env._y
        env.step(UP)
        ups += env._y == y + 1
    assert 0.89 <= ups / 900 <= 0.96  # expected 0.925


def test_gridnav_hindsight_rewards():
    env = GridNavEnv(4, "1")
    ep = play(env, [UP, UP, UP, RIGHT, RIGHT, RIGHT])
    obs = np.array(ep["obs"])
    r, reached = env.hindsight_rewards(obs, obs[3])  # the I1 corner, flag set
    assert reached and r.tolist() == pytest.approx([-1 / 60] * 2 + [10.0])
    r, reached = env.hindsight_rewards(obs, np.array([0.5, 0.25, 0, 0], np.float32))
    assert not reached and len(r) == 6


@pytest.mark.parametrize("make,message", [
    (lambda: BitFlipEnv(1), "n_bits"),
    (lambda: BitFlipEnv(6, subgoal=2), "False, True"),
    (lambda: GridNavEnv(1), "size must be an integer >= 2"),
    (lambda: GridNavEnv(8, "3"), "'0', '1', '2+', '2-'"),
    (lambda: GridNavEnv(8, "0", 1.5), "stochasticity"),
    (lambda: gym.make("esnb/GridNav-v0", size=8, subgoals="two"), "'2+'"),
])
def test_bad_environment_arguments(make, message):
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        make()


def test_bad_actions_are_refused():
    with pytest.raises(ValueError, match="BitFlip action"):
        BitFlipEnv(4).step(4)
    env = GridNavEnv(4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="UP, DOWN, LEFT, RIGHT"):
        env.step(-1)
