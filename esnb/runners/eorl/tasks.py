"""EORL's worker-side task: one whole run of a table (in a worker's process, or inline)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from esnb.runners.eorl.columns import COLUMNS
from esnb.runners.eorl.config import EpisodeConfig
from esnb.runners.eorl.runner import make_runner

LAST = 100  # the paper's tables: mean reward over the last 100 training episodes


@dataclass(frozen=True)
class RunSpec:
    """One run of a table.

    Attributes
    ----------
    algorithm : str
        A table column name (:data:`esnb.runners.eorl.columns.COLUMNS`).
    env : str
        ``"bitflip"`` or ``"gridnav"``.
    env_kwargs : tuple of (key, value)
        Environment arguments as sorted pairs (hashable).
    episodes : int
        Training episodes.
    seed : int
    eps_decay : float, optional
        Default: the paper's decay for this environment and length.
    options : tuple of (key, value)
        Other settings (``minibatch``, ``n``, ...).
    """

    algorithm: str
    env: str
    env_kwargs: tuple = ()
    episodes: int = field(default_factory=lambda: EpisodeConfig.build().episodes)
    seed: int = 0
    eps_decay: float | None = None
    options: tuple = field(default=())

    def __post_init__(self):
        if self.algorithm not in COLUMNS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}; valid: "
                             f"{', '.join(COLUMNS)}")
        object.__setattr__(self, "env_kwargs", tuple(sorted(dict(self.env_kwargs).items())))
        object.__setattr__(self, "options", tuple(sorted(dict(self.options).items())))

    def cost(self) -> float:
        """A rough relative cost (episodes x population x grid size), for ordering."""
        kw = dict(self.env_kwargs)
        size = kw.get("size", kw.get("n_bits", 6))
        members = 8 if self.algorithm.startswith(("EORL", "CEM")) else 1.5
        return self.episodes * members * size

    def describe(self) -> str:
        kw = ", ".join(f"{k}={v}" for k, v in self.env_kwargs)
        return f"{self.algorithm} on {self.env}({kw}) seed {self.seed}"


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Run one table entry in this process; returns its summary and its returns.

    Returns
    -------
    dict
        The spec's fields (environment arguments as their own keys), ``last100`` (mean return
        of the last 100 episodes), ``goal100`` (share of them that reached the goal), ``final``
        (mean of 10 greedy evaluation episodes of the best member), ``returns`` (float32 array
        of every episode), ``env_steps``, ``seconds`` and ``operators`` (EORL only).
    """
    t0 = time.perf_counter()
    runner = make_runner(spec.algorithm, spec.env, dict(spec.env_kwargs),
                         episodes=spec.episodes, seed=spec.seed, eps_decay=spec.eps_decay,
                         **dict(spec.options), name=f"table-{spec.algorithm}-{spec.seed}")
    runner.step(spec.episodes)
    records = runner.records
    returns = np.array([r["return"] for r in records], dtype=np.float64)
    reached = np.array([r["terminated"] for r in records], dtype=bool)
    final = runner.evaluate(10)
    return {
        "algorithm": spec.algorithm,
        "env": spec.env,
        **env_columns(runner.learner.core),
        "episodes": spec.episodes,
        "seed": spec.seed,
        "eps_decay": runner.learner.eps_decay,
        "last100": float(returns[-LAST:].mean()),
        "goal100": float(reached[-LAST:].mean()),
        "final": float(final.mean()),
        "returns": returns.astype(np.float32),
        "env_steps": runner.learner.env_steps,
        "operators": int(records[-1].get("operators", 0)),
        "seconds": time.perf_counter() - t0,
    }


def env_columns(core) -> dict[str, Any]:
    """The version of an EORL environment, defaults included (one column each)."""
    if hasattr(core, "n_bits"):
        return {"n_bits": core.n_bits, "subgoal": core.subgoal}
    return {"size": core.size, "subgoals": core.subgoals, "stochasticity": core.stochasticity}
