"""Pixel environments (esnb.envs.pixels): Atari with DeepMind's preprocessing, MinAtar.

ale-py, opencv and minatar are in the ``test`` extra: a machine without them fails here (the
imports below), it does not skip.
"""

import subprocess
import sys

import ale_py  # noqa: F401  (the atari extra must be installed where tests run)
import cv2
import gymnasium as gym
import minatar  # noqa: F401
import numpy as np
import pytest

from esnb.envs.make import env_spaces, make_env
from esnb.envs.pixels import check_vector_obs, is_pixel_env


def run(env, actions):
    frames = []
    for a in actions:
        obs, *_ = env.step(int(a))
        frames.append(obs)
    return np.stack(frames)


def test_pong_is_preprocessed_and_reproducible():
    obs_space, act_space, _ = env_spaces("ALE/Pong-v5")
    assert obs_space.shape == (4, 84, 84) and obs_space.dtype == np.uint8
    actions = np.random.default_rng(0).integers(0, act_space.n, 40)
    seen = []
    for _ in range(2):
        env = make_env("ALE/Pong-v5")
        obs, _ = env.reset(seed=3)
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        assert (obs == obs[0]).all()  # a new episode's stack is its first frame four times
        seen.append(np.concatenate([obs[None], run(env, actions)]))
        env.close()
    np.testing.assert_array_equal(seen[0], seen[1])
    assert seen[0].std() > 0  # frames, not zeros
    # another seed: another number of no-ops (1..30) at reset, almost surely other frames
    assert not np.array_equal(run_after_reset(seed=4, actions=actions), seen[0][1:])


def run_after_reset(seed, actions):
    env = make_env("ALE/Pong-v5")
    env.reset(seed=seed)
    out = run(env, actions)
    env.close()
    return out


def test_frame_skip_and_max_pool_match_the_raw_emulator():
    """Each agent step is 4 emulator frames; its frame is the max of the last two, grey,
    resized to 84x84; the raw env is stepped by hand beside the wrapped one."""
    env = make_env("ALE/Pong-v5")
    obs, _ = env.reset(seed=5)
    ale = env.unwrapped.ale
    raw = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
    raw.reset(seed=5)
    noops = raw.unwrapped.np_random.integers(1, 31)  # the wrapper's draw, same generator
    for _ in range(noops):
        raw.step(0)
    start = ale.getEpisodeFrameNumber()
    assert start == raw.unwrapped.ale.getEpisodeFrameNumber() == noops
    actions = np.random.default_rng(1).integers(0, 6, 12)
    for i, a in enumerate(actions, 1):
        obs, *_ = env.step(int(a))
        screens = []
        for _ in range(4):
            raw.step(int(a))
            screens.append(raw.unwrapped.ale.getScreenGrayscale())
        assert ale.getEpisodeFrameNumber() == start + 4 * i
        pooled = np.maximum(screens[-2], screens[-1])
        np.testing.assert_array_equal(obs[-1], cv2.resize(pooled, (84, 84),
                                                          interpolation=cv2.INTER_AREA))
    env.close()
    raw.close()


def gymnasium_chain(env_id, terminal_on_life_loss=False, screen_size=84, **kwargs):
    """What esnb's Atari envs are made to equal: gymnasium's own wrappers."""
    env = gym.make(env_id, frameskip=1, **{"repeat_action_probability": 0.0, **kwargs})
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4,
                                          screen_size=screen_size,
                                          terminal_on_life_loss=terminal_on_life_loss,
                                          grayscale_obs=True, scale_obs=False)
    return gym.wrappers.FrameStackObservation(env, 4)


@pytest.mark.parametrize("env_id, life_loss, size, kwargs", [
    ("ALE/Breakout-v5", False, 84, {}),
    ("ALE/Breakout-v5", True, 84, {}),  # lost lives end episodes mid frame-skip
    ("ALE/Pong-v5", False, 84, {"repeat_action_probability": 0.25,  # sticky actions
                                "max_num_frames_per_episode": 1_001}),  # caps mid frame-skip
    ("ALE/Pong-v5", False, 42, {"max_num_frames_per_episode": 1_001}),  # RLlib's fast Pong
])
def test_atari_frames_equal_gymnasiums_wrappers_step_for_step(env_id, life_loss, size, kwargs):
    """esnb's own Atari wrapper (AtariFrames) and gymnasium's AtariPreprocessing +
    FrameStackObservation, stepped side by side with the same actions through several
    episodes (seeded and unseeded resets): the same observations, rewards, ends and info at
    every step, at the papers' 84x84 and at 42x42."""
    sized = {} if size == 84 else {"screen_size": size}
    ours = make_env(env_id, terminal_on_life_loss=life_loss, **sized, **kwargs)
    theirs = gymnasium_chain(env_id, terminal_on_life_loss=life_loss, screen_size=size,
                             **kwargs)
    rng = np.random.default_rng(7)
    ends = []
    for seed in (11, None, 12, None):
        a, info_a = ours.reset(seed=seed)
        b, info_b = theirs.reset(seed=seed)
        np.testing.assert_array_equal(a, b)
        assert info_a == info_b
        for _ in range(3_000):
            action = int(rng.integers(0, ours.action_space.n))
            a, r_a, term_a, trunc_a, info_a = ours.step(action)
            b, r_b, term_b, trunc_b, info_b = theirs.step(action)
            assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape == (4, size, size)
            np.testing.assert_array_equal(a, b)
            assert (r_a, term_a, trunc_a, info_a) == (r_b, term_b, trunc_b, info_b)
            if term_a or trunc_a:
                ends.append("truncated" if trunc_a else "terminated")
                break
    # every episode ended, the capped game's by its cap
    assert ends == ["truncated" if kwargs else "terminated"] * 4
    ours.close()
    theirs.close()


