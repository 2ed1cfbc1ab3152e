"""EORL (Khadilkar 2023): ``n`` Monte-Carlo DQNs sharing one buffer, with crossover and
mutation between them (steps 1 and 5 of Algorithm 1; the rest is :class:`MCLearner`'s)."""

from __future__ import annotations

from typing import Any

import numpy as np

from esnb.evo.operators import (
    cross_ratio,
    linear_crossover,
    mutation,
    random_crossover,
)
from esnb.evo.population import Population
from esnb.evo.schedules import ResetTracker, draw_operator, operator_probabilities
from esnb.runners.eorl.learner import MCLearner


class EORLLearner(MCLearner):
    """EORL: ``n`` Monte-Carlo DQNs sharing one buffer, with crossover and mutation.

    Parameters
    ----------
    n : int
        Population size (>= 2; the paper: 8).
    **kwargs
        As :class:`MCLearner`.

    Notes
    -----
    ``run_episode(controls)`` reads ``kappa``, ``mu`` (rates in [0, 1]), ``schedule``
    (``"uniform"`` or ``"active"``), ``sigma`` (noise factor std, 0.25) and ``q`` (fitness
    smoothing, 0.9) from ``controls``: the runner passes its live controls each episode.
    A crossover with fewer than two possible parents (``n = 2``) becomes a mutation.
    """

    algorithm = "EORL"

    def __init__(self, env: str, env_kwargs: dict | None, episodes: int, seed: int, *, n: int,
                 **kwargs):
        super().__init__(env, env_kwargs, episodes, seed, n=n, **kwargs)
        self.population = Population(self.n)
        self.tracker = ResetTracker()
        self.operators = 0

    def choose_member(self, epsilon: float) -> int:
        return self.population.choose(epsilon, self.rngs["evo"])

    def best_member(self) -> int:
        return int(np.argmax(self.population.fitness))

    def after_episode(self, e, member, ep, epsilon, controls):
        kappa, mu = float(controls["kappa"]), float(controls["mu"])
        schedule = controls["schedule"]
        sigma, q = float(controls["sigma"]), float(controls["q"])
        pop, rng = self.population, self.rngs["evo"]
        pop.update(member, ep.ret, q)
        self.tracker.observe_return(e, ep.ret)
        p_cross, p_mut = operator_probabilities(schedule, kappa, mu, e, self.episodes,
                                                self.tracker, self.n, epsilon)
        op = draw_operator(p_cross, p_mut, rng)
        row = {"operator": op or "", "child": -1, "parent_i": -1, "parent_j": -1,
               "tau": np.nan, "p_cross": p_cross, "p_mut": p_mut,
               "fitness_max": float(pop.fitness.max()), "fitness_mean": float(pop.fitness.mean()),
               "fitness_min": float(pop.fitness.min()), "reset_episode": 0}
        if op is not None:
            row.update(self.apply_operator(op, sigma))
            self.tracker.observe_operator(e)
            self.operators += 1
        row["reset_episode"] = self.tracker.reset_episode
        row["operators"] = self.operators
        return row

    def apply_operator(self, op: str, sigma: float) -> dict[str, Any]:
        """Replace ``argmin A`` by a child of parents from the fitter half; fresh optimiser."""
        pop, rng, net = self.population, self.rngs["evo"], self.net
        slot = pop.replaced_slot(rng)
        crossover = op in ("random_crossover", "linear_crossover")
        parents = pop.pick_parents(slot, 2 if crossover else 1, rng)
        if crossover and len(parents) < 2:
            op, crossover = "mutation", False
        i = int(parents[0])
        if crossover:
            j = int(parents[1])
            tau = cross_ratio(pop.fitness[i], pop.fitness[j])
            fn = random_crossover if op == "random_crossover" else linear_crossover
            child = fn(net.flat(i), net.flat(j), tau, sigma, rng)
            fitness = tau * pop.fitness[i] + (1.0 - tau) * pop.fitness[j]
        else:
            j, tau = -1, 1.0
            child = mutation(net.flat(i), sigma, rng)
            fitness = pop.fitness[i]
        net.set_flat(slot, child)
        net.reset_optimizer(slot)
        pop.install(slot, fitness)
        return {"operator": op, "child": slot, "parent_i": i, "parent_j": j, "tau": tau,
                "fitness_max": float(pop.fitness.max()),
                "fitness_mean": float(pop.fitness.mean()),
                "fitness_min": float(pop.fitness.min())}

    def state_dict(self):
        meta, arrays = super().state_dict()
        meta.update(population=self.population.state_dict(), tracker=self.tracker.state_dict(),
                    operators=self.operators)
        return meta, arrays

    def load_state_dict(self, meta, arrays):
        super().load_state_dict(meta, arrays)
        self.population.load_state_dict(meta["population"])
        self.tracker.load_state_dict(meta["tracker"])
        self.operators = int(meta["operators"])
