"""CER, the EORL paper's contrastive experience replay baseline (Khadilkar and Meisheri 2023):
which transitions it marks, its contrastive samples, how batches mix the two buffers,
reproducibility, checkpoints, bad input and learning GridNav."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from esnb.envs.make import make_env
from esnb.rl.eorl.episodes import Episode
from esnb.runners.eorl import CER, make_runner
from esnb.runners.eorl.cer import CERLearner, Moments, causal_marks
from esnb.runners.eorl.config import CERConfig

UP, DOWN, LEFT, RIGHT = range(4)
M = 4  # grid side: I1 at (1, 4), the goal at (4, 4), timeout 60


def learner(**settings) -> CERLearner:
    config = CERConfig.build(env="gridnav", env_kwargs={"size": M, "subgoals": "1"},
                             episodes=50, seed=0, **settings)
    return CERLearner.of(config)


def scripted(lrn: CERLearner, actions) -> Episode:
    """The GridNav episode of ``actions`` (cut where the environment ends it), numbered in
    ``lrn``'s state index."""
    env = make_env("esnb/GridNav-v0", size=M, subgoals="1")
    obs, _ = env.reset(seed=0)
    seen, acts, rewards = [obs], [], []
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        seen.append(obs), acts.append(a), rewards.append(r)
        if term or trunc:
            break
    env.close()
    seen = np.asarray(seen, dtype=np.float32)
    return Episode(seen, lrn.states.ids(seen[:-1]), np.asarray(acts, dtype=np.int64),
                   np.asarray(rewards, dtype=np.float64), bool(term), bool(trunc))


# up to (1, 3), then down and up between (1, 2) and (1, 3) until the timeout: I1 never entered
SHUTTLE = [UP, UP] + [DOWN, UP] * 29
VIA_I1 = [UP, UP, UP, RIGHT, RIGHT, RIGHT]          # +10: I1 (step 3), then the goal
DIRECT = [RIGHT, UP, RIGHT, UP, RIGHT, UP]          # +1: the goal, no subgoal
I1_THEN_WALL = [UP, UP, UP] + [UP] * 57             # I1, then the wall until the timeout


def with_history(**settings) -> CERLearner:
    lrn = learner(**settings)
    for _ in range(3):
        lrn.store(scripted(lrn, SHUTTLE), {})
    assert lrn.marked == 0  # equal moves and ordinary returns: nothing stands out
    return lrn


def test_entering_the_subgoal_before_an_unusual_return_is_marked_with_its_contrasts():
    lrn = with_history()
    ep = scripted(lrn, VIA_I1)
    assert ep.ret == pytest.approx(10 - 5 / 60)
    lrn.store(ep, {})
    assert (lrn.last_marked, lrn.last_contrasts) == (1, 3)  # contrast_k = 3
    cer = {k: v[:len(lrn.cer_buffer)] for k, v in lrn.cer_buffer.storage.arrays.items()}
    at_13 = ep.sids[2]  # (1, 3), where UP enters I1
    # the marked transition first, with its return, then same-state other-action contrasts
    assert (cer["sid"][0], cer["action"][0]) == (at_13, UP)
    assert cer["ret"][0] == pytest.approx(10 - 3 / 60)
    assert cer["sid"][1:].tolist() == [at_13] * 3
    assert cer["action"][1:].tolist() == [DOWN] * 3  # the only other action taken there
    assert (cer["ret"][1:] < 0).all()  # the shuttles never reach the goal


@pytest.mark.parametrize("actions,why", [
    (I1_THEN_WALL, "a big state change, but the return is ordinary"),
    (DIRECT, "an unusual return, but no state change stands out"),
])
def test_the_rule_needs_both_a_big_state_change_and_an_unusual_return(actions, why):
    lrn = with_history()
    lrn.store(scripted(lrn, actions), {})
    assert lrn.last_marked == 0, why
    assert len(lrn.cer_buffer) == 0


def test_causal_marks_in_standard_deviations():
    dev, ret = Moments(), Moments()
    dev.add([0.0, 1.0] * 50)  # mean 0.5, std 0.5
    ret.add([-1.0, 1.0] * 50)  # mean 0, std 1
    marks = causal_marks(np.array([1.6, 1.6, 1.4, 1.6]), np.array([2.1, -2.1, 5.0, 1.9]),
                         dev, ret, state_z=2.0, return_z=2.0)
    assert marks.tolist() == [True, True, False, False]
    assert (dev.mean, dev.std, ret.std) == pytest.approx((0.5, 0.5, 1.0))


def test_contrast_radius_widens_similar_states():
    lrn = with_history(contrast_radius=0.3, contrast_k=1000)  # (1, 2) is 0.25 from (1, 3)
    lrn.store(scripted(lrn, [UP] + [LEFT] * 59), {})  # LEFT into the wall at (1, 2)
    ep = scripted(lrn, VIA_I1)
    lrn.store(ep, {})
    n = len(lrn.cer_buffer)
    sids = lrn.cer_buffer.storage.arrays["sid"][1:n]
    assert set(sids.tolist()) == {ep.sids[1], ep.sids[2]}  # (1, 2) and (1, 3)
    # every non-UP transition from those states: 3 x 29 DOWN at (1, 3), 59 LEFT at (1, 2)
    assert n - 1 == 3 * 29 + 59


