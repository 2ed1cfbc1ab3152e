"""``esnb.EORL`` and its baselines as runners: one episode per iteration, live controls.

EORL (Khadilkar 2023): a population of Monte-Carlo DQNs sharing one replay buffer, with
crossover and mutation between them (:mod:`esnb.runners.eorl.evolution`, :mod:`esnb.evo`).
The baselines of the paper's tables, on the same network, buffer and budget, are
:class:`VAN`, :class:`CER`, :class:`PER`, :class:`HER`, :class:`CBE` and
:class:`CEMRLRoundRobin` (:mod:`esnb.runners.eorl.baselines`, CER's in
:mod:`esnb.runners.eorl.cer`).

One iteration (:meth:`EpisodeRunner._iteration`) is one episode of the learner, top to bottom:
choose the member, run the episode (on :func:`esnb.envs.rollout.run_episode`), store it, train
every member, evolve (EORL), decay epsilon
(:meth:`esnb.runners.eorl.learner.MCLearner.run_episode`);
the row adds the mean return of the last 100 episodes.

A single run is one process's work: per episode the whole population trains in one batched
pass of a few milliseconds (measured: see ``docs/eorl.md``), far below what a Dask round
trip costs, so the members of one run are never spread over workers and the runners take no
executor. Clusters run many independent runs side by side:
:func:`esnb.runners.eorl.table.run_table`.

Live controls: ``kappa``, ``mu``, ``schedule``, ``sigma``, ``q`` (EORL), ``beta`` (CBE) and
``lr`` (all), read once per episode.
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

import numpy as np

from esnb.controls import ControlSnapshot
from esnb.runners.base import Runner
from esnb.runners.eorl.baselines import CBELearner, CEMRRLearner, HERLearner, PERLearner
from esnb.runners.eorl.cer import CERLearner
from esnb.runners.eorl.columns import COLUMNS
from esnb.runners.eorl.config import (
    CBEConfig,
    CEMRLRoundRobinConfig,
    CERConfig,
    EORLConfig,
    EpisodeConfig,
    HERConfig,
    PERConfig,
)
from esnb.runners.eorl.evolution import EORLLearner
from esnb.runners.eorl.learner import MCLearner


class EpisodeRunner(Runner):
    """A Monte-Carlo DQN learner (:class:`~esnb.runners.eorl.learner.MCLearner`) as a runner.

    Subclasses name their learner and settings. Each iteration is one episode; the history row
    has the episode's return, its mean over the last 100 episodes, epsilon, the loss and
    timings, plus what the learner reports (operators, fitness, ...).

    Parameters
    ----------
    env : str
        ``"bitflip"`` / ``"gridnav"`` (or ``"esnb/BitFlip-v0"`` / ``"esnb/GridNav-v0"``).
    env_kwargs : dict, optional
        The environment's version, e.g. ``{"n_bits": 6, "subgoal": True}`` or ``{"size": 12,
        "subgoals": "2+", "stochasticity": 0.1}`` (the second positional argument: with
        ``env`` it names the task, as the paper's tables do).
    client : optional
        Accepted for a uniform interface (``Runner.load`` passes one); one run trains in this
        process.
    preset : {"laptop", "paper"}
        The same here: the defaults are the paper's.
    config : settings dataclass, optional
        All settings at once (keyword settings are applied on top).
    name : str, optional
        Run name.
    **settings
        Any setting below.
    """

    algorithm: ClassVar[str] = "VAN"
    holds = "Monte-Carlo Q-network(s) acted on greedily (exporting them is not implemented)"
    iteration_column = "episode"
    Config = EpisodeConfig
    learner_class: ClassVar[type] = MCLearner
    plot_default_panels = False

    def __init__(self, env: str | None = None, env_kwargs: dict | None = None, *, client=None,
                 preset: str = "laptop", config: EpisodeConfig | None = None,
                 name: str | None = None, **settings: Any):
        if env_kwargs is not None:
            settings["env_kwargs"] = env_kwargs
        cfg = self.make_config(env, preset, config, **settings)
        super().__init__(cfg, name=name)
        self.learner = self.learner_class.of(cfg)
        self._recent: deque = deque(maxlen=100)

    plot_panels = (
        {"title": "return vs {x}", "x": "iteration", "y_label": "return",
         "y": [{"column": "return", "label": "episode return", "color": "#aec7e8"},
               {"column": "return_avg100", "label": "mean of last 100", "color": "#1f77b4"}]},
        {"title": "exploration vs {x}", "x": "iteration", "y": ["epsilon"]},
        {"title": "loss vs {x}", "x": "iteration", "y": ["loss"], "y_axis_type": "log"},
    )

    # -- runner protocol ---------------------------------------------------------------------
    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        row = self.learner.run_episode(dict(snap.values))
        self._recent.append(row["return"])
        return {"return_avg100": float(np.mean(self._recent)), **row}

    def _progress(self) -> dict[str, float]:
        return {"episodes": self.learner.episode, "env_steps": self.learner.env_steps}

    def _state_dict(self):
        meta, arrays = self.learner.state_dict()
        meta["recent"] = list(self._recent)
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        self.learner.load_state_dict(meta, arrays)
        self._recent = deque(meta["recent"], maxlen=100)

    # -- public ------------------------------------------------------------------------------
    @property
    def returns(self) -> np.ndarray:
        """Returns of the episodes run so far."""
        return np.array([r["return"] for r in self._records], dtype=np.float64)

    def evaluate(self, episodes: int = 10) -> np.ndarray:
        """Returns of greedy episodes of the best member (nothing stored or trained)."""
        with self._iter_lock:
            return self.learner.evaluate(episodes)


class VAN(EpisodeRunner):
    """One Monte-Carlo DQN (the paper's vanilla DQN baseline)."""

    algorithm = "VAN"
    Config = EpisodeConfig
    learner_class = MCLearner


class PER(EpisodeRunner):
    """One Monte-Carlo DQN with prioritised replay (alpha 0.6, beta 0.4 -> 1)."""

    algorithm = "PER"
    Config = PERConfig
    learner_class = PERLearner


class CER(EpisodeRunner):
    """One Monte-Carlo DQN whose samples mix in a contrastive buffer: transitions marked by a
    large state change before an unusual return, and same-state other-action contrasts."""

    algorithm = "CER"
    Config = CERConfig
    learner_class = CERLearner


class HER(EpisodeRunner):
    """One goal-conditioned Monte-Carlo DQN with hindsight relabelling from a goal buffer of
    the 8 best terminal states."""

    algorithm = "HER"
    Config = HERConfig
    learner_class = HERLearner


class CBE(EpisodeRunner):
    """One Monte-Carlo DQN with the count bonus ``beta / sqrt(1 + N(s, a))`` (live ``beta``)."""

    algorithm = "CBE"
    Config = CBEConfig
    learner_class = CBELearner


class CEMRLRoundRobin(EpisodeRunner):
    """The paper's round-robin CEM-RL baseline: ``n`` policies in turn; a bottom-half one is
    replaced (p = 0.5) by a noisy copy of a fitter-half one and leaves the RL pool."""

    algorithm = "CEM-RL"
    Config = CEMRLRoundRobinConfig
    learner_class = CEMRRLearner
    #: a member not yet evaluated has no last return (NaN)
    nonfinite_arrays = ("last_return",)


class EORL(EpisodeRunner):
    """EORL (Khadilkar 2023): ``n`` Monte-Carlo DQNs sharing one buffer, with crossover and
    mutation (arguments as :class:`EpisodeRunner`).

    Examples
    --------
    >>> run = EORL("bitflip", {"n_bits": 6}, episodes=400, variant="EORL-ACTV", seed=0)
    >>> run.step(400).returns[-100:].mean()  # doctest: +SKIP
    """

    algorithm = "EORL"
    holds = ("a population of Monte-Carlo Q-networks (evaluate() acts greedily with the best "
             "member)")
    Config = EORLConfig
    learner_class = EORLLearner

    plot_panels = EpisodeRunner.plot_panels + (
        {"title": "fitness vs {x}", "x": "iteration",
         "y": ["fitness_max", "fitness_mean", "fitness_min"]},
        {"title": "operator probabilities vs {x}", "x": "iteration", "y": ["p_cross", "p_mut"]},
    )

    @property
    def variant(self) -> str | None:
        """The named variant, or None when the rates were given."""
        return self.config.variant

    @property
    def fitness(self) -> np.ndarray:
        """The population's fitness values ``A`` (a copy)."""
        return self.learner.population.fitness.copy()


#: every runner of the family by class name
RUNNERS = {c.__name__: c for c in (EORL, VAN, CER, PER, HER, CBE, CEMRLRoundRobin)}


def runner_class(name: str) -> type[EpisodeRunner]:
    """The runner class called ``name`` (``"EORL"``, ``"VAN"``, ...)."""
    if name not in RUNNERS:
        raise ValueError(f"unknown EORL-family runner {name!r}; valid: {', '.join(RUNNERS)}")
    return RUNNERS[name]


def algorithm_runner(algorithm: str) -> tuple[type[EpisodeRunner], dict]:
    """The runner class and settings of a table column name (``"VAN"``, ``"EORL-ACTV"``)."""
    if algorithm not in COLUMNS:
        raise ValueError(f"unknown algorithm {algorithm!r}; valid: {', '.join(COLUMNS)}")
    cls_name, settings = COLUMNS[algorithm]
    return runner_class(cls_name), dict(settings)


def make_runner(algorithm: str, env: str | None = None, env_kwargs: dict | None = None,
                **settings: Any) -> EpisodeRunner:
    """A runner for a table column name (``"VAN"``, ``"CEM-RL"``, ``"EORL-ACTV"``, ...)."""
    cls, named = algorithm_runner(algorithm)
    return cls(env, env_kwargs, **{**named, **settings})
