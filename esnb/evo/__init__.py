"""Evolutionary operators and their bookkeeping (no Dask): EORL's crossover, mutation,
schedules and population."""

from esnb.evo.operators import (
    OPERATORS,
    cross_ratio,
    linear_crossover,
    mutation,
    noise_factor,
    random_crossover,
)
from esnb.evo.population import Population
from esnb.evo.schedules import SCHEDULES, VARIANTS, ResetTracker, draw_operator

__all__ = ["OPERATORS", "SCHEDULES", "VARIANTS", "Population", "ResetTracker", "cross_ratio",
           "draw_operator", "linear_crossover", "mutation", "noise_factor", "random_crossover"]