@pytest.mark.parametrize("fraction,expected_cer", [(0.5, 4), (0.25, 2), (0.0, 0), (1.0, 4)])
def test_batches_mix_the_two_buffers(fraction, expected_cer):
    lrn = with_history(cer_fraction=fraction)
    lrn.store(scripted(lrn, VIA_I1), {})
    assert len(lrn.cer_buffer) == 4
    s = lrn.sample(0, 8)
    assert len(s.sids) == 8
    n_main = 8 - expected_cer
    cer = lrn.cer_buffer.storage.arrays
    # the tail is drawn from the CER buffer (all of it when it holds no more than asked)
    tail = sorted(zip(s.sids[n_main:].tolist(), s.actions[n_main:].tolist()))
    if expected_cer == 4:
        assert tail == sorted(zip(cer["sid"][:4].tolist(), cer["action"][:4].tolist()))
    else:
        assert len(tail) == expected_cer
        assert set(tail) <= set(zip(cer["sid"][:4].tolist(), cer["action"][:4].tolist()))
    # the head: distinct transitions of the main buffer
    a = lrn.buffer.storage.arrays
    rows = set(zip(a["sid"][:len(lrn.buffer)].tolist(), a["action"][:len(lrn.buffer)].tolist(),
                   a["ret"][:len(lrn.buffer)].tolist()))
    head = list(zip(s.sids[:n_main].tolist(), s.actions[:n_main].tolist(),
                    s.returns[:n_main].tolist()))
    assert set(head) <= rows


@pytest.mark.parametrize("env,env_kwargs", [("bitflip", {"n_bits": 5}),
                                            ("gridnav", {"size": 5, "subgoals": "1"})])
def test_runs_reproducibly_from_its_seed(env, env_kwargs):
    runs = []
    for _ in range(2):
        run = make_runner("CER", env=env, env_kwargs=env_kwargs, episodes=40, seed=3)
        run.step(40)
        runs.append(run)
    a, b = runs
    np.testing.assert_array_equal(a.returns, b.returns)
    assert torch.equal(a.learner.net.theta, b.learner.net.theta)
    assert a.history["cer_marked"].sum() == a.learner.marked
    if env == "bitflip":  # every flip moves the observation by 1: nothing stands out
        assert a.learner.marked == 0
    other = make_runner("CER", env=env, env_kwargs=env_kwargs, episodes=40, seed=4)
    other.step(40)
    assert not torch.equal(a.learner.net.theta, other.learner.net.theta)


def test_checkpoint_with_a_filled_cer_buffer_resumes_bitwise(tmp_path):
    kw = dict(env="gridnav", env_kwargs={"size": M, "subgoals": "1"}, episodes=40, seed=4)
    a = CER(**kw)
    a.step(30)  # marks first at episode 25 with this seed
    assert len(a.learner.cer_buffer) > 0
    path = a.save(tmp_path / "cer.npz")
    a.step(10)
    b = CER.load(path)
    assert (b.learner.marked, len(b.learner.cer_buffer)) == (
        a.history["cer_marked"][:30].sum(), a.history["cer_buffer"][29])
    b.step(10)
    np.testing.assert_array_equal(a.returns, b.returns)
    assert torch.equal(a.learner.net.theta, b.learner.net.theta)


def test_learns_gridnav_with_the_subgoal():
    """GridNav 6 x 6, subgoal 1 (+10 only through I1 at (1, 6)), 300 episodes: measured on
    seeds 0-7, every greedy policy takes the optimal path (9.91) and the last-100 training
    mean is 9.25-9.91 on seeds 0-4 (3.2 and 6.5 on seeds 7 and 5: epsilon still explores)."""
    last, greedy, marked = [], [], []
    for seed in range(5):
        run = make_runner("CER", env="gridnav", env_kwargs={"size": 6, "subgoals": "1"},
                          episodes=300, seed=seed)
        run.step(300)
        last.append(run.returns[-100:].mean())
        greedy.append(run.learner.evaluate(3).mean())
        marked.append(run.learner.marked)
    assert min(greedy) > 9.5  # through I1 to the goal (optimum 10 - 10/100)
    assert np.mean(last) > 8.5
    assert min(marked) > 0  # the rule fired in every run


@pytest.mark.parametrize("settings,message", [
    ({"cer_fraction": 1.5}, r"cer_fraction must be a number in \[0, 1\]"),
    ({"cer_fraction": -0.1}, r"cer_fraction must be a number in \[0, 1\]"),
    ({"contrast_k": -1}, "contrast_k"),
    ({"state_z": float("nan")}, "state_z"),
])
def test_bad_settings_are_refused_in_one_line(settings, message):
    with pytest.raises(ValueError, match=message) as err:
        CER("gridnav", {"size": 4}, **settings)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name,value,message", [
    ("cer_fraction", 2.0, r"cer_fraction must be a number in \[0, 1\], got 2.0"),
    ("cer_fraction", True, "cer_fraction must be a number"),
    ("return_z", -1.0, r"return_z must be a number in \[0, 100\], got -1.0"),
    ("contrast_k", 1.5, r"contrast_k must be an integer in \[0, 1000\]"),
    ("cer_buffer_factor", 0, r"cer_buffer_factor must be an integer in \[1, 10,000\]"),
])
def test_the_learners_settings_refuse_bad_values(name, value, message):
    """The learner's values are checked once, by its settings (the learner is built from
    them: :meth:`~esnb.runners.eorl.learner.MCLearner.of`)."""
    with pytest.raises(ValueError, match=message):
        CERConfig.build(**{name: value})