def test_sticky_actions_off_unless_asked():
    env = make_env("ALE/Pong-v5")
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    env.close()
    env = make_env("ALE/Pong-v5", repeat_action_probability=0.25)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    env.close()


def lives_at_first_end(terminal_on_life_loss, budget=4000):
    env = make_env("ALE/Breakout-v5", terminal_on_life_loss=terminal_on_life_loss)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(budget):
        _, _, terminated, truncated, info = env.step(int(rng.integers(0, 4)))
        if terminated or truncated:
            env.close()
            return info["lives"]
    raise AssertionError(f"no episode end in {budget} steps")


def test_life_loss_is_terminal_only_where_asked():
    assert lives_at_first_end(True) == 4  # the first lost life ends the episode
    assert lives_at_first_end(False) == 0  # the game ends with its last life


def test_episode_cap_counts_agent_steps():
    # by default the v5 ids' own 108,000 frames, a time limit actors see (in agent steps)
    assert env_spaces("ALE/Pong-v5")[2] == 27_000
    assert env_spaces("MinAtar/Breakout-v1")[2] is None  # MinAtar has none: runs must cap it
    env = make_env("ALE/Pong-v5", max_episode_steps=7)
    env.reset(seed=0)
    ends = [env.step(0)[3] for _ in range(7)]
    assert ends == [False] * 6 + [True]
    env.close()


def test_minatar_breakout_channels_first_uint8_reproducible():
    obs_space, act_space, _ = env_spaces("MinAtar/Breakout-v1")
    assert obs_space.shape == (4, 10, 10) and obs_space.dtype == np.uint8
    assert act_space.n == 3  # v1: the game's minimal action set
    actions = np.random.default_rng(0).integers(0, 3, 200)
    seen = []
    for _ in range(2):
        env = make_env("MinAtar/Breakout-v1")
        obs, _ = env.reset(seed=2)
        frames, ends = [obs], 0
        for a in actions:
            obs, _, terminated, truncated, _ = env.step(int(a))
            frames.append(obs)
            if terminated or truncated:
                ends += 1
                frames.append(env.reset()[0])
        seen.append(np.stack(frames))
        env.close()
    np.testing.assert_array_equal(seen[0], seen[1])
    assert seen[0].dtype == np.uint8 and set(np.unique(seen[0])) <= {0, 1}
    assert ends >= 1  # random play loses the ball within 200 steps


@pytest.mark.parametrize("env_id, close", [("ALE/Pongg-v5", "ALE/Pong-v5"),
                                           ("ALE/Pong-v4", "ALE/Pong-v5"),
                                           ("MinAtar/Breakout-v3", "MinAtar/Breakout-v1")])
def test_unknown_game_names_the_closest_ids(env_id, close):
    with pytest.raises(ValueError, match=f"unknown environment id '{env_id}'; close ids: "
                                         f"{close}"):
        make_env(env_id)


@pytest.mark.parametrize("env_id, module, extra", [("ALE/Pong-v5", "ale_py", "atari"),
                                                   ("ALE/Pong-v5", "cv2", "atari"),
                                                   ("MinAtar/Breakout-v1", "minatar", "minatar")])
def test_missing_package_names_the_extra(monkeypatch, env_id, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import of it now raises ImportError
    with pytest.raises(ValueError) as err:
        make_env(env_id)
    message = str(err.value)
    assert "\n" not in message
    assert f"pip install 'esnb[{extra}]'" in message and repr(module) in message


def test_bad_keywords_one_line_each():
    with pytest.raises(ValueError, match="frameskip is the preprocessing's"):
        make_env("ALE/Pong-v5", frameskip=4)
    with pytest.raises(ValueError, match="terminal_on_life_loss applies to ALE ids"):
        make_env("MinAtar/Breakout-v1", terminal_on_life_loss=True)
    with pytest.raises(ValueError, match="screen_size applies to ALE ids"):
        make_env("MinAtar/Breakout-v1", screen_size=42)
    with pytest.raises(ValueError, match=r"screen_size must be an int in \[8, 210\]"):
        make_env("ALE/Pong-v5", screen_size=4)


def test_vector_algorithms_refuse_pixel_envs():
    assert is_pixel_env("ALE/Pong-v5") and is_pixel_env("MinAtar/Breakout-v1")
    assert not is_pixel_env("CartPole-v1") and not is_pixel_env(None)
    check_vector_obs("HalfCheetah-v5", "ES")
    with pytest.raises(ValueError, match="ES takes vector observations"):
        check_vector_obs("ALE/Pong-v5", "ES")


@pytest.mark.parametrize("algorithm, env_id", [("es", "ALE/Pong-v5"),
                                               ("aesrl", "ALE/Pong-v5"),
                                               ("cemrl", "MinAtar/Breakout-v1")])
def test_cli_refuses_a_pixel_env_before_a_cluster(tmp_path, algorithm, env_id):
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "train", algorithm, "--env", env_id,
                        "--workers", "2", "--out", str(tmp_path / "run"), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr  # no cluster's log lines: it never started
    assert "takes vector observations" in lines[0] and env_id in lines[0]
    assert not (tmp_path / "run").exists()


def test_python_api_refuses_a_pixel_env_before_its_workers():
    from esnb.runners.aesrl import AESRL
    from esnb.runners.es import ES

    with pytest.raises(ValueError, match="ES takes vector observations"):
        ES("ALE/Pong-v5", client=False, noise_size=1_000_000)
    with pytest.raises(ValueError, match="AESRL takes vector observations"):
        AESRL("MinAtar/Breakout-v1", client=False)
