"""AES-RL's update rules against their formulas at hand-picked points (no Dask, no torch)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from esnb.aes import AsyncDistribution, PopulationControl, SepCEM, env_defaults
from esnb.aes.rules import (
    MEAN_RULES,
    VARIANCE_RULES,
    call_rule,
    elite_weights,
    rank_target,
    rl_probability,
    rule_params,
)


def sig(x):
    return 1.0 / (1.0 + math.exp(-x))


# -- mean rules -----------------------------------------------------------------------------
@pytest.mark.parametrize("f_z, f_mu, p", [(2.0, 1.0, 1.0), (1.0, 1.0, 0.0), (0.0, 1.0, 0.0),
                                          (-1e9, 1e9, 0.0)])
def test_one_plus_one(f_z, f_mu, p):
    assert MEAN_RULES["one_plus_one"](f_z, f_mu) == p


@pytest.mark.parametrize("f_z, f_mu, kw, p", [
    (1500, 1000, {}, 0.25),                       # inside the range
    (5000, 1000, {}, 1.0),                        # clipped at +1
    (1000, 1000, {}, 0.0),                        # equal: p_sg = p_neg, times 0
    (500, 1000, {}, 0.0),                         # worse, p_neg = 0
    (500, 1000, {"p_neg": 0.5}, -0.125),          # worse, p_neg > 0: negative p
    (-9000, 1000, {"p_neg": 0.5}, -0.5),          # clipped at -1, times p_neg
    (1500, 1000, {"p_pos": 0.5}, 0.125),
])
def test_fixed_linear(f_z, f_mu, kw, p):
    assert MEAN_RULES["fixed_linear"](f_z, f_mu, r=2000, **kw) == pytest.approx(p, abs=1e-15)


@pytest.mark.parametrize("f_z, f_mu, kw, p", [
    (3000, 1000, {}, sig(1.0)),
    (1000, 1000, {}, 0.0),                        # eq. 8 with p_neg = 0: no move
    (-1000, 1000, {}, 0.0),
    (-1000, 1000, {"p_neg": 0.5}, 0.5 * sig(-1.0)),
    (1e12, 0, {"p_pos": 0.8}, 0.8),               # saturated sigmoid, no overflow
])
def test_fixed_sigmoid(f_z, f_mu, kw, p):
    assert MEAN_RULES["fixed_sigmoid"](f_z, f_mu, r=2000, **kw) == pytest.approx(p, abs=1e-15)


def test_fixed_sigmoid_unsigned_is_the_released_code():
    rule = MEAN_RULES["fixed_sigmoid_unsigned"]
    assert rule(1000, 1000, r=2000) == 0.5                 # a non-improving z still pulls
    assert rule(-1000, 1000, r=2000) == pytest.approx(sig(-1.0))
    assert rule(-1e12, 0, r=1) == 0.0                      # no overflow
    assert "p_neg" not in rule_params(rule)


@pytest.mark.parametrize("f_z, f_mu, f_b, p", [
    (1000, 3000, -2000, 3000 / 8000),             # eq. 9 inside [0, 1]
    (3000, 1000, -2000, 5000 / 8000),
    (-2000, 1000, -2000, 0.0),                    # f(z) == f_b
    (-2500, 1000, -2000, 0.0),                    # below the baseline: 0, not a sign flip
    (50, -100, 0, 0.0),                           # mean below f_b: ratio -1, clipped to 0
    (150, -100, 0, 1.0),                          # ratio 3, clipped to 1
    (100, -100, 0, 1.0),                          # zero denominator: the limit from z's side
])
def test_absolute_baseline(f_z, f_mu, f_b, p):
    assert MEAN_RULES["absolute_baseline"](f_z, f_mu, f_b=f_b) == pytest.approx(p, abs=1e-15)


@pytest.mark.parametrize("f_z, kw, p", [
    (1000, {}, 0.0),                              # f(z) <= f_rb - f_b: p = 0
    (1000, {"p_neg": 1.0}, 0.0),                  # ... whatever p_neg
    (5000, {}, 0.5),                              # f(z) == f(mu): 2000 / 4000
    (9000, {}, 0.75),                             # 6000 / 8000
    (3000, {}, 0.0),                              # f(z) == f_rb: p_pos * 0
    (2000, {}, 0.0),                              # below f_rb, p_neg = 0
    (2000, {"p_neg": 0.5}, -0.5),                 # -1000 / 1000 = -1, times p_neg
    (2500, {"p_neg": 1.0}, -1 / 3),               # -500 / 1500
    (1000.001, {"p_neg": 1.0}, -1.0),             # just above the cut: clipped at -1
    (9000, {"p_pos": 0.5}, 0.375),
])
def test_relative_baseline(f_z, kw, p):
    # f(mu) = 5000, f_b = 2000: f_rb = 3000, cut at 1000
    assert MEAN_RULES["relative_baseline"](f_z, 5000, f_b=2000, **kw) == pytest.approx(
        p, abs=1e-12)


def test_rank_async_and_its_target():
    rule = MEAN_RULES["rank_async"]
    assert rule(1.0, 0.0, filled=9, n=10) == 0.0
    assert rule(1.0, 0.0, filled=10, n=10) == 0.1
    w = elite_weights(2)
    assert w == pytest.approx([math.log(3) / (math.log(3) + math.log(1.5)),
                               math.log(1.5) / (math.log(3) + math.log(1.5))])
    z = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [-1.0, -1.0]])
    target = rank_target(z, [1.0, 2.0, 3.0, 0.0])  # elites: #2 (3.0) then #1 (2.0)
    assert target == pytest.approx(w[0] * z[2] + w[1] * z[1])


def test_every_registered_rule_is_covered():
    assert set(MEAN_RULES) == {"one_plus_one", "fixed_linear", "fixed_sigmoid",
                               "fixed_sigmoid_unsigned", "absolute_baseline",
                               "relative_baseline", "rank_async"}
    assert set(VARIANCE_RULES) == {"online_fixed", "online_adaptive", "success_rule",
                                   "rank_window"}
    assert rule_params(MEAN_RULES["fixed_linear"]) == ("r", "p_pos", "p_neg")
    assert call_rule(MEAN_RULES, "fixed_linear", 1500.0, 1000.0, r=2000.0, f_b=7.0,
                     n=3) == 0.25


# -- variance rules -------------------------------------------------------------------------
VAR = np.array([1e-3, 2e-3])
MU0 = np.zeros(2)
Z = np.array([0.1, -0.2])


def moved(p):
    return (1 - p) * MU0 + p * Z


def test_online_fixed():
    rule = VARIANCE_RULES["online_fixed"]
    # p = 0.5: (z - mu_old)(z - mu_new) = [0.005, 0.02]; var + (term - var) / 10
    assert rule(VAR, MU0, moved(0.5), Z, 0.5) == pytest.approx([0.0014, 0.0038])
    assert rule(VAR, MU0, moved(0.5), Z, 0.5, n=1) == pytest.approx([0.005, 0.02])
    for p in (0.0, -0.2, 5e-4):  # p <= 0, and below the released code's 1e-3
        out = rule(VAR, MU0, moved(p), Z, p)
        assert np.array_equal(out, VAR) and out is not VAR
    assert not np.array_equal(rule(VAR, MU0, moved(5e-4), Z, 5e-4, p_min=0.0), VAR)


def test_online_adaptive():
    rule = VARIANCE_RULES["online_adaptive"]
    assert rule(VAR, MU0, moved(0.5), Z, 0.5) == pytest.approx([0.005, 0.02])   # n = 1
    # p = 0.2: n = 4; term = [0.1 * 0.08, 0.2 * 0.16]
    assert rule(VAR, MU0, moved(0.2), Z, 0.2) == pytest.approx([0.00275, 0.0095])
    assert rule(VAR, MU0, moved(0.9), Z, 0.9) == pytest.approx(
        (Z - MU0) * (Z - moved(0.9)))                                           # n clipped to 1
    assert rule(VAR, MU0, moved(1.0), Z, 1.0) == pytest.approx([0.0, 0.0])      # floor's job
    assert np.array_equal(rule(VAR, MU0, MU0, Z, 0.0), VAR)
    assert np.array_equal(rule(VAR, MU0, moved(-0.3), Z, -0.3), VAR)


def test_success_rule():
    rule = VARIANCE_RULES["success_rule"]
    args = (VAR, MU0, MU0, Z, 0.0)
    assert np.array_equal(rule(*args, successes=[True] * 9), VAR)           # window not full
    assert rule(*args, successes=[True] * 3 + [False] * 7) == pytest.approx(VAR / 0.99)
    assert rule(*args, successes=[True] * 2 + [False] * 8) == pytest.approx(VAR * 0.99)
    # a sliding window: only the last 10 count
    assert rule(*args, successes=[True] * 5 + [False] * 10) == pytest.approx(VAR * 0.99)


def test_rank_window_variance():
    rule = VARIANCE_RULES["rank_window"]
    wz = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [-1.0, -1.0]])
    wf = [1.0, 2.0, 3.0, 0.0]
    w = elite_weights(2)
    out = rule(VAR, MU0, MU0, Z, 0.25, window_z=wz, window_f=wf, eps=1e-4)
    assert out == pytest.approx((w[0] * wz[2] ** 2 + w[1] * wz[1] ** 2) / 2 + 1e-4)
    assert np.array_equal(rule(VAR, MU0, MU0, Z, 0.0, window_z=wz, window_f=wf, eps=1e-4), VAR)


# -- population control ---------------------------------------------------------------------
@pytest.mark.parametrize("n_rl, n_es, p_desired, p", [
    (0, 0, 0.5, 0.5), (0, 0, 0.1, 0.1), (5, 5, 0.5, 0.5), (6, 4, 0.5, 0.0), (4, 6, 0.5, 1.0),
    (49, 51, 0.5, 1.0), (1, 9, 0.1, 0.5), (10, 89, 0.1, -50 * (10 / 99 - 0.1) + 0.5),
])
def test_rl_probability(n_rl, n_es, p_desired, p):
    assert rl_probability(n_rl, n_es, p_desired, 50) == pytest.approx(p)


@pytest.mark.parametrize("p_desired", [0.1, 0.5, 0.8])
def test_population_control_converges_to_p_desired(p_desired):
    rng = np.random.default_rng(0)
    ctl = PopulationControl()
    for _ in range(20):  # the warm-up creates uncounted ES individuals
        assert ctl.decide(rng, p_desired, 50, warmup=True) == (False, 0.0)
    assert ctl.n_rl + ctl.n_es == 0
    for _ in range(2000):
        ctl.decide(rng, p_desired, 50, warmup=False)
    assert abs(ctl.rl_share - p_desired) < 0.01
    # without feedback (K_rl = 0) p_rl is 0.5 whatever the share
    assert ctl.probability(p_desired, 0.0) == 0.5


@pytest.mark.parametrize("p_desired, first", [(0.5, 0.5), (0.1, 0.0), (0.8, 1.0),
                                               (0.49, 0.0)])
def test_population_control_starts_from_one_and_one_as_the_released_code(p_desired, first):
    """Source: the authors' released AES-RL code (its AesrlAlgorithm.learn) starts
    ``total_rl_population = total_es_population = 1``: the first p_rl after the warm-up is
    -K_rl (1/2 - p_desired) + 1/2, clipped, not p_desired."""
    ctl = PopulationControl()
    assert ctl.probability(p_desired, 50.0) == pytest.approx(first)
    assert ctl.probability(0.45, 1.0) == pytest.approx(-(0.5 - 0.45) + 0.5)
    rng = np.random.default_rng(0)
    ctl.decide(rng, 0.5, 50.0, warmup=False)
    assert ctl.n_rl + ctl.n_es == 1  # created individuals only: rl_share is theirs


def test_env_defaults_follow_table_5():
    assert env_defaults("HalfCheetah-v5") == {"r": 2000.0, "f_b_absolute": -2000.0,
                                              "f_b_relative": 2000.0, "p_desired": 0.5}
    assert env_defaults("Swimmer-v5")["p_desired"] == 0.1
    assert env_defaults("Hopper-v5")["r"] == 600.0


# -- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("call, match", [
    (lambda: MEAN_RULES["fixed_linear"](1.0, 0.0, r=0.0), "r .*must be > 0"),
    (lambda: MEAN_RULES["fixed_sigmoid"](1.0, 0.0, r=-5.0), "r .*must be > 0"),
    (lambda: MEAN_RULES["fixed_linear"](float("nan"), 0.0, r=1.0), r"f\(z\)"),
    (lambda: MEAN_RULES["one_plus_one"](0.0, float("inf")), r"f\(mu\)"),
    (lambda: MEAN_RULES["relative_baseline"](0.0, 0.0, f_b=0.0), "f_b"),
    (lambda: MEAN_RULES["fixed_linear"](1.0, 0.0, r=1.0, p_neg=1.5), "p_neg"),
    (lambda: rl_probability(1, 1, 1.5, 50), "p_desired"),
    (lambda: rl_probability(1, 1, -0.1, 50), "p_desired"),
    (lambda: VARIANCE_RULES["online_fixed"](VAR, MU0, MU0, Z, 0.5, n=0.5), "n must be >= 1"),
    (lambda: call_rule(MEAN_RULES, "linear", 1.0, 0.0), "valid: one_plus_one, fixed_linear"),
    (lambda: call_rule(VARIANCE_RULES, "adaptive", VAR, MU0, MU0, Z, 0.1), "online_adaptive"),
])
def test_bad_input_raises_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _snapshot(d: AsyncDistribution):
    meta, arrays = d.state_dict()
    return meta, {k: v.copy() for k, v in arrays.items()}


@pytest.mark.parametrize("kwargs, match", [
    (dict(mean_rule="nope", var_rule="online_fixed"), "unknown mean rule 'nope'; valid:"),
    (dict(mean_rule="fixed_linear", var_rule="nope"), "unknown variance rule 'nope'; valid:"),
    (dict(mean_rule="fixed_linear", var_rule="online_fixed", r=0.0), "r .*> 0"),
    (dict(mean_rule="fixed_linear", var_rule="online_fixed", r=10.0, var_floor=0.0),
     "var_floor"),
    (dict(mean_rule="fixed_linear", var_rule="online_fixed", r=10.0, var_floor=-1e-5),
     "var_floor"),
    (dict(mean_rule="fixed_linear", var_rule="online_fixed", r=10.0, f_z=float("nan")),
     r"f\(z\)"),
    (dict(mean_rule="fixed_linear", var_rule="online_fixed", r=10.0, f_mu=float("-inf")),
     r"f\(mu\)"),
])
def test_bad_input_leaves_the_distribution_untouched(kwargs, match):
    d = AsyncDistribution(np.zeros(3), var_init=1e-3, var_floor=1e-5)
    rng = np.random.default_rng(1)
    for k in range(3):
        d.tell(d.sample(rng), float(k), 0.0, "fixed_linear", "online_adaptive", r=10.0)
    before = _snapshot(d)
    args = {"z": d.sample(rng), "f_z": 5.0, "f_mu": 1.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        d.tell(**args)
    after = _snapshot(d)
    assert before[0] == after[0]
    for k in before[1]:
        assert np.array_equal(before[1][k], after[1][k])


# -- the distribution -----------------------------------------------------------------------
def test_async_distribution_update_and_floor():
    d = AsyncDistribution(np.zeros(2), var_init=1e-3, var_floor=1e-5)
    z = np.array([0.1, -0.2])
    info = d.tell(z, 1500.0, 1000.0, "fixed_linear", "online_fixed", r=2000.0, n=10.0)
    assert info["p"] == 0.25 and info["update"] == 1 and d.updates == 1
    assert d.mu == pytest.approx(0.25 * z)
    assert d.var == pytest.approx(VARIANCE_RULES["online_fixed"](
        np.full(2, 1e-3), np.zeros(2), 0.25 * z, z, 0.25, n=10.0))
    # (1+1) success with the adaptive rule collapses var to 0: the floor holds it
    info = d.tell(z, 1e9, 0.0, "one_plus_one", "online_adaptive", var_floor=2e-5)
    assert d.mu == pytest.approx(z) and info["p"] == 1.0
    assert np.all(d.var == 2e-5) and info["var_at_floor"] == 1.0
    # p = 0: nothing moves, nothing changes
    mu, var = d.mu.copy(), d.var.copy()
    info = d.tell(z * 5, 0.0, 1.0, "fixed_sigmoid", "online_adaptive", r=2000.0)
    assert info["p"] == 0.0 and np.array_equal(d.mu, mu) and np.array_equal(d.var, var)
    assert d.updates == 3


def test_rank_async_moves_oldest_window():
    d = AsyncDistribution(np.zeros(2), rank_window=4)
    zs = [np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([2.0, 2.0]),
          np.array([-1.0, -1.0]), np.array([4.0, 4.0])]
    fs = [1.0, 2.0, 3.0, 0.0, 10.0]
    for z, f in zip(zs[:3], fs[:3]):
        assert d.tell(z, f, 0.0, "rank_async", "rank_window")["p"] == 0.0
    assert np.array_equal(d.mu, np.zeros(2))
    info = d.tell(zs[3], fs[3], 0.0, "rank_async", "rank_window")
    target = rank_target(np.stack(zs[:4]), fs[:4])
    assert info["p"] == 0.25 and d.mu == pytest.approx(0.25 * target)
    # the fifth replaces the oldest: the window is now zs[1:5]
    mu = d.mu.copy()
    d.tell(zs[4], fs[4], 0.0, "rank_async", "rank_window")
    assert d.mu == pytest.approx(mu + (rank_target(np.stack(zs[1:]), fs[1:]) - mu) / 4)


def test_rank_rule_decays_its_additive_variance_before_adding_it():
    """The released ACEM-RL (KyunghyunLee/aes-rl, core/population.py lines 139, 176, 180):
    tau = cemrl_tau ** (1 / window) with cemrl_tau = 0.90, and each update decays
    ``damp <- damp * tau + (1 - tau) * damp_limit`` *before* ``var = ... + damp``."""
    d = AsyncDistribution(np.zeros(2), var_init=1e-3, var_floor=1e-9, rank_window=2)
    tau = 0.9 ** 0.5                                          # 0.948683...
    assert d.eps_decay == pytest.approx(tau, rel=1e-15)
    d.tell(np.array([1.0, 0.0]), 1.0, 0.0, "rank_async", "rank_window")  # window not full
    assert d.eps == 1e-3 and np.array_equal(d.var, np.full(2, 1e-3))
    # the window is full: the elite (K_e = 1) is [0, 2]; mu moves half way toward it
    d.tell(np.array([0.0, 2.0]), 3.0, 0.0, "rank_async", "rank_window")
    eps1 = 1e-3 * tau + (1 - tau) * 1e-5                      # decayed first ...
    assert eps1 == pytest.approx(9.4919646507e-4, rel=1e-10)
    assert d.mu == pytest.approx([0.0, 1.0])
    assert d.var == pytest.approx([0.0 + eps1, 4.0 + eps1], rel=1e-12)  # ... then added
    assert d.eps == pytest.approx(eps1, rel=1e-15)
    assert d.var[0] != pytest.approx(1e-3)                    # not the undecayed eps
    # the next update: window [[0, 2], [2, 0]] with fitness [3, 2], elite [0, 2] again
    d.tell(np.array([2.0, 0.0]), 2.0, 0.0, "rank_async", "rank_window")
    eps2 = eps1 * tau + (1 - tau) * 1e-5
    assert d.mu == pytest.approx([0.0, 1.5])
    assert d.var == pytest.approx([eps2, 1.0 + eps2], rel=1e-12)


def test_success_rule_through_the_distribution():
    d = AsyncDistribution(np.zeros(2), var_init=1e-3)
    z = np.ones(2)
    for _k in range(9):
        d.tell(z, 0.0, 1.0, "one_plus_one", "success_rule")
    assert np.all(d.var == 1e-3)
    d.tell(z, 0.0, 1.0, "one_plus_one", "success_rule")  # 10 failures: shrink
    assert d.var == pytest.approx(np.full(2, 1e-3 * 0.99))


def test_sep_cem_by_hand():
    cem = SepCEM(np.zeros(2), pop_size=4, var_init=1e-3)
    z = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [-1.0, -1.0]])
    info = cem.tell(z, [1.0, 2.0, 3.0, 0.0])
    w = elite_weights(2)
    eps = 1e-3 * 0.95 + 0.05 * 1e-5
    assert list(info["elites"]) == [2, 1]
    assert cem.mu == pytest.approx(w[0] * z[2] + w[1] * z[1])
    assert cem.var == pytest.approx((w[0] * z[2] ** 2 + w[1] * z[1] ** 2) / 2 + eps)
    paper = SepCEM(np.zeros(2), pop_size=4, variance_form="paper")
    paper.tell(z, [1.0, 2.0, 3.0, 0.0])
    assert paper.var == pytest.approx(w[0] * z[2] ** 2 + w[1] * z[1] ** 2 + eps)
    with pytest.raises(ValueError, match="f\\(z\\)"):
        cem.tell(z, [1.0, float("nan"), 0.0, 0.0])


def test_sep_cem_minimises_a_sphere():
    # eq. 2 as printed converges; the released code's extra 1/K_e shrinks the variance K_e
    # times faster and stalls short of the optimum (premature convergence)
    final = {}
    for form in ("paper", "code"):
        rng = np.random.default_rng(0)
        cem = SepCEM(np.full(5, 3.0), pop_size=20, var_init=1.0, eps_init=1e-2,
                     eps_limit=1e-4, antithetic=True, variance_form=form)
        for _ in range(60):
            z = cem.ask(rng)
            cem.tell(z, -np.square(z.astype(np.float64)).sum(axis=1))
        final[form] = np.linalg.norm(cem.mu)
    assert final["paper"] < 0.05 < final["code"] < np.linalg.norm(np.full(5, 3.0))
