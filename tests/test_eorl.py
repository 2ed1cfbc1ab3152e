"""EORL and its baselines: the Monte-Carlo DQN, fitness bookkeeping, operators in a run,
live controls, checkpoints, bad input, and learning BitFlip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from esnb.rl.eorl.episodes import default_eps_decay
from esnb.rl.eorl.mc_dqn import PopulationQNet, mc_returns, one_thread
from esnb.runners.eorl import CBE, COLUMNS, EORL, HER, PER, VAN, make_runner
from esnb.runners.eorl.config import EORLConfig, EpisodeConfig
from esnb.runners.eorl.runner import CEMRLRoundRobin


def learner_of(runner, env_kwargs: dict, **settings):
    """``runner``'s learner as the runner builds it (its settings: the paper's values unless
    given) on BitFlip or GridNav, and the live controls an episode reads."""
    settings.setdefault("env", "bitflip")
    config = runner.Config.build(env_kwargs=env_kwargs, **settings)
    return runner.learner_class.of(config), dict(config.controls().snapshot().values)


def test_mc_returns_are_undiscounted_returns_to_go():
    np.testing.assert_allclose(mc_returns([-0.1, -0.1, 10.0]), [9.8, 9.9, 10.0])
    assert mc_returns([-1 / 30] * 30)[0] == pytest.approx(-1.0)


def _rows_gradient(net, states, sids, acts, g, w):
    """Autograd on the sample rows themselves: the reference for the aggregated pass."""
    th = net.theta.clone().requires_grad_(True)
    h = torch.as_tensor(states[sids])
    layers = net.layers(th)
    for k, (wt, b) in enumerate(layers):
        h = torch.baddbmm(b, h, wt)
        if k < len(layers) - 1:
            h = torch.relu(h)
    qa = h.gather(2, torch.as_tensor(acts)[..., None]).squeeze(2)
    loss = (torch.as_tensor(w, dtype=torch.float32)
            * (qa - torch.as_tensor(g, dtype=torch.float32)) ** 2).mean(1)
    grad, = torch.autograd.grad(loss.sum(), th)
    return grad, loss.detach().numpy()


def test_aggregated_full_batch_pass_equals_the_pass_over_sample_rows():
    g0 = np.random.default_rng(0)
    net = PopulationQNet(3, 6, 4, g0, hidden=(32, 8), lr=0.01)
    states = g0.integers(0, 2, (20, 6)).astype(np.float32)
    n, b = 3, 300
    sids, acts = g0.integers(0, 20, (n, b)), g0.integers(0, 4, (n, b))
    g, w = g0.normal(size=(n, b)) * 5, g0.uniform(0.2, 1.0, (n, b))
    ref_grad, ref_loss = _rows_gradient(net, states, sids, acts, g, w)
    count, tsum = np.zeros((n, 20, 4)), np.zeros((n, 20, 4))
    for i in range(n):
        np.add.at(count[i], (sids[i], acts[i]), w[i])
        np.add.at(tsum[i], (sids[i], acts[i]), w[i] * g[i])
    q, inputs = net._forward(torch.as_tensor(states))
    scale = torch.full((n, 1, 1), 2.0 / b)
    grad = net._gradient(inputs, torch.as_tensor(count, dtype=torch.float32) * scale * q
                         - torch.as_tensor(tsum, dtype=torch.float32) * scale)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-6)
    loss, _ = net.fit(states, count, tsum, (w * g * g).sum(1), np.full(n, b))
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)


def test_adam_steps_only_the_selected_members_and_resets_per_member():
    g0 = np.random.default_rng(1)
    net = PopulationQNet(3, 4, 2, g0, hidden=(32, 8), lr=0.01)
    before = net.theta.clone()
    x = g0.normal(size=(5, 4)).astype(np.float32)
    count = np.ones((3, 5, 2))
    tsum = g0.normal(size=(3, 5, 2))
    loss, _ = net.fit(x, count, tsum, np.ones(3), np.full(3, 10.0),
                      members=np.array([True, False, True]), epochs=2)
    assert np.isnan(loss[1]) and np.isfinite(loss[[0, 2]]).all()
    assert torch.equal(net.theta[1], before[1]) and not torch.equal(net.theta[0], before[0])
    assert net.steps.tolist() == [2, 0, 2]
    # the first Adam step moves every parameter with a nonzero gradient by ~lr
    step = (net.theta[0] - before[0]).abs()
    assert step.max().item() == pytest.approx(0.02, rel=0.05)  # two steps of 0.01
    net.reset_optimizer(0)
    assert net.steps[0] == 0 and float(net._m[0].abs().sum()) == 0.0
    flat = net.flat(2)
    net.set_flat(0, flat)
    np.testing.assert_array_equal(net.flat(0), flat)
    with pytest.raises(ValueError, match="expected"):
        net.set_flat(0, flat[:-1])


def test_one_thread_restores_torch_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with one_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# -- EORL's bookkeeping in a run ------------------------------------------------------------------
def test_every_episode_updates_the_fitness_of_the_policy_that_ran():
    learner, controls = learner_of(EORL, {"n_bits": 5}, episodes=100, seed=1)
    controls.update(kappa=0.0, mu=0.0)
    for _ in range(30):
        before = learner.population.fitness.copy()
        row = learner.run_episode(controls)
        after = learner.population.fitness
        i = row["member"]
        assert after[i] == pytest.approx(0.9 * before[i] + 0.1 * row["return"])
        others = np.arange(learner.n) != i
        np.testing.assert_array_equal(after[others], before[others])
    assert learner.operators == 0
    # epsilon decays by 0.99 per episode on BitFlip, from 1
    assert learner.epsilon == pytest.approx(0.99 ** 30)
    assert default_eps_decay("gridnav", 2500) == 0.998
    assert default_eps_decay("gridnav", 4000) == 0.999


def test_operator_replaces_the_weakest_with_a_child_that_runs_next():
    learner, controls = learner_of(EORL, {"n_bits": 5}, episodes=100, seed=2, n=4)
    pop, net = learner.population, learner.net
    pop.fitness[:] = [3.0, 1.0, -2.0, 2.0]
    thetas = [net.flat(i) for i in range(4)]
    net.steps[:] = 7
    info = learner.apply_operator("linear_crossover", sigma=0.0)
    assert info["child"] == 2
    i, j = info["parent_i"], info["parent_j"]
    assert {i, j} == {0, 3}  # the ceil(4/2) = 2 fittest of the others
    fit = {0: 3.0, 3: 2.0}
    tau = np.exp(fit[i]) / (np.exp(fit[i]) + np.exp(fit[j]))  # softmax(A_i, A_j)
    assert info["tau"] == pytest.approx(tau)
    np.testing.assert_allclose(net.flat(2), tau * thetas[i] + (1 - tau) * thetas[j],
                               rtol=1e-6, atol=1e-7)
    assert pop.fitness[2] == pytest.approx(tau * fit[i] + (1 - tau) * fit[j])
    assert net.steps[2] == 0 and net.steps[0] == 7  # fresh optimiser for the child only
    row = learner.run_episode({**controls, "kappa": 0.0, "mu": 0.0})
    assert row["member"] == 2  # the child runs next
    info = learner.apply_operator("mutation", sigma=0.0)
    assert info["parent_j"] == -1
    np.testing.assert_allclose(net.flat(info["child"]), net.flat(info["parent_i"]))


def test_live_controls_turn_operators_on_and_are_logged():
    run = EORL("bitflip", {"n_bits": 5}, episodes=1000, variant="EORL-FIX", seed=3)
    run.step(10)
    assert run.records[-1]["operators"] == 0
    run.controls.set(kappa=1.0, mu=1.0)
    run.step(10)
    ops = [r["operator"] for r in run.records[10:]]
    assert sum(o != "" for o in ops) >= 8  # p ~ 0.99 per episode
    assert {o for o in ops if o} <= {"random_crossover", "linear_crossover", "mutation"}
    # a child always runs the episode after it was created
    for prev, row in zip(run.records[10:-1], run.records[11:]):
        if prev["operator"]:
            assert row["member"] == prev["child"]
    changes = run.changes
    # logged with the episode where they took effect: the 11th
    assert set(changes.name) == {"kappa", "mu"} and changes.episode.tolist() == [11, 11]
    run.controls.set(schedule="active")
    run.step(1)
    assert run.controls["schedule"] == "active"


def test_eorl_learns_bitflip_6_far_better_than_chance():
    """EORL-05-05 on BitFlip m = 6 (400 episodes, the paper's budget), over 5 seeds.

    One seed is too chaotic to pin: over 40 seeds (torch 2.13, numpy 2.4.6, gymnasium 1.4)
    the last-100 mean was 8.84 +- 0.54 per seed (min 7.54, 90% above 8; seed 3: 7.61), and
    the best member's greedy policy was optimal in 92% of the runs and always reached the
    goal; seeds 0-4: mean 8.96, min 7.61, 3 optimal (the other two take 7 steps: 9.77).
    The paper reports 9.29 (10 seeds); a random walk gets 0.5 to 4.
    """
    torch.set_num_threads(1)
    chance = VAN("bitflip", {"n_bits": 6}, episodes=200, seed=0, eps_decay=1.0)  # random play
    chance.step(200)
    assert 0.5 < chance.returns.mean() < 4.0  # a random walk finds 111111 in ~1 of 4 episodes
    last, optimal = [], 0
    for seed in range(5):
        run = EORL("bitflip", {"n_bits": 6}, episodes=400, variant="EORL-05-05", seed=seed)
        run.step(400)
        last.append(run.returns[-100:].mean())
        optimal += bool(np.allclose(run.evaluate(5), 10 - 5 / 30))  # the optimum is 9.83
    assert np.mean(last) > 8.0  # the mean of 5 seeds has a std of ~0.2
    assert min(last) > 7.0  # every seed far above chance
    assert optimal >= 3  # most runs' best member goes straight to the goal


@pytest.mark.parametrize("algorithm", list(COLUMNS))
def test_checkpoint_resumes_bitwise(algorithm, tmp_path):
    kw = dict(env="gridnav", env_kwargs={"size": 5, "subgoals": "2+", "stochasticity": 0.1},
              episodes=40, seed=4)
    a = make_runner(algorithm, **kw)
    a.step(12)
    path = a.save(tmp_path / "run.npz")
    a.step(12)
    b = type(a).load(path)
    b.step(12)
    np.testing.assert_array_equal(a.returns, b.returns)
    assert torch.equal(a.learner.net.theta, b.learner.net.theta)
    assert b.algorithm == type(a).algorithm and b.iteration == 24


def test_a_state_saved_with_weights_in_out_loads_transposed():
    """States saved before esnb.nets (each weight stored [in, out]) load as the same networks."""
    a, controls = learner_of(EORL, {"n_bits": 5}, episodes=20, seed=6, n=3)
    for _ in range(4):
        a.run_episode({**controls, "kappa": 0.0, "mu": 0.0})
    meta, arrays = a.state_dict()
    assert meta.pop("net_layout") == "out_in"
    mlp = a.net.mlp

    def in_out(row):
        return np.concatenate([p for w, b in mlp.layers(row) for p in (w.T.ravel(), b)])

    for k in ("net.theta", "net.adam_m", "net.adam_v"):
        arrays[k] = np.stack([in_out(row) for row in arrays[k]])
    assert not np.array_equal(arrays["net.theta"], a.net.theta.numpy())
    b, _ = learner_of(EORL, {"n_bits": 5}, episodes=20, seed=7, n=3)
    b.load_state_dict(meta, arrays)
    assert torch.equal(b.net.theta, a.net.theta) and torch.equal(b.net._v, a.net._v)
    assert b.run_episode(controls)["return"] == a.run_episode(controls)["return"]
    assert torch.equal(b.net.theta, a.net.theta)


# -- baselines ------------------------------------------------------------------------------------
def test_per_anneals_beta_and_updates_priorities():
    learner, controls = learner_of(PER, {"n_bits": 5}, episodes=11, seed=5)
    rows = [learner.run_episode(controls) for _ in range(11)]
    assert [r["beta"] for r in rows] == pytest.approx([0.4 + 0.06 * k for k in range(11)])
    p = learner.buffer.sampler.priorities(np.arange(len(learner.buffer)))
    assert len(np.unique(p)) > 10  # no longer all the initial maximum


def test_her_relabels_with_the_best_terminal_states():
    learner, controls = learner_of(HER, {"n_bits": 5}, episodes=50, seed=6)
    assert learner.input_dim == 10
    for _ in range(30):
        learner.run_episode(controls)
    assert len(learner.goals) == 8
    returns = [r for r, _ in learner.goals]
    assert returns == sorted(returns, reverse=True)
    assert len({g.tobytes() for _, g in learner.goals}) == 8  # distinct states
    assert len(learner.buffer) > learner.env_steps  # relabelled copies were stored


def test_cbe_bonus_counts_visits_before_each_step():
    learner, _ = learner_of(CBE, {"n_bits": 4}, episodes=10, seed=7)
    ep = learner.rollout(0, 1.0)
    r = learner.training_rewards(ep, {"beta": 1.0})
    keys = ep.sids * 4 + ep.actions
    seen: dict = {}
    expected = []
    for k in keys:
        expected.append(1.0 / np.sqrt(1.0 + seen.get(k, 0)))
        seen[k] = seen.get(k, 0) + 1
    np.testing.assert_allclose(r - ep.rewards, expected)
    assert learner.visits.sum() == ep.length


def test_cem_round_robin_and_pool():
    learner, controls = learner_of(CEMRLRoundRobin, {"n_bits": 5}, episodes=40, seed=8)
    rows = [learner.run_episode(controls) for _ in range(40)]
    assert [r["member"] for r in rows] == [k % 8 for k in range(40)]
    assert rows[-1]["replacements"] > 0
    assert all(2 <= r["pool"] <= 8 for r in rows)


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("make,message", [
    (lambda: EORL("bitflip", {"n_bits": 6}, n=1), r"n must be an integer in \[2"),
    (lambda: EORLConfig.build(n=1), r"n must be an integer in \[2"),
    (lambda: EORL("bitflip", kappa=1.5), r"kappa must be a number in \[0, 1\]"),
    (lambda: EORL("bitflip", mu=-0.1), r"mu must be a number in \[0, 1\]"),
    (lambda: EORL("bitflip", schedule="sometimes"), "one of 'uniform', 'active'"),
    (lambda: EORL("bitflip", variant="EORL-99"), "'EORL-FIX', 'EORL-05-00', 'EORL-05-05'"),
    (lambda: EORL("bitflip", variant="EORL-FIX", kappa=0.1), "either variant or kappa"),
    (lambda: EORL("gridnav", {"size": 8, "subgoals": "3"}), "'0', '1', '2', '2-'"),
    (lambda: EORL("gridnav", {"size": 1}), "size must be an integer >= 2"),
    (lambda: EORL("bitflip", {"n_bits": 1}), "n_bits"),
    (lambda: EORL("cartpole"), "'bitflip', 'gridnav'"),
    (lambda: make_runner("ZER"), "unknown algorithm 'ZER'; valid: VAN, CER, HER, PER, CBE"),
    (lambda: EpisodeConfig.build(episodes=0), r"episodes must be an integer in \[1"),
])
def test_bad_input_is_refused_clearly(make, message):
    with pytest.raises(ValueError, match=message.replace("'2', ", r"'2\+', ")):
        make()


def test_bad_live_values_change_nothing():
    run = EORL("bitflip", {"n_bits": 5}, episodes=10, variant="EORL-05-05")
    version = run.controls.version
    for bad in ({"kappa": 2.0}, {"mu": -1}, {"schedule": "x"}, {"kappa": 0.5, "mu": 7}):
        with pytest.raises(ValueError):
            run.controls.set(**bad)
    assert run.controls.version == version
    assert (run.controls["kappa"], run.controls["mu"]) == (0.05, 0.05)
    with pytest.raises(ValueError, match="fixed"):
        run.controls.set(n=4)


def test_minibatch_reading_takes_one_adam_step_per_minibatch():
    learner, controls = learner_of(EORL, {"n_bits": 4}, episodes=10, seed=9, n=2, minibatch=32)
    row = learner.run_episode({**controls, "kappa": 0.0, "mu": 0.0})
    steps = 2 * -(-row["buffer_size"] // 32)  # 2 passes of ceil(B / 32) mini-batches
    assert learner.net.steps.tolist() == [steps, steps]
    assert np.isfinite(row["loss"])


# -- settings and the episode loop ------------------------------------------------------------
def test_settings_variants_and_presets():
    from esnb.runners.eorl.config import (
        CBEConfig,
        CEMRLRoundRobinConfig,
        CERConfig,
        EORLConfig,
        EpisodeConfig,
        HERConfig,
        PERConfig,
    )

    default = EORLConfig.build()
    assert (default.variant, default.kappa, default.mu, default.schedule) == (
        "EORL-05-05", 0.05, 0.05, "uniform")
    assert default.env == "esnb/BitFlip-v0"
    actv = EORLConfig.build(variant="EORL-ACTV")
    assert (actv.kappa, actv.mu, actv.schedule) == (0.05, 0.05, "active")
    rates = EORLConfig.build(kappa=0.2)  # the other rates: EORL-05-05's
    assert (rates.variant, rates.kappa, rates.mu, rates.schedule) == (None, 0.2, 0.05, "uniform")
    for cfg in (actv, rates):
        assert EORLConfig.from_dict(cfg.to_dict()) == cfg  # checkpoints rebuild it
    # the defaults are the paper's, so the paper preset changes nothing
    for cls in (EpisodeConfig, PERConfig, HERConfig, CBEConfig, CERConfig,
                CEMRLRoundRobinConfig, EORLConfig):
        assert cls.build(preset="paper") == cls.build()
    assert default.learner_kwargs() == {"lr": 0.01, "eps_decay": None, "hidden": (32, 8),
                                        "batch_size": 4096, "epochs": 2, "minibatch": None,
                                        "buffer_factor": 100, "n": 8, "device": "auto"}
    assert {"alpha", "beta0"} <= set(PERConfig.build().learner_kwargs())
    assert "beta" not in CBEConfig.build().learner_kwargs()  # live: read every episode
    with pytest.raises(ValueError, match="unknown setting 'kappa'"):
        VAN("bitflip", kappa=0.1)
    run = EORL("bitflip", {"n_bits": 5}, preset="paper", kappa=0.0, mu=0.0)
    assert run.variant is None and (run.controls["kappa"], run.controls["n"]) == (0.0, 8)
    assert run.config_dict()["env_kwargs"] == {"n_bits": 5}


def test_episodes_run_on_the_one_episode_loop(monkeypatch):
    import esnb.rl.eorl.episodes as episodes

    calls = []
    real = episodes.run_episode
    monkeypatch.setattr(episodes, "run_episode",
                        lambda *a, **k: calls.append(k) or real(*a, **k))
    learner, controls = learner_of(VAN, {"size": 5}, env="gridnav", episodes=10, seed=0)
    learner.run_episode(controls)
    learner.evaluate(2)
    assert len(calls) == 3 and all(c["record"] for c in calls)
    ep = learner.rollout(0, 1.0)
    # the reset observation first; the states acted on numbered in the run's index
    assert ep.obs.shape == (ep.length + 1, 4) and ep.sids.shape == (ep.length,)
    np.testing.assert_array_equal(learner.states.rows[ep.sids], ep.obs[:-1].astype(np.float32))
    assert ep.terminated != ep.truncated
    size = learner.states.size
    assert (learner.rollout(0, 0.0, record=False).sids == -1).all()  # evaluation: not numbered
    assert learner.states.size == size
