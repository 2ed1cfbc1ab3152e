"""EORL's evolutionary operators, schedules and population bookkeeping (numpy only)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from esnb.evo.operators import (
    cross_ratio,
    linear_crossover,
    mutation,
    noise_factor,
    random_crossover,
)
from esnb.evo.population import Population, check_population_size
from esnb.evo.schedules import (
    VARIANTS,
    ResetTracker,
    active_multiplier,
    active_probabilities,
    check_rate,
    check_schedule,
    draw_operator,
    operator_probabilities,
    uniform_probabilities,
    variant_settings,
)

P = 200_000  # parameters per statistics test: 4-sigma bands of ~0.2-0.5%
SIGMA = 0.25


def rng(seed=0):
    return np.random.default_rng(seed)


def test_cross_ratio_is_a_softmax_and_never_overflows():
    assert cross_ratio(0.0, 0.0) == 0.5
    assert cross_ratio(2.0, 1.0) == pytest.approx(math.exp(2) / (math.exp(2) + math.exp(1)))
    assert cross_ratio(1.0, 2.0) == pytest.approx(1 - cross_ratio(2.0, 1.0))
    assert cross_ratio(1000.0, -1000.0) == 1.0 and cross_ratio(-1000.0, 1000.0) == 0.0


def test_noise_factor_has_mean_one_and_std_sigma():
    z = noise_factor(P, SIGMA, rng(1), np.float64)
    assert abs(z.mean() - 1.0) < 4 * SIGMA / math.sqrt(P)
    assert abs(z.std() - SIGMA) < 0.003


def test_random_crossover_takes_parent_i_with_probability_tau():
    a, b = np.ones(P, np.float32), -np.ones(P, np.float32)  # the sign tells the parent
    for tau in (0.2, 0.5, 0.9):
        child = random_crossover(a, b, tau, SIGMA, rng(2))
        frac_i = np.mean(child > 0)  # a factor N(1, .25) is negative with prob 3e-5
        assert abs(frac_i - tau) < 4 * math.sqrt(tau * (1 - tau) / P), tau
        noise = np.abs(child).astype(np.float64)
        assert abs(noise.mean() - 1.0) < 0.003 and abs(noise.std() - SIGMA) < 0.003
    assert child.dtype == np.float32
    np.testing.assert_array_equal(a, 1.0)  # parents untouched


def test_linear_crossover_scales_the_weighted_average():
    a, b = np.full(P, 1.0), np.full(P, 3.0)
    child = linear_crossover(a, b, 0.25, SIGMA, rng(3))
    ratio = child / (0.25 * 1.0 + 0.75 * 3.0)
    assert abs(ratio.mean() - 1.0) < 0.003 and abs(ratio.std() - SIGMA) < 0.003
    exact = linear_crossover(np.array([1.0, 2.0]), np.array([3.0, 6.0]), 0.5, 0.0, rng())
    np.testing.assert_allclose(exact, [2.0, 4.0])


def test_mutation_multiplies_each_parameter_by_its_own_factor():
    theta = rng(4).normal(size=P)
    child = mutation(theta, SIGMA, rng(5))
    ratio = child / theta
    assert abs(ratio.mean() - 1.0) < 0.003 and abs(ratio.std() - SIGMA) < 0.003
    assert np.corrcoef(ratio[:-1], ratio[1:])[0, 1] < 0.01  # independent factors


def test_operators_are_reproducible_from_their_generator():
    a, b = rng(6).normal(size=50), rng(7).normal(size=50)
    for op in (lambda g: random_crossover(a, b, 0.3, SIGMA, g),
               lambda g: linear_crossover(a, b, 0.3, SIGMA, g), lambda g: mutation(a, SIGMA, g)):
        np.testing.assert_array_equal(op(rng(8)), op(rng(8)))
        assert not np.array_equal(op(rng(8)), op(rng(9)))


def test_operator_input_errors():
    a = np.zeros(5)
    with pytest.raises(ValueError, match="tau must be in"):
        random_crossover(a, a, 1.5, SIGMA, rng())
    with pytest.raises(ValueError, match="sigma"):
        mutation(a, -0.1, rng())
    with pytest.raises(ValueError, match="shapes"):
        linear_crossover(a, np.zeros(4), 0.5, SIGMA, rng())


# -- schedules -----------------------------------------------------------------------------------
def test_uniform_probabilities_decay_linearly_to_zero():
    assert uniform_probabilities(0.1, 0.05, 0, 400) == (0.1, 0.05)
    assert uniform_probabilities(0.1, 0.05, 100, 400) == pytest.approx((0.075, 0.0375))
    assert uniform_probabilities(0.1, 0.05, 400, 400) == (0.0, 0.0)
    assert uniform_probabilities(0.1, 0.05, 500, 400) == (0.0, 0.0)  # past E: clipped


def test_active_probabilities():
    # while epsilon > 0.05: Uniform Random's
    assert active_probabilities(0.05, 0.05, 100, 400, 0, 8, 0.2) == \
        uniform_probabilities(0.05, 0.05, 100, 400)
    # multiplier (e - e*)/n clipped to [1 - e/E, 5]
    assert active_multiplier(300, 400, 299, 8) == pytest.approx(0.25)  # 1/8 -> lower bound
    assert active_multiplier(300, 400, 280, 8) == pytest.approx(2.5)
    assert active_multiplier(300, 400, 0, 8) == 5.0
    assert active_probabilities(0.05, 0.05, 300, 400, 280, 8, 0.05) == pytest.approx((0.125,
                                                                                      0.125))
    assert active_probabilities(0.5, 0.3, 300, 400, 0, 8, 0.01) == (1.0, 1.0)  # clipped to 1
    tracker = ResetTracker()
    tracker.reset_episode = 280
    assert operator_probabilities("active", 0.05, 0.0, 300, 400, tracker, 8, 0.01) == \
        pytest.approx((0.125, 0.0))
    assert operator_probabilities("uniform", 0.05, 0.0, 300, 400, tracker, 8, 0.01) == \
        pytest.approx((0.0125, 0.0))


def test_draw_operator_frequencies():
    g = rng(10)
    draws = [draw_operator(0.3, 0.5, g) for _ in range(40_000)]
    freq = {k: draws.count(k) / len(draws) for k in
            ("random_crossover", "linear_crossover", "mutation", None)}
    # crossover 0.3 split evenly; mutation (1 - 0.3) * 0.5; nothing else
    for k, p in {"random_crossover": 0.15, "linear_crossover": 0.15, "mutation": 0.35,
                 None: 0.35}.items():
        assert abs(freq[k] - p) < 4 * math.sqrt(p * (1 - p) / len(draws)), k
    assert all(draw_operator(0.0, 0.0, g) is None for _ in range(100))
    assert all(draw_operator(1.0, 0.0, g) in ("random_crossover", "linear_crossover")
               for _ in range(100))


def test_reset_tracker_uses_95_percent_of_the_best_also_below_zero():
    t = ResetTracker()
    t.observe_return(1, -1.0)
    assert (t.best, t.reset_episode) == (-1.0, 1)
    t.observe_return(2, -1.04)  # >= -1 - 0.05 |-1| = -1.05
    assert t.reset_episode == 2
    t.observe_return(3, -1.06)
    assert t.reset_episode == 2
    t.observe_return(4, 10.0)
    t.observe_return(5, 9.6)
    t.observe_return(6, 9.4)  # below 9.5
    assert (t.best, t.reset_episode) == (10.0, 5)
    t.observe_operator(7)
    assert t.reset_episode == 7
    u = ResetTracker()
    u.load_state_dict(t.state_dict())
    assert (u.best, u.reset_episode) == (10.0, 7)


def test_variants_and_validation():
    assert variant_settings("EORL-10-05") == (0.10, 0.05, "uniform")
    assert variant_settings("EORL-FIX") == (0.0, 0.0, "uniform")
    assert variant_settings("EORL-ACTV") == (0.05, 0.05, "active")
    assert set(VARIANTS) == {"EORL-FIX", "EORL-05-00", "EORL-05-05", "EORL-10-05", "EORL-ACTV"}
    with pytest.raises(ValueError, match="EORL-FIX, EORL-05-00"):
        variant_settings("EORL-20-20")
    with pytest.raises(ValueError, match="'uniform', 'active'"):
        check_schedule("random")
    for bad in (-0.1, 1.1, float("nan"), "x", True):
        with pytest.raises(ValueError, match=r"kappa must be a number in \[0, 1\]"):
            check_rate("kappa", bad)


# -- population ----------------------------------------------------------------------------------
def test_population_size_is_checked():
    with pytest.raises(ValueError, match="n must be an integer >= 2, got 1"):
        Population(1)
    with pytest.raises(ValueError, match=">= 2"):
        check_population_size(2.5)


def test_fitness_update_is_the_soft_average():
    pop = Population(4)
    assert pop.update(2, 10.0) == pytest.approx(1.0)  # 0.9 * 0 + 0.1 * 10
    assert pop.update(2, -3.0, q=0.5) == pytest.approx(-1.0)
    np.testing.assert_allclose(pop.fitness, [0, 0, -1.0, 0])


def test_choose_is_epsilon_greedy_with_uniform_ties_and_fresh_children_first():
    pop, g = Population(4), rng(11)
    # all tied at 0: the greedy choice is uniform
    counts = np.bincount([pop.choose(0.0, g) for _ in range(8000)], minlength=4)
    assert np.all(np.abs(counts / 8000 - 0.25) < 0.025)
    pop.fitness[:] = [0.0, 3.0, 3.0, 1.0]
    counts = np.bincount([pop.choose(0.0, g) for _ in range(4000)], minlength=4)
    assert counts[0] == counts[3] == 0 and abs(counts[1] / 4000 - 0.5) < 0.04
    counts = np.bincount([pop.choose(1.0, g) for _ in range(8000)], minlength=4)
    assert np.all(np.abs(counts / 8000 - 0.25) < 0.025)
    pop.install(0, 5.0)
    assert pop.choose(0.0, g) == 0 and pop.fresh is None  # the child runs next, once
    assert pop.fitness[0] == 5.0


def test_replaced_slot_and_parents():
    pop, g = Population(8), rng(12)
    pop.fitness[:] = [5.0, -1.0, 3.0, -1.0, 7.0, 2.0, 0.0, 6.0]
    slots = {pop.replaced_slot(g) for _ in range(200)}
    assert slots == {1, 3}  # argmin, ties uniformly
    pool = pop.parent_pool(1, g)
    assert sorted(pool) == [0, 2, 4, 7]  # the ceil(8/2) = 4 fittest others
    seen = set()
    for _ in range(300):
        i, j = pop.pick_parents(1, 2, g)
        assert i != j and {i, j} <= {0, 2, 4, 7}
        seen.add((i, j))
    assert len(seen) == 12  # every ordered pair of the pool
    # ties at the cut are broken at random, and the replaced one is never a parent
    tied = Population(5)
    pools = {tuple(sorted(tied.parent_pool(0, g))) for _ in range(200)}
    assert all(0 not in p and len(p) == 3 for p in pools) and len(pools) == 4
    # n = 2: one possible parent
    two = Population(2)
    assert list(two.pick_parents(0, 2, g)) == [1]


def test_population_state_roundtrip():
    pop = Population(3)
    pop.update(1, 4.0)
    pop.install(2, 1.5)
    other = Population(3)
    other.load_state_dict(pop.state_dict())
    np.testing.assert_array_equal(other.fitness, pop.fitness)
    assert other.fresh == 2
    with pytest.raises(ValueError, match="expected"):
        Population(4).load_state_dict(pop.state_dict())
